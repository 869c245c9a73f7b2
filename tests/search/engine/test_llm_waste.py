"""LLM mutation that wastes nothing, in the loop with fake evaluators and an instant fake LLM:
requests stay tied to what the evaluators take, a useless model pauses while Optuna goes on,
bare files are candidates, and the per-model ledger agrees with the store."""

from __future__ import annotations

import itertools

import pytest

import kernels.families
from kernels.params import ParamsError, read_params
from population.models import Origin, State
from search.config import EvaluationConfig, FamilySpec, MutationMix, RunConfig
from search.inspect.view import RunView
from search.engine.llm_budget import CHILD_KEY, read_ledger
from search.inspect.report import render_html
from tests.search.fakes import TOY_SOURCE, FakeLLMPool, FakePool, failed, toy_time, verified, toy_registry
from tests.search.engine.test_loop import make_loop

PARAMS_BLOCK = TOY_SOURCE[TOY_SOURCE.index("# qrsearch: params"):TOY_SOURCE.index("# qrsearch: end params")]
PROSE = "The panel factorisation is latency bound; I would fuse it with the update."


@pytest.fixture()
def families(monkeypatch):
    fams = toy_registry()
    monkeypatch.setattr(kernels.families, "FAMILIES", fams, raising=False)
    return fams


def judge(request):
    """Like the default fake judge, for files with or without a PARAMS block."""
    if "CRASH" in request.source:
        return failed(request, State.CRASHED, "verify x: evaluation process killed by SIGABRT")
    if request.family == "torch_geqrf":
        return verified(request, 10.0)
    try:
        params = read_params(request.source)
    except ParamsError:
        params = {}
    return verified(request, toy_time(params, request.source))


def config(tmp_path, **kw):
    base = dict(name="w", runs_dir=str(tmp_path), seed=11, families=[FamilySpec(name="toy", islands=1, island_size=4)],
                evaluation=EvaluationConfig(verify_suite="smoke-quick", bench_suite="smoke-bench", device="cpu"),
                mutation=MutationMix({"llm_edit": 1.0, "optuna_step": 0.3, "param_crossover": 0.0, "llm_merge": 0.0}))
    base.update(kw)
    return RunConfig(**base)


def seventy_percent_unusable(i: int) -> str:
    """Ten kinds of answer, cycled, each one new (no duplicates): 3 usable, 7 not (2 of those
    are evaluated and crash, 5 cannot run and are rejected)."""
    kind = i % 10
    if kind in (0, 9):  # a good edit (a new structure)
        return (f"<<<<<<< SEARCH\ndef custom_kernel(A):\n=======\nV{i} = {i}\n\n\n"
                "def custom_kernel(A):\n>>>>>>> REPLACE\n")
    if kind == 5:  # a bare GPU MODE file
        return f"```python\nimport torch\n\nV = {i}\n\n\ndef custom_kernel(data):\n    return torch.geqrf(data)\n```\n"
    if kind in (3, 7):  # runs, and crashes
        return f"```python\nimport torch\n\n{PARAMS_BLOCK}# qrsearch: end params\n\n\ndef custom_kernel(A):\n" \
               f"    raise RuntimeError('CRASH {i}')\n```\n"
    if kind == 4:
        return f"```python\ndef custom_kernel(A:\n    return {i}\n```\n"
    if kind == 8:
        return f"```python\nimport subprocess\n\n\ndef custom_kernel(A):\n    return subprocess.run({i})\n```\n"
    if kind == 2:
        return f"<<<<<<< SEARCH\nline {i} that is nowhere\n=======\nx = 1\n>>>>>>> REPLACE\n"
    return PROSE


def instant(answer_of):
    counter = itertools.count()
    return lambda messages: answer_of(next(counter))


