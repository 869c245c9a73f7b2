"""The steady-state search loop: ask, mutate, evaluate, tell — no generation barriers.

Each :meth:`SearchLoop.step`:
  1. collects finished evaluations and tells them to the population (champions,
     maturation, migration) and to Optuna;
  2. re-queues work an evaluator lost (a dead actor or node blames nobody);
  3. turns finished LLM calls into children (or rejected edits, with the reason;
     search/engine/llm_calls.py);
  4. fills every free evaluator: a new champion's duel first (search/engine/duels.py), then
     the pending queue (candidates with their sources),
     topping it up with the immediate operators' children (Optuna step, parameter
     crossover; see search/mutation/operators) so that no GPU waits on an LLM call;
  5. keeps the LLM operators' calls in flight (up to the configured concurrency) for later.
Steps 1 to 5 change the store in one commit (search/engine/step_commit.py).

It talks to evaluators, the LLM and Optuna through small interfaces, so tests
drive it with fakes and no Ray, GPU or network.
"""

from __future__ import annotations

import collections
import random
import time
from dataclasses import dataclass, field
from typing import Callable, Mapping

from population.errors import InvalidTransition
from population.models import Candidate, EvalResult, Origin, State
from population.rng import rng_state_to_json
from population.run import Run
from search.config import RunConfig
from search.engine.empty_families import EmptyFamilies
from search.engine.evaluator_watch import EvaluatorWatch
from search.engine.focus import Focus
from search.engine.duels import Duels
from search.engine.human import HumanChannel
from search.engine.llm import LLMPool
from search.engine.llm_calls import LLMCalls
from search.engine.pool import Completed, EvaluatorPool, Lost
from search.engine.requests import RequestFactory
from search.engine.step_commit import StepLog
from population.records import (C, DRIVER_RNG, NOTE_KEY, OPERATOR_KEY, STATUS_KEY, TRIAL_KEY, DriverStatus, state_counter)
from search.engine.proposer import Child, KernelFamily, Proposer
from search.numbers import ms as fmt_ms, speedup as fmt_speedup
from population.records import BASELINE_FAMILY
from population.speedup import with_speedups
from search.mutation.tuning import Tuner
from search.engine.withdrawal import withdraw_overtaken
from search.engine.work_queue import Queued, WorkQueue
from search.engine.messages import EvalOutcome

__all__ = ["SearchLoop"]

MAX_LOSSES = 3


@dataclass
class LoopStats:
    started: float = field(default_factory=time.monotonic)
    evaluations: int = 0  # finished GPU/CPU evaluations in this session
    by_state: collections.Counter = field(default_factory=collections.Counter)
    lost: int = 0
    # Queued children taken back, their parent overtaken (evaluation.withdraw_overtaken), per family.
    withdrawn: collections.Counter = field(default_factory=collections.Counter)
    llm_calls: int = 0
    llm_errors: int = 0
    driver_s: float = 0.0  # time spent in the loop itself, not waiting on evaluators
    champions: list[str] = field(default_factory=list)

    def evals_per_minute(self) -> float:
        minutes = (time.monotonic() - self.started) / 60
        return self.evaluations / minutes if minutes > 0 else 0.0


