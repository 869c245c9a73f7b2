"""The Ray pool hands an evaluator more candidates while its compile processes have room,
never more than ``max_lookahead`` queued, and only ``lookahead`` once they are busy."""

from __future__ import annotations

import os
import time

import pytest

from kernels.families import BASELINE_PATH
from kernels.suites import get_suite
from search.engine.messages import EvalRequest

ray = pytest.importorskip("ray")


@ray.remote(concurrency_groups={"ahead": 1})
class RoomActor:
    """Answers like an EvaluatorActor whose compile processes have ``room`` idle; evaluates nothing."""

    def __init__(self) -> None:
        self.room = 0
        self.prefetched: list[str] = []

    def ping(self) -> dict:
        return {"name": "fake", "pid": os.getpid(), "host": "here", "gpus": ""}

    def evaluate(self, request_json: str | None, ticket: int | None = None) -> tuple[str, list[str]]:
        time.sleep(600)  # busy for the whole test
        return "", []

    @ray.method(concurrency_group="ahead")
    def prefetch(self, request_json: str, ticket: int | None = None) -> bool:
        self.prefetched.append(EvalRequest.model_validate_json(request_json).candidate_id)
        return True

    @ray.method(concurrency_group="ahead")
    def compile_state(self, candidate_ids: list[str]) -> tuple[int, list[str]]:
        return self.room, []  # nothing it queues is compiled

    @ray.method(concurrency_group="ahead")
    def set_room(self, room: int) -> None:
        self.room = room

    @ray.method(concurrency_group="ahead")
    def announced(self) -> list[str]:
        return self.prefetched


def request(cid: str) -> EvalRequest:
    cases = list(get_suite("smoke"))[:1]
    return EvalRequest(candidate_id=cid, family="torch_geqrf", source=BASELINE_PATH.read_text(),
                       verify_suite="smoke", verify_cases=cases, bench_suite="custom", bench_cases=cases,
                       device="cpu")


def room_pool(tmp_path, lookahead: int, max_lookahead: int, actors: tuple = (RoomActor,), **options):
    """A RayPool over RoomActors (one per class in ``actors``) instead of evaluators."""
    from search.evaluate.ray_pool import RayPool
    from search.evaluate.slots import Slot

    class RoomPool(RayPool):
        def __post_init__(self) -> None:
            for i, actor in enumerate(actors):
                slot = Slot(name="fake" if len(actors) == 1 else f"fake{i}", actor=actor.remote(), gpu=True)
                slot.send_ping()
                self.slots.append(slot)

    return RoomPool(workdir=tmp_path, gpus=len(actors), lookahead=lookahead, max_lookahead=max_lookahead,
                    room_every_s=0.05, **options)


def settled_free(pool, want: int, timeout: float = 30.0) -> int:
    """free_slots() once the room answers have come in (they are collected on later calls)."""
    deadline = time.monotonic() + timeout
    free = pool.free_slots()
    while free != want and time.monotonic() < deadline:
        time.sleep(0.05)
        free = pool.free_slots()
    return free


def test_an_evaluator_takes_more_candidates_only_while_its_compile_cpus_have_room(local_ray, tmp_path):
    pool = room_pool(tmp_path, lookahead=1, max_lookahead=4)
    actor = pool.slots[0].actor
    try:
        assert settled_free(pool, 2) == 2  # the running one and one queued: no room reported yet
        for cid in ("c1", "c2"):
            pool.submit(request(cid))
        assert pool.free_slots() == 0
        ray.get(actor.set_room.remote(5))
        assert settled_free(pool, 3) == 3  # room for 5 more, but at most 4 queued: 3 beyond the one
        for cid in ("c3", "c4", "c5"):
            assert pool.free_slots() > 0  # what the loop asks before each submit
            pool.submit(request(cid))
        assert pool.free_slots() == 0 and pool.inflight() == ["c1", "c2", "c3", "c4", "c5"]
        with pytest.raises(RuntimeError):
            pool.submit(request("c6"))
        ray.get(actor.set_room.remote(0))  # busy compiling: back to the lookahead queue
        time.sleep(0.3)
        assert settled_free(pool, 0) == 0
        assert pool._capacity(pool.slots[0]) == 5  # what it holds, no more: nothing is taken back
        ray.get(actor.set_room.remote(1))
        time.sleep(0.3)
        assert settled_free(pool, 0) == 0  # room for one more, but 4 are queued: the most it takes
        assert ray.get(actor.announced.remote()) == ["c2", "c3", "c4", "c5"]  # every queued one compiles ahead
    finally:
        ray.kill(actor, no_restart=True)


def test_without_a_larger_max_the_queue_is_the_lookahead(local_ray, tmp_path):
    pool = room_pool(tmp_path, lookahead=2, max_lookahead=0)
    actor = pool.slots[0].actor
    try:
        ray.get(actor.set_room.remote(9))
        assert settled_free(pool, 3) == 3
        time.sleep(0.3)
        assert pool.free_slots() == 3  # never asked: the room does not matter
        assert pool.slots[0].room_ref is None
    finally:
        ray.kill(actor, no_restart=True)


def test_compile_room_takes_at_most_room_lookahead_and_a_hold_up_to_max_lookahead(local_ray, tmp_path):
    pool = room_pool(tmp_path, lookahead=1, max_lookahead=4, room_lookahead=2)
    slot, actor = pool.slots[0], pool.slots[0].actor
    try:
        ray.get(actor.set_room.remote(5))
        assert settled_free(pool, 3) == 3  # room for 5 more, but room_lookahead 2 queued beyond the one
        slot.starved_load = 4  # a lane that holds (every queued one compiling) asks for more: up to 4 queued
        assert pool._capacity(slot) == 5
        slot.starved_load = 9
        assert pool._capacity(slot) == 1 + 4
    finally:
        ray.kill(actor, no_restart=True)


# --- the rule alone (search/evaluate/admission.py): no actors -------------------------------


def test_an_evaluator_holds_its_lanes_and_lookahead_without_an_answer():
    from search.evaluate.admission import Admission

    rule = Admission(lanes=2, lookahead=1, max_lookahead=4)
    assert rule.capacity(room_load=0, room=0, starved_load=None) == 3
    assert rule.free(load=2, room_load=0, room=0, starved_load=None) == 1
    assert rule.free(load=5, room_load=0, room=0, starved_load=None) == 0  # never negative
    assert Admission(lanes=0).capacity(0, 0, None) == 1  # no lanes configured: one


def test_compile_room_adds_what_it_held_plus_its_room_up_to_the_cap():
    from search.evaluate.admission import Admission

    rule = Admission(lanes=1, lookahead=1, max_lookahead=4)
    assert rule.room_cap == 4
    assert rule.capacity(room_load=2, room=1, starved_load=None) == 3
    assert rule.capacity(room_load=2, room=9, starved_load=None) == 5  # lanes + max_lookahead
    capped = Admission(lanes=1, lookahead=1, max_lookahead=4, room_lookahead=2)
    assert capped.room_cap == 2 and capped.capacity(room_load=2, room=9, starved_load=None) == 3


def test_a_starved_lane_asks_for_one_more_than_it_held_up_to_max_lookahead():
    from search.evaluate.admission import Admission

    rule = Admission(lanes=1, lookahead=0, max_lookahead=3, room_lookahead=0)
    assert rule.capacity(room_load=0, room=0, starved_load=1) == 2
    assert rule.capacity(room_load=0, room=0, starved_load=2) == 3
    assert rule.capacity(room_load=0, room=0, starved_load=9) == 4  # lanes + max_lookahead