def test_an_instant_endpoint_with_70_percent_unusable_answers_cannot_outrun_the_evaluators(tmp_path, families):
    cfg = config(tmp_path)
    llm = FakeLLMPool(instant(seventy_percent_unusable), concurrency=4)
    loop = make_loop(cfg, families, pool=FakePool(size=1, judge=judge), llm=llm, max_evals=40)
    loop.run_until_done()
    store = loop.run.store
    requests = len(llm.prompts)
    llm_children = [c for c in store.list_candidates() if store.get_json(CHILD_KEY.format(cid=c.id))]
    evaluated = [c for c in llm_children if c.state.is_terminal]
    assert len(evaluated) >= 10  # the LLM did most of the work
    assert requests <= 2 * len(evaluated) + 4, (requests, len(evaluated))
    assert all(c.state.is_terminal for c in llm_children)  # nothing paid for was left unevaluated
    ledger = read_ledger(store)["fake"]
    assert ledger["requests"] == requests and ledger["evaluated"] == len(evaluated)
    rejected = store.list_candidates(state=State.REJECTED)
    assert ledger["rejected_total"] == len(rejected)
    assert set(ledger["rejected"]) == {"no-code", "search-mismatch", "syntax", "screen"}
    assert ledger["accepted"] == len(llm_children)
    # The crashing files ran (a state, not a rejection); the bare GPU MODE files verified.
    assert any(c.state is State.CRASHED for c in llm_children)
    bare = [c for c in llm_children if "def custom_kernel(data)" in store.source(c.source_sha256)]
    assert bare and all(c.state is State.VERIFIED and c.params == {} for c in bare)


def test_a_prose_only_model_pauses_after_n_rejections_and_optuna_goes_on(tmp_path, families):
    cfg = config(tmp_path)
    llm = FakeLLMPool(lambda messages: PROSE, concurrency=1, max_consecutive_rejections=5, pause_cooldown_s=3600)
    loop = make_loop(cfg, families, pool=FakePool(size=2, judge=judge), llm=llm, max_evals=30)
    loop.run_until_done()
    store = loop.run.store
    assert len(llm.prompts) == 5
    paused = [line for line in loop.logs if "LLM mutation paused for model fake" in line]
    assert len(paused) == 1 and "5 unusable answers in a row" in paused[0]
    assert int(store.counter("gpu_evaluations")) == 30
    assert sum(c.origin is Origin.OPTUNA and c.state.is_terminal for c in store.list_candidates()) >= 20
    ledger = read_ledger(store)["fake"]
    assert ledger["paused"] is True and ledger["rejected"] == {"no-code": 5}
    # The report says so too (its data and its page).
    view = RunView(cfg.run_dir)
    assert view.metadata()["llm"]["models"]["fake"] == ledger
    page = render_html(view, {})
    assert "<h2>LLM models</h2>" in page and "paused until" in page


def test_a_bare_file_reading_params_gets_its_parents_block_back_and_is_tuned(tmp_path, families):
    body = ("import torch\n\nFAST = True\n\n\ndef custom_kernel(A):\n    b = PARAMS['block']\n"
            "    return torch.geqrf(A)\n")
    answers = iter([f"```python\n{body}```\n"])
    llm = FakeLLMPool(lambda messages: next(answers, PROSE), concurrency=1)
    loop = make_loop(config(tmp_path), families, pool=FakePool(size=1, judge=judge), llm=llm, max_evals=20)
    loop.run_until_done()
    store = loop.run.store
    restored = [c for c in store.list_candidates() if c.origin is Origin.LLM and "FAST = True" in
                store.source(c.source_sha256) and c.state is not State.REJECTED]
    first = min(restored, key=lambda c: c.created_at)
    assert first.params == read_params(store.source(store.get_candidate(first.parent_ids[0]).source_sha256))
    assert first.state is State.VERIFIED
    call = next(store.get_json(f"llm/call/{n:06d}") for n in range(1, 3)
                if store.get_json(f"llm/call/{n:06d}", {}).get("child") == first.id)
    assert call["params"] == "restored"
    assert read_ledger(store)["fake"]["restored_params"] == 1
    # Its block makes it tunable: Optuna children of the new structure were evaluated.
    assert any(c.origin is Origin.OPTUNA and c.fingerprint == first.fingerprint for c in store.list_candidates())
