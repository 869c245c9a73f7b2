"""`qrsearch launch` with no configuration on a CPU-only machine: the embedded default
(real families in the Triton interpreter, smoke suites) completes a search."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).parents[3]


def test_launch_with_the_embedded_default_completes(tmp_path):
    env_path = f"{ROOT}"
    proc = subprocess.run([sys.executable, "-m", "search", "launch", "--max-minutes", "1"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600,
                          env={**__import__("os").environ, "PYTHONPATH": env_path})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "LLM mutation is off" in proc.stdout
    runs = list((tmp_path / "runs").iterdir())
    assert len(runs) == 1 and runs[0].name.startswith("default-cpu-")
    status = subprocess.run([sys.executable, "-m", "search", "status", str(runs[0]), "--json"], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    data = json.loads(status.stdout)
    assert data["evaluations"] >= 2 and data["states"].get("verified", 0) >= 2
    assert data["baseline_geomean_ms"] > 0 and data["best"]
