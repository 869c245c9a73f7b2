"""RayPool over real evaluator actors (simulated GPUs): a queued request's text crosses Ray once,
in its announcement, and its start names it by ticket; where the actor no longer holds it (here:
taken from it behind the pool's back, as a restart or a lost announcement would) the start comes
back unrun and is sent again with its text, and every request completes once."""

from __future__ import annotations

import time
from collections import Counter
from typing import Any, Iterator

import pytest

from search.config import SimulationConfig
from search.engine.messages import EvalRequest
from search.engine.pool import Completed
from tests.search.evaluate.test_simulated_worker import request
from tests.search.evaluate.pool_events import poll_until

ray = pytest.importorskip("ray")


@pytest.fixture()
def texts(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, str]]]:
    """(method, candidate id) for every request text the driver passes to an actor call."""
    from ray.actor import ActorMethod

    sent: list[tuple[str, str]] = []
    original = ActorMethod._remote

    def _remote(self_: Any, *args: Any, **kwargs: Any) -> Any:
        for arg in list(args[0] if args else []) + list((kwargs.get("args") or [])):
            if isinstance(arg, str) and arg.startswith("{") and '"candidate_id"' in arg:
                sent.append((self_._method_name, EvalRequest.model_validate_json(arg).candidate_id))
        return original(self_, *args, **kwargs)

    monkeypatch.setattr(ActorMethod, "_remote", _remote)
    yield sent


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


def test_a_queued_requests_text_crosses_once(local_ray, tmp_path, texts):
    pool = sim_pool(tmp_path)
    try:
        ids = ["c1", "c2", "c3"]
        for cid in ids:
            pool.submit(request(cid, "householder_unblocked"))
        assert len(pool.slots[0].queue) == 2  # c1 runs, c2 and c3 were announced
        events = poll_until(pool, 3, timeout=60.0, every=0.2)
        assert sorted(e.outcome.candidate_id for e in events if isinstance(e, Completed)) == ids
        assert Counter(cid for _, cid in texts) == {cid: 1 for cid in ids}, texts
        assert sorted(texts) == [("evaluate", "c1"), ("prefetch", "c2"), ("prefetch", "c3")]
        assert pool.slots[0].resent == 0
    finally:
        pool.shutdown()


def test_a_start_the_actor_cannot_serve_is_sent_again_with_its_text(local_ray, tmp_path, texts):
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
        assert sorted(texts) == [("evaluate", "c1"), ("evaluate", "c2"), ("evaluate", "c3"),
                                 ("prefetch", "c2"), ("prefetch", "c3")]
    finally:
        pool.shutdown()
