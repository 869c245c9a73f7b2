"""Two lanes of one Worker on CPU, with real children: timed calls own the device, and the lanes
do run at once.

Every candidate call is logged by the candidate itself (tests/search/evaluate/lane_probe.py:
pid and time.monotonic(), one clock for every process); the test records in this process when
each bench job, verify stage and compile wait ran, when each child was spawned and when it
was first heard from (the end of its start), and which job each child ran.  No assertion is
about how long anything takes."""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from kernels.harness.process import ChildProcess
from kernels.harness.protocol import ChildMessage, Unreadable
from kernels.harness.settings import RunLimits, TimingPolicy
from kernels.suites import Case
from population.models import State
from search.evaluate.compile_ahead import CompileAhead
from search.engine.messages import EvalOutcome, EvalRequest
from tests.search.fake_compiler import FakeCompiler

# One structure: the variants differ only in PARAMS, so their children are reused by structure;
# OTHER is another structure (new children, taken from the spares).
TEMPLATE = '''import time

import torch

from tests.search.evaluate import lane_probe

# qrsearch: params
PARAMS = {{"variant": {variant}}}
# qrsearch: end params

LOG = {log!r}


def custom_kernel(A):
    with lane_probe.call(LOG):
        time.sleep(0.05)  # a timed job long enough for the other lane to run into it, were it let
        return torch.geqrf({arg})
'''
Interval = tuple[int, float, float]  # (thread, start, end)


def overlap(a0: float, a1: float, b0: float, b1: float) -> bool:
    return a0 < b1 and b0 < a1


class Record:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.bench: list[Interval] = []
        self.verify: list[Interval] = []
        self.compile_waits: list[Interval] = []
        # (thread, spawned or told to init, warm or dead, pid): where a context was created
        self.starts: list[tuple[int, float, float, int]] = []
        self.jobs: dict[int, list[tuple[float, str, str | None]]] = defaultdict(list)  # pid -> submits and dones
        self.pauses: list[tuple[int, str, bool]] = []  # (thread, pause|resume, exclusive held)
        self.turns: list[Interval] = []  # timing_hold "region": from each exclusive grant to its release

    def add(self, where: list[Any], item: Any) -> None:
        with self.lock:
            where.append(item)


def recording_child(record: Record) -> type[ChildProcess]:
    class RecordingChild(ChildProcess):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self._spawned = (threading.get_ident(), time.monotonic())
            self._heard = False
            self._inited = False
            super().__init__(*args, **kwargs)

        def init(self) -> None:
            self._spawned = (threading.get_ident(), time.monotonic())  # its context from here
            self._inited = True
            super().init()

        def next_message(self, deadline: float) -> ChildMessage | Unreadable | None:
            message = super().next_message(deadline)
            now = time.monotonic()
            loaded = message is not None and message.type == "loaded"
            if not self._heard and not loaded:  # warm, or the end of its stream: the start is over
                self._heard = True
                if self._inited or not self.staged:  # a spare never told to init made no context
                    record.add(record.starts, (*self._spawned, now, self.proc.pid))
            if message is not None and message.type == "done":
                record.add(record.jobs[self.proc.pid], (now, "done", None))
            return message

        def submit(self, job_path: Path) -> None:
            mode = json.loads(Path(job_path).read_text())["mode"]
            record.add(record.jobs[self.proc.pid], (time.monotonic(), "submit", mode))
            super().submit(job_path)

    return RecordingChild


def calls(log: Path) -> list[tuple[int, float, float]]:
    """(pid, start, end) of every candidate call, from the probe's log."""
    opened: dict[int, float] = {}
    out = []
    for line in log.read_text().splitlines():
        kind, pid, at = line.split()
        if kind == "start":
            opened[int(pid)] = float(at)
        else:
            out.append((int(pid), opened.pop(int(pid)), float(at)))
    assert not opened, "a call never ended"
    return out


def own_timing_child(record: Record, pid: int, began: float, ended: float) -> bool:
    """Whether ``pid`` got a bench job between ``began`` and ``ended``: a spare the bench job
    claimed, whose context its watcher created under that job's exclusive hold."""
    return any(kind == "submit" and mode == "bench" and began <= t <= ended for t, kind, mode in record.jobs[pid])


def mode_at(record: Record, pid: int, at: float) -> str:
    submits = [(t, mode) for t, kind, mode in record.jobs[pid] if kind == "submit" and t <= at]
    assert submits, f"pid {pid} called the candidate before any job was handed to it"
    return str(submits[-1][1])


