"""A free evaluator lane holds for a compiled request instead of starting one whose kernels still
compile (evaluation.hold_for_ready): a child queued meanwhile that is ready runs first, the pool
asks the loop for one more request while it holds, and a head that waited its case timeout starts."""

from __future__ import annotations

import os
import time

import pytest

from kernels.families import BASELINE_PATH
from kernels.harness.settings import RunLimits
from kernels.suites import get_suite
from population.models import EvalResult, State
from search.engine.messages import EvalOutcome, EvalRequest
from search.engine.pool import Completed

ray = pytest.importorskip("ray")


@ray.remote(concurrency_groups={"ahead": 1, "waits": 1})
class CompilingActor:
    """An evaluator whose compile-ahead is scripted: ``ready`` is what has compiled; evaluations
    block until released, record the order they started in, and end saying which of the requests
    announced to it and not started are compiled (as EvaluatorActor.evaluate)."""

    def __init__(self) -> None:
        self.ready: set[str] = set()
        self.started: list[str] = []
        self.released: set[str] = set()
        self.announced: list[str] = []
        self.tickets: dict[int, str] = {}  # what each announcement's ticket names
        self.waits: list[float] = []  # each question's timeout: 0 asks, more holds
        self.reports = 0
        self.questions = 0

    def ping(self) -> dict:
        return {"name": "fake", "pid": os.getpid(), "host": "here", "gpus": ""}

    def evaluate(self, request_json: str | None, ticket: int | None = None) -> tuple[str, list[str]]:
        cid = EvalRequest.model_validate_json(request_json).candidate_id if request_json else self.tickets[ticket]
        self.started.append(cid)
        while cid not in self.released:
            time.sleep(0.01)
        waiting = [c for c in self.announced if c not in self.started]
        return EvalOutcome(candidate_id=cid, state=State.VERIFIED, result=EvalResult(
            candidate_id=cid, geomean_ms=1.0)).model_dump_json(), [c for c in waiting if c in self.ready]

    @ray.method(concurrency_group="ahead")
    def prefetch(self, request_json: str, ticket: int | None = None) -> bool:
        self.announced.append(EvalRequest.model_validate_json(request_json).candidate_id)
        if ticket is not None:
            self.tickets[ticket] = self.announced[-1]
        return True

    @ray.method(concurrency_group="ahead")
    def compiled(self, candidate_ids: list[str]) -> list[str]:
        return [c for c in candidate_ids if c in self.ready]

    @ray.method(concurrency_group="waits")
    def ready_within(self, candidate_ids: list[str], timeout_s: float) -> list[str]:
        self.questions += 1
        self.waits.append(timeout_s)
        deadline = time.monotonic() + timeout_s
        while not (ready := [c for c in candidate_ids if c in self.ready]) and time.monotonic() < deadline:
            time.sleep(0.01)
        return ready

    @ray.method(concurrency_group="ahead")
    def compile_state(self, candidate_ids: list[str]) -> tuple[int, list[str]]:
        self.reports += 1
        # Every compile CPU busy: only holds (and with anticipation, reports) make the queue grow.
        return 0, [c for c in candidate_ids if c in self.ready]

    @ray.method(concurrency_group="ahead")
    def compile_done(self, cid: str) -> None:
        self.ready.add(cid)

    @ray.method(concurrency_group="ahead")
    def release(self, cid: str) -> None:
        self.released.add(cid)

    @ray.method(concurrency_group="ahead")
    def starts(self) -> list[str]:
        return list(self.started)

    @ray.method(concurrency_group="ahead")
    def calls(self) -> dict[str, int]:
        return {"reports": self.reports, "questions": self.questions}

    @ray.method(concurrency_group="ahead")
    def question_waits(self) -> list[float]:
        return list(self.waits)


def request(cid: str, timeout_s: float = 240.0) -> EvalRequest:
    cases = list(get_suite("smoke"))[:1]
    return EvalRequest(candidate_id=cid, family="torch_geqrf", source=BASELINE_PATH.read_text(),
                       verify_suite="smoke", verify_cases=cases, bench_suite="custom", bench_cases=cases,
                       device="cpu", limits=RunLimits(case_timeout_s=timeout_s))


def make_pool(tmp_path, hold: bool, **options):
    from search.evaluate.ray_pool import RayPool
    from search.evaluate.slots import Slot

    class OneActorPool(RayPool):
        def __post_init__(self) -> None:
            slot = Slot(name="fake", actor=CompilingActor.remote(), gpu=True)  # type: ignore[attr-defined]
            slot.send_ping()
            self.slots.append(slot)

    pool = OneActorPool(workdir=tmp_path, gpus=1, lookahead=2, max_lookahead=4, hold_for_ready=hold,
                        ready_wait_s=0.05, **options)
    deadline = time.monotonic() + 30
    while pool.free_slots() == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    return pool, pool.slots[0].actor


