"""The driver's side of the human channel: apply the engineer's events within a second.

Called from every :meth:`search.engine.loop.SearchLoop.step`; it reads the ``events`` table
at most every :data:`POLL_S` seconds (one indexed query), applies each new event in
one transaction with its outcome and the cursor (so a killed driver applies each
event exactly once), and runs the re-checks on the next free evaluator.

- ``inject``: a ``human`` candidate at the front of the queue (the next free slot);
- ``note``: recorded; later LLM prompts of the family show it;
- ``recheck``: queued for the next free evaluator (also while paused: it is the
  engineer's own request); a result that does not hold is disputed and re-measured;
- ``promote``: recorded (``export`` prefers promoted candidates);
- ``retire``: the structure is no longer tuned or chosen as a parent;
- ``pause`` / ``unpause``: no new work starts while paused; work in flight finishes.
"""

from __future__ import annotations

import collections
import time
from typing import TYPE_CHECKING, Any, Callable, Mapping

from population.events import (CURSOR_KEY, EventKind, EventOutcome, HumanEvent, OutcomeStatus, active, describe,
                               inject_applied, injected_candidate, is_paused, notes_by_candidate, outcome_key)
from population.models import Candidate, NewCandidate, Origin, State
from population.records import C
from search.engine.pool import Completed, Lost, PoolEvent, event_id
from search.engine.recheck import compare, fresh_cases, parse_recheck_id, recheck_id
from population.records import BASELINE_FAMILY

if TYPE_CHECKING:
    from population.run import Run
    from search.engine.pool import EvaluatorPool
    from search.engine.proposer import Proposer
    from search.engine.requests import RequestFactory
    from search.mutation.operators.base import KernelFamily

POLL_S = 1.0
PROMPT_NOTES = 12


