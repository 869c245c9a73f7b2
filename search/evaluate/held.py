"""The evaluator's side of a request sent once: what its announcements (``prefetch``) carried, kept
until a lane starts the request by its ticket or the pool withdraws it.

A request's text (50-180 KB of JSON) is the larger part of what an actor call costs the driver,
and a queued request used to travel twice: in its announcement and again in its start.  The pool
now names an announced request by its ticket (unique per announcement, so a request made again
under the same candidate id is never mistaken for an older one), and the evaluator answers
"not held" where it lacks it: a restarted actor lost what was announced to the one before, and an
announcement runs in another concurrency group than the start, so it may still be on its way.
The pool then sends the text.  Pure Python, tested without Ray."""

from __future__ import annotations

import threading
from collections import OrderedDict
from search.engine.messages import EvalRequest

# How long a start by ticket waits for its announcement to land before it answers "not held": the
# announcement was sent first but runs in the "ahead" group, behind that group's other calls.
ANNOUNCED_WITHIN_S = 2.0
# Tickets started or withdrawn, remembered so that a late announcement of one is not held for ever
# (nor compiled); an announcement later than this many newer ones is not expected.
REMEMBERED = 4096


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
