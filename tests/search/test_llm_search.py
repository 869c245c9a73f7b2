"""A search whose LLM is a real OpenAI-compatible server on loopback, answering from a
script: every kind of answer ends in the right state and the search goes on, also
after the endpoint goes down."""

from __future__ import annotations

import os

import pytest

from population.models import Origin, State
from population.store import RunStore
from search.config import BudgetConfig, EvaluationConfig, LLMConfig, LLMModel, MutationMix
from search.driver import launch
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
        mutation=MutationMix(llm=1.0, optuna=0.3, crossover=0.0),
        evaluation=EvaluationConfig(verify_suite="smoke-quick", bench_suite="smoke-bench", device="cpu",
                                    case_timeout_s=6, min_reps=2, max_reps=3, max_seconds_per_case=0.05,
                                    profile=False),
        llm=LLMConfig(base_url=server.url, models=[LLMModel(name="scripted", usd_per_mtok_in=1.0)], concurrency=1,
                      timeout_s=5, max_retries=0))
    import search.loop as loop_module
    original_collect = loop_module.SearchLoop._collect_llm

    def collect(self):
        original_collect(self)
        if not server.script and server.requests and not getattr(server, "down", False):
            server.down = True
            server.stop()  # the endpoint disappears mid-run

    monkeypatch.setattr(loop_module.SearchLoop, "_collect_llm", collect)
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
        assert store.check_consistency(deep=True) == []
    assert set(by_marker) == {"valid", "unapplied", "crash", "hang", "cached", "snoop"}, sorted(by_marker)
    assert by_marker["valid"].state is State.VERIFIED
    assert by_marker["unapplied"].state is State.REJECTED and "does not occur" in by_marker["unapplied"].reason
    assert by_marker["crash"].state is State.CRASHED and "SIGABRT" in by_marker["crash"].reason
    assert by_marker["hang"].state is State.TIMEOUT
    assert by_marker["cached"].state is State.FAILED_VERIFY
    assert by_marker["snoop"].state is State.VERIFIED, by_marker["snoop"].reason  # no secrets reached it
    assert evals == 14 and errors >= 1  # the search went on after the endpoint went down
    assert os.environ["SOME_SECRET"] == "hunter2"
