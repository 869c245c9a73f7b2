"""Ctrl-C (SIGINT) and SIGTERM stop a search cleanly also when stdout is a pipe whose reader
died first (``qrsearch launch | tee log``: the shell's Ctrl-C ends ``tee`` too): the in-flight
evaluation finishes or stays queued, the stop is in ``driver.log`` and in ``status``, and the
exit code is 128 + the signal."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from population.consistency import check_consistency
from population.models import State
from population.store import RunStore
from search.cli.run import run_status

ROOT = Path(__file__).parents[3]
pytestmark = pytest.mark.slow


def _evaluations(run_dir: Path) -> int:
    try:
        with RunStore.open(run_dir, readonly=True) as store:
            return int(store.counter("gpu_evaluations"))
    except Exception:  # not created yet
        return 0


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_signal_with_a_dead_pipe_reader_stops_cleanly(tmp_path, signum):
    run_dir = tmp_path / "piped"
    # The reader (tee's part) reads until it is killed; after that every write to the driver's
    # stdout fails with EPIPE.
    reader = subprocess.Popen([sys.executable, "-c", "import sys\nfor _ in sys.stdin.buffer: pass"],
                              stdin=subprocess.PIPE)
    # stderr to a file, not a pipe nobody drains (Ray's processes inherit it and would block).
    errors = tmp_path / "stderr.txt"
    with errors.open("wb") as err_file:
        driver = subprocess.Popen([sys.executable, "-m", "tests.search.toy_driver", str(run_dir), "launch", "40"],
                                  cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=reader.stdin,
                                  stderr=err_file, start_new_session=True)
    reader.stdin.close()
    try:
        deadline = time.monotonic() + 240
        while _evaluations(run_dir) < 2 and time.monotonic() < deadline and driver.poll() is None:
            time.sleep(0.5)
        assert driver.poll() is None, errors.read_text()[-2000:]
        reader.kill()
        reader.wait()
        driver.send_signal(signum)
        driver.wait(timeout=240)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait()
    stderr = errors.read_text()
    assert driver.returncode == 128 + signum, stderr[-2000:]
    assert "Traceback" not in stderr, stderr[-2000:]

    status = run_status(run_dir)
    name = signal.Signals(signum).name
    assert status["state"] == "stopped"
    assert status["stop_reason"] == f"{name} received"  # true after the stop, unlike "finishing in-flight work"
    log = (run_dir / "driver.log").read_text()
    assert f"stopped by {name}" in log
    with RunStore.open(run_dir, readonly=True) as store:
        states = {c.state for c in store.list_candidates()}
        assert check_consistency(store, deep=True) == []
    # Nothing is left marked running: it finished, or it waits in the queue for `resume`.
    assert State.RUNNING not in states
    assert status["evaluations"] >= 2
