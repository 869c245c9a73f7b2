"""Evaluator actors on Ray: one per GPU (or a few on CPU), driven by a ray.wait loop.

Facts this relies on (see docs/ray-optuna-triton-facts in the notes):
  * GPU actors get ``num_cpus`` explicitly: one that silently holds a CPU
    for life can deadlock a small machine;
  * ``ActorPool`` loses work when an actor dies, so work is tracked per
    object ref: a dead actor's evaluation is *lost* (re-queued by the loop,
    nobody blamed), and the actor, restarted by Ray, is pinged before reuse;
  * a call that outlives its deadline cannot be cancelled; the actor is killed
    (and restarted) instead;
  * a lost actor's queued requests (not started yet) move to the evaluators that are up:
    its restart may never come (a node that left the cluster);
  * an actor runs up to ``lanes`` evaluations at once (its default concurrency group has
    ``lanes`` threads; prefetch and the compile questions keep their own group of one), so
    a killed or dead actor loses every evaluation in flight on it, each reported ``Lost``;
  * a queued request's text (50-180 KB) crosses Ray once, in its announcement (as its difference
    from a text of its family announced there before, where one is close); its start names it by
    ticket, and an actor that lacks it (restarted, or the announcement lost) answers unrun, and
    the text follows (search/evaluate/held.py).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, Collection

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayError

from search.engine.messages import EvalOutcome, EvalRequest
from search.evaluate.actor import EvaluatorActor, Simulation
from search.evaluate.actor_output import describe_output, output_path
from search.evaluate.admission import Admission
from search.evaluate.compile_reports import CompileReports
from search.evaluate.slots import Announcement, Flight, Slot
from search.engine.pool import Completed, Lost, PoolEvent, PoolStats, next_in_queue


@dataclass
class RayPool(CompileReports):
    """Implements the loop's EvaluatorPool over Ray actors.

    Each evaluator runs up to ``lanes`` requests at once and takes up to ``lookahead`` queued
    ones beyond them, so the loop proposes the next candidates early and the evaluator
    compiles them ahead; while its compile processes would otherwise idle (it says so:
    ``compile_room``) it takes more, up to ``max_lookahead`` queued, so compiling keeps the
    CPUs busy when candidates are cheap to compile and the evaluator finds one ready.  The
    pipeline is the same for every evaluator.  An evaluator's busy fraction is the time it
    had at least one request in flight (whatever its lanes did).

    With ``hold_for_ready``, a free lane does not start a request whose kernels are still
    compiling: it waits (``ready_within``, answered within ``ready_wait_s``) for the first
    queued one that is ready, and asks the loop for one more request every ``ready_wait_s``
    while none is (up to ``max_lookahead`` queued), so a cheap child proposed meanwhile runs
    while a long compile goes on; the head still starts once it has waited its case timeout.
    Without it, the lane starts the head and the evaluator waits inside it (on an H200: 0.55 s of
    every 2.4 s evaluation, the GPU idle; docs/search-performance.md)."""

    workdir: Path
    gpus: int
    cpu_evaluators: int = 1
    cpus_per_evaluator: float = 1.0
    env_extra: dict[str, str] = field(default_factory=dict)
    lanes: int = 1  # evaluations in flight per evaluator (evaluation.lanes)
    lookahead: int = 0
    max_lookahead: int = 0  # queued at most while a lane holds for a compiled request
    room_lookahead: int | None = None  # queued at most while compile CPUs have room (None: max_lookahead)
    ready_first: bool = True  # start a queued request whose compile is done before the head
    room_every_s: float = 0.5  # how often an evaluator is asked for its compile room
    hold_for_ready: bool = False  # a free lane waits for a compiled request (see the class docstring)
    ready_wait_s: float = 0.5
    # With hold_for_ready: while its lanes all run and nothing it queues is compiled, an evaluator
    # takes one more request per compile report, so that one is compiled when a lane frees.
    anticipate: bool = False
    simulation: Simulation | None = None  # simulated GPUs (evaluation.device: simulated)
    output_to_files: bool = False  # each actor's stdout/stderr to its actor.log (ray.log_to_driver off)
    slots: list[Slot] = field(default_factory=list)
    _flights: dict[Any, Flight] = field(default_factory=dict)
    created_at: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        self.lanes = max(1, self.lanes)  # 0 (unset) means one lane
        self.anticipate = self.anticipate and self.hold_for_ready  # it changes only how lanes hold
        count = self.gpus if self.gpus > 0 else self.cpu_evaluators
        env = dict(self.env_extra)
        if self.gpus == 0:
            env.setdefault("TRITON_INTERPRET", "1")  # no GPU: run Triton kernels in the interpreter
        for i in range(count):
            name = f"gpu{i}" if self.gpus else f"cpu{i}"
            options: dict[str, Any] = {"num_cpus": self.cpus_per_evaluator, "max_concurrency": self.lanes}
            if self.gpus:
                options["num_gpus"] = 1
            actor = EvaluatorActor.options(**options).remote(  # type: ignore[attr-defined]
                str(self.workdir), env, name, self.lookahead > 0, self.lanes,
                self.simulation.model_dump_json() if self.simulation is not None else None,
                output_file=str(self._output_file(name)) if self.output_to_files else None)
            slot = Slot(name=name, actor=actor, gpu=self.gpus > 0)
            slot.send_ping()
            self.slots.append(slot)

    def _output_file(self, name: str) -> Path | None:
        return output_path(self.workdir, name) if self.output_to_files else None

    @property
    def size(self) -> int:
        return len(self.slots)

    def _ready(self) -> list[Slot]:
        return [s for s in self.slots if s.up]

    @cached_property
    def _admission(self) -> Admission:
        # Made once (the settings above never change): asked per slot per free-slot count, 64
        # times a proposal at 64 GPUs.
        return Admission(self.lanes, self.lookahead, self.max_lookahead, self.room_lookahead)

    @property
    def _room_cap(self) -> int:
        return self._admission.room_cap

    def _capacity(self, slot: Slot) -> int:
        """Requests the slot may hold (the rule: :class:`search.evaluate.admission.Admission`)."""
        return self._admission.capacity(slot.room_load, slot.room, slot.starved_load)

    def free_slots(self) -> int:
        self._collect_pings()
        self._ask_room()
        return sum(max(0, self._capacity(s) - s.load) for s in self._ready())

    def inflight(self) -> list[str]:
        return [f.request.candidate_id for f in self._flights.values()] + \
            [r.candidate_id for s in self.slots for r in s.queue]

    def inflight_count(self) -> int:
        return len(self._flights) + sum(len(s.queue) for s in self.slots)

    def _collect_pings(self) -> None:
        pending = [s for s in self.slots if s.ping is not None]
        if not pending:
            return
        ready, _ = ray.wait([s.ping for s in pending], num_returns=len(pending), timeout=0)
        for slot in pending:
            if slot.ping in ready:
                try:
                    info = ray.get(slot.ping)
                except RayError:
                    slot.send_ping()  # still restarting
                    self._rehome(slot)
                    continue
                slot.answered_ping(info)
                self._next(slot)  # the lanes start first: what they take needs no prefetch
                slot.announce_queue()
                for other in self.slots:  # queues left on evaluators lost while none was up
                    if other.ping is not None:
                        self._rehome(other)

    def submit(self, request: EvalRequest) -> None:
        ready = [s for s in self._ready() if s.load < self._capacity(s)]
        if not ready:
            raise RuntimeError("submit() without a free slot")
        slot = min(ready, key=lambda s: s.load)
        request = request.model_copy(update={"dispatched_at": time.time()})
        if slot.running >= self.lanes or slot.queue:  # busy, or holding for a ready one
            slot.enqueue(request)
        else:
            self._start(slot, request)  # a free lane (the worker announces it to its compile-ahead itself)

    def holding(self) -> bool:
        return any(slot.starved_load is not None for slot in self._ready())

    def withdraw_queued(self) -> list[str]:
        """Take back every request not started yet (the loop returns them to pending on stop); the
        evaluators stop compiling them ahead, which would hold their CPUs while the runs drain."""
        return self.withdraw([r.candidate_id for slot in self.slots for r in slot.queue])

    def withdraw(self, candidate_ids: Collection[str]) -> list[str]:
        """Take back those of ``candidate_ids`` still queued on an evaluator; each one's compile ahead
        is stopped there (a question about its queue already out is answered for the queue as it
        is then: a withdrawn id in the answer is never started, see :meth:`_ready_answered`)."""
        wanted, out = set(candidate_ids), []
        for slot in self.slots:
            gone = [r.candidate_id for r in slot.queue if r.candidate_id in wanted]
            if not gone:
                continue
            tickets = {cid: slot.payloads[cid].ticket for cid in gone if cid in slot.payloads}
            slot.queue = [r for r in slot.queue if r.candidate_id not in wanted]
            slot.forget_unqueued()
            for cid in gone:
                slot.actor.withdraw.remote(cid, tickets.get(cid))
            out += gone
        return out

    def _start(self, slot: Slot, request: EvalRequest, sent: Announcement | None = None) -> None:
        """Start ``request`` on a free lane of ``slot`` (``sent``: its announcement there, if any)."""
        ref, by_ticket = slot.send_start(request, sent)
        now = time.monotonic()
        # A lane's evaluation may wait for the device behind every other lane's gate calls and
        # bench jobs, each bounded by its own limits: the deadline grows with the lanes.
        deadline = now + request.deadline_s * self.lanes
        self._flights[ref] = Flight(slot=slot, request=request, started=now, deadline=deadline, by_ticket=by_ticket)
        slot.lane_started(now)

    def _resend(self, ref: Any) -> None:
        """The actor did not hold the request a start named by ticket: the same lane and deadline,
        its text sent this time."""
        flight = self._flights.pop(ref)
        assert flight.by_ticket is not None
        self._flights[flight.slot.send_again(flight.by_ticket)] = flight
        flight.by_ticket = None

    def _landed(self, ref: Any) -> Flight:
        """Take a flight off the books."""
        flight = self._flights.pop(ref)
        flight.slot.lane_landed(time.monotonic())
        return flight

    def _next(self, slot: Slot, answered: bool = False) -> None:
        """Start the slot's next queued requests while it is up and has a free lane; when which one
        to start depends on what is compiled, ask the actor (answered without blocking the loop).

        ``answered``: an evaluation that just ended said which of the requests announced to the actor
        are compiled, which answers the question for the whole queue (a request queued after it
        ended was announced too late to have compiled since), so none compiled means what a
        question's answer of none means: hold, or start the head."""
        while slot.queue and slot.ping is None and slot.running < self.lanes:
            if slot.ready_ref is not None:
                return  # a question about its queue is out: its answer starts one
            index: int | None = 0
            if self._needs_answer(slot):
                # A request the actor already said is compiled starts without a question (one
                # actor call and a poll's round trip less per start).
                index = slot.known_next(self.hold_for_ready)
            if index is None and answered and self.hold_for_ready:
                self._ask_ready(slot, hold=True)
                return
            if index is None and not answered:
                self._ask_ready(slot, hold=False)
                return
            index = index or 0  # answered, none compiled, no hold: the head
            slot.starved_load = None
            self._start(slot, *slot.take(index))

    def _needs_answer(self, slot: Slot) -> bool:
        """Whether the request to start depends on which queued ones are compiled (:func:`next_in_queue`);
        if not, the head starts."""
        waited, limit = slot.head_waited()
        return self.ready_first and (len(slot.queue) >= 2 or self.hold_for_ready) and waited <= limit

    def _ask_ready(self, slot: Slot, hold: bool) -> None:
        """Ask the actor which queued requests are compiled: at once, or (``hold``: every one is still
        compiling, a lane waits) as soon as one is or ``ready_wait_s`` passed, taking one more
        request meanwhile (the loop proposes it).  The answer comes through :meth:`poll`: a
        blocking question here held the whole loop for a round trip per start, 38 ms at 64
        simulated GPUs."""
        if slot.ready_ref is not None:
            return
        slot.ready_hold = hold
        if hold:
            slot.starved_load = slot.load
        slot.ready_ref = slot.actor.ready_within.remote([r.candidate_id for r in slot.queue],
                                                        self.ready_wait_s if hold else 0.0)

    def _ready_answered(self, slot: Slot) -> None:
        ref, slot.ready_ref = slot.ready_ref, None
        try:
            ready = set(ray.get(ref))
        except RayActorError:
            self._restarted(slot)  # died while holding: no flight on it reports the death
            return
        except RayError:
            ready = set()
        slot.compiled = (slot.compiled | ready).intersection(r.candidate_id for r in slot.queue)
        if not slot.queue or slot.ping is not None or slot.running >= self.lanes:
            slot.starved_load = None
            return
        index = next_in_queue([r.candidate_id for r in slot.queue], ready, *slot.head_waited(),
                              hold=self.hold_for_ready)
        if index is None:
            self._ask_ready(slot, hold=True)  # none compiled: hold, with one more request queued by now
            return
        slot.starved_load = None
        self._start(slot, *slot.take(index))
        self._next(slot)

    def poll(self, timeout: float) -> list[PoolEvent]:
        events: list[PoolEvent] = []
        self._collect_pings()
        holds = {s.ready_ref: s for s in self.slots if s.ready_ref is not None}
        if self._flights or holds:
            refs = list(self._flights) + list(holds)
            # What is done already, in one call; only when nothing is, a wait for the first (at 64
            # simulated GPUs most polls find something done, and a blocking wait for one answer
            # followed by a sweep for the rest was two calls over every reference each time).
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
            if not ready and timeout > 0:
                ready, _ = ray.wait(refs, num_returns=1, timeout=timeout)
            for ref in ready:
                if ref in self._flights:  # not already taken with its dead actor's other lanes
                    events += self._finish(ref)
                elif ref in holds and holds[ref].ready_ref is ref:
                    self._ready_answered(holds[ref])
        elif timeout > 0:
            time.sleep(min(timeout, 0.05))
        now = time.monotonic()
        for ref, flight in list(self._flights.items()):
            if ref in self._flights and now > flight.deadline:
                # A call cannot be cancelled; kill the actor (Ray restarts it) and re-queue the work:
                # every evaluation in flight on it, the late one and its other lanes'.
                ray.kill(flight.slot.actor, no_restart=False)
                late = f"{flight.slot.name}: no answer within {flight.deadline - flight.started:.0f} s; evaluator restarted"
                events += self._lose_slot(flight.slot, lambda f: late if f is flight else
                                          f"{late} (lost with {flight.request.candidate_id})")
        return events

    def _lose_slot(self, slot: Slot, reason: Callable[[Flight], str]) -> list[PoolEvent]:
        """The slot's actor is dead or killed: every flight on it is lost, once, and the restarted
        actor is pinged (its queue starts when it answers)."""
        lost = [ref for ref, f in self._flights.items() if f.slot is slot]
        events: list[PoolEvent] = []
        for ref in lost:
            flight = self._landed(ref)
            events.append(Lost(candidate_id=flight.request.candidate_id, reason=reason(flight)))
        self._restarted(slot)
        return events

    def _restarted(self, slot: Slot) -> None:
        """The slot's actor died (Ray restarts it): ping it before reuse, its queue to one that is up."""
        slot.restarts += 1
        slot.send_ping()
        self._rehome(slot)

    def _rehome(self, slot: Slot) -> None:
        """Move a lost slot's queued requests to the evaluators that are up, least loaded first.

        Its actor may never come back (its node left the cluster: Ray keeps the restart pending
        until resources appear), and requests left in its queue would be in flight forever.  With
        no evaluator up, they stay, and move to the first one that comes up (this one, restarted, or
        another)."""
        alive = [s for s in self._ready() if s is not slot]
        if not alive or not slot.queue:
            return
        moved, slot.queue = slot.queue, []
        for request in moved:
            min(alive, key=lambda s: s.load).enqueue(request, slot.payload(request))
        slot.payloads.clear()
        for target in alive:
            self._next(target)

    def _finish(self, ref: Any) -> list[PoolEvent]:
        flight = self._flights[ref]
        slot = flight.slot
        try:
            outcome_json, compiled = ray.get(ref)
            if outcome_json is None:
                self._resend(ref)
                return []
            outcome = EvalOutcome.model_validate_json(outcome_json)
        except RayActorError as exc:
            died = (f"{slot.name} died during the evaluation ({type(exc).__name__})"
                    + describe_output(self._output_file(slot.name)))
            # Its other lanes' calls die with it; one that finished first keeps its result.
            events: list[PoolEvent] = []
            for other in [r for r, f in self._flights.items() if f.slot is slot and r is not ref]:
                done, _ = ray.wait([other], timeout=0)
                if done:
                    try:
                        answer = ray.get(other)[0]
                    except RayError:
                        continue
                    if answer is None:
                        continue  # it did not hold the request: nothing ran, it is lost with the rest
                    finished = EvalOutcome.model_validate_json(answer)
                    self._landed(other)
                    slot.evaluations += 1
                    events.append(self._completed(slot, finished))
            return events + self._lose_slot(slot, lambda f: died)
        except RayError as exc:
            self._landed(ref)
            self._next(slot)
            return [Lost(candidate_id=flight.request.candidate_id,
                         reason=f"{slot.name}: evaluator error {type(exc).__name__}: {str(exc)[:300]}")]
        self._landed(ref)
        slot.evaluations += 1
        queued = {r.candidate_id for r in slot.queue}
        slot.compiled.update(cid for cid in compiled if cid in queued)  # what the freed lane may start
        self._next(slot, answered=True)
        return [self._completed(slot, outcome)]

    @staticmethod
    def _completed(slot: Slot, outcome: EvalOutcome) -> PoolEvent:
        if outcome.infra_error:
            return Lost(candidate_id=outcome.candidate_id, reason=f"{slot.name}: {outcome.infra_error}")
        return Completed(outcome=outcome)

    def stats(self) -> PoolStats:
        now = time.monotonic()
        return PoolStats(evaluators=len(self.slots), ready=sum(s.up for s in self.slots),
                         busy_fraction={s.name: s.busy_fraction(now) for s in self.slots},
                         restarts=sum(s.restarts for s in self.slots))

    def utilization(self, timeout: float = 5.0) -> dict[str, float | None]:
        out: dict[str, float | None] = {}
        for slot in self.slots:
            try:
                out[slot.name] = ray.get(slot.actor.utilization.remote(), timeout=timeout)
            except (GetTimeoutError, RayError):
                out[slot.name] = None
        return out

    def actor_pids(self) -> dict[str, int | None]:
        return {s.name: s.pid for s in self.slots}

    def shutdown(self, timeout: float = 10.0) -> None:
        refs = [s.actor.shutdown.remote() for s in self.slots]
        try:
            ray.get(refs, timeout=timeout)
        except (GetTimeoutError, RayError):
            pass
        for slot in self.slots:
            ray.kill(slot.actor, no_restart=True)