class SearchLoop:
    def __init__(self, config: RunConfig, run: Run, pool: EvaluatorPool, tuner: Tuner,
                 families: Mapping[str, KernelFamily], llm: LLMPool | None = None,
                 log: Callable[[str], None] = print, max_evals: int | None = None,
                 max_minutes: float | None = None) -> None:
        self.config = config
        self.run = run
        self.pool = pool
        self.tuner = tuner
        self.families = families
        self.log = StepLog(log)  # a step's lines wait for its commit (search/engine/step_commit.py)
        self.rng = self._restore_rng()
        self.proposer = Proposer(config, run, tuner, families, self.rng, llm=llm)
        self.llm_calls = LLMCalls(llm, run, self.proposer, self.rng, self.log)  # the LLM operators' calls in flight
        self.queue = WorkQueue()  # candidates with their sources: pending, and sent to evaluators
        self.proposer.busy_parents = self.queue.by_parent()  # selection.inflight_penalty's counts
        self.losses: collections.Counter = collections.Counter()
        self.stats = LoopStats()
        self.stop_requested: str | None = None
        # What the run is when the loop ends: "finished" (a budget, exhaustion) or "stopped" (resumable,
        # because the evaluators are gone: the driver's exit code says so).
        self.end_state = "finished"
        self.evaluator_watch = EvaluatorWatch(config.ray.no_evaluator_minutes, self.log)
        self.max_evals = max_evals
        self.deadline = time.monotonic() + max_minutes * 60 if max_minutes else None
        self.requests = RequestFactory(config, run, families, profiles=llm is not None)
        self.bench_cases, self.verify_cases = self.requests.bench_cases, self.requests.verify_cases
        self._last_status = 0.0
        self.focus = Focus(config.focus, run, self.log)  # the objective of a focused run (search/engine/focus.py)
        # the engineer's events (search/engine/human.py)
        self.human = HumanChannel(run, pool, self.requests, self.proposer, families, self.enqueue, self.log)
        # new champions timed against the ones they replaced (search/engine/duels.py)
        self.duels = Duels(config, run, pool, self.requests, self.log)
        # Seconds each family's candidates took to compile ahead (a moving average of what the
        # evaluators reported): while an evaluator holds for a compiled request, cheap ones go first.
        self.compile_seconds: dict[str, float] = {}
        # Families passed over while nothing of theirs changed since they had nothing to offer
        # (search/engine/empty_families.py, evaluation.skip_empty_families).
        self.empty = EmptyFamilies(self._family_stamp, config.evaluation.skip_empty_families)

    # --- state across resumes ------------------------------------------------------------

    def _restore_rng(self) -> random.Random:
        from population.rng import derived_rng, rng_from_json

        saved = self.run.store.rng_state(DRIVER_RNG)
        return rng_from_json(saved) if saved else derived_rng(self.config.seed, DRIVER_RNG)

    def _save_rng(self) -> None:
        self.run.store.set_rng_state(DRIVER_RNG, rng_state_to_json(self.rng))

    def start(self) -> None:
        """Queue what a previous session left pending or running, oldest first; the baseline first, then
        the engineer's candidates (injected while the run was stopped: a live run takes them next too)."""
        pending = self.run.requeue_inflight()
        pending.sort(key=lambda c: (c.family != BASELINE_FAMILY, c.origin is not Origin.HUMAN, c.created_at, c.id))
        for c in pending:
            self.queue.push(c, self.run.source(c))  # the only read of their sources
        if pending:
            self.log(f"queued {len(pending)} pending candidates")
        self.focus.start()

    # --- the step ------------------------------------------------------------------------

    def step(self, timeout: float = 0.2) -> None:
        events = self.duels.intercept(self.human.intercept(self.pool.poll(timeout)))
        began = time.monotonic()
        self.human.poll()
        with self.log.one_commit(self.run):
            for event in events:
                if isinstance(event, Completed):
                    self._told(event.outcome)
                elif isinstance(event, Lost):
                    self._lost(event)
            collected = self.llm_calls.collect(self._store_child)
            self.stats.llm_calls += collected.answered
            self.stats.llm_errors += collected.failed
            if not self.stop_requested:
                self._check_budget()
            if not self.stop_requested:
                self.human.dispatch()  # rechecks first, also while paused
            if not self.stop_requested and not self.human.paused:
                self._dispatch()
                self.llm_calls.start(self.pool.size, self._evals_room, self._families_in_order)
        self.tuner.flush()  # the step's tells and asks, in one write
        self.stats.driver_s += time.monotonic() - began

    @property
    def finished(self) -> bool:
        return bool(self.stop_requested) and not self.pool.inflight_count()

    def run_until_done(self, on_tick: Callable[[], None] | None = None) -> None:
        self.start()
        while not self.finished:
            self.step()
            if on_tick:
                on_tick()
            if self.stop_requested is None and not self.queue and not self.pool.inflight_count() and not self.human.paused \
                    and not self.human.busy() and not self.duels.busy() and not self.llm_calls.jobs \
                    and self._nothing_to_propose():
                if not any(self.run.champion(f) for f in self.proposer.searchable_families()):
                    self.request_stop("no verified candidate to build on (every seed failed; see `qrsearch status`)")
                else:
                    self.request_stop("nothing left to propose (every structure used its tuning budget)")
        self.write_status(self.end_state)

    def request_stop(self, reason: str) -> None:
        if self.stop_requested is None:
            self.stop_requested = reason
            self.log(f"stopping: {reason}")
            self.llm_calls.cancel()
            # Requests queued behind a running one (compile-ahead lookahead) have not started: pending again.
            for cid in self.pool.withdraw_queued():
                if self.duels.withdrawn(cid) or self.human.withdrawn(cid):
                    continue  # kept in the store as waiting: a resumed run starts it
                self.run.requeue(cid)
                self.queue.done(cid)

    # --- evaluations ---------------------------------------------------------------------

    def _told(self, outcome: EvalOutcome) -> None:
        result = outcome.result  # times only: speedups are computed where results are read
        sent = self.queue.done(outcome.candidate_id)
        family = sent.candidate.family if sent else self.run.store.get_candidate(outcome.candidate_id).family
        state, reason, result = self.focus.judge(family, outcome.state, outcome.reason, result)
        with self.run.transaction():  # the outcome and the counters that count it commit together
            report = self.run.tell(outcome.candidate_id, state, reason=reason, result=result)
            if report.already_recorded:
                return
            self.run.add_counters({C.GPU_EVALUATIONS: 1, state_counter(state.value): 1,
                                   C.BUSY_SECONDS: outcome.busy_s})
            self.llm_calls.evaluated(outcome.candidate_id)
        self._learn_compile_cost(family, result)
        told = result.fitness_ms if state is State.VERIFIED else None
        if state is State.SCREENED:
            told = result.screen.get("estimate_ms")  # the screened value, on the fitness scale
        self._tell_tuner(outcome.candidate_id, told)
        self.focus.after_tell(family)
        self.proposer.told(report.candidate)
        if self.config.evaluation.withdraw_overtaken and state is State.VERIFIED:
            self.stats.withdrawn[family] += len(withdraw_overtaken(self.run, self.pool, self.queue, self.tuner,
                                                                   report.candidate))
        self.stats.evaluations += 1
        self.stats.by_state[state.value] += 1
        cand = report.candidate
        speedup = with_speedups(result, self.proposer.baseline_result()).speedup if report.champion_changes else None
        for change in report.champion_changes:
            speed = f", {fmt_speedup(speedup)} torch.geqrf" if speedup else ""
            line = f"champion of {change.family}: {change.candidate_id} ({fmt_ms(cand.fitness_ms, unit=True)}{speed})"
            self.stats.champions.append(line)
            self.log(line)
            self.duels.consider(change)

    def _lost(self, event: Lost) -> None:
        self.stats.lost += 1
        self.losses[event.candidate_id] += 1
        self.log(f"evaluation of {event.candidate_id} lost: {event.reason}")
        if self.losses[event.candidate_id] >= MAX_LOSSES:
            # Lost too often to be bad luck: a failure like any other (counters, Optuna, stats).
            reason = f"evaluation lost {MAX_LOSSES} times (last: {event.reason})"
            self._told(EvalOutcome(candidate_id=event.candidate_id, state=State.CRASHED, reason=reason,
                                   result=EvalResult(candidate_id=event.candidate_id, error=reason)))
            return
        cand = self.run.requeue(event.candidate_id)
        sent = self.queue.done(event.candidate_id)
        self.enqueue(cand, sent.source if sent else self.run.source(cand), front=True)

    def _tell_tuner(self, cid: str, value: float | None) -> None:
        trial = self.run.store.get_json(TRIAL_KEY.format(cid=cid))
        if trial:
            self.tuner.tell(trial["study"], trial["number"], value)

    def _dispatch(self) -> None:
        free = self.pool.free_slots()
        while free > 0:
            # A title in doubt steers every later child: its duel goes first, after what was pushed
            # to the front (an engineer's candidate, a lost evaluation).
            if not self.queue.urgent and self.duels.dispatch_one():
                free -= 1
                continue
            if self._budget_in_flight():
                break  # the rest stay pending (a resume runs them)
            if self.queue:
                item = self.queue.pop()
                try:
                    cand = self.run.mark_running(item.candidate.id)  # the store checks it is still pending
                except InvalidTransition:
                    continue  # no longer pending (queued twice, or finished meanwhile): nothing to run
            else:
                # Stored already running: one commit per child, not two (resume re-queues running ones).
                started = self._propose_now(start=True)
                if started is None:
                    break
                item, cand = started, started.candidate
            self.queue.submitted(cand, item.source)
            self.pool.submit(self.requests(cand, item.source))
            free -= 1

    def _budget_in_flight(self) -> bool:
        """The candidates evaluated and in flight fill ``max_evals``: sending another would overrun it
        (a resumed run's re-queued work, several lanes per evaluator; an in-flight one that is lost
        makes room again)."""
        return self.max_evals is not None and self._evals_committed() + len(self.queue.sent) >= self.max_evals

    def enqueue(self, cand: Candidate, source: str, front: bool = False) -> None:
        """Queue a pending candidate; ``front``: the next free evaluator takes it."""
        self.queue.push(cand, source, front)

    # --- proposals -----------------------------------------------------------------------

    def _inflight_by_structure(self) -> Mapping[str, int]:
        """Queued and running children per structure, from memory (no store read per proposal)."""
        return self.queue.by_structure()

    def _learn_compile_cost(self, family: str, result: EvalResult) -> None:
        seconds = result.stage_seconds.get("compile_ahead")
        if seconds is not None:
            old = self.compile_seconds.get(family)
            self.compile_seconds[family] = seconds if old is None else 0.7 * old + 0.3 * seconds

    def _families_in_order(self) -> list[str]:
        """Families to propose from, in random order; while an evaluator holds a lane for a
        compiled request, those whose candidates compiled fastest first (a family not seen yet
        counts as free: one child teaches its cost), after those that have had more than their
        share of the proposals with ``evaluation.hold_fair_share``."""
        names = self.proposer.searchable_families()
        self.rng.shuffle(names)
        if self.pool.holding():
            cost = self.compile_seconds
            if self.config.evaluation.hold_fair_share and names:
                # Cheapest first alone gave the families that compile fast most of the evaluations
                # once many evaluators held (80% to two of five at 16), long after they had converged.
                inflight = self.queue.by_family()
                # A withdrawn child is told (rejected) but never ran: it is no share of the evaluations.
                had = {name: self.run.population.family(name).evals - self.stats.withdrawn[name] + inflight.get(name, 0)
                       for name in names}
                share = sum(had.values()) / len(names)
                names.sort(key=lambda name: (had[name] > share, cost.get(name, 0.0)))
            else:
                names.sort(key=lambda name: cost.get(name, 0.0))
        return names

    def _propose_now(self, start: bool = False) -> Queued | None:
        """An immediate operator's child for an idle evaluator: queued, or (``start``) running, to submit."""
        # LLM calls in flight hold their place: their answers must still find room in the budget.
        room = self._evals_room()
        if room is not None and room - len(self.llm_calls.jobs) <= 0:
            return None
        inflight = self._inflight_by_structure()
        for family in self._families_in_order():
            if self.empty.skip(family):
                continue
            island = self.rng.randrange(len(self.run.population.family(family).islands))
            child = self.proposer.synchronous(family, island, inflight)
            if child is not None:
                return self._stored(child, start)
            self.empty.came_back_empty(family)
        return None

    def _family_stamp(self, family: str) -> tuple[int, int, frozenset[str]]:
        """What a family's offer of children depends on: its evaluations told, its children queued
        or in flight, the retired structures (search/engine/empty_families.py)."""
        return (self.run.population.family(family).evals, self.queue.by_family().get(family, 0),
                self.proposer.retired)

    def _nothing_to_propose(self) -> bool:
        self.empty.forget()  # a family only passed over must not end the run
        return self._propose_now() is None and self.llm_calls.off_or_paused()

    def _store_child(self, child: Child) -> str:
        return self._stored(child).candidate.id

    def _stored(self, child: Child, start: bool = False) -> Queued:
        """The child in the store, queued; with ``start``, marked running in the same commit instead."""
        with self.run.transaction():
            cand = self.run.add_candidate(child.new)
            if child.proposal is not None:
                self.tuner.bind(child.proposal, cand.id)
                self.run.store.set_json(TRIAL_KEY.format(cid=cand.id),
                                        {"study": child.proposal.study, "number": child.proposal.trial_number})
            if child.note:
                self.run.store.set_json(NOTE_KEY.format(cid=cand.id), child.note)
            self.run.store.set_json(OPERATOR_KEY.format(cid=cand.id), child.operator)
            self._save_rng()
            if start:
                return Queued(self.run.mark_running(cand.id), child.new.source)
        self.enqueue(cand, child.new.source)
        return Queued(cand, child.new.source)

    # --- budget and status ---------------------------------------------------------------

    def _evals_committed(self) -> int:
        return int(self.run.store.counter(C.GPU_EVALUATIONS))

    def _evals_room(self) -> int | None:
        """What ``max_evals`` leaves after the evaluations committed, running and pending (None: no
        evaluation budget); proposals and LLM calls are bounded by it."""
        if self.max_evals is None:
            return None
        return self.max_evals - self._evals_committed() - self.pool.inflight_count() - len(self.queue)

    def _check_evaluators(self) -> None:
        """Stop, resumable, once every evaluator has been gone too long (search/engine/evaluator_watch.py)."""
        if self.evaluator_watch.gone(self.pool.stats()):
            limit = self.config.ray.no_evaluator_minutes
            self.end_state = "stopped"
            self.request_stop(f"no evaluator up for {limit:g} min (restarting, or lost with their node); "
                              f"resume with `qrsearch resume {self.run.store.run_dir}` once the cluster has them again")

    def _check_budget(self) -> None:
        self._check_evaluators()
        if (reached := self.focus.reached()) is not None:
            self.request_stop(reached)
        if self.max_evals is not None and self._evals_committed() >= self.max_evals:
            self.request_stop(f"evaluation budget reached ({self.max_evals})")
        elif self.deadline is not None and time.monotonic() >= self.deadline:
            self.request_stop("time budget reached")
        self.llm_calls.check_spend(self.config.budget)

    def status(self, state: str = "running") -> DriverStatus:
        stats = self.pool.stats()
        return DriverStatus(
            state=state, updated=time.time(), session_evaluations=self.stats.evaluations,
            evals_per_minute=round(self.stats.evals_per_minute(), 3), lost=self.stats.lost,
            by_state=dict(self.stats.by_state), queue=len(self.queue), inflight=self.pool.inflight_count(),
            llm_inflight=len(self.llm_calls.jobs), llm=self.llm_calls.off_reason or "on",
            evaluators=stats.evaluators, evaluators_ready=stats.ready,
            busy_fraction={k: round(v, 4) for k, v in stats.busy_fraction.items()},
            driver_seconds=round(self.stats.driver_s, 3), stop_reason=self.stop_requested,
            human=self.human.status(), focus=self.focus.status())

    def write_status(self, state: str = "running", every_s: float = 2.0) -> None:
        now = time.monotonic()
        if state == "running" and now - self._last_status < every_s:
            return
        self._last_status = now
        self.run.set_json(STATUS_KEY, self.status(state).model_dump(mode="json"))

