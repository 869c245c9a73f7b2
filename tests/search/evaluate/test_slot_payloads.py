"""A queued request's JSON is made once: the text its evaluator was announced (prefetch) is the text
its start sends (evaluate), and a restarted actor is announced again; a request made since under the
same id (re-queued after a loss, with another dispatch time) is never sent the older text."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from search.engine.messages import EvalRequest
from search.evaluate.slots import Slot
from tests.search.evaluate.test_pool_contract import request


@dataclass
class _Method:
    calls: list[Any] = field(default_factory=list)

    def remote(self, *args: Any) -> None:
        self.calls.append(args[0] if len(args) == 1 else args)


@dataclass
class _Actor:
    prefetch: _Method = field(default_factory=_Method)
    evaluate: _Method = field(default_factory=_Method)


@pytest.fixture()
def dumps(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    made: list[str] = []
    original = EvalRequest.model_dump_json

    def counted(self: EvalRequest, **kwargs: Any) -> str:
        made.append(self.candidate_id)
        return original(self, **kwargs)

    monkeypatch.setattr(EvalRequest, "model_dump_json", counted)
    return made


def test_a_started_request_sends_the_text_it_was_announced_with_made_once(dumps: list[str]) -> None:
    actor = _Actor()
    slot = Slot(name="gpu0", actor=actor, gpu=True)
    first, second = request("c0000001"), request("c0000002")
    slot.enqueue(first)
    slot.enqueue(second)
    started, payload = slot.take(1)
    assert started is second and payload is actor.prefetch.calls[1]
    assert EvalRequest.model_validate_json(payload) == second
    assert dumps == ["c0000001", "c0000002"]  # one dump a request, none for its start
    slot.announce_queue()  # a restarted actor hears of what it still queues, in the same text
    assert actor.prefetch.calls[2] is actor.prefetch.calls[0]
    assert list(slot.payloads) == ["c0000001"] and dumps == ["c0000001", "c0000002"]


def test_a_request_made_again_under_the_same_id_is_sent_its_own_text(dumps: list[str]) -> None:
    slot = Slot(name="gpu0", actor=_Actor(), gpu=True)
    old = request("c0000001").model_copy(update={"dispatched_at": 1.0})
    slot.enqueue(old)
    slot.queue.clear()  # withdrawn without the pool's bookkeeping
    again = old.model_copy(update={"dispatched_at": 2.0})
    assert EvalRequest.model_validate_json(slot.payload(again)).dispatched_at == 2.0
    slot.enqueue(again)
    assert EvalRequest.model_validate_json(slot.take(0)[1]).dispatched_at == 2.0
    assert slot.payloads == {}


def test_withdrawn_and_moved_requests_leave_no_text_behind() -> None:
    slot, other = Slot(name="gpu0", actor=_Actor(), gpu=True), Slot(name="gpu1", actor=_Actor(), gpu=True)
    for cid in ("c0000001", "c0000002", "c0000003"):
        slot.enqueue(request(cid))
    slot.queue = [r for r in slot.queue if r.candidate_id != "c0000002"]
    slot.forget_unqueued()
    assert sorted(slot.payloads) == ["c0000001", "c0000003"]
    moved = slot.queue.pop(0)
    other.enqueue(moved, slot.payload(moved))  # what RayPool._rehome does with a lost slot's queue
    assert other.actor.prefetch.calls == [slot.payloads["c0000001"][1]]