def poll_until(pool, predicate, timeout: float = 20.0) -> list:
    events: list = []
    deadline = time.monotonic() + timeout
    while not predicate(events) and time.monotonic() < deadline:
        events += pool.poll(0.05)
    return events


def starts(actor, count: int, timeout: float = 20.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while len(got := ray.get(actor.starts.remote())) < count and time.monotonic() < deadline:
        time.sleep(0.02)
    return got


def test_a_ready_child_queued_while_the_lane_holds_runs_before_the_compiling_ones(local_ray, tmp_path):
    pool, actor = make_pool(tmp_path, hold=True)
    try:
        pool.submit(request("c1"))  # a free lane, nothing queued: it starts
        pool.submit(request("c2"))
        pool.submit(request("c3"))
        assert starts(actor, 1) == ["c1"]
        ray.get(actor.release.remote("c1"))
        events = poll_until(pool, lambda ev: any(isinstance(e, Completed) for e in ev))
        assert [e.outcome.candidate_id for e in events if isinstance(e, Completed)] == ["c1"]
        poll_until(pool, lambda ev: pool.holding(), timeout=5)  # once the actor said none is compiled
        # Both queued ones still compile: nothing started, and the pool asks for one more.
        assert ray.get(actor.starts.remote()) == ["c1"] and pool.free_slots() == 1 and pool.holding()
        pool.submit(request("c4"))  # a cheap child: queued behind them, not started at once
        assert pool.inflight() == ["c2", "c3", "c4"]
        ray.get(actor.compile_done.remote("c4"))
        poll_until(pool, lambda ev: len(ray.get(actor.starts.remote())) == 2)
        assert ray.get(actor.starts.remote()) == ["c1", "c4"] and pool.inflight() == ["c4", "c2", "c3"]
        assert not pool.holding()  # its lane is busy again
        ray.get(actor.compile_done.remote("c3"))
        ray.get(actor.release.remote("c4"))
        poll_until(pool, lambda ev: len(ray.get(actor.starts.remote())) == 3)
        assert ray.get(actor.starts.remote()) == ["c1", "c4", "c3"]  # the compiled one, not the head
    finally:
        ray.kill(actor, no_restart=True)


def test_the_queue_grows_one_request_per_unanswered_hold_up_to_the_max(local_ray, tmp_path):
    pool, actor = make_pool(tmp_path, hold=True)
    try:
        for cid in ("c1", "c2", "c3"):
            pool.submit(request(cid))
        ray.get(actor.release.remote("c1"))
        poll_until(pool, lambda ev: bool(ev))
        submitted = 0
        deadline = time.monotonic() + 3  # 60 unanswered holds of 0.05 s: far more than the room left
        while time.monotonic() < deadline and submitted < 10:
            pool.poll(0.05)
            if pool.free_slots() > 0:
                pool.submit(request(f"x{submitted}"))
                submitted += 1
        assert len(pool.inflight()) == 1 + 4  # lanes + max_lookahead, never more
        assert ray.get(actor.starts.remote()) == ["c1"]  # none of them compiled: still holding
    finally:
        ray.kill(actor, no_restart=True)


def reported(pool, cid: str) -> bool:
    """Whether a compile report named ``cid`` compiled (reports are collected where the loop asks
    for free slots, before each proposal)."""
    pool.free_slots()
    return cid in pool.slots[0].compiled


def test_a_request_a_compile_report_named_starts_without_a_question(local_ray, tmp_path):
    pool, actor = make_pool(tmp_path, hold=True, room_every_s=0.05)
    try:
        for cid in ("c1", "c2", "c3"):
            pool.submit(request(cid))
        ray.get(actor.compile_done.remote("c3"))
        poll_until(pool, lambda ev: reported(pool, "c3"), timeout=10)
        ray.get(actor.release.remote("c1"))
        poll_until(pool, lambda ev: len(ray.get(actor.starts.remote())) == 2, timeout=10)
        assert ray.get(actor.starts.remote()) == ["c1", "c3"]  # the compiled one, not the head
        calls = ray.get(actor.calls.remote())
        assert calls["questions"] == 0 and calls["reports"] >= 1
    finally:
        ray.kill(actor, no_restart=True)


@pytest.mark.parametrize("anticipate", [True, False])
def test_anticipation_takes_one_more_per_report_while_every_lane_runs_and_nothing_queued_is_compiled(
        local_ray, tmp_path, anticipate):
    pool, actor = make_pool(tmp_path, hold=True, anticipate=anticipate, room_every_s=0.05)
    try:
        for cid in ("c1", "c2", "c3"):  # c1 runs (held there), c2 and c3 compile
            pool.submit(request(cid))
        submitted = 0
        deadline = time.monotonic() + 3  # 60 reports of nothing compiled
        while time.monotonic() < deadline and submitted < 10:
            pool.poll(0.05)
            if pool.free_slots() > 0:
                pool.submit(request(f"x{submitted}"))
                submitted += 1
        assert ray.get(actor.starts.remote()) == ["c1"]  # no lane was free: nothing else started
        if not anticipate:
            assert submitted == 0 and not pool.holding()
            return
        assert len(pool.inflight()) == 1 + 4 and pool.holding()  # lanes + max_lookahead, never more
        ray.get(actor.compile_done.remote("x0"))
        poll_until(pool, lambda ev: reported(pool, "x0") and not pool.holding(), timeout=10)  # no more
        assert pool.free_slots() == 0 and ray.get(actor.starts.remote()) == ["c1"]
    finally:
        ray.kill(actor, no_restart=True)


def test_a_request_an_evaluations_answer_named_compiled_starts_on_the_freed_lane_without_a_question(
        local_ray, tmp_path):
    pool, actor = make_pool(tmp_path, hold=True)
    try:
        for cid in ("c1", "c2", "c3"):
            pool.submit(request(cid))
        ray.get(actor.compile_done.remote("c3"))  # no compile report is collected: only polls below
        ray.get(actor.release.remote("c1"))
        poll_until(pool, lambda ev: len(ray.get(actor.starts.remote())) == 2, timeout=10)
        assert ray.get(actor.starts.remote()) == ["c1", "c3"]  # the compiled one, not the head
        assert ray.get(actor.calls.remote())["questions"] == 0 and not pool.holding()
        ray.get(actor.release.remote("c3"))  # c2 still compiles: the answer names none, so the lane holds
        poll_until(pool, lambda ev: pool.holding(), timeout=10)
        assert ray.get(actor.starts.remote()) == ["c1", "c3"]
        assert ray.get(actor.question_waits.remote())[0] == 0.05  # a hold at once, no question first
    finally:
        ray.kill(actor, no_restart=True)


def test_a_head_that_waited_its_case_timeout_starts_compiled_or_not(local_ray, tmp_path):
    pool, actor = make_pool(tmp_path, hold=True)
    try:
        pool.submit(request("c1"))
        pool.submit(request("c2", timeout_s=0.5))
        ray.get(actor.release.remote("c1"))
        poll_until(pool, lambda ev: len(ray.get(actor.starts.remote())) == 2, timeout=10)
        assert ray.get(actor.starts.remote()) == ["c1", "c2"]
    finally:
        ray.kill(actor, no_restart=True)


def test_without_hold_the_head_starts_at_once(local_ray, tmp_path):
    pool, actor = make_pool(tmp_path, hold=False)
    try:
        for cid in ("c1", "c2", "c3"):
            pool.submit(request(cid))
        ray.get(actor.release.remote("c1"))
        poll_until(pool, lambda ev: len(ray.get(actor.starts.remote())) == 2, timeout=10)
        assert ray.get(actor.starts.remote()) == ["c1", "c2"]
        assert ray.get(actor.calls.remote())["questions"] == 0  # c1's answer said none is compiled
    finally:
        ray.kill(actor, no_restart=True)


def test_a_real_evaluator_that_holds_runs_every_queued_request_once(local_ray, tmp_path):
    """The production actor answers ready_within (on CPU every request is ready: no compile-ahead)."""
    from search.evaluate.ray_pool import RayPool
    from tests.search.evaluate.test_pool_contract import request as small_request

    pool = RayPool(workdir=tmp_path / "work", gpus=0, cpu_evaluators=1, lookahead=2, hold_for_ready=True)
    try:
        deadline = time.monotonic() + 120
        while pool.free_slots() < 3 and time.monotonic() < deadline:
            pool.poll(0.2)
        for cid in ("c0000001", "c0000002", "c0000003"):
            pool.submit(small_request(cid))
        events = poll_until(pool, lambda ev: len(ev) >= 3, timeout=240)
        done = [e.outcome for e in events if isinstance(e, Completed)]
        assert sorted(o.candidate_id for o in done) == ["c0000001", "c0000002", "c0000003"]
        assert all(o.state is State.VERIFIED for o in done), [o.reason for o in done]
        assert pool.inflight() == []
    finally:
        pool.shutdown()
