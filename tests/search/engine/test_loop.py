"""The search loop with fake evaluators and a fake LLM: no Ray, GPU or network."""

from __future__ import annotations

import pytest

import kernels.families
from kernels.harness.settings import RunLimits, TimingPolicy
from kernels.families import BASELINE_PATH
from kernels.params import ParamSpace, structure_fingerprint
from population.consistency import check_consistency
from population.models import Origin, State
from population.run import Run
from population.snapshot import read_snapshot
from search.config import EvaluationConfig, FamilySpec, MaturationSettings, MutationMix, RunConfig
from search.run.driver import create_run
from search.engine.llm import LLMError
from search.engine.loop import SearchLoop
from search.mutation.tuning import Tuner
from tests.search.fakes import TOY_SOURCE, FakeLLMPool, FakePool, ToyFamily, default_judge


class NoSpace(ParamSpace):
    pass


@pytest.fixture()
def families(monkeypatch):
    fams = {"torch_geqrf": ToyFamily("torch_geqrf", baseline=True, space=NoSpace, text=BASELINE_PATH.read_text()),
            "toy": ToyFamily("toy"), "toy2": ToyFamily("toy2")}
    monkeypatch.setattr(kernels.families, "FAMILIES", fams, raising=False)
    return fams


def config(tmp_path, **kw):
    base = dict(name="t", runs_dir=str(tmp_path), seed=3,
                families=[FamilySpec(name="toy", islands=2, island_size=4), FamilySpec(name="toy2", islands=1)],
                evaluation=EvaluationConfig(verify_suite="smoke-quick", bench_suite="smoke-bench", device="cpu"),
                mutation=MutationMix({"llm_edit": 0.0, "optuna_step": 0.8, "param_crossover": 0.2, "llm_merge": 0.2}),
                maturation=MaturationSettings(tuning_budget=3))
    base.update(kw)
    return RunConfig(**base)


def make_loop(cfg, families, pool=None, llm=None, max_evals=30, run=None):
    run = run or create_run(cfg, families)
    tuner = Tuner(cfg.run_dir / "optuna.journal", seed=cfg.seed)
    logs: list[str] = []
    loop = SearchLoop(cfg, run, pool or FakePool(), tuner, families, llm=llm, log=logs.append, max_evals=max_evals)
    loop.logs = logs
    return loop


def test_runs_to_budget_and_learns(tmp_path, families):
    loop = make_loop(config(tmp_path), families, max_evals=30)
    loop.run_until_done()
    store = loop.run.store
    assert check_consistency(store, deep=True) == []
    assert int(store.counter("gpu_evaluations")) == 30
    cands = store.list_candidates()
    assert loop.pool.submitted[0] == cands[0].id and cands[0].family == "torch_geqrf"  # baseline first
    assert {c.origin for c in cands} >= {Origin.SEED, Origin.OPTUNA}
    # Optuna found the optimum of the toy landscape (block=32, warps=2 -> 1.0 ms) or close to it.
    champ = loop.run.champion("toy")
    assert champ is not None and champ.fitness_ms <= 1.5
    # Times are stored; the speedup against the baseline (10 ms) is filled in when the run is read.
    assert store.get_result(champ.id).speedup is None
    assert read_snapshot(store).results[champ.id].speedup == pytest.approx(10.0 / champ.fitness_ms)
    # Optuna children share their parent's structure; the studies hold their trials.
    for c in cands:
        if c.origin is Origin.OPTUNA:
            assert c.fingerprint == structure_fingerprint(TOY_SOURCE)
    assert loop.tuner.trials_used("toy", structure_fingerprint(TOY_SOURCE)) >= 5
    assert any("champion of toy" in line for line in loop.logs)
    assert loop.stop_requested.startswith("evaluation budget")


def test_queued_work_beyond_the_evaluation_budget_stays_pending(tmp_path, families):
    """An evaluator with lanes takes more at once than is left of the budget (the seeds, or a resumed
    run's re-queued work): only what the budget allows goes out; the rest waits for a resume."""
    pool = FakePool(size=1, lanes=4)
    loop = make_loop(config(tmp_path), families, pool=pool, max_evals=2)
    loop.start()
    assert len(loop.queue) >= 3  # the seeds
    loop.step(timeout=0)
    assert len(pool.inflight()) == 2 and pool.free_slots() == 2
    loop.run_until_done()
    assert int(loop.run.store.counter("gpu_evaluations")) == 2 and len(pool.submitted) == 2
    assert sum(c.state is State.PENDING for c in loop.run.store.list_candidates()) >= 1


def test_never_oversubscribes_and_keeps_evaluators_busy(tmp_path, families):
    pool = FakePool(size=3)
    loop = make_loop(config(tmp_path), families, pool=pool, max_evals=20)
    loop.start()
    busy = []
    for _ in range(12):
        loop.step()
        busy.append(len(pool.inflight()))
    assert max(busy) <= 3
    assert sum(b == 3 for b in busy) >= 5  # Optuna fills every slot without waiting


