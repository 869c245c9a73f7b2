"""The compile fork server: a forked child per compile, with start_precompile's environment,
report and isolation, and a fresh interpreter whenever the server is not there to fork."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from kernels.harness.compile_server import CompileForkServer, ForkedProcess
from kernels.harness.precompile import CompileTarget, read_report
from tests.kernels.test_precompile import KERNEL_CANDIDATE, _write, needs_ptxas


def ready(server: CompileForkServer, timeout: float = 120.0) -> CompileForkServer:
    deadline = time.monotonic() + timeout
    while not server.ready and time.monotonic() < deadline and server.failed is None:
        time.sleep(0.05)
    assert server.ready, server.failed
    return server


def stopped(pid: int, timeout: float = 10.0) -> bool:
    """Whether the process is stopped once the signal has arrived (signals arrive asynchronously)."""
    deadline = time.monotonic() + timeout
    while Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "T":
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@pytest.fixture
def server(tmp_path, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    made = CompileForkServer(tmp_path / "cache", {"QRSEARCH_PROBE": "yes"}, cpus=sorted(os.sched_getaffinity(0)))
    yield ready(made)
    made.close()


def probe_candidate(tmp_path: Path, name: str = "probe.py") -> tuple[Path, Path]:
    probe = tmp_path / f"{name}.json"
    candidate = _write(tmp_path, name, f'''
        import json, os
        json.dump({{"cuda": os.environ.get("CUDA_VISIBLE_DEVICES"), "cache": os.environ.get("TRITON_CACHE_DIR"),
                   "secret": os.environ.get("OPENAI_API_KEY"), "extra": os.environ.get("QRSEARCH_PROBE"),
                   "cpus": sorted(os.sched_getaffinity(0)), "nice": os.nice(0), "pid": os.getpid(),
                   "pgid": os.getpgid(0)}}, open({str(probe)!r}, "w"))

        def custom_kernel(A):
            return A, A
    ''')
    return candidate, probe


def test_a_forked_compile_runs_as_a_fresh_process_would(server, tmp_path, monkeypatch):
    candidate, probe = probe_candidate(tmp_path)
    cpu = min(os.sched_getaffinity(0))
    parent_nice = os.nice(0)
    report_path = tmp_path / "out" / "report.json"
    proc = server.start(candidate, [(2, 8)], cache_dir=tmp_path / "cache", target=CompileTarget(),
                        report_path=report_path, cpus=[cpu], env_extra={"QRSEARCH_PROBE": "yes"})
    assert isinstance(proc, ForkedProcess) and proc.wait(timeout=60) == 0
    seen = json.loads(probe.read_text())
    assert seen["cuda"] == "" and seen["cache"] == str((tmp_path / "cache").resolve())
    assert seen["secret"] is None and seen["extra"] == "yes"
    assert seen["cpus"] == [cpu] and seen["nice"] > parent_nice
    assert seen["pid"] == proc.pid and seen["pgid"] == proc.pid  # its own group: a killpg reaches it all
    report = read_report(report_path)
    assert report is not None and report.ok and report.shapes == [(2, 8)] and report.cpu_s > 0
    assert "kernels_compiled" in (report_path.with_name("report.json.log")).read_text()  # its output: its log


def test_candidates_do_not_see_each_other(server, tmp_path):
    """A candidate that changes its process (a module global, os.environ) leaves the next fork untouched."""
    first = _write(tmp_path, "meddler.py", '''
        import os, torch
        os.environ["QRSEARCH_MEDDLED"] = "1"
        torch.meddled = True

        def custom_kernel(A):
            return A, A
    ''')
    probe = tmp_path / "seen.json"
    second = _write(tmp_path, "witness.py", f'''
        import json, os, torch
        json.dump({{"env": os.environ.get("QRSEARCH_MEDDLED"), "torch": hasattr(torch, "meddled")}},
                  open({str(probe)!r}, "w"))

        def custom_kernel(A):
            return A, A
    ''')
    for i, candidate in enumerate((first, second)):
        proc = server.start(candidate, [(2, 8)], cache_dir=tmp_path / "cache", target=CompileTarget(),
                            report_path=tmp_path / f"r{i}.json", env_extra={"QRSEARCH_PROBE": "yes"})
        assert proc.wait(timeout=60) == 0
    assert json.loads(probe.read_text()) == {"env": None, "torch": False}
    assert server.forked == 2


def test_a_forked_compile_can_be_stopped_continued_and_killed(server, tmp_path):
    candidate = _write(tmp_path, "slow.py", '''
        import time
        time.sleep(60)

        def custom_kernel(A):
            return A, A
    ''')
    proc = server.start(candidate, [(2, 8)], cache_dir=tmp_path / "cache", target=CompileTarget(),
                        report_path=tmp_path / "slow.json", env_extra={"QRSEARCH_PROBE": "yes"})
    assert proc.poll() is None
    os.killpg(proc.pid, signal.SIGSTOP)  # what CompileAhead.pause does
    assert stopped(proc.pid)
    os.killpg(proc.pid, signal.SIGCONT)
    os.killpg(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=30) == -signal.SIGKILL and read_report(tmp_path / "slow.json") is None


def test_another_cache_or_a_dead_server_gets_a_fresh_interpreter(server, tmp_path):
    candidate, probe = probe_candidate(tmp_path)
    other = server.start(candidate, [(2, 8)], cache_dir=tmp_path / "other-cache", target=CompileTarget(),
                         report_path=tmp_path / "o.json", env_extra={"QRSEARCH_PROBE": "yes"})
    assert not isinstance(other, ForkedProcess) and other.wait(timeout=240) == 0
    assert json.loads(probe.read_text())["cache"] == str((tmp_path / "other-cache").resolve())
    server._proc.kill()  # the server dies
    server._proc.wait()
    again = server.start(candidate, [(2, 8)], cache_dir=tmp_path / "cache", target=CompileTarget(),
                         report_path=tmp_path / "a.json", env_extra={"QRSEARCH_PROBE": "yes"})
    assert not isinstance(again, ForkedProcess) and again.wait(timeout=240) == 0
    assert server.failed and read_report(tmp_path / "a.json").ok


@needs_ptxas
def test_a_forked_child_compiles_real_kernels_into_the_cache(server, tmp_path):
    candidate = _write(tmp_path, "k.py", KERNEL_CANDIDATE)
    proc = server.start(candidate, [(2, 8), (2, 64)], cache_dir=tmp_path / "cache", target=CompileTarget(),
                        report_path=tmp_path / "k.json", env_extra={"QRSEARCH_PROBE": "yes"})
    assert proc.wait(timeout=240) == 0
    report = read_report(tmp_path / "k.json")
    assert report is not None and report.ok and report.kernels_compiled == 2, report
    again = server.start(candidate, [(2, 8), (2, 64)], cache_dir=tmp_path / "cache", target=CompileTarget(),
                         report_path=tmp_path / "k2.json", env_extra={"QRSEARCH_PROBE": "yes"})
    assert again.wait(timeout=240) == 0
    second = read_report(tmp_path / "k2.json")
    assert second.kernels_compiled == 0 and second.kernels_cached == 2  # the first child's kernels, found


@needs_ptxas
def test_compile_ahead_compiles_through_the_fork_server_once_it_is_ready(tmp_path, monkeypatch):
    from search.evaluate.compile_ahead import CompileAhead

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    sched = CompileAhead(tmp_path / "cache", tmp_path / "ahead", sorted(os.sched_getaffinity(0)), poll_s=0.01)
    try:
        ready(sched._server)
        candidate = _write(tmp_path, "k.py", KERNEL_CANDIDATE)
        sched.announce("c1", candidate, [(2, 8), (2, 64)], kind="toy")
        got = sched.wait("c1", timeout=240)
        assert got.state == "done" and got.kernels_compiled == 2, got
        assert sched._server.forked >= 1  # forked, not a fresh interpreter
    finally:
        sched.close()
    assert not sched._server.alive


def test_a_closed_server_lets_a_stopped_child_finish(server, tmp_path):
    candidate = _write(tmp_path, "nap.py", '''
        import time
        time.sleep(2)

        def custom_kernel(A):
            return A, A
    ''')
    proc = server.start(candidate, [(2, 8)], cache_dir=tmp_path / "cache", target=CompileTarget(),
                        report_path=tmp_path / "nap.json", env_extra={"QRSEARCH_PROBE": "yes"})
    os.killpg(proc.pid, signal.SIGSTOP)  # its compiles were stopped for a timing when the parent went
    assert stopped(proc.pid)
    server.close()  # the parent is done: the server continues its children and waits for them
    assert read_report(tmp_path / "nap.json") is not None
