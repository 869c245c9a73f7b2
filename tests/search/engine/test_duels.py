"""Duels: a champion crowned on a lucky process is timed again against the one it replaced.

The fake evaluator gives every candidate a true time (the toy landscape); every third
candidate's own evaluation records half of it, as a process whose host happens to be fast
would. A duel times both sides in one process, so the luck cancels and the true times come
back."""

from __future__ import annotations

import pytest

import kernels.families
from kernels.families import BASELINE_PATH
from kernels.params import ParamSpace, read_params
from population.consistency import check_consistency
from population.models import CaseOutcome, CaseStatus, EvalResult, Origin, State
from population.records import DUEL_KEY, DUELS_KEY
from population.run import Run
from search.config import EvaluationConfig, FamilySpec, MaturationSettings, MutationMix, RunConfig
from search.engine.duels import duel_id, is_duel_id, judge, short_cases
from search.engine.loop import SearchLoop
from search.mutation.tuning import Tuner
from search.run.driver import create_run
from search.engine.messages import EvalOutcome, EvalRequest
from tests.search.fakes import FakePool, ToyFamily, default_judge, toy_time


class NoSpace(ParamSpace):
    pass


@pytest.fixture()
def families(monkeypatch):
    fams = {"torch_geqrf": ToyFamily("torch_geqrf", baseline=True, space=NoSpace, text=BASELINE_PATH.read_text()),
            "toy": ToyFamily("toy")}
    monkeypatch.setattr(kernels.families, "FAMILIES", fams, raising=False)
    return fams


def config(tmp_path, duel_below_ms=100.0):
    return RunConfig(name="d", runs_dir=str(tmp_path), seed=5,
                     families=[FamilySpec(name="toy", islands=2, island_size=4)],
                     evaluation=EvaluationConfig(verify_suite="smoke-quick", bench_suite="smoke-bench", device="cpu",
                                                 duel_below_ms=duel_below_ms),
                     mutation=MutationMix({"llm_edit": 0.0, "optuna_step": 0.8, "param_crossover": 0.2,
                                           "llm_merge": 0.0}),
                     maturation=MaturationSettings(tuning_budget=2, min_improvement=0.01))


def true_ms(source: str) -> float:
    return toy_time(read_params(source), source)


def luck(cid: str) -> float:
    """Every third candidate's own process is fast: its record is half its true time."""
    return 0.5 if int(cid.lstrip("c")) % 3 == 0 else 1.0


def case(name: str, ms: float, baseline: float | None = None) -> CaseOutcome:
    return CaseOutcome(case=name, status=CaseStatus.OK, median_ms=ms, min_ms=ms, max_ms=ms, count=5,
                       baseline_ms=baseline)


class LuckyPool(FakePool):
    """Own evaluations are lucky by a per-candidate factor; duels pair the true times."""

    def __init__(self) -> None:
        super().__init__(judge=self.lucky)
        self.duels: list[EvalRequest] = []

    def lucky(self, request: EvalRequest) -> EvalOutcome:
        if request.family == "torch_geqrf":
            return default_judge(request)
        ms = true_ms(request.source)
        if is_duel_id(request.candidate_id):
            self.duels.append(request)
            assert request.reference_source is not None
            cases = tuple(case(c.name, ms, true_ms(request.reference_source)) for c in request.bench_cases)
        else:
            ms *= luck(request.candidate_id)
            cases = tuple(case(c.name, ms) for c in request.bench_cases)
        result = EvalResult(candidate_id=request.candidate_id, cases=cases, geomean_ms=ms, device="fake")
        return EvalOutcome(candidate_id=request.candidate_id, state=State.VERIFIED, result=result, busy_s=0.01)


def make_loop(cfg, families, pool, max_evals=60, run=None):
    run = run or create_run(cfg, families)
    loop = SearchLoop(cfg, run, pool, Tuner(cfg.run_dir / "optuna.journal", seed=cfg.seed), families,
                      log=lambda line: None, max_evals=max_evals)
    return loop


def step_until_a_duel_runs(loop: SearchLoop, pool: FakePool) -> str:
    """Step the loop until a duel is in flight on the pool; its evaluation id."""
    for _ in range(200):
        loop.step(timeout=0)
        duel = next((cid for cid in pool.inflight() if is_duel_id(cid)), None)
        if duel:
            return duel
    raise AssertionError("no duel was dispatched")


# --- the verdict ---------------------------------------------------------------------------