@pytest.fixture
def lanes_worker(tmp_path, monkeypatch):
    import search.evaluate.children as children_module
    import search.evaluate.worker as worker_module
    from search.evaluate.device_gate import RegionTurns
    from search.evaluate.worker import Worker

    record = Record()
    monkeypatch.setattr(children_module, "ChildProcess", recording_child(record))
    compiler = FakeCompiler(delay=0.3)
    sched = CompileAhead(tmp_path / "cache", tmp_path / "ahead", start=compiler.start, read=compiler.read,
                         target="t", poll_s=0.01, parallel=2)
    worker = Worker(tmp_path / "work", {"TRITON_CACHE_DIR": str(tmp_path / "cache")}, name="cpu0", ahead=sched,
                    lanes=2)
    real_run, real_parallel, real_wait = worker_module.run_candidate, worker_module.run_candidate_parallel, \
        worker._wait_compile
    real_pause, real_resume = sched.pause, sched.resume

    def timed(label: str, where: list[Interval], real: Any) -> Any:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            began = time.monotonic()
            try:
                return real(*args, **kwargs)
            finally:
                record.add(where, (threading.get_ident(), began, time.monotonic()))
        return wrapped

    def bench(job: Any, hooks: Any) -> Any:
        assert job.mode == "bench"
        if hooks.turns is None:
            assert worker.gate.state().writer, "a bench job ran without the exclusive hold"
        else:
            assert not worker.gate.state().writer, "a bench job with turns began exclusive"
        return timed("bench", record.bench, real_run)(job, hooks)

    real_acquire, real_release = RegionTurns.acquire, RegionTurns.release
    granted: dict[int, float] = {}

    def acquire(self: RegionTurns) -> float:
        waited = real_acquire(self)
        granted[threading.get_ident()] = time.monotonic()
        return waited

    def release(self: RegionTurns) -> float:
        began = granted.pop(threading.get_ident(), None)
        if began is not None:
            record.add(record.turns, (threading.get_ident(), began, time.monotonic()))
        return real_release(self)

    def paused(name: str, real: Any) -> Any:
        def wrapped() -> None:
            record.add(record.pauses, (threading.get_ident(), name, worker.gate.state().writer))
            real()
        return wrapped

    monkeypatch.setattr(worker_module, "run_candidate", bench)
    monkeypatch.setattr(worker_module, "run_candidate_parallel", timed("verify", record.verify, real_parallel))
    monkeypatch.setattr(worker, "_wait_compile", timed("compile", record.compile_waits, real_wait))
    monkeypatch.setattr(sched, "pause", paused("pause", real_pause))
    monkeypatch.setattr(sched, "resume", paused("resume", real_resume))
    monkeypatch.setattr(RegionTurns, "acquire", acquire)
    monkeypatch.setattr(RegionTurns, "release", release)
    yield worker, record
    worker.close()


