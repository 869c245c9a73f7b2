"""kernels/ knows nothing of Ray, LLMs, Optuna or the search: it is the contract, the verifier,
the harness and the families.  From population it takes only the one result vocabulary
(population/outcomes.py: pure data, the standard library only), so the harness and the store
share one case-status enum and one geomean."""

from __future__ import annotations

import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import kernels

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = {"search", "ray", "optuna", "openai"}
ALLOWED_FROM_POPULATION = {"population", "population.outcomes"}


def test_no_module_of_kernels_imports_the_search_stack() -> None:
    modules = sorted(m.name for m in pkgutil.walk_packages(kernels.__path__, "kernels.")
                     if not m.name.endswith("__main__"))
    assert len(modules) >= 15  # the listing itself must find the package's modules
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {sorted(FORBIDDEN)!r})\n"
        f"bad += sorted(m for m in sys.modules if m.split('.')[0] == 'population' "
        f"and m not in {sorted(ALLOWED_FROM_POPULATION)!r})\n"
        "print('FORBIDDEN', bad)\n"
        "sys.exit(1 if bad else 0)\n"
    )
    # Under the interpreter: importing Triton for a GPU in the test process would break later
    # interpreter tests, so the imports run in a child.
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "FORBIDDEN []" in proc.stdout