class HumanChannel:
    def __init__(self, run: Run, pool: EvaluatorPool, requests: RequestFactory, proposer: Proposer,
                 families: Mapping[str, KernelFamily], enqueue: Callable[..., None], log: Callable[[str], None]) -> None:
        """``enqueue(candidate, source, front=True)`` puts a candidate in the loop's queue."""
        self.run, self.pool, self.requests, self.proposer = run, pool, requests, proposer
        self.families, self.enqueue, self.log = families, enqueue, log
        self.store = run.store
        self.cursor = int(self.store.get_json(CURSOR_KEY, 0) or 0)
        self.applied: list[HumanEvent] = self.store.events()
        self.applied = [e for e in self.applied if e.seq <= self.cursor]
        self.outcomes: dict[int, EventOutcome] = self.store.outcomes()
        self.paused = is_paused(self.applied)
        self.rechecks: collections.deque[int] = collections.deque(
            seq for seq, o in sorted(self.outcomes.items()) if o.status is OutcomeStatus.QUEUED)
        self.running: dict[str, int] = {}  # recheck evaluation id -> event seq
        self._next_poll = 0.0
        self._retired_changed()
        proposer.human_notes = self.prompt_notes

    # --- reading and applying events -----------------------------------------------------

    def poll(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now < self._next_poll:
            return
        self._next_poll = now + POLL_S
        for event in self.store.events(self.cursor):
            self._apply(event)

    def _apply(self, event: HumanEvent) -> None:
        run = self.run
        if event.seq in self.outcomes:  # applied by `qrsearch inject` while the run was stopped
            with run.transaction():
                self.store.set_json(CURSOR_KEY, event.seq)
            self.cursor = event.seq
            self.applied.append(event)
            return
        queued_front: str | None = None
        try:
            with run.transaction():
                outcome = self._effect(event)
                if outcome.status is OutcomeStatus.APPLIED and event.kind is EventKind.INJECT:
                    queued_front = outcome.candidate_id
                self._record(outcome)
                self.store.set_json(CURSOR_KEY, event.seq)
        except (KeyError, TypeError, ValueError) as exc:  # a malformed event (written by hand?): refuse it
            outcome = self._outcome(event, OutcomeStatus.REFUSED, f"malformed event: {type(exc).__name__}: {exc}"[:300])
            with run.transaction():
                self._record(outcome)
                self.store.set_json(CURSOR_KEY, event.seq)
        self.cursor = event.seq
        self.applied.append(event)
        if event.kind in (EventKind.PAUSE, EventKind.UNPAUSE) and outcome.status is OutcomeStatus.APPLIED:
            self.paused = event.kind is EventKind.PAUSE
        if event.kind is EventKind.RETIRE:
            self._retired_changed()
        if outcome.status is OutcomeStatus.QUEUED:
            self.rechecks.append(event.seq)
        if queued_front:  # the next free evaluator takes it; read back once, after the commit
            self.enqueue(self.store.get_candidate(queued_front), str(event.data["source"]), front=True)
        self.log(f"human event {describe(event)} -> {outcome.status.value}"
                      + (f" ({outcome.detail})" if outcome.detail else ""))

    def _record(self, outcome: EventOutcome) -> None:
        self.outcomes[outcome.seq] = outcome
        self.store.set_json(outcome_key(outcome.seq), outcome.model_dump(mode="json"))

    def _outcome(self, event: HumanEvent, status: OutcomeStatus, detail: str = "", **kw: Any) -> EventOutcome:
        return EventOutcome(seq=event.seq, status=status, detail=detail, at=time.time(), **kw)

    def _effect(self, event: HumanEvent) -> EventOutcome:
        kind = event.kind
        if kind is EventKind.INJECT:
            return self._inject(event)
        if kind in (EventKind.NOTE, EventKind.PROMOTE, EventKind.RECHECK):
            cand = self.store.find_candidate(event.target)
            if cand is None:
                return self._outcome(event, OutcomeStatus.REFUSED, f"no candidate {event.target}")
            if kind is EventKind.RECHECK:
                if cand.state is not State.VERIFIED or self.store.evaluated_result(cand.id) is None:
                    return self._outcome(event, OutcomeStatus.REFUSED, f"{cand.id} is {cand.state.value}, not verified")
                return self._outcome(event, OutcomeStatus.QUEUED, "waiting for a free evaluator")
            return self._outcome(event, OutcomeStatus.APPLIED)
        return self._outcome(event, OutcomeStatus.APPLIED)

    def _inject(self, event: HumanEvent) -> EventOutcome:
        family = event.target
        if family not in self.proposer.searchable_families():
            return self._outcome(event, OutcomeStatus.REFUSED, f"family {family} is not searched in this run")
        cand = self.run.add_candidate(injected_candidate(event))
        self.proposer.seen.add(cand.content_key)
        return inject_applied(event, cand.id)

    def _retired_changed(self) -> None:
        self.proposer.retired = frozenset(
            e.target.partition("/")[2] for e in active(self.applied, EventKind.RETIRE))

    # --- re-checks -----------------------------------------------------------------------

    def dispatch(self) -> None:
        """Rechecks go first to the next free evaluators."""
        pool = self.pool
        while self.rechecks and pool.free_slots() > 0:
            seq = self.rechecks.popleft()
            event = next(e for e in self.applied if e.seq == seq)
            cand = self.store.get_candidate(event.target)
            baseline = self.families[BASELINE_FAMILY].source()
            wanted = [str(c) for c in event.data.get("cases") or []]  # type: ignore[union-attr]
            request = self.requests(cand, self.run.source(cand)).model_copy(update={
                "candidate_id": recheck_id(cand.id, seq), "verify_cases": [], "profile": False, "screen": None,
                "bench_cases": fresh_cases(self.requests.bench_cases, wanted, seq), "reference_source": baseline})
            pool.submit(request)
            self.running[request.candidate_id] = seq
            self.log(f"recheck of {cand.id} (#{seq}) started")

    def intercept(self, events: list[PoolEvent]) -> list[PoolEvent]:
        """Take the re-checks' results out of the pool's events; the rest go to the loop."""
        rest: list[PoolEvent] = []
        for ev in events:
            rid = event_id(ev)
            if parse_recheck_id(rid) is None:
                rest.append(ev)
            elif isinstance(ev, Lost):
                self.rechecks.appendleft(self.running.pop(rid))
            else:
                self._finish_recheck(self.running.pop(rid), ev)
        return rest

    def _finish_recheck(self, seq: int, done: Completed) -> None:
        run, out = self.run, done.outcome
        event = next(e for e in self.applied if e.seq == seq)
        cand = self.store.get_candidate(event.target)
        recorded = self.store.evaluated_result(cand.id)
        assert recorded is not None  # checked when it was queued; results are never deleted
        verdict = compare(recorded, self.proposer.baseline_result(), out.state, out.result, out.reason)
        remeasure: str | None = None
        queued: tuple[Candidate, str] | None = None
        with run.transaction():
            run.add_counters({C.RECHECKS: 1, C.RECHECKS_DISPUTED: int(not verdict["holds"])})
            if not verdict["holds"]:
                changes = run.dispute(cand.id)
                for change in changes:
                    self.log(f"champion of {change.family}: {change.candidate_id} ({cand.id} is disputed)")
                new = NewCandidate(family=cand.family, island=cand.island, parent_ids=(cand.id,),
                                   origin=Origin.HUMAN, source=run.source(cand), params=cand.params,
                                   fingerprint=cand.fingerprint, generation=cand.generation)
                added = run.add_candidate(new)
                remeasure, queued = added.id, (added, new.source)
            self._record(self._outcome(event, OutcomeStatus.DONE, verdict["summary"], candidate_id=remeasure,
                                       data=verdict))
        if queued is not None:
            self.enqueue(*queued, front=True)
        self.log(f"recheck of {cand.id} (#{seq}): {verdict['summary']}"
                      + (f"; disputed, re-measuring as {remeasure}" if remeasure else ""))

    def withdrawn(self, rid: str) -> bool:
        """A re-check the pool handed back unstarted (the run stops): queued again (its outcome
        stays queued in the store, so a resumed run starts it)."""
        seq = self.running.pop(rid, None)
        if seq is None:
            return False
        self.rechecks.appendleft(seq)
        return True

    # --- what the loop and the prompts read ----------------------------------------------

    def busy(self) -> bool:
        return bool(self.rechecks or self.running)

    def prompt_notes(self, family: str) -> list[str]:
        """The engineer's notes on this family's candidates, newest last, for the LLM prompt."""
        lines = []
        for cid, notes in notes_by_candidate(self.applied, self.outcomes).items():
            cand = self.store.find_candidate(cid)
            if cand is None or cand.family != family:
                continue
            for note in notes:
                lines.append((note.seq, f"- on {cid} ({cand.state.value}), {note.who}: {note.text}"))
        return [text for _, text in sorted(lines)][-PROMPT_NOTES:]

    def status(self) -> dict[str, Any]:
        return {"paused": self.paused, "events": self.cursor, "rechecks_waiting": len(self.rechecks),
                "rechecks_running": len(self.running), "retired": sorted(self.proposer.retired)}
