"""Which bench cases are timed with compiles stopped: those the request expects to be short."""

from __future__ import annotations

from search.config import EvaluationConfig, MutationMix
from search.engine.messages import EvalRequest
from tests.search.engine.test_loop import config, families, make_loop  # noqa: F401 - the fixture
from tests.search.fakes import FakePool, default_judge


def run_with(tmp_path, families, below_ms: float, pause: bool = True) -> list[EvalRequest]:
    seen: list[EvalRequest] = []

    def judge(request: EvalRequest):
        seen.append(request)
        return default_judge(request)

    evaluation = EvaluationConfig(verify_suite="smoke-quick", bench_suite="smoke-bench", device="cpu",
                                  pause_compiles_below_ms=below_ms, pause_compiles_while_timing=pause)
    cfg = config(tmp_path, evaluation=evaluation, mutation=MutationMix({"optuna_step": 1.0}))
    make_loop(cfg, families, pool=FakePool(size=1, judge=judge), max_evals=8).run_until_done()
    return seen


def test_a_case_pauses_compiles_when_its_structure_best_was_faster_than_the_bar(tmp_path, families):
    seen = run_with(tmp_path, families, below_ms=100.0)  # toy times are 1-6 ms: every case is short
    firsts = {}
    for r in seen:
        firsts.setdefault(r.family, r)
    assert all(r.pause_cases is None for r in firsts.values())  # nothing known yet: every case pauses
    known = [r for r in seen if r.pause_cases is not None]
    assert len(known) >= 4 and all(r.pause_cases == [c.name for c in r.bench_cases] for r in known)


def test_cases_expected_longer_than_the_bar_time_with_compiles_going_on(tmp_path, families):
    seen = run_with(tmp_path, families, below_ms=0.5)  # every toy case takes 1 ms or more
    seeds = {r.candidate_id for r in seen[:1]}
    children = [r for r in seen if r.candidate_id not in seeds and r.pause_cases is not None]
    assert children and all(r.pause_cases == [] for r in children)


def test_no_pause_no_pause_cases(tmp_path, families):
    assert all(r.pause_cases is None and not r.pause_compiles for r in run_with(tmp_path, families, 100.0, False))


def test_a_long_case_its_record_shows_host_bound_pauses_compiles_too(tmp_path, families):
    """The length rule reads "long" as "the device's": a 6 ms call that the host took 5.4 ms to
    enqueue is as exposed to a busy host as a launch-bound one."""
    seen: list[EvalRequest] = []

    def judge(request: EvalRequest):
        seen.append(request)
        out = default_judge(request)
        assert out.result is not None
        first = out.result.cases[0].case
        cases = tuple(c.model_copy(update={"host_ms": 0.9 * c.median_ms if c.case == first else 0.01})
                      for c in out.result.cases)
        return out.model_copy(update={"result": out.result.model_copy(update={"cases": cases})})

    for share, paused_first in ((0.8, True), (0.0, False)):
        seen.clear()
        evaluation = EvaluationConfig(verify_suite="smoke-quick", bench_suite="smoke-bench", device="cpu",
                                      pause_compiles_below_ms=0.5, pause_compiles_host_share=share)
        cfg = config(tmp_path / str(share), evaluation=evaluation, mutation=MutationMix({"optuna_step": 1.0}))
        make_loop(cfg, families, pool=FakePool(size=1, judge=judge), max_evals=8).run_until_done()
        children = [r for r in seen if r.pause_cases is not None]
        assert children
        for r in children:  # every toy case is longer than 0.5 ms: only the host-bound one pauses
            assert r.pause_cases == ([r.bench_cases[0].name] if paused_first else []), (share, r.pause_cases)
