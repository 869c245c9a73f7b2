"""`qrsearch launch` with no configuration on a CPU-only machine: the embedded default is a
demonstration of the loop (real families in the Triton interpreter, the CPU suites) that shows
children evaluated, a champion change and a lineage with mutations within minutes, and says
where the run is."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).parents[3]


def test_the_default_cpu_launch_shows_the_search_working(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # In the interpreter most knobs change nothing, and the 1% title margin is within the timing noise;
    # the demo's bench (demo-bench) holds an n = 80 matrix, so that one step of householder_unblocked's
    # max_n (128 to 64, half of the tuner's random draws) hands it to torch.geqrf, several times faster:
    # a gain the search finds without luck (on smoke-bench only max_n = 32 helped, and a CI run of 24
    # evaluations drew it in none of its 13 householder children).  The time limit leaves a loaded CI
    # machine (22 s an evaluation) room for all 24.
    proc = subprocess.run([sys.executable, "-m", "search", "launch", "--max-evals", "24", "--max-minutes", "10"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "LLM mutation is off" in proc.stdout
    runs = [p for p in (tmp_path / "runs").iterdir() if p.name != "latest"]
    assert len(runs) == 1 and runs[0].name.startswith("default-cpu-")
    assert (tmp_path / "runs" / "latest").resolve() == runs[0].resolve()
    assert f"run: runs/{runs[0].name} (also runs/latest)" in proc.stdout

    from population.models import Origin
    from population.store import RunStore

    with RunStore.open(runs[0], readonly=True) as store:
        children = [c for c in store.list_candidates() if c.origin is not Origin.SEED and c.state.is_terminal]
        changes = [e.change for e in store.champion_history() if e.change.previous_id is not None]
        crowned_children = {c.candidate_id for c in changes} & {c.id for c in children}
    assert len(children) >= 3, f"{len(children)} children evaluated"
    assert crowned_children, "no child took a champion's title:\n" + proc.stdout[-2000:]
    assert re.search(r"search: \d+ children evaluated \(.*\), \d+ champion changes? \(", proc.stdout)

    lineage = subprocess.run([sys.executable, "-m", "search", "lineage", "runs/latest"], cwd=tmp_path,
                             capture_output=True, text=True, timeout=120, env=env)
    assert lineage.returncode == 0 and "optuna/" in lineage.stdout and "☆ was champion" in lineage.stdout
    status = json.loads(subprocess.run([sys.executable, "-m", "search", "status", "runs/latest", "--json"],
                                       cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env).stdout)
    assert status["baseline_geomean_ms"] > 0 and set(status["best"]) == {"householder_unblocked", "blocked_wy"}