def test_lost_work_is_requeued_and_nobody_is_blamed(tmp_path, families):
    cfg = config(tmp_path)
    run = create_run(cfg, families)
    victim = run.store.list_candidates()[1].id
    always_lost = run.store.list_candidates()[2].id
    pool = FakePool(lose={victim: 2, always_lost: 5})
    loop = make_loop(cfg, families, pool=pool, run=run, max_evals=12)
    loop.run_until_done()
    assert run.store.get_candidate(victim).state is State.VERIFIED
    assert pool.submitted.count(victim) == 3
    lost = run.store.get_candidate(always_lost)
    assert lost.state is State.CRASHED and "lost 3 times" in lost.reason
    assert check_consistency(run.store) == []


def test_failures_are_states_and_tell_optuna_fail(tmp_path, families):
    crashy = dict(families)
    crashy["toy2"] = ToyFamily("toy2", text=TOY_SOURCE.replace("import torch", "import torch  # CRASH"))
    loop = make_loop(config(tmp_path), crashy, max_evals=10)
    loop.run_until_done()
    crashed = loop.run.store.list_candidates(family="toy2")
    assert crashed and all(c.state is State.CRASHED and "SIGSEGV" in c.reason for c in crashed)
    assert loop.run.champion("toy2") is None


class RecordingPool(FakePool):
    def __init__(self) -> None:
        super().__init__()
        self.requests = []

    def submit(self, request) -> None:
        self.requests.append(request)
        super().submit(request)


@pytest.mark.parametrize("with_llm", [False, True])
def test_candidates_are_profiled_only_for_an_llm(tmp_path, families, with_llm):
    pool = RecordingPool()
    cfg = config(tmp_path, evaluation=EvaluationConfig(verify_suite="smoke-quick", bench_suite="smoke-bench",
                                                       device="cpu", profile=True, verify_processes=3))
    llm = FakeLLMPool(lambda messages: "no edit") if with_llm else None
    loop = make_loop(cfg, families, pool=pool, llm=llm, max_evals=6)
    loop.run_until_done()
    flags = {r.family: r.profile for r in pool.requests}
    assert flags["torch_geqrf"] is False  # the reference is never profiled
    assert flags["toy"] is with_llm
    assert {r.verify_processes for r in pool.requests} == {3}


def edit_reply(messages):
    return ("Make it contiguous first.\n<<<<<<< SEARCH\n    return torch.geqrf(A)\n=======\n"
            "    return torch.geqrf(A.contiguous())  # FAST\n>>>>>>> REPLACE\n")


def test_llm_edits_become_new_structures_that_mature(tmp_path, families):
    cfg = config(tmp_path, mutation=MutationMix({"llm_edit": 0.5, "optuna_step": 0.5, "param_crossover": 0.0, "llm_merge": 0.0}))
    llm = FakeLLMPool(edit_reply)
    loop = make_loop(cfg, families, llm=llm, max_evals=40)
    loop.run_until_done()
    store = loop.run.store
    llm_children = [c for c in store.list_candidates() if c.origin is Origin.LLM and c.state is not State.REJECTED]
    assert llm_children and all(c.fingerprint != structure_fingerprint(TOY_SOURCE) for c in llm_children)
    # The new structure was tuned (Optuna children of it) and, being 2x faster, became champion.
    fast = llm_children[0].fingerprint
    tuned = [c for c in store.list_candidates() if c.fingerprint == fast and c.origin is Origin.OPTUNA]
    assert tuned
    assert loop.run.champion("toy").fingerprint == fast
    # The prompt carried the contract, the parent and the inspiration of the other family.
    prompt = llm.prompts[-1][1]["content"]
    assert "custom_kernel(A) -> (H, tau)" in prompt and "## Parent c" in prompt
    counters = store.counters("llm_")
    assert counters["llm_calls"] == len(llm.prompts) and counters["llm_prompt_tokens"] == 1000 * len(llm.prompts)
    assert store.get_json("llm/call/000001")["model"] == "fake"


