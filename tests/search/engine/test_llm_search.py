"""A search whose LLM is a real OpenAI-compatible server on loopback, answering from a
script: every kind of answer ends in the right state and the search goes on, also
after the endpoint goes down."""

from __future__ import annotations

import os

import pytest

from kernels.harness.settings import RunLimits, TimingPolicy
from population.consistency import check_consistency
from population.models import Origin, State
from population.store import RunStore
from search.config import BudgetConfig, EvaluationConfig, LLMConfig, MutationMix
from search.config.sections import LLMModel
from search.run.driver import launch
from tests.search.fake_llm import FakeLLM
from tests.search.fakes import TOY_SOURCE
from tests.search.toy_driver import install, toy_config

pytestmark = pytest.mark.slow

PARAMS_BLOCK = TOY_SOURCE[TOY_SOURCE.index("# qrsearch: params"):TOY_SOURCE.index("# qrsearch: end params")]


def whole_file(body: str) -> str:
    return f"Rewrite.\n```python\nimport torch\nimport os\nimport time\n\n{PARAMS_BLOCK}# qrsearch: end params\n\n{body}\n```\n"


VALID = ("Add a module constant.\n<<<<<<< SEARCH\n# qrsearch: params\n=======\nSCALE = 1\n\n"
         "# qrsearch: params\n>>>>>>> REPLACE\n")
NOT_APPLYING = "<<<<<<< SEARCH\nthis line is nowhere\n=======\nx = 1\n>>>>>>> REPLACE\n"
CRASH = whole_file("def custom_kernel(A):\n    os.abort()\n")
HANG = whole_file("def custom_kernel(A):\n    time.sleep(1000)\n    return torch.geqrf(A)\n")
CACHED = whole_file("_c = []\n\n\ndef custom_kernel(A):\n    if not _c:\n        _c.append(torch.geqrf(A))\n"
                    "    return _c[0]\n")
SNOOP = whole_file("_SEEN = [k for k in os.environ if 'KEY' in k or 'SECRET' in k]\n\n\n"
                   "def custom_kernel(A):\n    if _SEEN:\n        raise RuntimeError('found ' + ','.join(_SEEN))\n"
                   "    return torch.geqrf(A)\n")


