"""The LLM budget on its own: capacity, back-off, shares, pause and cool-down, the ledger, resume."""

from __future__ import annotations

import collections
import random

import pytest

from population.store import RunStore
from search.config import LLMConfig
from search.config.sections import LLMModel
from search.engine.llm_budget import LLMBudget, read_ledger


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def llm_config(**kw) -> LLMConfig:
    base = dict(base_url="http://127.0.0.1:9/v1", models=[LLMModel(name="a"), LLMModel(name="b/coder")],
                concurrency=3, queue_per_evaluator=2, backoff_initial_s=1.0, backoff_max_s=8.0,
                max_consecutive_rejections=6, pause_cooldown_s=100.0)
    base.update(kw)
    return LLMConfig(**base)


@pytest.fixture()
def store(tmp_path):
    with RunStore.create(tmp_path / "run", "{}") as s:
        yield s


def budget(store, clock, logs=None, **kw) -> LLMBudget:
    return LLMBudget(llm_config(**kw), store, (logs if logs is not None else []).append, clock=clock)


def reject(b: LLMBudget, model: str = "a", kind: str = "no-code") -> None:
    b.answered(model, 100, 10, 0.5, rejection=kind, child=None)


def test_room_is_bounded_by_concurrency_evaluators_and_the_evaluation_budget(store):
    b = budget(store, Clock())
    assert b.room(inflight=0, evaluators=1, eval_room=None) == 3  # concurrency
    assert b.room(inflight=3, evaluators=1, eval_room=None) == 0
    for cid in ("c1", "c2", "c3", "c4"):
        b.answered("a", 1, 1, 0.0, rejection=None, child=cid)
    # 2 per evaluator + concurrency = 5, less 4 unevaluated children
    assert b.room(inflight=0, evaluators=1, eval_room=None) == 1
    assert b.room(inflight=1, evaluators=1, eval_room=None) == 0
    b.evaluated("c1")
    b.evaluated("c2")
    assert b.room(inflight=1, evaluators=1, eval_room=None) == 2
    assert b.room(inflight=0, evaluators=1, eval_room=2) == 2  # only what the evaluation budget can still take
    assert b.room(inflight=2, evaluators=1, eval_room=2) == 0


def test_backoff_doubles_up_to_its_cap_and_an_accepted_answer_resets_it(store):
    clock = Clock()
    b = budget(store, clock)
    waits = []
    for _ in range(5):
        reject(b)
        waits.append(b.state["a"].not_before - clock.now)
        assert not b.available("a") and b.available("b/coder")
    assert waits == [1.0, 2.0, 4.0, 8.0, 8.0]
    clock.now += 8.0
    assert b.available("a")
    b.answered("a", 1, 1, 0.0, rejection=None, child="c9")
    assert b.state["a"].streak == 0 and b.available("a")


def test_errors_count_as_unusable_answers(store):
    b = budget(store, Clock())
    b.failed("a", "a: HTTP 503: down")
    assert b.state["a"].streak == 1 and "HTTP 503" in b.state["a"].last_reason
    assert read_ledger(store)["a"]["errors"] == 1 and read_ledger(store)["a"]["requests"] == 1


def test_model_choice_follows_the_configured_weights(store):
    b = budget(store, Clock(), models=[LLMModel(name="a", weight=3), LLMModel(name="b", weight=1)])
    rng = random.Random(0)
    picks = [b.pick(rng).name for _ in range(2000)]
    assert 0.7 < picks.count("a") / 2000 < 0.8


def test_a_model_with_a_streak_loses_share_of_the_ensemble(store):
    clock = Clock()
    b = budget(store, clock, backoff_initial_s=0.0)
    for _ in range(3):
        reject(b)
    rng = random.Random(1)
    picks = collections.Counter(b.pick(rng).name for _ in range(4000))
    # weights 1/8 : 1, so about 11% for "a"
    assert 0.07 < picks["a"] / 4000 < 0.16


def test_a_model_pauses_after_n_unusable_answers_with_one_log_line_and_rests_its_cool_down(store):
    clock = Clock()
    logs: list[str] = []
    b = budget(store, clock, logs)
    for i in range(6):
        clock.now += 10  # past any back-off
        assert b.available("a")
        reject(b, kind="search-mismatch")
    assert len(logs) == 1 and "paused for model a" in logs[0] and "6 unusable answers in a row" in logs[0]
    clock.now += 50
    assert not b.available("a") and b.available("b/coder") and not b.all_paused()
    assert b.pick(random.Random(0)).name == "b/coder"
    assert read_ledger(store, now=clock.now)["a"]["paused"] is True
    clock.now += 51  # the cool-down is over: one probe
    assert b.available("a")
    reject(b)  # still useless: paused again at once
    assert len(logs) == 2 and not b.available("a")
    clock.now += 101
    b.answered("a", 1, 1, 0.0, rejection=None, child="c1")  # a later accepted answer resets the count
    assert b.state["a"].streak == 0 and b.state["a"].paused_until is None
    assert read_ledger(store, now=clock.now)["a"]["paused"] is False and read_ledger(store)["a"]["pauses"] == 2


def test_the_ledger_counts_per_model_and_survives_a_new_session(store):
    clock = Clock()
    b = budget(store, clock)
    reject(b, "b/coder", "syntax")
    reject(b, "b/coder", "duplicate")
    b.answered("b/coder", 200, 20, 1.25, rejection=None, child="c7", restored=True)
    b.failed("a", "timed out")
    b.evaluated("c7")
    b.evaluated("c8")  # not an LLM child: counts for nobody
    for _ in range(5):
        reject(b, "a")
    ledger = read_ledger(store, now=clock.now)
    coder = ledger["b/coder"]
    assert (coder["requests"], coder["answers"], coder["accepted"], coder["evaluated"]) == (3, 3, 1, 1)
    assert coder["rejected"] == {"duplicate": 1, "syntax": 1} and coder["rejected_total"] == 2
    assert (coder["prompt_tokens"], coder["completion_tokens"]) == (400, 40)
    assert coder["cost_usd"] == pytest.approx(2.25) and coder["restored_params"] == 1
    assert ledger["a"]["paused"] is True and ledger["a"]["errors"] == 1 and ledger["a"]["requests"] == 6
    again = budget(store, clock)  # a resume: the pause and the streaks carry over
    assert not again.available("a") and again.state["b/coder"].streak == 0
