"""The evaluator's side of a request sent once: what its announcements (``prefetch``) carried, kept
until a lane starts the request by its ticket or the pool withdraws it.

A request's text (50-180 KB of JSON) is the larger part of what an actor call costs the driver,
and a queued request used to travel twice: in its announcement and again in its start.  The pool
now names an announced request by its ticket (unique per announcement, so a request made again
under the same candidate id is never mistaken for an older one), and the evaluator answers
"not held" where it lacks it: a restarted actor lost what was announced to the one before, and an
announcement runs in another concurrency group than the start, so it may still be on its way.
The pool then sends the text.

An announcement's source may also come as its difference from one of the last few of its family
that this evaluator was announced (:class:`AnnouncedTexts`): a tuner's child differs from its
sibling in a PARAMS block, and ``cuda_blocked``'s 177 KB file is above Ray's 100 KB limit for
arguments sent inline (a call five times as costly to the driver).  Pure Python, tested without
Ray."""

from __future__ import annotations

import json
import threading
from collections import OrderedDict

from population.sources import Delta, join
from search.engine.messages import EvalRequest

# How long a start by ticket waits for its announcement to land before it answers "not held": the
# announcement was sent first but runs in the "ahead" group, behind that group's other calls.
ANNOUNCED_WITHIN_S = 2.0
# Tickets started or withdrawn, remembered so that a late announcement of one is not held for ever
# (nor compiled); an announcement later than this many newer ones is not expected.
REMEMBERED = 4096
# Announced sources kept per family, to send later ones as their differences from: a few structures
# of a family are tuned at once (their children come interleaved).
TEXTS_PER_FAMILY = 4


class HeldRequests:
    def __init__(self, wait_s: float = ANNOUNCED_WITHIN_S) -> None:
        self.wait_s = wait_s
        self._cond = threading.Condition()
        self._held: dict[int, EvalRequest] = {}  # ticket -> request: announced, not started nor withdrawn
        self._done: OrderedDict[int, None] = OrderedDict()  # tickets started or withdrawn

    def announced(self, ticket: int, request: EvalRequest) -> bool:
        """Keep an announced request; False (nothing kept) if its ticket was already started or
        withdrawn, so the announcement came late and should not be compiled either."""
        with self._cond:
            if ticket in self._done:
                return False
            self._drop(request.candidate_id)  # an older announcement of the same candidate
            self._held[ticket] = request
            self._cond.notify_all()
            return True

    def claim(self, ticket: int) -> EvalRequest | None:
        """The request announced under ``ticket``, off the books (a lane starts it); waits up to
        ``wait_s`` for its announcement, then None: the pool sends the text."""
        with self._cond:
            self._cond.wait_for(lambda: ticket in self._held, timeout=self.wait_s)
            self._finish(ticket)  # held or not: a late announcement of it is not kept
            return self._held.pop(ticket, None)

    def started(self, candidate_id: str, ticket: int | None) -> None:
        """A lane starts ``candidate_id`` from the text it was sent: an announcement of it held here
        is dropped, and a late one of ``ticket`` is not kept."""
        with self._cond:
            self._drop(candidate_id)
            if ticket is not None:
                self._finish(ticket)

    def withdrawn(self, candidate_id: str, ticket: int | None = None) -> None:
        with self._cond:
            self._drop(candidate_id)
            if ticket is not None:
                self._finish(ticket)

    def ids(self) -> list[str]:
        """The candidates held, in the order they were announced."""
        with self._cond:
            return [r.candidate_id for r in self._held.values()]

    def _drop(self, candidate_id: str) -> None:
        # A scan: an evaluator holds its compile-ahead queue, a few to sixteen requests.
        for ticket in [t for t, r in self._held.items() if r.candidate_id == candidate_id]:
            del self._held[ticket]
            self._finish(ticket)

    def _finish(self, ticket: int) -> None:
        self._done[ticket] = None
        self._done.move_to_end(ticket)
        while len(self._done) > REMEMBERED:
            self._done.popitem(last=False)


class AnnouncedTexts:
    """Per family, the last few sources announced to one evaluator, as ``(ticket, text)``, oldest
    first: the texts a later announcement's source may be the difference from.  The pool keeps one
    for each evaluator and the evaluator its own, and both follow the same rule in the order the
    announcements were sent (one concurrency group, in order), so that the ticket the pool names
    is one the evaluator holds:

    - a source sent whole is added last; one sent as its difference from a kept text takes that
      text's place, last (its structure's newest text: a tuner's children differ from each other
      in a PARAMS block, and children of several structures of a family come interleaved);
    - beyond ``per_family`` texts, the oldest goes.

    The evaluator also drops what it cannot rebuild (a restart since): it does not add it, and
    the pool, once a start shows the evaluator lacks something, forgets every text (``clear``) and
    sends whole again; the texts the evaluator holds beyond the pool's are then older than any
    the pool names, so the oldest-first rule never drops one the pool keeps."""

    def __init__(self, per_family: int = TEXTS_PER_FAMILY) -> None:
        self.per_family = per_family
        self._texts: dict[str, list[tuple[int, str]]] = {}

    def bases(self, family: str) -> list[tuple[int, str]]:
        return list(self._texts.get(family, ()))

    def add(self, family: str, ticket: int, text: str, base: int | None = None) -> None:
        """Keep ``text``, announced under ``ticket`` (as its difference from ``base``, if given)."""
        kept = [(t, x) for t, x in self._texts.get(family, ()) if t != base]
        kept.append((ticket, text))
        self._texts[family] = kept[-self.per_family:]

    def received(self, request_json: str, ticket: int | None,
                 delta: tuple[int, int, int, str] | None = None) -> EvalRequest | None:
        """The request an announcement carried, its source kept under ``ticket`` (the same rule,
        in the same order, as the pool's book).  ``delta``: the JSON lacks the source, which is
        ``(base ticket, head, tail, middle)`` of a kept text; None where that base is not kept."""
        if delta is None:
            request = EvalRequest.model_validate_json(request_json)
        else:
            fields = json.loads(request_json)
            source = self.rebuild(fields["family"], *delta)
            if source is None:
                return None
            request = EvalRequest.model_validate({**fields, "source": source})
        if ticket is not None:
            self.add(request.family, ticket, request.source, None if delta is None else delta[0])
        return request

    def rebuild(self, family: str, base: int, head: int, tail: int, middle: str) -> str | None:
        """The source ``base[:head] + middle + base[len(base) - tail:]``, or None where ``base`` is
        not kept here (a restart since it was announced): the pool then sends the text when the
        start names the ticket and the evaluator lacks it."""
        text = next((x for t, x in self._texts.get(family, ()) if t == base), None)
        if text is None or head + tail > len(text):
            return None
        return join(text, Delta(base="", head=head, tail=tail, middle=middle))

    def clear(self) -> None:
        self._texts.clear()
