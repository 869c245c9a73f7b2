"""Family size domains: a family is gated and timed only inside its range of n, its fitness
is the geomean there (against the reference's geomean on the same cases), and the composite
export's fallback is a candidate timed on every case."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest

import kernels.families
from kernels.families import FAMILIES
from kernels.suites import get_suite
from population.models import CaseOutcome, CaseStatus, EvalResult, State
from population.snapshot import read_snapshot
from search.config import EvaluationConfig, FamilySpec, MutationMix, RunConfig
from search.engine.domains import describe_domains, domain_cases
from search.engine.messages import EvalOutcome, EvalRequest
from tests.search.fakes import FakePool, ToyFamily, toy_baseline
from tests.search.engine.test_loop import make_loop


@dataclass(frozen=True)
class RangedToy(ToyFamily):
    n_range: tuple[int, int] = (1, 32)


def test_registered_domains_cover_every_bench_case_and_skip_delegated_sizes():
    bench = list(get_suite("qrv2-bench"))
    hu = domain_cases(bench, FAMILIES["householder_unblocked"])
    assert [c.n for c in hu] == [32]  # it calls torch.geqrf above max_n=128: nothing to re-time there
    covered = {c.name for name, fam in FAMILIES.items() if not fam.baseline for c in domain_cases(bench, fam)}
    assert covered == {c.name for c in bench}  # the composite has a searched family for every case
    assert domain_cases(bench, FAMILIES["torch_geqrf"]) == bench
    # A domain with no case in a small suite falls back to the whole suite (and says so).
    smoke = list(get_suite("smoke-bench"))
    assert domain_cases(smoke, FAMILIES["lookahead_split"]) == smoke
    line = describe_domains({"lookahead_split": FAMILIES["lookahead_split"]}, smoke)[0]
    assert "holds no case" in line and "4/4" in line


def _timed(request: EvalRequest, per_case_ms) -> EvalOutcome:
    cases = tuple(CaseOutcome(case=c.name, status=CaseStatus.OK, median_ms=per_case_ms(c), min_ms=per_case_ms(c),
                              max_ms=per_case_ms(c)) for c in request.bench_cases)
    gm = math.exp(sum(math.log(c.median_ms) for c in cases) / len(cases))
    result = EvalResult(candidate_id=request.candidate_id, cases=cases, geomean_ms=gm, device="fake")
    return EvalOutcome(candidate_id=request.candidate_id, state=State.VERIFIED, result=result, busy_s=0.01)


@pytest.fixture()
def ranged(monkeypatch):
    fams = {"torch_geqrf": toy_baseline(), "small": RangedToy("small", n_range=(1, 32)), "anywhere": ToyFamily("anywhere")}
    monkeypatch.setattr(kernels.families, "FAMILIES", fams, raising=False)
    return fams


def _config(tmp_path, domains: bool = True) -> RunConfig:
    return RunConfig(name="d", runs_dir=str(tmp_path), seed=2,
                     families=[FamilySpec(name="small", islands=1), FamilySpec(name="anywhere", islands=1)],
                     evaluation=EvaluationConfig(verify_suite="smoke", bench_suite="smoke-bench", device="cpu",
                                                 family_domains=domains),
                     mutation=MutationMix({"llm_edit": 0.0, "optuna_step": 1.0, "param_crossover": 0.0, "llm_merge": 0.0}))


def test_requests_carry_only_the_familys_domain_and_speedups_compare_like_with_like(tmp_path, ranged):
    seen: dict[str, list[EvalRequest]] = {}

    def judge(request: EvalRequest) -> EvalOutcome:
        seen.setdefault(request.family, []).append(request)
        if request.family == "torch_geqrf":
            return _timed(request, lambda c: float(c.n))  # the reference: n ms on each case
        return _timed(request, lambda c: c.n / 2)  # every child twice as fast on every case

    loop = make_loop(_config(tmp_path), ranged, pool=FakePool(judge=judge), max_evals=8)
    loop.run_until_done()
    bench = list(get_suite("smoke-bench"))
    assert all(len(r.bench_cases) == len(bench) for r in seen["torch_geqrf"] + seen["anywhere"])
    assert seen["small"] and all(r.bench_cases and all(c.n <= 32 for c in r.bench_cases) for r in seen["small"])
    assert all(all(c.n <= 32 for c in r.verify_cases) for r in seen["small"])
    assert len(seen["small"][0].verify_cases) < len(get_suite("smoke"))
    champ = loop.run.champion("small")
    result = read_snapshot(loop.run.store).results[champ.id]  # speedups are computed when a run is read
    in_domain = [c.n for c in bench if c.n <= 32]
    assert result.baseline_geomean_ms == pytest.approx(math.exp(sum(map(math.log, in_domain)) / len(in_domain)))
    assert result.speedup == pytest.approx(2.0)


def test_domains_off_times_every_family_everywhere(tmp_path, ranged):
    seen = []

    def judge(request: EvalRequest) -> EvalOutcome:
        seen.append(request)
        return _timed(request, lambda c: float(c.n))

    loop = make_loop(_config(tmp_path, domains=False), ranged, pool=FakePool(judge=judge), max_evals=4)
    loop.run_until_done()
    assert all(len(r.bench_cases) == len(get_suite("smoke-bench")) for r in seen)


def test_the_composite_fallback_is_timed_on_every_case(tmp_path, ranged):
    from search.inspect.export import plan_composite
    from search.inspect.best import best_overall
    from search.inspect.view import RunView

    def judge(request: EvalRequest) -> EvalOutcome:
        # The small family is much faster where it runs: over its domain alone it has the best geomean.
        scale = {"small": 0.01, "anywhere": 0.5}.get(request.family, 1.0)
        return _timed(request, lambda c: scale * c.n)

    loop = make_loop(_config(tmp_path), ranged, pool=FakePool(judge=judge), max_evals=8)
    loop.run_until_done()
    loop.run.close()
    view = RunView(tmp_path / "d")
    best = best_overall(view)
    assert best is not None and best.family == "anywhere"
    plan = plan_composite(view)
    small_routes = [r for r in plan.routes if r.family == "small"]
    assert small_routes and all(r.n <= 32 for r in small_routes)
    assert plan.fallback_family == "anywhere"