@pytest.mark.parametrize("hold", ["region", "job"])
def test_two_lanes_run_at_once_and_nothing_overlaps_a_timed_job(lanes_worker, tmp_path, hold):
    worker, record = lanes_worker
    log = tmp_path / "calls.log"

    def request(cid: str, variant: int, arg: str = "A") -> EvalRequest:
        return EvalRequest(
            candidate_id=cid, family="probe", source=TEMPLATE.format(variant=variant, log=str(log), arg=arg),
            verify_suite="custom", verify_cases=[Case(batch=2, n=4, cond=1, seed=1, case="dense")],
            bench_suite="custom", bench_cases=[Case(batch=2, n=8, cond=1, seed=2, case="dense")], device="cpu",
            limits=RunLimits(case_timeout_s=120),
            timing=TimingPolicy(warmup_calls=1, min_reps=4, max_reps=4, max_seconds=10),
            verify_processes=1, pause_cases=None, timing_hold=hold)

    # Lane a: two candidates of one structure, then another structure (children from the
    # spares); lane b: the first structure too, so both lanes want its kept children at once.
    work = {"a": [request("c0000001", 1), request("c0000003", 3), request("c0000005", 5, "A.contiguous()")],
            "b": [request("c0000002", 2), request("c0000004", 4)]}
    for reqs in work.values():  # announced ahead, as the pool does: the next candidate's compile is
        for r in reqs[1:]:      # done by the time its lane is free, so its gate calls come at once
            assert worker.prefetch(r)
    outcomes: dict[str, EvalOutcome] = {}
    errors: list[BaseException] = []

    def lane(requests: list[EvalRequest]) -> None:
        try:
            for r in requests:
                outcomes[r.candidate_id] = worker.evaluate(r)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=lane, args=(reqs,)) for reqs in work.values()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not errors and not any(t.is_alive() for t in threads), errors
    assert all(o.state is State.VERIFIED for o in outcomes.values()), {k: o.reason for k, o in outcomes.items()}
    assert len(outcomes) == 5 and worker.evaluations == 5
    worker.close()  # every child start has ended (spares starting now are killed and heard of)

    # The lanes ran at once: verify stages of the two lanes overlapped, and so did gate calls
    # of two verify children (the probe makes each process's first call wait for another's).
    assert any(overlap(a0, a1, b0, b1) for ta, a0, a1 in record.verify for tb, b0, b1 in record.verify if ta != tb)
    made = calls(log)
    gate_calls = [(pid, t0, t1) for pid, t0, t1 in made if mode_at(record, pid, t0) == "verify"]
    timed_calls = [(pid, t0, t1) for pid, t0, t1 in made if mode_at(record, pid, t0) == "bench"]
    assert gate_calls and timed_calls
    assert any(overlap(a0, a1, b0, b1) for pa, a0, a1 in gate_calls for pb, b0, b1 in gate_calls if pa != pb)
    assert all(any(b0 <= t0 and t1 <= b1 for _, b0, b1 in record.bench) for _, t0, t1 in timed_calls)

    if hold == "job":
        # Timed calls own the device: no other bench job, no gate call, and no child start (but
        # the bench job's own timing child) overlaps a bench job.
        assert not record.turns
        for tb, b0, b1 in record.bench:
            assert not [o for o in record.bench if o != (tb, b0, b1) and overlap(o[1], o[2], b0, b1)]
            assert not [c for c in gate_calls if overlap(c[1], c[2], b0, b1)], "a gate call ran during a timed job"
            intruders = [s for s in record.starts if overlap(s[1], s[2], b0, b1) and s[0] != tb
                         and not own_timing_child(record, s[3], b0, b1)]
            assert not intruders, "a child created a context while another lane's job was timed"
    else:
        # Each timed call had a turn of its own: the 4 timed calls of each bench job inside
        # turns, its warm-up call outside them (shared with the other lane's work).
        inside = [c for c in timed_calls if any(u0 <= c[1] and c[2] <= u1 for _, u0, u1 in record.turns)]
        assert len(inside) == 4 * len(record.bench) and len(timed_calls) - len(inside) == len(record.bench)
        # And owned the device: nothing of another process ran during a turn (no call, no child
        # start, no other turn); timing children now start before their job's first turn.
        for tu, u0, u1 in record.turns:
            assert not [o for o in record.turns if o != (tu, u0, u1) and overlap(o[1], o[2], u0, u1)]
            busy = [pid for pid, t0, t1 in made if overlap(t0, t1, u0, u1)]
            assert len(set(busy)) <= 1, "another process called the candidate during a timed region"
            assert not [s for s in record.starts if overlap(s[1], s[2], u0, u1)], \
                "a child created a context during a timed region"
    # Compiles were stopped only by the holder of the exclusive gate, one pair at a time.
    assert record.pauses and [p[1] for p in record.pauses] == ["pause", "resume"] * (len(record.pauses) // 2)
    assert all(p[2] for p in record.pauses)
    assert all(record.pauses[i][0] == record.pauses[i + 1][0] for i in range(0, len(record.pauses), 2))

    # No child was handed to two lanes: each one's jobs came one after the other.
    for pid, events in record.jobs.items():
        kinds = [kind for _, kind, _ in events]
        assert kinds[::2] == ["submit"] * len(kinds[::2]) and kinds[1::2] == ["done"] * len(kinds[1::2]), pid
    assert worker.reused > 0  # the second candidates of a structure ran in kept children
    for outcome in outcomes.values():
        stages = outcome.result.stage_seconds
        assert stages["settle"] >= 0 and stages["device_wait"] >= 0 and stages["compile_wait"] >= 0


def test_with_lanes_a_request_started_at_once_compiles_ahead_and_a_late_prefetch_is_ignored(tmp_path, monkeypatch):
    """A free lane starts a request nobody announced: its kernels would otherwise compile inside
    the verify stage, holding the gate against the other lane's bench job, so the worker announces
    it itself; a prefetch that arrives while it runs starts nothing, one after it does."""
    from kernels.families import BASELINE_PATH
    from search.evaluate.worker import Worker

    compiler = FakeCompiler(delay=0.2)
    sched = CompileAhead(tmp_path / "cache", tmp_path / "ahead", start=compiler.start, read=compiler.read,
                         target="t", poll_s=0.01)
    worker = Worker(tmp_path / "work", {"TRITON_CACHE_DIR": str(tmp_path / "cache")}, name="cpu0", ahead=sched,
                    lanes=2)
    late: list[bool] = []
    real_wait = worker._wait_compile

    def wait(request: EvalRequest, *args: Any) -> None:
        late.append(worker.prefetch(request))
        real_wait(request, *args)

    monkeypatch.setattr(worker, "_wait_compile", wait)
    request = EvalRequest(candidate_id="c0000001", family="torch_geqrf", source=BASELINE_PATH.read_text(),
                          verify_suite="custom", verify_cases=[Case(batch=2, n=4, cond=1, seed=1)],
                          bench_suite="custom", bench_cases=[Case(batch=2, n=8, cond=1, seed=2)], device="cpu",
                          timing=TimingPolicy(min_reps=2, max_reps=2, max_seconds=0.1), verify_processes=1)
    try:
        out = worker.evaluate(request)
        assert out.state is State.VERIFIED, out.reason
        assert out.result.jit["ahead_done"] == 1.0 and len(compiler.calls) == 1
        assert late == [False]
        assert worker.prefetch(request)  # evaluated again (after a loss, say): announced again
    finally:
        worker.close()
