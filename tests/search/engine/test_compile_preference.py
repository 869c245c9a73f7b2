"""While an evaluator holds a lane for a compiled request (the pool's holding()), the loop proposes
from the families whose candidates compiled fastest, learnt from the evaluators' reports, among those
that have not had more than their share of the children (``evaluation.hold_fair_share``); otherwise
every family takes its turn at random."""

from __future__ import annotations

from collections import Counter

import kernels.families
from search.config import EvaluationConfig, FamilySpec, MutationMix, RunConfig
from search.engine.messages import EvalOutcome, EvalRequest
from tests.search.fakes import FakePool, ToyFamily, default_judge, toy_baseline
from tests.search.engine.test_loop import make_loop

COMPILE_S = {"quick": 0.4, "slow": 35.0, "torch_geqrf": 0.0}


def judge(request: EvalRequest) -> EvalOutcome:
    outcome = default_judge(request)
    stages = {**outcome.result.stage_seconds, "compile_ahead": COMPILE_S[request.family]}
    return outcome.model_copy(update={"result": outcome.result.model_copy(update={"stage_seconds": stages})})


def run(tmp_path, monkeypatch, hold: bool, fair: bool = True) -> Counter:
    fams = {"torch_geqrf": toy_baseline(), "quick": ToyFamily("quick"), "slow": ToyFamily("slow")}
    monkeypatch.setattr(kernels.families, "FAMILIES", fams, raising=False)
    cfg = RunConfig(name="p", runs_dir=str(tmp_path / f"hold{hold}-fair{fair}"), seed=3,
                    families=[FamilySpec(name="quick", islands=1), FamilySpec(name="slow", islands=1)],
                    evaluation=EvaluationConfig(verify_suite="smoke", bench_suite="smoke-bench", device="cpu",
                                                hold_fair_share=fair),
                    mutation=MutationMix({"llm_edit": 0.0, "optuna_step": 1.0, "param_crossover": 0.0, "llm_merge": 0.0}))
    pool = FakePool(size=1, judge=judge, hold=hold)
    loop = make_loop(cfg, fams, pool=pool, max_evals=24)
    loop.run_until_done()
    assert loop.compile_seconds["slow"] > 30 and loop.compile_seconds["quick"] < 1  # learnt from the reports
    children = [c for c in loop.run.store.list_candidates() if c.origin.value != "seed"]
    return Counter(c.family for c in children)


def test_a_holding_evaluator_gets_children_of_the_family_that_compiles_fastest(tmp_path, monkeypatch):
    held = run(tmp_path, monkeypatch, hold=True, fair=False)
    free = run(tmp_path, monkeypatch, hold=False)
    # Until both seeds have reported, the slow family is still "free"; after that, only quick ones.
    assert held["quick"] >= 18 and held["slow"] <= 2, held
    assert free["quick"] >= 5 and free["slow"] >= 5, free  # no hold: both families take turns


def test_with_a_fair_share_the_fastest_family_goes_first_only_up_to_its_share(tmp_path, monkeypatch):
    held = run(tmp_path, monkeypatch, hold=True, fair=True)
    # Each family gets about half of the children, the quick one first whenever it is within its share.
    assert abs(held["quick"] - held["slow"]) <= 2 and held["quick"] >= held["slow"], held
