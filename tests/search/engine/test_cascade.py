"""The multi-fidelity cascade: which cases screen a child, the bar it must meet, how a
screened child is told to Optuna and kept from any title, and the worker's two stages."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from kernels.families import BASELINE_PATH
from kernels.harness.settings import RunLimits, TimingPolicy
from kernels.params import structure_fingerprint
from kernels.suites import get_suite
from population.consistency import check_consistency
from population.models import CaseOutcome, CaseStatus, EvalResult, Origin, State
from search.engine.cascade import ScreenPlan, is_screened_out, plan_screen, screen_cases, screened_estimate
from search.config import EvaluationConfig
from search.evaluate.worker import EvalOutcome, EvalRequest, Worker
from tests.search.fakes import TOY_SOURCE, FakePool
from tests.search.engine.test_loop import config, families, make_loop  # noqa: F401 - fixture

QRV2 = list(get_suite("qrv2-bench"))


def test_screen_cases_are_one_case_of_the_sizes_that_weigh_most():
    lookahead_domain = [c for c in QRV2 if c.n >= 352]
    picked = screen_cases(lookahead_domain, 2)
    assert [(c.batch, c.n) for c in picked] == [(640, 512), (60, 1024)]  # 4 and 3 of its 10 cases
    blocked_domain = [c for c in QRV2 if 128 <= c.n <= 512]
    assert [c.n for c in screen_cases(blocked_domain, 2)] == [176, 512]
    assert screen_cases([c for c in QRV2 if c.n == 32], 2) == []  # the whole domain: nothing to save
    assert screen_cases(QRV2, 0) == []


def _result(times: dict[str, float]) -> EvalResult:
    cases = tuple(CaseOutcome(case=k, status=CaseStatus.OK, median_ms=v) for k, v in times.items())
    gm = math.exp(sum(math.log(v) for v in times.values()) / len(times))
    return EvalResult(candidate_id="c0000009", cases=cases, geomean_ms=gm)


def test_the_bar_is_the_structure_bests_geomean_on_the_screen_cases():
    domain = [c for c in QRV2 if c.n >= 352]
    best = _result({c.name: float(c.n) for c in domain})
    plan = plan_screen(domain, 2, 1.2, best, best.geomean_ms)
    assert plan is not None and plan.cases == ["dense-640x512-c2", "dense-60x1024-c2"]
    assert plan.bar_ms == pytest.approx(math.sqrt(512 * 1024))
    assert not is_screened_out(1.19 * plan.bar_ms, plan) and is_screened_out(1.21 * plan.bar_ms, plan)
    # Twice as slow on the screen: Optuna hears twice the best's fitness.
    assert screened_estimate(2 * plan.bar_ms, plan) == pytest.approx(2 * best.geomean_ms)
    assert plan_screen(domain, 2, 1.2, None, None) is None  # a new structure: full bench
    other = _result({"dense-20x32-c1": 1.0})
    assert plan_screen(domain, 2, 1.2, other, 1.0) is None  # its best was never timed on those cases


def _screening_judge(requests: list[EvalRequest]):
    """Seeds run fully; a child with a screen plan is screened with a (misleadingly) tiny
    estimate, so only the state can keep it from the title."""
    def judge(request: EvalRequest) -> EvalOutcome:
        requests.append(request)
        if request.screen is None:
            cases = tuple(CaseOutcome(case=c.name, status=CaseStatus.OK, median_ms=float(c.n))
                          for c in request.bench_cases)
            gm = math.exp(sum(math.log(c.median_ms) for c in cases) / len(cases))
            result = EvalResult(candidate_id=request.candidate_id, cases=cases, geomean_ms=gm, device="fake")
            return EvalOutcome(candidate_id=request.candidate_id, state=State.VERIFIED, result=result)
        cases = tuple(CaseOutcome(case=name, status=CaseStatus.OK, median_ms=0.001) for name in request.screen.cases)
        result = EvalResult(candidate_id=request.candidate_id, cases=cases, fidelity="screen", device="fake",
                            screen={"geomean_ms": 5.0, "bar_ms": request.screen.bar_ms, "margin": 1.2,
                                    "estimate_ms": 0.001})
        return EvalOutcome(candidate_id=request.candidate_id, state=State.SCREENED, reason="screened: slow",
                           result=result)
    return judge


def test_a_screened_child_is_told_to_optuna_and_never_crowned(tmp_path, families):  # noqa: F811
    requests: list[EvalRequest] = []
    cfg = config(tmp_path, evaluation=EvaluationConfig(verify_suite="smoke-quick", bench_suite="smoke-bench",
                                                       device="cpu", screen_cases=2))
    loop = make_loop(cfg, families, pool=FakePool(judge=_screening_judge(requests)), max_evals=14)
    loop.run_until_done()
    store = loop.run.store
    assert check_consistency(store, deep=True) == []
    cands = {c.id: c for c in store.list_candidates()}
    screened = [c for c in cands.values() if c.state is State.SCREENED]
    assert screened and all(c.origin is not Origin.SEED and c.fitness_ms is None for c in screened)
    # Every screened child's plan came from its structure's verified best.
    for request in requests:
        if request.screen is not None:
            assert len(request.screen.cases) == 2 and request.screen.bar_ms > 0
    # Never crowned, though its estimate (0.001 ms) beats every verified time.
    champions = {e.change.candidate_id for e in store.champion_history()}
    assert champions.isdisjoint(c.id for c in screened)
    assert all(cands[cid].state is State.VERIFIED for cid in champions)
    # Optuna heard the screened estimate for each screened child it proposed.
    study = loop.tuner.study("toy", structure_fingerprint(TOY_SOURCE))
    values = [t.value for t in study.trials if t.value is not None]
    told = [c for c in screened if c.family == "toy" and c.origin is Origin.OPTUNA]
    assert told and values.count(0.001) == len(told)
    # Screened is its own state: not a failure, counted apart.
    assert not State.SCREENED.is_failure and State.SCREENED.is_terminal
    assert int(store.counter("failures")) == 0 and int(store.counter("state/screened")) == len(screened)


def _request(plan: ScreenPlan | None) -> EvalRequest:
    return EvalRequest(candidate_id="c0000002", family="f", source=BASELINE_PATH.read_text(), verify_suite="smoke",
                       verify_cases=[c for c in get_suite("smoke") if c.n in (1, 8)][:4], bench_suite="smoke-bench",
                       bench_cases=list(get_suite("smoke-bench")), device="cpu", limits=RunLimits(case_timeout_s=30),
                       timing=TimingPolicy(min_reps=2, max_reps=3, max_seconds=0.05), verify_processes=1, screen=plan)


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    w = Worker(tmp_path_factory.mktemp("work"), name="cpu0")
    yield w
    w.close()


def test_the_worker_stops_a_slow_child_at_the_screen(worker):
    bench = list(get_suite("smoke-bench"))
    plan = ScreenPlan(cases=[bench[0].name, bench[2].name], bar_ms=1e-6, best_ms=1e-5, margin=1.2)
    out = worker.evaluate(_request(plan))
    assert out.state is State.SCREENED, out.reason
    r = out.result
    assert r.geomean_ms is None and r.fidelity == "screen"
    assert [c.case for c in r.cases] == plan.cases  # only the screen was timed
    assert r.screen["geomean_ms"] > 0 and r.screen["estimate_ms"] == pytest.approx(
        1e-5 * r.screen["geomean_ms"] / 1e-6)
    assert "screened" in out.reason and "screen" in r.stage_seconds


def test_a_promising_child_gets_the_full_bench_with_the_screen_timings_in_it(worker):
    bench = list(get_suite("smoke-bench"))
    plan = ScreenPlan(cases=[bench[1].name], bar_ms=1e6, best_ms=1e6, margin=1.2)
    out = worker.evaluate(_request(plan))
    assert out.state is State.VERIFIED, out.reason
    assert [c.case for c in out.result.cases] == [c.name for c in bench]  # suite order, screen included
    assert all(c.median_ms and c.median_ms > 0 for c in out.result.cases)
    assert out.result.fidelity == "full" and out.result.geomean_ms > 0


def test_a_child_that_fails_its_screen_gates_is_a_failure_not_screened(worker):
    plan = ScreenPlan(cases=[list(get_suite("smoke-bench"))[0].name], bar_ms=1.0, best_ms=1.0, margin=1.2)
    crash = Path(__file__).parents[2] / "kernels" / "candidates" / "raises.py"
    out = worker.evaluate(_request(plan).model_copy(update={"source": crash.read_text()}))
    assert out.state is State.CRASHED and out.result.fidelity == "full"
