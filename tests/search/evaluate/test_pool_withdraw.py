"""Taking back queued requests one by one (EvaluatorPool.withdraw), for every pool with a queue:
the virtual pool of the quality studies and RayPool on a local CPU-only Ray with the production
actor.  A withdrawn request never runs and never comes back; a running one is not taken back."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, Iterator

import pytest

from search.config import SimulationConfig
from search.engine.messages import EvalRequest
from search.engine.pool import Completed, EvaluatorPool
from tests.search.evaluate.pool_events import poll_until


@pytest.fixture(params=["virtual", "ray"])
def queued_pool(request: pytest.FixtureRequest,
                tmp_path: Path) -> Iterator[tuple[EvaluatorPool, Callable[[str], EvalRequest]]]:
    """One evaluator, one lane, two queued behind it."""
    made: EvaluatorPool
    if request.param == "virtual":
        from search.evaluate.simulated.virtual_pool import VirtualPool
        from tests.search.evaluate.test_virtual_pool import request as make

        made = VirtualPool(1, SimulationConfig(), seed=1, lanes=1, lookahead=2, max_lookahead=2)
    else:
        request.getfixturevalue("local_ray")
        from search.evaluate.ray_pool import RayPool
        from tests.search.evaluate.test_pool_contract import request as make  # type: ignore[assignment]

        made = RayPool(workdir=tmp_path / "work", gpus=0, cpu_evaluators=1, lookahead=2, max_lookahead=2)
    deadline = time.monotonic() + 120
    while made.free_slots() < 3 and time.monotonic() < deadline:
        made.poll(0.2)  # an actor that is still starting answers its ping here
    yield made, make
    made.shutdown()


def test_a_withdrawn_queued_request_never_runs_and_a_running_one_is_not_taken(queued_pool) -> None:
    pool, make = queued_pool
    assert pool.free_slots() == 3
    for cid in ("c0000001", "c0000002", "c0000003"):
        pool.submit(make(cid))
    assert sorted(pool.inflight()) == ["c0000001", "c0000002", "c0000003"]
    # c0000001 runs (a free lane started it); the others wait behind it.
    assert pool.withdraw(["c0000002", "c0000001", "c0009999"]) == ["c0000002"]
    assert sorted(pool.inflight()) == ["c0000001", "c0000003"]
    assert pool.free_slots() == 1  # the withdrawn one's place is free again
    events = poll_until(pool, 2, timeout=240, every=0.5)
    done = sorted(e.outcome.candidate_id for e in events if isinstance(e, Completed))
    assert done == ["c0000001", "c0000003"] and len(events) == 2
    assert poll_until(pool, 1, timeout=1.0, every=0.5) == [] and pool.inflight() == []  # nothing else comes back
    assert pool.withdraw(["c0000003"]) == []  # finished: nothing to take back