def test_paired_times_replace_the_lucky_record_of_the_short_cases_only():
    challenger = EvalResult(candidate_id="c2", cases=(case("s", 0.08), case("l", 9.0)), geomean_ms=1)
    defender = EvalResult(candidate_id="c1", cases=(case("s", 0.10), case("l", 10.0)), geomean_ms=1)
    assert short_cases(challenger, 2.0) == ["s"]
    # Recorded: 20% faster at s. In one process: 1% slower at s; l keeps its recorded 0.9.
    paired = EvalResult(candidate_id="c2:duel:1", cases=(case("s", 0.101, 0.100),), geomean_ms=1)
    verdict = judge(challenger, defender, State.VERIFIED, paired, margin=0.01)
    assert verdict["holds"] is True and verdict["ratio"] == pytest.approx((1.01 * 0.9) ** 0.5, rel=1e-3)
    rows = {r["case"]: r for r in verdict["cases"]}
    assert rows["s"]["paired"] and rows["s"]["recorded_ratio"] == pytest.approx(0.8)
    assert not rows["l"]["paired"] and rows["l"]["ratio"] == pytest.approx(0.9)
    # With the short case alone, the same pair does not hold: the luck was all of its lead.
    alone = judge(EvalResult(candidate_id="c2", cases=(case("s", 0.08),), geomean_ms=1),
                  EvalResult(candidate_id="c1", cases=(case("s", 0.10),), geomean_ms=1), State.VERIFIED, paired, 0.01)
    assert alone["holds"] is False and "not past the 1% margin" in alone["summary"]


def test_the_margin_is_strict_a_failed_challenger_loses_and_a_silent_defender_decides_nothing():
    challenger = EvalResult(candidate_id="c2", cases=(case("s", 0.05),), geomean_ms=1)
    defender = EvalResult(candidate_id="c1", cases=(case("s", 0.10),), geomean_ms=1)
    at_margin = EvalResult(candidate_id="x", cases=(case("s", 0.099, 0.100),), geomean_ms=1)
    assert judge(challenger, defender, State.VERIFIED, at_margin, margin=0.01)["holds"] is False
    past = EvalResult(candidate_id="x", cases=(case("s", 0.0989, 0.100),), geomean_ms=1)
    assert judge(challenger, defender, State.VERIFIED, past, margin=0.01)["holds"] is True
    crashed = EvalResult(candidate_id="x", error="timed call 3: wrong R")
    lost = judge(challenger, defender, State.FAILED_VERIFY, crashed, 0.01, "timed call 3: wrong R")
    assert lost["holds"] is False and "wrong R" in lost["summary"]
    silent = EvalResult(candidate_id="x", cases=(case("s", 0.05),), geomean_ms=1)  # no baseline: defender failed
    assert judge(challenger, defender, State.VERIFIED, silent, 0.01)["holds"] is None


# --- in the loop ---------------------------------------------------------------------------


def test_lucky_champions_lose_their_duels_and_true_ones_keep_the_title(tmp_path, families):
    cfg = config(tmp_path)
    pool = LuckyPool()
    loop = make_loop(cfg, families, pool, max_evals=40)
    loop.run_until_done()
    store = loop.run.store
    verdicts = {k.partition("/")[2]: v for k, v in store.kv_items().items() if k.startswith("duel/")}
    assert len(verdicts) >= 2, "the toy run should crown several challengers"
    sources = {c.id: loop.run.source(c) for c in store.list_candidates()}
    margin = cfg.maturation.min_improvement
    for challenger, verdict in verdicts.items():
        # Only a record that claims to beat the defender by the margin is put to a duel.
        claimed = store.get_candidate(challenger).fitness_ms
        assert claimed < store.get_candidate(verdict["defender"]).fitness_ms * (1 - margin)
        truly_faster = true_ms(sources[challenger]) < true_ms(sources[verdict["defender"]]) * (1 - margin)
        assert verdict["holds"] is truly_faster, (challenger, verdict)
    lost = {c for c, v in verdicts.items() if v["holds"] is False}
    assert lost, "some champion must have been crowned by luck"
    family = loop.run.population.family("toy")
    assert all(family.is_disputed(c) for c in lost)
    assert loop.run.champion("toy").id not in lost
    # Duels are not evaluations: not counted, not told to Optuna, not in the candidate table.
    assert int(store.counter("gpu_evaluations")) == 40
    assert int(store.counter("duels")) == len(verdicts) and int(store.counter("duels_lost")) == len(lost)
    assert not any(is_duel_id(c.id) for c in store.list_candidates())
    assert check_consistency(store, deep=True) == []
    # What a duel asks: the defender as the reference, only the short cases, on fresh inputs, no screen.
    bench = {c.name: c for c in loop.bench_cases}
    for request in pool.duels:
        challenger = request.candidate_id.partition(":")[0]
        assert request.reference_source == sources[verdicts[challenger]["defender"]]
        assert request.verify_cases == [] and request.screen is None and not request.profile
        assert all(c.seed != bench[c.name].seed for c in request.bench_cases)
    assert store.get_json(DUELS_KEY)["pending"] == []
    from search.cli.run import run_status

    assert run_status(cfg.run_dir)["duels"] == {"judged": len(verdicts), "lost": len(lost), "pending": 0}


