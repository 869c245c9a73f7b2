"""One contract for every EvaluatorPool the loop can be given: the Ray actors of production
(search.evaluate.ray_pool.RayPool, here on a local CPU-only Ray) and the fake the loop's
tests use (tests/search/fakes.py).  A new implementation joins the parametrisation."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Iterator

import pytest

from kernels.families import BASELINE_PATH
from kernels.harness.settings import RunLimits, TimingPolicy
from kernels.suites import get_suite
from population.models import State
from search.engine.pool import Completed, EvaluatorPool, PoolStats
from search.engine.messages import EvalRequest
from tests.search.fakes import FakePool
from tests.search.evaluate.pool_events import poll_until


def request(cid: str) -> EvalRequest:
    cases = [c for c in get_suite("smoke") if c.n <= 4][:2]
    return EvalRequest(candidate_id=cid, family="torch_geqrf", source=BASELINE_PATH.read_text(),
                       verify_suite="smoke", verify_cases=cases, bench_suite="custom", bench_cases=cases[:1],
                       device="cpu", limits=RunLimits(case_timeout_s=60),
                       timing=TimingPolicy(min_reps=2, max_reps=3, max_seconds=0.1))


@pytest.fixture(params=["fake", "ray"])
def pool(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EvaluatorPool]:
    made: EvaluatorPool
    if request.param == "fake":
        made = FakePool(size=1)
    else:
        request.getfixturevalue("local_ray")
        from search.evaluate.ray_pool import RayPool

        made = RayPool(workdir=tmp_path / "work", gpus=0, cpu_evaluators=1)
    yield made
    made.shutdown()


def wait_for_slot(pool: EvaluatorPool, timeout: float = 120.0) -> int:
    deadline = time.monotonic() + timeout
    while (free := pool.free_slots()) == 0 and time.monotonic() < deadline:
        pool.poll(0.2)  # an actor that is still starting answers its ping here
    return free


def test_a_submitted_request_comes_back_once_as_its_own_outcome(pool: EvaluatorPool) -> None:
    assert pool.size == 1
    free = wait_for_slot(pool)
    assert free == 1  # one evaluator, no lookahead queue
    pool.submit(request("c0000007"))
    assert pool.inflight() == ["c0000007"] and pool.inflight_count() == 1 and pool.free_slots() == 0
    events = poll_until(pool, 1, timeout=240.0, every=1.0)
    assert len(events) == 1 and isinstance(events[0], Completed)
    outcome = events[0].outcome
    assert outcome.candidate_id == "c0000007" and outcome.state is State.VERIFIED, outcome.reason
    assert outcome.result.geomean_ms is not None and outcome.result.geomean_ms > 0
    assert pool.inflight() == [] and pool.inflight_count() == 0 and pool.free_slots() == 1
    assert poll_until(pool, 1, timeout=2.0, every=1.0) == []  # nothing comes back twice


def test_a_pool_refuses_more_work_than_it_has_slots_for(pool: EvaluatorPool) -> None:
    wait_for_slot(pool)
    pool.submit(request("c0000001"))
    with pytest.raises(RuntimeError, match="free slot"):
        pool.submit(request("c0000002"))
    assert pool.inflight() == ["c0000001"]  # the refused one was not taken
    assert [e.outcome.candidate_id for e in poll_until(pool, 1, timeout=240.0, every=1.0) if isinstance(e, Completed)] == ["c0000001"]


def test_stats_name_every_evaluator(pool: EvaluatorPool) -> None:
    wait_for_slot(pool)
    stats = pool.stats()
    assert isinstance(stats, PoolStats) and stats.evaluators == pool.size == 1 and stats.ready == 1
    assert len(stats.busy_fraction) == 1
    assert all(0.0 <= busy <= 1.0 for busy in stats.busy_fraction.values())


@pytest.fixture(params=["fake", "ray"])
def two_lanes(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EvaluatorPool]:
    """One evaluator with two lanes (``evaluation.lanes: 2``)."""
    made: EvaluatorPool
    if request.param == "fake":
        made = FakePool(size=1, lanes=2)
    else:
        request.getfixturevalue("local_ray")
        from search.evaluate.ray_pool import RayPool

        made = RayPool(workdir=tmp_path / "work", gpus=0, cpu_evaluators=1, lanes=2)
    yield made
    made.shutdown()


def test_an_evaluator_with_two_lanes_runs_two_requests_at_once_and_returns_each_once(two_lanes: EvaluatorPool) -> None:
    assert two_lanes.size == 1  # evaluators, not lanes
    assert wait_for_slot(two_lanes) == 2
    two_lanes.submit(request("c0000001"))
    two_lanes.submit(request("c0000002"))
    assert sorted(two_lanes.inflight()) == ["c0000001", "c0000002"] and two_lanes.free_slots() == 0
    assert two_lanes.inflight_count() == 2
    with pytest.raises(RuntimeError, match="free slot"):
        two_lanes.submit(request("c0000003"))
    events = poll_until(two_lanes, 2, timeout=240.0, every=1.0)
    done = {e.outcome.candidate_id: e.outcome for e in events if isinstance(e, Completed)}
    assert sorted(done) == ["c0000001", "c0000002"] and len(events) == 2
    assert all(o.state is State.VERIFIED for o in done.values()), {k: o.reason for k, o in done.items()}
    first, second = (o.result for o in done.values())
    if first.started_at is not None:  # a real evaluator: the two evaluations ran at the same time
        assert first.started_at < second.finished_at and second.started_at < first.finished_at  # type: ignore[operator]
    assert two_lanes.free_slots() == 2 and poll_until(two_lanes, 1, timeout=2.0, every=1.0) == []
    assert all(0.0 <= busy <= 1.0 for busy in two_lanes.stats().busy_fraction.values())
