"""The evaluator actor's own books, without Ray: an evaluation's answer names which of the requests
announced to it are compiled, never one that began or was withdrawn, so that the pool starts one
of those on the freed lane without asking (search/evaluate/ray_pool.py ``_finish``)."""

from __future__ import annotations

import pytest

from search.config import SimulationConfig
from search.engine.messages import EvalOutcome
from search.evaluate.actor import EvaluatorActor, Simulation
from search.evaluate.simulated.worker import SimulatedWorker
from tests.search.evaluate.test_simulated_worker import FakeClock, request

pytest.importorskip("ray")


def actor(tmp_path, compile_ahead: bool = True):
    made = EvaluatorActor.__ray_metadata__.modified_class(  # type: ignore[attr-defined]
        str(tmp_path / "work"), {}, "gpu0", compile_ahead, 2,
        Simulation(settings=SimulationConfig(), seed=7).model_dump_json())
    clock = FakeClock()
    # Time passes only when the test says: an evaluation's own waits take none.
    made.worker = SimulatedWorker(SimulationConfig(), seed=7, name="gpu0", lanes=2, compile_ahead=compile_ahead,
                                  clock=clock, sleep=lambda seconds: None)
    return made, clock


def test_an_evaluations_answer_names_the_announced_requests_compiled_and_no_other(tmp_path):
    made, clock = actor(tmp_path)
    for cid in ("c1", "c2", "c3", "c4"):
        assert made.prefetch(request(cid, "householder_unblocked").model_dump_json())
    made.withdraw("c2")
    clock.sleep(3600.0)  # every compile announced has ended
    outcome_json, compiled = made.evaluate(request("c1", "householder_unblocked").model_dump_json())
    assert EvalOutcome.model_validate_json(outcome_json).candidate_id == "c1"
    assert compiled == ["c3", "c4"]  # not c1 (it ran), not c2 (withdrawn)
    _, compiled = made.evaluate(request("c3", "householder_unblocked").model_dump_json())
    assert compiled == ["c4"]


def test_an_answer_names_nothing_still_compiling(tmp_path):
    made, clock = actor(tmp_path)
    assert made.prefetch(request("c1", "householder_unblocked").model_dump_json())
    assert made.evaluate(request("c0", "householder_unblocked").model_dump_json())[1] == []  # c1 compiles
    clock.sleep(3600.0)
    outcome_json, compiled = made.evaluate(request("c2", "householder_unblocked").model_dump_json())
    assert compiled == ["c1"] and EvalOutcome.model_validate_json(outcome_json).candidate_id == "c2"


def test_without_compile_ahead_an_answer_names_none(tmp_path):
    """A worker without compile-ahead calls every request compiled; the pool must keep asking it
    (its answer then says what a lane may start), not take the claim from an evaluation's end."""
    made, _ = actor(tmp_path, compile_ahead=False)
    assert not made.prefetch(request("c1", "householder_unblocked").model_dump_json())
    assert made.evaluate(request("c0", "householder_unblocked").model_dump_json())[1] == []


def test_a_start_by_ticket_runs_the_announced_request_without_its_text(tmp_path):
    made, clock = actor(tmp_path)
    assert made.prefetch(request("c1", "householder_unblocked").model_dump_json(), 11)
    assert made.prefetch(request("c2", "householder_unblocked").model_dump_json(), 12)
    clock.sleep(3600.0)
    outcome_json, compiled = made.evaluate(None, 11)
    assert EvalOutcome.model_validate_json(outcome_json).candidate_id == "c1" and compiled == ["c2"]


def test_an_actor_that_lacks_the_announced_request_answers_none_and_runs_nothing(tmp_path):
    """A restarted actor (or one whose announcement was lost): the pool then sends the text; the
    announcement, if it lands after all, is neither kept nor compiled."""
    made, _ = actor(tmp_path)
    made._held.wait_s = 0.05
    assert made.evaluate(None, 21) == (None, [])
    assert made.worker.evaluations == 0
    assert not made.prefetch(request("c1", "householder_unblocked").model_dump_json(), 21)
    outcome_json, _ = made.evaluate(request("c1", "householder_unblocked").model_dump_json(), 21)
    assert EvalOutcome.model_validate_json(outcome_json).candidate_id == "c1"


def test_a_withdrawn_request_is_not_started_by_its_ticket(tmp_path):
    made, _ = actor(tmp_path)
    made._held.wait_s = 0.05
    assert made.prefetch(request("c1", "householder_unblocked").model_dump_json(), 31)
    made.withdraw("c1", 31)
    assert made.evaluate(None, 31) == (None, [])


def test_an_announcement_as_a_difference_is_held_as_the_whole_request(tmp_path):
    made, clock = actor(tmp_path)
    first = request("c1", "cuda_blocked")
    second = first.model_copy(update={"candidate_id": "c2", "source": first.source.replace("pdl", "pdl_", 1)})
    assert made.prefetch(first.model_dump_json(), 41)
    head = second.source.index("pdl_") + 3
    tail = len(first.source) - head
    assert made.prefetch(second.model_dump_json(exclude={"source"}), 42, (41, head, tail, "_"))
    assert made._held._held[42] == second  # the source rebuilt exactly
    clock.sleep(3600.0)
    outcome_json, _ = made.evaluate(None, 42)
    assert EvalOutcome.model_validate_json(outcome_json).candidate_id == "c2"


def test_an_announcement_whose_base_the_actor_lacks_is_not_held(tmp_path):
    """Restarted since its base was announced: nothing is held, and the start by ticket answers
    unrun (the pool sends the whole text)."""
    made, _ = actor(tmp_path)
    made._held.wait_s = 0.05
    compact = request("c2", "cuda_blocked").model_dump_json(exclude={"source"})
    assert not made.prefetch(compact, 52, (51, 10, 10, "x"))
    assert made.evaluate(None, 52) == (None, [])
    assert made.worker.evaluations == 0
