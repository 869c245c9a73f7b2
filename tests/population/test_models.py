from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from population.errors import InvalidTransition
from population.models import (FAILURE_STATES, Candidate, CaseOutcome, CaseStatus, EvalResult, NewCandidate,
                               Origin, State, can_transition, candidate_id, id_sort_key, result_from_json,
                               source_hash)
from population.outcomes import geomean


def pending(**kw: object) -> Candidate:
    base = dict(id="c0000002", family="f", island=0, parent_ids=("c0000001",), origin=Origin.LLM,
                source_sha256=source_hash("x"), params={"bm": 32}, fingerprint="fp", created_at=1.0, updated_at=1.0)
    base.update(kw)
    return Candidate(**base)  # type: ignore[arg-type]


def test_state_helpers_partition_the_lifecycle() -> None:
    assert {s for s in State if not s.is_terminal} == {State.PENDING, State.RUNNING}
    # A screened candidate finished without a fitness, but did nothing wrong.
    assert {s for s in State if s.is_failure} == set(State) - {State.PENDING, State.RUNNING, State.VERIFIED,
                                                                State.SCREENED}
    assert set(FAILURE_STATES) == {s for s in State if s.is_failure}


def test_transitions_follow_the_state_machine() -> None:
    c = pending()
    running = c.with_state(State.RUNNING, now=5.0)
    assert running.state is State.RUNNING and running.updated_at == 5.0 and c.state is State.PENDING
    back = running.with_state(State.PENDING)  # requeue after a restart
    assert back.state is State.PENDING
    done = running.with_state(State.VERIFIED, fitness_ms=1.5)
    assert done.fitness_ms == 1.5
    for target in State:
        with pytest.raises(InvalidTransition):
            done.with_state(target, reason="x", fitness_ms=1.0 if target is State.VERIFIED else None)
    with pytest.raises(InvalidTransition):
        running.with_state(State.RUNNING)
    assert can_transition(State.PENDING, State.REJECTED)


def test_failure_is_a_state_with_a_reason_never_a_score() -> None:
    c = pending()
    with pytest.raises(ValidationError, match="reason"):
        c.with_state(State.FAILED_COMPILE)
    with pytest.raises(ValidationError, match="only verified"):
        c.with_state(State.CRASHED, reason="segfault", fitness_ms=1.0)
    with pytest.raises(ValidationError, match="positive finite"):
        c.with_state(State.VERIFIED, fitness_ms=math.inf)
    with pytest.raises(ValidationError, match="positive finite"):
        c.with_state(State.VERIFIED)
    assert c.with_state(State.TIMEOUT, reason="> 30 s").reason == "> 30 s"


def test_candidate_is_frozen_and_rejects_unknown_fields() -> None:
    c = pending()
    with pytest.raises(ValidationError):
        c.state = State.VERIFIED  # type: ignore[misc]
    with pytest.raises(ValidationError):
        pending(score=3.0)


@pytest.mark.parametrize("origin,parents,ok", [
    (Origin.SEED, (), True), (Origin.SEED, ("c1",), False), (Origin.LLM, (), False),
    (Origin.OPTUNA, ("c1",), True), (Origin.MIGRATION, ("c1", "c2"), False),
    (Origin.CROSSOVER, ("c1", "c2"), True), (Origin.CROSSOVER, ("c1",), False)])
def test_origin_fixes_the_number_of_parents(origin: Origin, parents: tuple[str, ...], ok: bool) -> None:
    if ok:
        assert pending(origin=origin, parent_ids=parents).origin is origin
    else:
        with pytest.raises(ValidationError):
            pending(origin=origin, parent_ids=parents)


def test_params_must_be_json_safe_and_content_key_is_order_free() -> None:
    with pytest.raises(ValidationError):
        pending(params={"x": math.nan})
    a, b = pending(params={"a": 1, "b": 2}), pending(params={"b": 2, "a": 1})
    assert a.content_key == b.content_key
    assert a.content_key != pending(params={"a": 1, "b": 3}).content_key


def test_new_candidate_hashes_its_source() -> None:
    new = NewCandidate(family="f", origin=Origin.SEED, source="print(1)\n", fingerprint="fp")
    c = new.to_candidate(candidate_id(7), 3.0)
    assert c.id == "c0000007" and c.source_sha256 == source_hash("print(1)\n") and c.state is State.PENDING


def test_ids_sort_numerically_past_the_padding() -> None:
    ids = [candidate_id(n) for n in (5, 10**7, 9_999_999, 123)]
    assert sorted(ids, key=id_sort_key) == [candidate_id(n) for n in (5, 123, 9_999_999, 10**7)]


def test_result_round_trips_through_json_with_nan_residuals() -> None:
    case = CaseOutcome(case="dense/512", status=CaseStatus.FAILED_VERIFY, median_ms=1.0,
                       residuals={"factor": math.nan, "orth": math.inf}, message="bad orthogonality")
    res = EvalResult(candidate_id="c0000002", cases=(case,), device="H200", versions={"torch": "2.9"},
                     error="", profile={"launches": 3, "kernels": [{"name": "k", "ms": 0.2}]})
    back = result_from_json(res.model_dump_json())
    assert math.isnan(back.cases[0].residuals["factor"]) and back.cases[0].residuals["orth"] == math.inf
    assert back.profile == res.profile and back.device == "H200"


def test_result_rejects_a_nonpositive_geomean() -> None:
    with pytest.raises(ValidationError):
        EvalResult(candidate_id="c1", geomean_ms=0.0)


def test_geomean() -> None:
    assert geomean([1.0, 4.0]) == pytest.approx(2.0)
    # The one geomean (population/outcomes.py) answers None, not ValueError, for what has no mean:
    # the harness and the cascade ask it about failed cases, where None is the answer they need.
    assert geomean([1.0, 0.0]) is None