def test_bad_llm_answers_are_rejected_with_reasons_and_the_search_goes_on(tmp_path, families):
    answers = iter(["no code at all", LLMError("fake: HTTP 503: down"),
                    "<<<<<<< SEARCH\nnot in the file\n=======\nx\n>>>>>>> REPLACE\n"])

    def respond(messages):
        return next(answers, LLMError("fake: cannot reach"))

    cfg = config(tmp_path, mutation=MutationMix({"llm_edit": 0.5, "optuna_step": 0.5, "param_crossover": 0.0, "llm_merge": 0.0}))
    llm = FakeLLMPool(respond)
    loop = make_loop(cfg, families, llm=llm, max_evals=15)
    loop.run_until_done()
    rejected = loop.run.store.list_candidates(state=State.REJECTED)
    reasons = sorted(c.reason for c in rejected)
    assert any("no SEARCH/REPLACE" in r for r in reasons) and any("does not occur" in r for r in reasons)
    assert int(loop.run.store.counter("gpu_evaluations")) == 15  # Optuna kept the GPUs busy
    assert loop.stats.llm_errors >= 2
    # The reason of a failed attempt reaches the next prompt.
    later = [p[1]["content"] for p in llm.prompts[3:]]
    assert any("does not occur" in p or "no SEARCH/REPLACE" in p for p in later)


def test_an_endpoint_that_keeps_failing_is_logged_with_a_count_not_once_per_call(tmp_path, families):
    def respond(messages):
        return LLMError("fake: cannot reach http://127.0.0.1:9/v1: Connection refused")

    cfg = config(tmp_path, mutation=MutationMix({"llm_edit": 1.0, "optuna_step": 0.5, "param_crossover": 0.0,
                                                 "llm_merge": 0.0}))
    loop = make_loop(cfg, families, llm=FakeLLMPool(respond), max_evals=15)
    loop.run_until_done()
    failed = [line for line in loop.logs if line.startswith("LLM call failed")]
    errors = loop.stats.llm_errors
    assert errors >= 4, errors
    assert len(failed) == errors.bit_length() < errors  # the 1st, 2nd, 4th, 8th, ... failure in a row
    assert failed[0] == "LLM call failed: fake: cannot reach http://127.0.0.1:9/v1: Connection refused"
    assert failed[-1].startswith(f"LLM call failed {1 << (errors.bit_length() - 1)} times in a row: fake: cannot reach")


def test_llm_token_budget_turns_llm_off(tmp_path, families):
    from search.config import BudgetConfig

    cfg = config(tmp_path, mutation=MutationMix({"llm_edit": 1.0, "optuna_step": 0.5, "param_crossover": 0.0, "llm_merge": 0.0}),
                 budget=BudgetConfig(max_llm_tokens=2500))
    llm = FakeLLMPool(edit_reply)
    loop = make_loop(cfg, families, llm=llm, max_evals=15)
    loop.run_until_done()
    assert loop.llm_calls.off_reason and "token budget" in loop.llm_calls.off_reason
    assert len(llm.prompts) <= 3


def test_resume_after_an_abrupt_stop_continues_exactly(tmp_path, families):
    cfg = config(tmp_path)
    pool = FakePool()
    loop = make_loop(cfg, families, pool=pool, max_evals=40)
    loop.start()
    for _ in range(8):
        loop.step()
    loop.pool._flight and None
    # Simulate a kill: work in flight stays "running" in the store; nothing else is written.
    from search.engine.duels import Duel, duel_id, is_duel_id
    from population.records import DUELS_KEY

    duels = {cid for cid in pool.inflight() if is_duel_id(cid)}  # a duel in flight is kept as pending
    inflight = set(pool.inflight()) - duels
    pending_duels = {duel_id(Duel.model_validate(d)) for d in loop.run.store.get_json(DUELS_KEY)["pending"]} \
        if duels else set()
    assert pending_duels >= duels
    done_before = int(loop.run.store.counter("gpu_evaluations"))
    fp = structure_fingerprint(TOY_SOURCE)
    trials_before = loop.tuner.trials_used("toy", fp)
    loop.run.close()

    run = Run.open(cfg.run_dir)
    assert {c.id for c in run.store.inflight()} >= inflight
    loop2 = make_loop(cfg, families, run=run, max_evals=done_before + 10)
    loop2.run_until_done()
    store = loop2.run.store
    assert int(store.counter("gpu_evaluations")) == done_before + 10
    assert all(store.get_candidate(cid).state.is_terminal for cid in inflight)  # re-queued and finished
    assert check_consistency(store, deep=True) == []
    assert loop2.tuner.trials_used("toy", fp) > trials_before  # the same study, continued
    assert not loop2.duels.running and all(f"duel/{cid.partition(':')[0]}" in store.kv_items()
                                            for cid in duels)  # the resumed run judged the duels in flight
    ids = [c.id for c in store.list_candidates()]
    assert len(ids) == len(set(ids))


def test_requests_carry_the_configs_timing_and_limits_unchanged(tmp_path, families):
    timing = TimingPolicy(warmup_calls=1, min_reps=4, max_reps=9, max_seconds=0.25)
    limits = RunLimits(case_timeout_s=33)
    evaluation = EvaluationConfig(verify_suite="smoke-quick", bench_suite="smoke-bench", device="cpu", timing=timing,
                                  limits=limits)
    seen = []

    def judge(request):
        seen.append(request)
        return default_judge(request)

    loop = make_loop(config(tmp_path, evaluation=evaluation), families, pool=FakePool(judge=judge), max_evals=4)
    loop.run_until_done()
    assert seen and all(r.timing == timing and r.limits == limits for r in seen)