def test_scripted_llm_answers_end_in_the_right_states(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-driver-only")
    monkeypatch.setenv("SOME_SECRET", "hunter2")
    install()
    server = FakeLLM([("ok", VALID), ("ok", NOT_APPLYING), ("ok", CRASH), ("ok", HANG), ("ok", CACHED),
                      ("ok", SNOOP)])
    server.thread.start()
    config = toy_config(
        tmp_path, budget=BudgetConfig(max_evals=14, max_minutes=8),
        mutation=MutationMix({"llm_edit": 1.0, "optuna_step": 0.3, "param_crossover": 0.0, "llm_merge": 0.0}),
        evaluation=EvaluationConfig(verify_suite="smoke-quick", bench_suite="smoke-bench", device="cpu",
                                    limits=RunLimits(case_timeout_s=6),
                                    timing=TimingPolicy(min_reps=2, max_reps=3, max_seconds=0.05),
                                    profile=False),
        llm=LLMConfig(base_url=server.url, models=[LLMModel(name="scripted", usd_per_mtok_in=1.0)], concurrency=1,
                      timeout_s=5, max_retries=0))
    from search.engine.llm_calls import LLMCalls
    original_collect = LLMCalls.collect

    def collect(self, store_child):
        collected = original_collect(self, store_child)
        if not server.script and server.requests and not getattr(server, "down", False):
            server.down = True
            server.stop()  # the endpoint disappears mid-run
        return collected

    monkeypatch.setattr(LLMCalls, "collect", collect)
    try:
        assert launch(config) == 0
    finally:
        if not getattr(server, "down", False):
            server.stop()
    assert server.requests[0]["auth"] == "Bearer sk-driver-only"
    with RunStore.open(config.run_dir, readonly=True) as store:
        cands = store.list_candidates()
        evals = int(store.counter("gpu_evaluations"))
        errors = int(store.counter("llm_errors"))
        llm = [c for c in cands if c.origin is Origin.LLM]
        by_marker = {}
        for c in llm:
            source = store.source(c.source_sha256)
            for marker, name in (("SCALE = 1", "valid"), ("nowhere", "unapplied"), ("os.abort", "crash"),
                                 ("time.sleep(1000)", "hang"), ("_c.append", "cached"), ("_SEEN", "snoop")):
                if marker in source and name not in by_marker:
                    by_marker[name] = c
        assert check_consistency(store, deep=True) == []
    assert set(by_marker) == {"valid", "unapplied", "crash", "hang", "cached", "snoop"}, sorted(by_marker)
    assert by_marker["valid"].state is State.VERIFIED
    assert by_marker["unapplied"].state is State.REJECTED and "does not occur" in by_marker["unapplied"].reason
    assert by_marker["crash"].state is State.CRASHED and "SIGABRT" in by_marker["crash"].reason
    assert by_marker["hang"].state is State.TIMEOUT
    assert by_marker["cached"].state is State.FAILED_VERIFY
    assert by_marker["snoop"].state is State.VERIFIED, by_marker["snoop"].reason  # no secrets reached it
    assert evals == 14 and errors >= 1  # the search went on after the endpoint went down
    assert os.environ["SOME_SECRET"] == "hunter2"


# --- issue 14: nothing wasted ------------------------------------------------------------------

SMOKE_EVALUATION = EvaluationConfig(verify_suite="smoke-quick", bench_suite="smoke-bench", device="cpu",
                                    limits=RunLimits(case_timeout_s=30),
                                    timing=TimingPolicy(min_reps=2, max_reps=3, max_seconds=0.05),
                                    profile=False)
PROSE = "The panel is latency bound; fusing the reflector into the trailing update would help."
GPU_MODE = "import torch\n\nV = {i}\n\n\ndef custom_kernel(data):\n    return torch.geqrf(data)\n"


class Endless:
    """A FakeLLM script without end: request i is answered with ``answer(i)``."""

    def __init__(self, answer) -> None:
        self.answer = answer
        self.served = 0

    def __bool__(self) -> bool:
        return True

    def popleft(self) -> tuple:
        self.served += 1
        return ("ok", self.answer(self.served - 1))


def seventy_percent_unusable(i: int) -> str:
    """Cycled kinds, each answer new: 3 in 10 usable; of the 7 others 2 run and fail, 5 cannot run."""
    kind = i % 10
    if kind in (0, 9):
        return (f"<<<<<<< SEARCH\ndef custom_kernel(A):\n=======\nV{i} = {i}\n\n\n"
                "def custom_kernel(A):\n>>>>>>> REPLACE\n")
    if kind == 5:
        return f"```python\n{GPU_MODE.format(i=i)}```\n"
    if kind == 3:
        return whole_file(f"V = {i}\n\n\ndef custom_kernel(A):\n    os.abort()\n")
    if kind == 7:
        return f"```python\nimport torch\n\n\ndef custom_kernel(A):\n    H, tau = torch.geqrf(A)\n" \
               f"    return H, tau * 0 + {i}\n```\n"
    if kind == 4:
        return f"```python\ndef custom_kernel(A:\n    return {i}\n```\n"
    if kind == 8:
        return f"```python\nimport subprocess\n\n\ndef custom_kernel(A):\n    return subprocess.run({i})\n```\n"
    if kind == 2:
        return f"<<<<<<< SEARCH\nline {i} that is nowhere\n=======\nx = 1\n>>>>>>> REPLACE\n"
    return PROSE


def status_json(run_dir) -> dict:
    import json

    from typer.testing import CliRunner

    from search.cli.app import app

    result = CliRunner().invoke(app, ["status", str(run_dir), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_an_instant_endpoint_with_70_percent_unusable_answers_spends_in_step_with_the_evaluators(tmp_path):
    from collections import Counter

    install()
    server = FakeLLM()
    server.script = Endless(seventy_percent_unusable)
    concurrency = 2
    with server:
        config = toy_config(
            tmp_path, budget=BudgetConfig(max_evals=16, max_minutes=8),
            mutation=MutationMix({"llm_edit": 1.0, "optuna_step": 0.3, "param_crossover": 0.0, "llm_merge": 0.0}), evaluation=SMOKE_EVALUATION,
            llm=LLMConfig(base_url=server.url, models=[LLMModel(name="scripted", usd_per_mtok_in=2.0)],
                          concurrency=concurrency, timeout_s=10, max_retries=0, backoff_initial_s=0.05,
                          backoff_max_s=0.2))
        assert launch(config) == 0
        requests = len(server.requests)
    with RunStore.open(config.run_dir, readonly=True) as store:
        calls = [store.get_json(f"llm/call/{n:06d}") for n in range(1, int(store.counter("llm_calls")) + 1)]
        llm = [c for c in store.list_candidates() if c.origin is Origin.LLM]
        made = [c for c in llm if c.state is not State.REJECTED]
        evaluated = [c for c in made if c.state.is_terminal]
        sources = {c.id: store.source(c.source_sha256) for c in made}
        gpu_evaluations = int(store.counter("gpu_evaluations"))
    assert len(evaluated) >= 6, (requests, len(evaluated))
    assert requests <= 2 * len(evaluated) + concurrency, (requests, len(evaluated))
    assert len(made) == len(evaluated)  # no answer was paid for and left unevaluated
    assert any(c.state is State.CRASHED for c in evaluated)
    # `qrsearch status --json` tells what the store holds, and the server saw as many requests.
    status = status_json(config.run_dir)
    row = status["llm_models"]["scripted"]
    assert row["requests"] == requests == len(calls) and status["llm_calls"] == len(calls)
    assert row["accepted"] == len(made) and row["evaluated"] == len(evaluated)
    assert row["rejected_total"] == len(llm) - len(made)
    assert row["rejected"] == dict(Counter(c["kind"] for c in calls if "rejected" in c))
    assert set(row["rejected"]) == {"no-code", "search-mismatch", "syntax", "screen"}
    assert row["prompt_tokens"] == sum(c["prompt_tokens"] for c in calls)
    assert row["cost_usd"] == pytest.approx(sum(c["cost_usd"] for c in calls))
    assert row["paused"] is False and status["evaluations"] == gpu_evaluations == 16
    assert any("def custom_kernel(data)" in s for s in sources.values())


def test_a_prose_only_endpoint_pauses_llm_mutation_and_optuna_goes_on(tmp_path):
    install()
    server = FakeLLM(default=("ok", PROSE))
    with server:
        config = toy_config(
            tmp_path, budget=BudgetConfig(max_evals=10, max_minutes=8),
            mutation=MutationMix({"llm_edit": 1.0, "optuna_step": 0.3, "param_crossover": 0.0, "llm_merge": 0.0}), evaluation=SMOKE_EVALUATION,
            llm=LLMConfig(base_url=server.url, models=[LLMModel(name="scripted")], concurrency=1, timeout_s=10,
                          max_retries=0, backoff_initial_s=0.05, backoff_max_s=0.2, max_consecutive_rejections=4,
                          pause_cooldown_s=3600))
        assert launch(config) == 0
        requests = len(server.requests)
    assert requests == 4
    log = (config.run_dir / "driver.log").read_text()
    paused = [line for line in log.splitlines() if "LLM mutation paused for model scripted" in line]
    assert len(paused) == 1 and "4 unusable answers in a row" in paused[0], log
    with RunStore.open(config.run_dir, readonly=True) as store:
        optuna_done = [c for c in store.list_candidates() if c.origin is Origin.OPTUNA and c.state.is_terminal]
        assert int(store.counter("gpu_evaluations")) == 10 and len(optuna_done) >= 6
    row = status_json(config.run_dir)["llm_models"]["scripted"]
    assert row["paused"] is True and row["rejected"] == {"no-code": 4} and row["requests"] == 4


def test_bare_files_are_evaluated_and_one_reading_params_gets_its_parents_block_back(tmp_path):
    install()
    reads_params = ("```python\nimport torch\n\nBLOCK = PARAMS['block']\n\n\ndef custom_kernel(A):\n"
                    "    assert PARAMS['warps'] > 0\n    return torch.geqrf(A)\n```\n")
    server = FakeLLM([("ok", reads_params), ("ok", f"Here it is.\n```python\n{GPU_MODE.format(i=0)}```\n")],
                     default=("ok", PROSE))
    with server:
        config = toy_config(
            tmp_path, budget=BudgetConfig(max_evals=8, max_minutes=8),
            mutation=MutationMix({"llm_edit": 1.0, "optuna_step": 0.3, "param_crossover": 0.0, "llm_merge": 0.0}), evaluation=SMOKE_EVALUATION,
            llm=LLMConfig(base_url=server.url, models=[LLMModel(name="scripted")], concurrency=1, timeout_s=10,
                          max_retries=0, backoff_initial_s=0.05, backoff_max_s=0.2))
        assert launch(config) == 0
    with RunStore.open(config.run_dir, readonly=True) as store:
        llm = {store.source(c.source_sha256): c for c in store.list_candidates() if c.origin is Origin.LLM}
        restored = next(c for s, c in llm.items() if "BLOCK = PARAMS['block']" in s)
        bare = next(c for s, c in llm.items() if "def custom_kernel(data)" in s)
        parent = store.get_candidate(restored.parent_ids[0])
        assert restored.state is State.VERIFIED and bare.state is State.VERIFIED, (restored.reason, bare.reason)
        assert restored.params == parent.params and "# qrsearch: params" in store.source(restored.source_sha256)
        assert bare.params == {}
        result = store.get_result(bare.id)
        assert result.geomean_ms and result.cases and all(case.status.value == "ok" for case in result.cases)
        # Nothing to tune: its structure is judged at once (it may take the title), not left maturing.
        record = next(r for r in store.structures("toy") if r.fingerprint == bare.fingerprint)
        assert record.status.value in ("champion", "matured")
    ledger = status_json(config.run_dir)["llm_models"]["scripted"]
    assert ledger["restored_params"] == 1 and ledger["accepted"] == 2
