"""A lost evaluator's queued requests move to the evaluators that are up: its restart may never
come (its node left the cluster), and a request left on it would be in flight forever.  CI once
saw exactly that: a removed node's queue stranded, the run ended on its time budget with 1 of 4
evaluations."""

from __future__ import annotations

import time

import pytest

from search.engine.pool import Lost
from tests.search.evaluate.test_pool_admission import RoomActor, request, room_pool

ray = pytest.importorskip("ray")


class _Restarting(RoomActor.__ray_metadata__.modified_class):  # type: ignore[name-defined]
    restart_s = 0.0

    def __init__(self) -> None:
        if ray.get_runtime_context().was_current_actor_reconstructed:
            time.sleep(self.restart_s)
        super().__init__()


@ray.remote(concurrency_groups={"ahead": 1}, max_restarts=-1)
class SlowRestartActor(_Restarting):
    """A RoomActor whose restart takes 3 s (a GPU actor's CUDA start, say)."""

    restart_s = 3.0


@ray.remote(concurrency_groups={"ahead": 1}, max_restarts=-1)
class StuckRestartActor(_Restarting):
    """A RoomActor whose restart never ends within a test: as one whose node left (Ray holds the
    restart until resources appear; pings to it wait, they do not fail)."""

    restart_s = 600.0


def rehome_pool(tmp_path, actors: tuple):
    """One lane and one queued request an evaluator; the head starts first (no compile questions)."""
    return room_pool(tmp_path, lookahead=1, max_lookahead=0, actors=actors, ready_first=False)


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
    pool = rehome_pool(tmp_path, (RoomActor, RoomActor))
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
    pool = rehome_pool(tmp_path, (RoomActor,))
    (only,) = pool.slots
    try:
        fill(pool, 2)
        queued = only.queue[0].candidate_id
        ray.kill(only.actor, no_restart=True)
        poll_until_lost(pool)
        assert [r.candidate_id for r in only.queue] == [queued] and pool.inflight() == [queued]
    finally:
        ray.kill(only.actor, no_restart=True)


def test_a_queue_left_while_none_was_up_moves_to_the_first_evaluator_back(local_ray, tmp_path):
    pool = rehome_pool(tmp_path, (SlowRestartActor, StuckRestartActor))
    restarts, gone = pool.slots
    try:
        fill(pool, 4)
        ray.kill(restarts.actor, no_restart=False)  # restarts, slowly
        poll_until_lost(pool)
        queued = [r.candidate_id for r in gone.queue]  # its own and the restarting one's
        assert len(queued) == 2 and restarts.queue == []
        ray.kill(gone.actor, no_restart=False)  # lost while the other is still restarting; never back
        poll_until_lost(pool)
        assert restarts not in pool._ready() and [r.candidate_id for r in gone.queue] == queued  # nowhere to go
        deadline = time.monotonic() + 60
        while restarts not in pool._ready() and time.monotonic() < deadline:
            pool.poll(0.1)
        assert restarts in pool._ready() and gone.queue == []
        running = [f.request.candidate_id for f in pool._flights.values() if f.slot is restarts]
        assert running == queued[:1] and [r.candidate_id for r in restarts.queue] == queued[1:]  # in order
        assert queued[1] in ray.get(restarts.actor.announced.remote())  # announced where it will run
    finally:
        for slot in pool.slots:
            ray.kill(slot.actor, no_restart=True)