def test_no_duels_when_off_or_when_every_case_is_long(tmp_path, families):
    for below, sub in ((0.0, "off"), (0.5, "long")):  # the toy cases take 1 ms and more
        pool = LuckyPool()
        loop = make_loop(config(tmp_path / sub, duel_below_ms=below), families, pool, max_evals=25)
        loop.run_until_done()
        assert pool.duels == [] and not any(is_duel_id(c) for c in pool.submitted)
        assert int(loop.run.store.counter("duels")) == 0


def test_a_duel_in_flight_when_the_driver_dies_is_judged_after_resume(tmp_path, families):
    cfg = config(tmp_path)
    pool = LuckyPool()
    pool.size = 1
    loop = make_loop(cfg, families, pool, max_evals=40)
    loop.start()
    duel = step_until_a_duel_runs(loop, pool)
    loop.run.close()  # killed: the duel's request never comes back
    run = Run.open(cfg.run_dir)
    challenger = duel.partition(":")[0]
    assert [d["challenger"] for d in run.store.get_json(DUELS_KEY)["pending"]][:1] == [challenger]
    loop2 = make_loop(cfg, families, LuckyPool(), max_evals=int(run.store.counter("gpu_evaluations")) + 3, run=run)
    loop2.run_until_done()
    assert run.store.get_json(DUEL_KEY.format(cid=challenger)) is not None
    assert challenger not in [d["challenger"] for d in run.store.get_json(DUELS_KEY)["pending"]]


def test_an_engineers_candidate_goes_before_a_waiting_duel_and_the_duel_before_new_children(tmp_path, families):
    from population.family import ChampionChange
    from population.models import NewCandidate

    cfg = config(tmp_path)
    pool = LuckyPool()
    pool.size = 1
    loop = make_loop(cfg, families, pool)
    loop.start()
    def without_duel():
        taken = {d.challenger for d in [*loop.duels.waiting, *loop.duels.running.values()]}
        return [c for c in loop.run.store.list_candidates() if c.family == "toy" and c.state is State.VERIFIED
                and c.id not in taken and loop.run.store.get_json(DUEL_KEY.format(cid=c.id)) is None]

    while len(without_duel()) < 2:
        loop.step(timeout=0)
    a, b = without_duel()[:2]
    loop.duels.consider(ChampionChange(family="toy", candidate_id=b.id, previous_id=a.id, fitness_ms=1.0,
                                       family_evals=2, cause="improved"))
    assert [d.challenger for d in loop.duels.waiting] == [b.id]
    pool.size = len(pool.inflight()) + 1  # one free evaluator
    source = loop.run.source(a)
    added = loop.run.add_candidate(NewCandidate(family="toy", island=a.island, parent_ids=(a.id,),
                                                origin=Origin.HUMAN, source=source, params=a.params,
                                                fingerprint=a.fingerprint, generation=a.generation))
    loop.enqueue(added, source, front=True)
    loop._dispatch()
    assert pool.submitted[-1] == added.id and [d.challenger for d in loop.duels.waiting] == [b.id]
    waiting = loop.duels.waiting[0]
    pool.size += 1  # the next free evaluator: the duel, before any new child
    loop._dispatch()
    assert pool.submitted[-1] == duel_id(waiting) and not loop.duels.waiting


def test_a_duel_the_pool_hands_back_at_stop_waits_for_the_resume(tmp_path, families):
    class Withdrawing(LuckyPool):
        def withdraw_queued(self) -> list[str]:
            back = [r.candidate_id for r in self._flight]
            self._flight = []
            return back

    cfg = config(tmp_path)
    pool = Withdrawing()
    pool.size = 1
    loop = make_loop(cfg, families, pool)
    loop.start()
    duel = step_until_a_duel_runs(loop, pool)
    loop.request_stop("time budget reached")  # a candidate's id would be re-queued; a duel's is not one
    assert loop.finished and [duel_id(d) for d in loop.duels.waiting] == [duel]
    assert [d["challenger"] for d in loop.run.store.get_json(DUELS_KEY)["pending"]] == [duel.partition(":")[0]]
