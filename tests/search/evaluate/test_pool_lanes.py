"""RayPool with ``lanes``: an evaluator runs that many requests at once, and one that dies or is
killed loses every request in flight on it, each reported Lost once (one restart, not one per lane)."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from kernels.families import BASELINE_PATH
from kernels.suites import get_suite
from search.engine.messages import EvalRequest
from search.engine.pool import Lost
from tests.search.evaluate.pool_events import poll_until

ray = pytest.importorskip("ray")


@ray.remote(max_restarts=-1, max_task_retries=0, concurrency_groups={"ahead": 1})
class LaneActor:
    """Answers like an EvaluatorActor whose evaluations never end; counts how many run at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running = 0

    def ping(self) -> dict:
        return {"name": "fake", "pid": os.getpid(), "host": "here", "gpus": ""}

    def evaluate(self, request_json: str | None, ticket: int | None = None) -> tuple[str, list[str]]:
        with self.lock:
            self.running += 1
        time.sleep(600)
        return "", []

    @ray.method(concurrency_group="ahead")
    def prefetch(self, request_json: str, ticket: int | None = None) -> bool:
        return True

    @ray.method(concurrency_group="ahead")
    def compiled(self, candidate_ids: list[str]) -> list[str]:
        return candidate_ids

    @ray.method(concurrency_group="ahead")
    def at_once(self) -> int:
        return self.running


def request(cid: str) -> EvalRequest:
    cases = list(get_suite("smoke"))[:1]
    return EvalRequest(candidate_id=cid, family="torch_geqrf", source=BASELINE_PATH.read_text(),
                       verify_suite="smoke", verify_cases=cases, bench_suite="custom", bench_cases=cases,
                       device="cpu")


def lane_pool(tmp_path, lanes: int = 2, lookahead: int = 1):
    """A RayPool over one LaneActor (the default group sized to the lanes, as RayPool sizes an
    EvaluatorActor's) instead of an evaluator."""
    from search.evaluate.ray_pool import RayPool
    from search.evaluate.slots import Slot

    class LanePool(RayPool):
        def __post_init__(self) -> None:
            actor = LaneActor.options(max_concurrency=self.lanes).remote()  # type: ignore[attr-defined]
            slot = Slot(name="fake", actor=actor, gpu=True)
            slot.send_ping()
            self.slots.append(slot)

    return LanePool(workdir=tmp_path, gpus=1, lanes=lanes, lookahead=lookahead)


def ready_pool(tmp_path, **kw):
    pool = lane_pool(tmp_path, **kw)
    deadline = time.monotonic() + 60
    while pool.free_slots() == 0 and time.monotonic() < deadline:
        pool.poll(0.05)
    return pool


def two_running(pool) -> None:
    """Submit three: two start on the evaluator's lanes at once, the third waits in its queue."""
    assert pool.free_slots() == 3  # two lanes and one queued
    for cid in ("c1", "c2", "c3"):
        pool.submit(request(cid))
    assert pool.free_slots() == 0 and pool.slots[0].running == 2 and len(pool.slots[0].queue) == 1
    actor = pool.slots[0].actor
    deadline = time.monotonic() + 60
    while ray.get(actor.at_once.remote()) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ray.get(actor.at_once.remote()) == 2  # both in flight on one actor, at once


def test_an_evaluator_killed_at_a_deadline_loses_every_lane_once(local_ray, tmp_path):
    pool = ready_pool(tmp_path)
    try:
        two_running(pool)
        for flight in pool._flights.values():
            if flight.request.candidate_id == "c1":
                flight.deadline = 0.0  # c1 is late; c2 shares its actor
        events = pool.poll(0.0)
        assert sorted(e.candidate_id for e in events if isinstance(e, Lost)) == ["c1", "c2"] and len(events) == 2
        assert "no answer" in events[0].reason and "lost with c1" in next(e.reason for e in events
                                                                           if e.candidate_id == "c2")
        assert pool.slots[0].restarts == 1 and pool.inflight() == ["c3"]
        deadline = time.monotonic() + 60  # the restarted actor answers its ping: c3 starts on a lane
        while not pool._flights and time.monotonic() < deadline:
            pool.poll(0.2)
        assert [f.request.candidate_id for f in pool._flights.values()] == ["c3"]
        assert pool.stats().busy_fraction["fake"] <= 1.0
    finally:
        ray.kill(pool.slots[0].actor, no_restart=True)


def test_an_evaluator_that_dies_loses_every_lane_once(local_ray, tmp_path):
    pool = ready_pool(tmp_path)
    try:
        two_running(pool)
        os.kill(pool.slots[0].pid, signal.SIGKILL)
        events = poll_until(pool, 2, timeout=60.0, every=0.2)
        assert sorted(e.candidate_id for e in events if isinstance(e, Lost)) == ["c1", "c2"] and len(events) == 2
        assert all("died" in e.reason for e in events)  # type: ignore[union-attr]
        assert poll_until(pool, 1, timeout=2.0, every=0.2) == []  # nothing is reported twice
        assert pool.slots[0].restarts == 1
    finally:
        ray.kill(pool.slots[0].actor, no_restart=True)
