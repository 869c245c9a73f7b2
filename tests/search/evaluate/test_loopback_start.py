"""LoopbackCluster.add_node against a stand-in ``ray`` executable: a start whose raylet did not
register in time is undone (its leftover raylet ended) and tried again on fresh ports, and any
other failure is raised at once, naming the attempt."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from search.evaluate.simulated.loopback import START_ATTEMPTS, LoopbackCluster

# Fails its first `fail_times` starts as `ray start` does when the GCS is slow, leaving behind a
# process whose command line names the temp dir and the node's port the way a raylet's does.
FAKE_RAY = """#!{python}
import json, subprocess, sys
from pathlib import Path
state = Path({state!r})
calls = json.loads(state.read_text()) if state.exists() else []
args = sys.argv[1:]
calls.append(args)
state.write_text(json.dumps(calls))
if len(calls) <= {fail_times}:
    temp = next(a.split("=", 1)[1] for a in args if a.startswith("--temp-dir="))
    port = next(a.split("=", 1)[1] for a in args if a.startswith("--node-manager-port="))
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", temp,
                      "--node_manager_port=" + port], start_new_session=True,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sys.stderr.write({message!r})
    sys.exit(1)
"""

TIMED_OUT = ("Exception: The current node timed out during startup. This could happen because some "
             "of the raylet failed to startup or the GCS has become overloaded.\n")


def _fake_ray(tmp_path: Path, fail_times: int, message: str = TIMED_OUT) -> tuple[Path, Path]:
    exe, state = tmp_path / "ray", tmp_path / "calls.json"
    exe.write_text(FAKE_RAY.format(python=sys.executable, state=str(state), fail_times=fail_times,
                                   message=message))
    exe.chmod(0o755)
    return exe, state


def _calls(state: Path) -> list[list[str]]:
    return json.loads(state.read_text())


def _flag(args: list[str], name: str) -> str:
    return next(a.split("=", 1)[1] for a in args if a.startswith(f"--{name}="))


def _alive_leftovers(temp: Path) -> list[int]:
    found = subprocess.run(["pgrep", "-f", f"sleep\\(120\\) {temp}"], capture_output=True, text=True)
    return [int(p) for p in found.stdout.split()]


def test_a_start_that_timed_out_is_undone_and_retried_on_fresh_ports(tmp_path):
    exe, state = _fake_ray(tmp_path, fail_times=1)
    cluster = LoopbackCluster(ray_exe=exe)
    try:
        node = cluster.add_node(num_gpus=4)
        calls = _calls(state)
        assert len(calls) == 2
        first, second = (_flag(c, "node-manager-port") for c in calls)
        assert first != second and _flag(calls[0], "port") != _flag(calls[1], "port")
        assert node.manager_port == int(second) and node.head and cluster.gcs_port == int(_flag(calls[1], "port"))
        # The failed head's raylet was ended before the retry, so nothing of it is left.
        deadline = time.monotonic() + 5
        while _alive_leftovers(cluster.temp) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _alive_leftovers(cluster.temp) == []
    finally:
        cluster.shutdown()


def test_a_joining_node_that_timed_out_is_retried_without_touching_the_head(tmp_path):
    exe, state = _fake_ray(tmp_path, fail_times=0)
    cluster = LoopbackCluster(ray_exe=exe)
    try:
        cluster.add_node(num_gpus=0)
        head_stand_in = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", str(cluster.temp),
                                          "--node_manager_port=1"], start_new_session=True)
        exe, state = _fake_ray(tmp_path, fail_times=2)  # counts its calls afresh: the head's is gone
        state.unlink(missing_ok=True)
        cluster.ray_exe = exe
        node = cluster.add_node(num_gpus=4)
        assert len(_calls(state)) == 3 and not node.head
        assert all(f"--address=127.0.0.1:{cluster.gcs_port}" in c for c in _calls(state))
        assert head_stand_in.poll() is None  # only the failed joiner's processes were ended
        head_stand_in.kill()
    finally:
        cluster.shutdown()


def test_other_failures_and_the_last_timeout_are_raised_naming_the_attempt(tmp_path):
    exe, state = _fake_ray(tmp_path, fail_times=1, message="ValueError: --num-gpus must be >= 0\n")
    cluster = LoopbackCluster(ray_exe=exe)
    try:
        with pytest.raises(RuntimeError, match=r"attempt 1\).*num-gpus must be"):
            cluster.add_node(num_gpus=4)
        assert len(_calls(state)) == 1 and cluster.nodes == []
    finally:
        cluster.shutdown()

    again = tmp_path / "again"
    again.mkdir()
    exe, state = _fake_ray(again, fail_times=START_ATTEMPTS)
    cluster = LoopbackCluster(ray_exe=exe)
    try:
        with pytest.raises(RuntimeError, match=rf"attempt {START_ATTEMPTS}\).*timed out during startup"):
            cluster.add_node(num_gpus=4)
        assert len(_calls(state)) == START_ATTEMPTS and cluster.gcs_port is None
    finally:
        cluster.shutdown()
    assert not os.path.exists(cluster.temp)
