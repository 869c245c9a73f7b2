"""``qrsearch status``, ``champions`` and ``lineage`` import none of the heavy stack.

They are what an engineer runs against a live run, often on a laptop without CUDA: each
runs here in a fresh interpreter on a real run store, and afterwards none of torch,
triton, optuna, openai or ray may have been imported.  Add such an import to a module on
their path (at module level instead of inside the command that needs it) and this fails.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.population.data.make_store import build

ROOT = Path(__file__).resolve().parents[3]
HEAVY = ("torch", "triton", "optuna", "openai", "ray")

# Runs the command through the real Typer app in-process, then reports what got imported.
SCRIPT = """
import json, sys
from search.cli.app import app
code = 0
try:
    app(sys.argv[1:], standalone_mode=False)
except SystemExit as exc:
    code = exc.code or 0
heavy = sorted({m.split('.')[0] for m in sys.modules} & set(%r))
print('HEAVY=' + json.dumps(heavy), file=sys.stderr)
sys.exit(code)
""" % (HEAVY,)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("light") / "run"
    build(path)
    return path


@pytest.mark.parametrize("args", [["status"], ["status", "--json"], ["champions"], ["champions", "--json"],
                                  ["lineage"], ["lineage", "--format", "json"], ["lineage", "--candidate", "c6"]])
def test_read_only_commands_stay_light(run_dir: Path, args: list[str]) -> None:
    command = [sys.executable, "-c", SCRIPT, args[0], str(run_dir), *args[1:]]
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip(), "the command printed nothing"
    line = next(x for x in proc.stderr.splitlines() if x.startswith("HEAVY="))
    assert json.loads(line[len("HEAVY="):]) == [], f"{' '.join(args)} imported {line}"


def test_the_check_sees_a_heavy_import(run_dir: Path) -> None:
    """The probe itself works: a command that does import torch (``bench --help`` does not, so import it here)."""
    code = SCRIPT.replace("from search.cli.app import app", "import torch\nfrom search.cli.app import app")
    proc = subprocess.run([sys.executable, "-c", code, "status", str(run_dir)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert '"torch"' in next(x for x in proc.stderr.splitlines() if x.startswith("HEAVY="))
