"""What the Ray pool knows of each evaluator actor (:class:`Slot`) and of each evaluation in flight
on one (:class:`Flight`): whether it is up, what it holds, what it last said about its compiles,
and how much of its life it was busy.  :class:`search.evaluate.ray_pool.RayPool` decides what to
send where; a slot keeps its own books and talks to its actor only through fire-and-forget calls."""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Any

from population.sources import Delta, delta_against
from search.engine.messages import EvalRequest
from search.engine.pool import next_in_queue
from search.evaluate.held import AnnouncedTexts

# Announcements are numbered across the pool's slots: a ticket names one announcement of one request
# (a request made again under the same id, or moved to another evaluator, gets a new one).
_TICKETS = itertools.count(1)
# Sources shorter than this are announced whole: a difference costs more to find and rebuild than a
# short text costs to send (6 KB: 0.26 ms an announcement against 0.20; 60 KB: 0.31 against 0.50;
# 180 KB: 0.45 against 1.68, over Ray's inline limit; lab/actor_call_cost.py).
DELTA_MIN_SOURCE = 16_384
# A difference this small is taken without trying the family's other kept texts (a PARAMS block).
SMALL_MIDDLE = 8_192


@dataclass
class Announcement:
    """A queued request as its evaluator was told of it, under the ticket that names it there.
    ``here``: sent to the actor as it is now; a restart (or an evaluator that said it lacks one)
    clears it, and the request's start carries its text: its whole JSON (50-180 KB), made once,
    when first needed (an announcement of a family announced before carries only the difference)."""

    request: EvalRequest
    ticket: int
    here: bool = True
    made: str | None = None

    @property
    def payload(self) -> str:
        if self.made is None:
            self.made = self.request.model_dump_json()
        return self.made


