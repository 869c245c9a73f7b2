"""A queued request's text crosses Ray once: its JSON is made once, sent in its announcement
(prefetch) under a ticket, and its start names the ticket; a restarted actor is announced again in
the same text, and until then (or once an actor said it lacks one) a start carries the text.  A
request made since under the same id (re-queued after a loss, with another dispatch time) is never
sent the older text nor started by the older ticket.  An announcement of a family the actor was
announced before carries its source as the difference from that one's."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from kernels.families import FAMILIES
from kernels.params import read_params
from search.engine.messages import EvalRequest
from search.evaluate.held import AnnouncedTexts
from search.evaluate.slots import Slot
from tests.search.evaluate.test_pool_contract import request
from tests.search.evaluate.test_simulated_worker import request as family_request


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
    assert slot.payload(again) is None and slot.announcement(again) is None
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


def _child(cid: str, family: str, **changed: Any) -> EvalRequest:
    """A request of ``family``'s file with some knobs changed, as a tuner's child is."""
    params = {**read_params(FAMILIES[family].source()), **changed}
    return family_request(cid, family, params)


def _rebuilt(texts: AnnouncedTexts, call: tuple[Any, ...]) -> EvalRequest:
    """The request the actor makes of an announcement (its own book: ``texts``)."""
    made = texts.received(*call)
    assert made is not None
    return made


def test_a_familys_next_announcement_carries_its_difference_and_rebuilds_exactly(dumps: list[str]) -> None:
    actor = _Actor()
    slot = Slot(name="gpu0", actor=actor, gpu=True)
    first = _child("c1", "cuda_blocked")
    second = _child("c2", "cuda_blocked", pdl=False)
    other = _child("c3", "lookahead_split")
    assert first.source != second.source and len(first.source) > 100_000
    for made in (first, second, other):
        slot.enqueue(made)
    whole, delta, other_whole = actor.prefetch.calls
    assert len(whole) == 2 and len(other_whole) == 2  # the first of each family: its whole JSON
    compact, ticket, (base, head, tail, middle) = delta
    assert base == whole[1] and ticket == slot.payloads["c2"].ticket
    assert '"source"' not in compact and len(compact) + len(middle) < 0.05 * len(second.source)
    texts = AnnouncedTexts()
    assert [_rebuilt(texts, call) for call in actor.prefetch.calls] == [first, second, other]
    assert slot.payloads["c2"].made is None and dumps.count("c2") == 1  # no whole JSON made for it
    _, sent = slot.take(1)
    assert sent is not None and EvalRequest.model_validate_json(sent.payload) == second  # made if it must go whole


def test_after_a_restart_each_family_is_announced_whole_once_then_as_differences() -> None:
    actor = _Actor()
    slot = Slot(name="gpu0", actor=actor, gpu=True)
    children = [_child(f"c{i}", "cuda_blocked", pdl=bool(i % 2)) for i in range(3)]
    for made in children:
        slot.enqueue(made)
    slot.send_ping()  # restarted: it holds none of the texts it was sent
    slot.announce_queue()
    again = actor.prefetch.calls[3:]
    assert [len(call) for call in again] == [2, 3, 3] and again[1][2][0] == again[0][1]
    texts = AnnouncedTexts()
    assert [_rebuilt(texts, call) for call in again] == children
    small = request("c0000009")  # a text under a few KB always goes whole
    slot.enqueue(small)
    slot.enqueue(small.model_copy(update={"candidate_id": "c0000010"}))
    assert [len(call) for call in actor.prefetch.calls[6:]] == [2, 2]


def test_children_of_interleaved_structures_each_cross_as_differences_from_their_own() -> None:
    """Two structures of a family tuned at once (the second: an edit at the file's end, far from its
    PARAMS block): after the first of each, every child is a small difference, and the actor's
    kept texts stay the pool's."""
    actor = _Actor()
    slot = Slot(name="gpu0", actor=actor, gpu=True)
    children = []
    for i in range(8):
        child = _child(f"c{i}", "cuda_blocked", pdl=bool(i % 3))
        if i % 2:
            child = child.model_copy(update={"source": child.source + "\n_EDIT = 1\n"})
        children.append(child)
        slot.enqueue(child)
    calls = actor.prefetch.calls
    assert [len(call) for call in calls] == [2, 2] + [3] * 6
    assert all(len(call[2][3]) < 8192 for call in calls[2:])
    texts = AnnouncedTexts()
    assert [_rebuilt(texts, call) for call in calls] == children
    assert texts.bases("cuda_blocked") == slot.sources_here.bases("cuda_blocked")


def test_kept_texts_follow_one_rule_and_a_missing_base_is_not_rebuilt() -> None:
    texts = AnnouncedTexts(per_family=2)
    texts.add("f", 1, "a" * 10)
    texts.add("f", 2, "b" * 10)
    texts.add("g", 3, "c" * 10)  # another family's texts are apart
    texts.add("f", 4, "bbxbb", base=2)  # takes the place of the text it differs from, last
    assert [t for t, _ in texts.bases("f")] == [1, 4]
    texts.add("f", 5, "d" * 10)  # beyond two, the oldest goes
    assert [t for t, _ in texts.bases("f")] == [4, 5]
    assert texts.rebuild("f", 1, 2, 2, "x") is None and texts.rebuild("g", 4, 2, 2, "x") is None
    assert texts.rebuild("f", 4, 2, 2, "y") == "bbybb"
    assert texts.rebuild("f", 5, 8, 8, "") is None  # a difference that does not fit its base
    texts.clear()
    assert texts.bases("f") == []