def _count_commits(monkeypatch) -> list[int]:
    """A list that grows by one at each store COMMIT from now on."""
    from population.store_file import StoreFile

    commits: list[int] = []
    original = StoreFile._execute

    def execute(self, sql, params=()):
        if sql == "COMMIT":
            commits.append(1)
        return original(self, sql, params)

    monkeypatch.setattr(StoreFile, "_execute", execute)
    return commits


def test_a_new_child_and_its_start_are_one_commit(tmp_path, families, monkeypatch):
    """A child proposed for a free evaluator is stored already running, in one transaction: with the
    tell's, two commits per evaluation (three before, a third of the store's time at 64 evaluators)."""
    loop = make_loop(config(tmp_path), families, max_evals=40)
    commits = _count_commits(monkeypatch)
    loop.start()
    while loop.stats.evaluations < 10:  # the seeds (stored before the loop) are evaluated first
        loop.step()
    before, evals = len(commits), loop.stats.evaluations
    while not loop.finished:
        loop.step()
    children = loop.stats.evaluations - evals
    assert children >= 20
    # a tell and a child each, and a few others (migrations, duels): 62 for 29 here; 89 with the child's
    # start committed apart
    assert len(commits) - before < 2.5 * children
    running = [c for c in loop.run.store.list_candidates() if c.state.value == "running"]
    assert running == [] and check_consistency(loop.run.store, deep=True) == []


def test_a_steps_outcomes_and_children_are_one_commit(tmp_path, families, monkeypatch):
    """Every change a step makes (the outcomes it tells, the children it stores and starts) commits
    once, at the step's end: a commit each was two to three an evaluation.  (A duel's verdict is
    recorded as the pool's answer arrives, before the step: no duels here.)"""
    evaluation = EvaluationConfig(verify_suite="smoke-quick", bench_suite="smoke-bench", device="cpu", duel_below_ms=0.0)
    loop = make_loop(config(tmp_path, evaluation=evaluation), families, pool=FakePool(size=3), max_evals=40)
    commits = _count_commits(monkeypatch)
    loop.start()
    per_step, told = [], 0
    while not loop.finished:
        before, evals = len(commits), loop.stats.evaluations
        loop.step()
        per_step.append(len(commits) - before)
        told += loop.stats.evaluations - evals > 1
    assert max(per_step) == 1 and told >= 5, (per_step, told)  # steps that told several outcomes too
    assert check_consistency(loop.run.store, deep=True) == []


def test_a_step_that_fails_leaves_the_store_as_it_was_before_the_step(tmp_path, families, monkeypatch):
    """All or nothing: a step that raises after telling outcomes and storing children leaves none of
    them in the store (those candidates are still running there, so a resume evaluates them again),
    its log lines are still printed, and the resumed run finishes consistent."""
    cfg = config(tmp_path)
    pool = FakePool(size=3)
    loop = make_loop(cfg, families, pool=pool, max_evals=30)
    loop.start()
    while loop.stats.evaluations < 12:
        loop.step()
    store = loop.run.store
    evaluated, candidates = int(store.counter("gpu_evaluations")), len(store.list_candidates())
    running = {c.id for c in store.inflight()}
    assert running == set(pool.inflight())
    submit, calls = pool.submit, []

    def failing(request):
        calls.append(request.candidate_id)
        if len(calls) == 2:  # the second child of the step: the first was stored and sent
            loop.log("a line of the step")
            assert "a line of the step" not in loop.logs  # held until the step's commit
            raise RuntimeError("the pool broke")
        submit(request)

    monkeypatch.setattr(pool, "submit", failing)
    with pytest.raises(RuntimeError, match="the pool broke"):
        loop.step()
    assert len(calls) == 2
    assert int(store.counter("gpu_evaluations")) == evaluated  # the step's tells did not commit
    assert len(store.list_candidates()) == candidates  # nor its children
    assert {c.id for c in store.inflight() if c.state is State.RUNNING} == running
    assert loop.logs[-1] == "a line of the step"  # and printed once the step ended, here by its error
    assert check_consistency(store, deep=True) == []
    loop.tuner.flush()
    loop.run.close()

    loop2 = make_loop(cfg, families, run=Run.open(cfg.run_dir), max_evals=30)
    loop2.run_until_done()
    store2 = loop2.run.store
    assert int(store2.counter("gpu_evaluations")) == 30
    assert all(store2.get_candidate(cid).state.is_terminal for cid in running)
    assert check_consistency(store2, deep=True) == []