@dataclass
class Slot:
    name: str
    actor: Any
    gpu: bool
    ready_at: float | None = None
    busy_s: float = 0.0  # time with at least one evaluation in flight (ended spells)
    busy_since: float | None = None  # the current spell's start, while one is in flight
    evaluations: int = 0
    # Its flights, counted as they start and land: counting the pool's flights for every slot at
    # every admission grew as evaluators squared.
    running: int = 0
    restarts: int = 0
    ping: Any = None  # an in-flight ping ref while the actor (re)starts
    ping_sent: float = 0.0
    pid: int | None = None
    node: str | None = None  # the Ray node it runs on (hex id), once it answered a ping
    # Requests handed to this evaluator behind the one it runs (announced to it, so their
    # kernels compile ahead); they start here, in order, and survive an actor restart (or move to
    # an evaluator that is up, see RayPool._rehome).
    queue: list[EvalRequest] = field(default_factory=list)
    # What the actor last said: it held ``room_load`` requests and ``room`` compile processes
    # would idle (its compile_state), so it may hold room_load + room; the question in flight,
    # the requests it held when that was sent, and when.
    room: int = 0
    room_load: int = 0
    room_ref: Any = None
    room_ref_load: int = 0
    room_asked: float = 0.0
    # The "which of these are compiled?" question in flight (to pick the request to start; with
    # ready_hold, every queued one was still compiling and a lane waits), and while holding the
    # load when the slot last asked for one more request.
    ready_ref: Any = None
    ready_hold: bool = False
    starved_load: int | None = None
    # Queued requests the actor said are compiled (its last compile report and hold answers).
    compiled: set[str] = field(default_factory=set)
    # Each queued request's announcement, by id (with the request, so that a request of the same id
    # made since is never taken for it): its start names the ticket, where the actor holds it, and
    # its text crosses Ray once.
    payloads: dict[str, Announcement] = field(default_factory=dict)
    resent: int = 0  # starts by ticket the actor did not hold, sent again with their text
    # The last few sources of each family the actor as it is now was announced (the actor keeps the
    # same): a later one's source goes as its difference from one of them.
    sources_here: AnnouncedTexts = field(default_factory=AnnouncedTexts)

    @property
    def up(self) -> bool:
        """Its actor answered a ping and is not (re)starting."""
        return self.ping is None and self.ready_at is not None

    @property
    def load(self) -> int:
        """Requests it holds: running and queued."""
        return self.running + len(self.queue)

    def send_ping(self) -> None:
        """Ask a (re)starting actor whether it is up; what it said before no longer counts."""
        self.room, self.room_load, self.room_ref = 0, 0, None
        self.ready_ref, self.starved_load = None, None
        self.compiled = set()  # a restarted actor compiles its queue again
        self.unannounce()
        self.ping = self.actor.ping.remote()
        self.ping_sent = time.monotonic()

    def answered_ping(self, info: dict[str, Any]) -> None:
        self.ping = None
        self.pid = info["pid"]
        self.node = info.get("node")
        self.ready_at = self.ready_at or time.monotonic()

    def enqueue(self, request: EvalRequest, payload: str | None = None) -> None:
        """Queue a request behind the running ones; the actor hears of it at once, to compile it ahead.
        ``payload``: its JSON, when another slot had it already."""
        self.queue.append(request)
        sent = self.payloads[request.candidate_id] = Announcement(request, next(_TICKETS), made=payload)
        self._announce(sent)

    def _announce(self, sent: Announcement) -> None:
        """Send an announcement: its source as the difference from the kept text of its family it
        differs least from, where that difference is small; else its whole JSON."""
        request = sent.request
        closest: tuple[int, Delta] | None = None
        if len(request.source) >= DELTA_MIN_SOURCE:
            for ticket, text in reversed(self.sources_here.bases(request.family)):
                delta = delta_against("", text, request.source)
                if delta is not None and (closest is None or len(delta.middle) < len(closest[1].middle)):
                    closest = ticket, delta
                    if len(delta.middle) <= SMALL_MIDDLE:
                        break
        if closest is None:
            self.actor.prefetch.remote(sent.payload, sent.ticket)
        else:
            base, delta = closest
            self.actor.prefetch.remote(request.model_dump_json(exclude={"source"}), sent.ticket,
                                       (base, delta.head, delta.tail, delta.middle))
        self.sources_here.add(request.family, sent.ticket, request.source, closest[0] if closest else None)

    def announcement(self, request: EvalRequest) -> Announcement | None:
        kept = self.payloads.get(request.candidate_id)
        return kept if kept is not None and kept.request is request else None

    def payload(self, request: EvalRequest) -> str | None:
        """The request's JSON where it was made for its announcement here (None if not)."""
        kept = self.announcement(request)
        return kept.made if kept is not None else None

    def take(self, index: int) -> tuple[EvalRequest, Announcement | None]:
        """The queued request at ``index``, off the queue, with its announcement (to start it)."""
        request = self.queue.pop(index)
        sent = self.announcement(request)
        self.payloads.pop(request.candidate_id, None)
        return request, sent

    def send_start(self, request: EvalRequest, sent: Announcement | None) -> tuple[Any, Announcement | None]:
        """Start ``request`` on the actor: by its ticket where the actor was announced it (its text
        crosses Ray once), else with its text.  Returns the call's ref, and the announcement when
        the start went by ticket (to send the text if the actor lacks it: :meth:`send_again`)."""
        if sent is not None and sent.here:
            return self.actor.evaluate.remote(None, sent.ticket), sent
        payload = request.model_dump_json() if sent is None else sent.payload
        return self.actor.evaluate.remote(payload, None if sent is None else sent.ticket), None

    def send_again(self, sent: Announcement) -> Any:
        """The actor answered a start by ticket unrun (restarted since the announcement, or it was
        lost): start it with its text; the rest of the queue starts with text too."""
        self.resent += 1
        self.unannounce()
        return self.actor.evaluate.remote(sent.payload, sent.ticket)

    def forget_unqueued(self) -> None:
        """Drop the JSON of requests no longer queued here (withdrawn, or moved to another slot)."""
        queued = {r.candidate_id for r in self.queue}
        for cid in [cid for cid in self.payloads if cid not in queued]:
            del self.payloads[cid]

    def unannounce(self) -> None:
        """The actor holds none of what was announced (restarted, or it said it lacks one): each
        queued request's start carries its text until it is announced again."""
        for sent in self.payloads.values():
            sent.here = False
        self.sources_here.clear()

    def announce_queue(self) -> None:
        """Tell a restarted actor what it holds: it knows nothing of what was announced before."""
        for queued in self.queue:
            sent = self.announcement(queued)
            if sent is None:
                sent = self.payloads[queued.candidate_id] = Announcement(queued, next(_TICKETS))
            sent.here = True
            self._announce(sent)

    def knows_compiled(self) -> bool:
        """Whether its actor said one of the requests it queues is compiled."""
        return any(r.candidate_id in self.compiled for r in self.queue)

    def known_next(self, hold: bool) -> int | None:
        """The queued request to start by what the actor last said is compiled (a compile does not
        undo itself), or None when it named none that is queued: then the pool asks it."""
        if not self.knows_compiled():
            return None
        return next_in_queue([r.candidate_id for r in self.queue], self.compiled, *self.head_waited(), hold=hold)

    def head_waited(self) -> tuple[float, float]:
        """How long the head has been queued, and how long it may be."""
        head = self.queue[0]
        waited = time.time() - head.dispatched_at if head.dispatched_at is not None else 0.0
        return waited, head.limits.case_timeout_s

    def lane_started(self, now: float) -> None:
        if self.busy_since is None:
            self.busy_since = now
        self.running += 1

    def lane_landed(self, now: float) -> None:
        """A flight is off the books: its landing ends the busy spell if it was the last one."""
        self.running -= 1
        if self.busy_since is not None and not self.running:
            self.busy_s += now - self.busy_since
            self.busy_since = None

    def busy_fraction(self, now: float) -> float:
        """The share of its time up with at least one evaluation in flight (0 in its first second)."""
        spell = now - self.busy_since if self.busy_since is not None else 0.0
        alive_for = now - (self.ready_at or now)
        return min(1.0, (self.busy_s + spell) / alive_for) if alive_for > 1 else 0.0


@dataclass
class Flight:
    slot: Slot
    request: EvalRequest
    started: float
    deadline: float
    # Started by ticket: the announcement whose text goes if the actor says it lacks it.
    by_ticket: Announcement | None = None
