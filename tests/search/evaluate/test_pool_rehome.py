"""A lost evaluator's queued requests move to the evaluators that are up: its restart may never
come (its node left the cluster), and a request left on it would be in flight forever.  CI once
saw exactly that: a removed node's queue stranded, the run ended on its time budget with 1 of 4
evaluations."""

from __future__ import annotations

import time

import pytest

from search.evaluate.pool import Lost
from tests.search.evaluate.test_pool_admission import RoomActor, request

ray = pytest.importorskip("ray")


def two_slot_pool(tmp_path, slots: int):
    """A RayPool over ``slots`` RoomActors (busy for the whole test once they start a request),
    with one lane and one queued request each."""
    from search.evaluate.ray_pool import RayPool, _Slot

    class RoomPool(RayPool):
        def __post_init__(self) -> None:
            for i in range(slots):
                slot = _Slot(name=f"fake{i}", actor=RoomActor.remote(), gpu=True)  # type: ignore[attr-defined]
                self._send_ping(slot)
                self.slots.append(slot)

    return RoomPool(workdir=tmp_path, gpus=slots, lookahead=1, max_lookahead=0, ready_first=False)


def fill(pool, want: int) -> list[str]:
    deadline = time.monotonic() + 30
    while pool.free_slots() < want and time.monotonic() < deadline:
        time.sleep(0.05)
    ids = [f"c{i}" for i in range(want)]
    for cid in ids:
        pool.submit(request(cid))
    return ids


def poll_until_lost(pool, timeout: float = 30.0) -> list:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        events = pool.poll(0.1)
        if any(isinstance(e, Lost) for e in events):
            return events
    raise AssertionError("the killed evaluator's flight was never reported lost")


def test_a_dead_evaluators_queue_moves_to_the_live_one(local_ray, tmp_path):
    pool = two_slot_pool(tmp_path, slots=2)
    dead, live = pool.slots
    try:
        fill(pool, 4)  # each: one running, one queued
        assert len(dead.queue) == 1 and len(live.queue) == 1
        queued = dead.queue[0].candidate_id
        running = next(f.request.candidate_id for f in pool._flights.values() if f.slot is dead)
        ray.kill(dead.actor, no_restart=True)  # gone for good, like an actor on a removed node
        events = poll_until_lost(pool)
        assert [e.candidate_id for e in events if isinstance(e, Lost)] == [running]
        assert dead.queue == [] and queued in [r.candidate_id for r in live.queue]
        assert queued in pool.inflight() and running not in pool.inflight()  # the loop re-queues the lost one
        assert queued in ray.get(live.actor.announced.remote())  # it compiles ahead where it will run
        for _ in range(5):  # the dead one never comes back; nothing moves back to it
            pool.poll(0.05)
        assert dead.queue == [] and dead not in pool._ready()
    finally:
        for slot in pool.slots:
            ray.kill(slot.actor, no_restart=True)


def test_with_no_evaluator_up_the_queue_waits_for_the_restart(local_ray, tmp_path):
    pool = two_slot_pool(tmp_path, slots=1)
    (only,) = pool.slots
    try:
        fill(pool, 2)
        queued = only.queue[0].candidate_id
        ray.kill(only.actor, no_restart=True)
        poll_until_lost(pool)
        assert [r.candidate_id for r in only.queue] == [queued] and pool.inflight() == [queued]
    finally:
        ray.kill(only.actor, no_restart=True)
