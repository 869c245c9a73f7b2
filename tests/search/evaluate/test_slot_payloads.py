"""A queued request's text crosses Ray once: its JSON is made once, sent in its announcement
(prefetch) under a ticket, and its start names the ticket; a restarted actor is announced again in
the same text, and until then (or once an actor said it lacks one) a start carries the text.  A
request made since under the same id (re-queued after a loss, with another dispatch time) is never
sent the older text nor started by the older ticket."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from search.engine.messages import EvalRequest
from search.evaluate.slots import Slot
from tests.search.evaluate.test_pool_contract import request


@dataclass
class _Method:
    calls: list[tuple[Any, ...]] = field(default_factory=list)

    def remote(self, *args: Any) -> None:
        self.calls.append(args)


@dataclass
class _Actor:
    prefetch: _Method = field(default_factory=_Method)
    evaluate: _Method = field(default_factory=_Method)
    ping: _Method = field(default_factory=_Method)


@pytest.fixture()
def dumps(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    made: list[str] = []
    original = EvalRequest.model_dump_json

    def counted(self: EvalRequest, **kwargs: Any) -> str:
        made.append(self.candidate_id)
        return original(self, **kwargs)

    monkeypatch.setattr(EvalRequest, "model_dump_json", counted)
    return made


def test_a_started_request_names_the_ticket_it_was_announced_under_made_once(dumps: list[str]) -> None:
    actor = _Actor()
    slot = Slot(name="gpu0", actor=actor, gpu=True)
    first, second = request("c0000001"), request("c0000002")
    slot.enqueue(first)
    slot.enqueue(second)
    (text0, ticket0), (text1, ticket1) = actor.prefetch.calls
    assert ticket0 != ticket1 and EvalRequest.model_validate_json(text1) == second
    started, sent = slot.take(1)
    assert started is second and sent is not None and sent.here
    assert sent.ticket == ticket1 and sent.payload is text1
    assert dumps == ["c0000001", "c0000002"]  # one dump a request, none for its start
    slot.announce_queue()  # a restarted actor hears of what it still queues, in the same text
    assert actor.prefetch.calls[2] == (text0, ticket0) and actor.prefetch.calls[2][0] is text0
    assert list(slot.payloads) == ["c0000001"] and dumps == ["c0000001", "c0000002"]


def test_after_a_restart_a_start_carries_the_text_until_the_queue_is_announced_again() -> None:
    actor = _Actor()
    slot = Slot(name="gpu0", actor=actor, gpu=True)
    for cid in ("c0000001", "c0000002", "c0000003"):
        slot.enqueue(request(cid))
    slot.send_ping()  # the actor restarted: it holds nothing announced before
    _, sent = slot.take(0)
    assert sent is not None and not sent.here  # RayPool._start sends sent.payload
    slot.announce_queue()
    assert [call[1] for call in actor.prefetch.calls[3:]] == [slot.payloads[c].ticket for c in ("c0000002", "c0000003")]
    assert all(s.here for s in slot.payloads.values())
    slot.unannounce()  # the actor said it lacked one: the rest start with their text
    assert not any(s.here for s in slot.payloads.values())


def test_a_request_made_again_under_the_same_id_is_sent_its_own_text_and_ticket(dumps: list[str]) -> None:
    slot = Slot(name="gpu0", actor=_Actor(), gpu=True)
    old = request("c0000001").model_copy(update={"dispatched_at": 1.0})
    slot.enqueue(old)
    old_ticket = slot.payloads["c0000001"].ticket
    slot.queue.clear()  # withdrawn without the pool's bookkeeping
    again = old.model_copy(update={"dispatched_at": 2.0})
    assert EvalRequest.model_validate_json(slot.payload(again)).dispatched_at == 2.0
    assert slot.announcement(again) is None
    slot.enqueue(again)
    _, sent = slot.take(0)
    assert sent is not None and sent.ticket != old_ticket
    assert EvalRequest.model_validate_json(sent.payload).dispatched_at == 2.0
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
    (text, ticket), = other.actor.prefetch.calls
    assert text is slot.payloads["c0000001"].payload and ticket != slot.payloads["c0000001"].ticket
