"""RayPool over real evaluator actors (simulated GPUs): a queued request's text crosses Ray once,
in its announcement, and its start names it by ticket; where the actor no longer holds it (here:
taken from it behind the pool's back, as a restart or a lost announcement would) the start comes
back unrun and is sent again with its text, and every request completes once."""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import Any, Iterator

import pytest

from search.config import SimulationConfig
from search.engine.pool import Completed
from tests.search.evaluate.test_simulated_worker import request
from tests.search.evaluate.pool_events import poll_until

ray = pytest.importorskip("ray")


@pytest.fixture()
def calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, str, int]]]:
    """(method, candidate id, characters of text) for every request the driver passes to an actor
    call, whole or without its source (then followed by its difference)."""
    from ray.actor import ActorMethod

    sent: list[tuple[str, str, int]] = []
    original = ActorMethod._remote

    def _remote(self_: Any, *args: Any, **kwargs: Any) -> Any:
        values = list(args[0] if args else []) + list((kwargs.get("args") or []))
        for arg in values:
            if isinstance(arg, str) and arg.startswith("{") and '"candidate_id"' in arg:
                chars = sum(len(v) for value in values for v in (value if isinstance(value, tuple) else (value,))
                            if isinstance(v, str))
                sent.append((self_._method_name, json.loads(arg)["candidate_id"], chars))
        return original(self_, *args, **kwargs)

    monkeypatch.setattr(ActorMethod, "_remote", _remote)
    yield sent


def named(calls: list[tuple[str, str, int]]) -> list[tuple[str, str]]:
    return [(method, cid) for method, cid, _ in calls]


def sim_pool(tmp_path):
    from search.evaluate.actor import Simulation
    from search.evaluate.ray_pool import RayPool

    # One lane and two queued; evaluations of 0.1-0.3 s (time runs 10x).
    pool = RayPool(workdir=tmp_path / "work", gpus=0, cpu_evaluators=1, cpus_per_evaluator=0.5, lookahead=2,
                   simulation=Simulation(settings=SimulationConfig(time_scale=10.0), seed=3))
    deadline = time.monotonic() + 60
    while pool.free_slots() < 3 and time.monotonic() < deadline:
        pool.poll(0.05)
    assert pool.free_slots() == 3
    return pool


def test_a_queued_requests_text_crosses_once(local_ray, tmp_path, calls):
    pool = sim_pool(tmp_path)
    try:
        ids = ["c1", "c2", "c3"]
        for cid in ids:
            pool.submit(request(cid, "householder_unblocked"))
        assert len(pool.slots[0].queue) == 2  # c1 runs, c2 and c3 were announced
        events = poll_until(pool, 3, timeout=60.0, every=0.2)
        assert sorted(e.outcome.candidate_id for e in events if isinstance(e, Completed)) == ids
        assert Counter(cid for _, cid in named(calls)) == {cid: 1 for cid in ids}, calls
        assert sorted(named(calls)) == [("evaluate", "c1"), ("prefetch", "c2"), ("prefetch", "c3")]
        assert pool.slots[0].resent == 0
    finally:
        pool.shutdown()


def test_a_start_the_actor_cannot_serve_is_sent_again_with_its_text(local_ray, tmp_path, calls):
    pool = sim_pool(tmp_path)
    try:
        for cid in ("c1", "c2", "c3"):
            pool.submit(request(cid, "householder_unblocked"))
        slot = pool.slots[0]
        # The actor loses what it was announced behind the pool's back (as a restart the pool has
        # not seen would): both starts by ticket come back unrun.
        for cid in ("c2", "c3"):
            ray.get(slot.actor.withdraw.remote(cid))
        events = poll_until(pool, 3, timeout=60.0, every=0.2)
        assert sorted(e.outcome.candidate_id for e in events if isinstance(e, Completed)) == ["c1", "c2", "c3"]
        # c2's start by ticket missed and was sent again with its text; c3, queued behind it, then
        # started with its text at once (the pool no longer counts on the actor holding it).
        assert slot.resent == 1
        assert sorted(named(calls)) == [("evaluate", "c1"), ("evaluate", "c2"), ("evaluate", "c3"),
                                 ("prefetch", "c2"), ("prefetch", "c3")]
    finally:
        pool.shutdown()


def test_a_familys_queued_children_cross_as_differences_and_all_complete(local_ray, tmp_path, calls):
    """``cuda_blocked``'s file is above Ray's inline limit; of the two children queued behind the
    running one, the second is announced as its difference from the first, and each runs once,
    none sent again."""
    pool = sim_pool(tmp_path)
    try:
        ids = ["c1", "c2", "c3"]
        for cid in ids:
            pool.submit(request(cid, "cuda_blocked"))
        events = poll_until(pool, 3, timeout=60.0, every=0.2)
        assert sorted(e.outcome.candidate_id for e in events if isinstance(e, Completed)) == ids
        source = len(request("c1", "cuda_blocked").source)
        announced = [(cid, chars) for method, cid, chars in calls if method == "prefetch"]
        assert [cid for cid, _ in announced] == ["c2", "c3"]
        assert announced[0][1] > source and announced[1][1] < 0.05 * source, announced
        assert pool.slots[0].resent == 0
    finally:
        pool.shutdown()


def test_taking_back_every_queued_request_tells_the_evaluator(local_ray, tmp_path):
    """On stop the loop takes back what is queued: the evaluator is told, so it holds none of it (a
    start by its ticket is answered unrun) and stops compiling it (Worker.withdraw), rather than
    keeping its CPUs busy while the running evaluations drain."""
    pool = sim_pool(tmp_path)
    try:
        for cid in ("c1", "c2", "c3"):
            pool.submit(request(cid, "cuda_blocked"))
        slot = pool.slots[0]
        tickets = {cid: slot.payloads[cid].ticket for cid in ("c2", "c3")}
        assert sorted(pool.withdraw_queued()) == ["c2", "c3"] and slot.payloads == {}
        for ticket in tickets.values():
            assert ray.get(slot.actor.evaluate.remote(None, ticket)) == (None, [])
        events = poll_until(pool, 1, timeout=60.0, every=0.2)
        assert [e.outcome.candidate_id for e in events if isinstance(e, Completed)] == ["c1"]
    finally:
        pool.shutdown()
