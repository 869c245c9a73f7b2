"""Simulated GPUs in virtual time, in this process: an EvaluatorPool for studies of search quality.

A dry run of a cluster (``qrsearch launch --simulate``) drives real Ray actors in real time, so
what it shows includes the driver's speed on the machine it runs on.  How well the search learns
with N evaluators is another question: what each proposal could know when it was made.  This
pool answers it with the driver taken as infinitely fast: :meth:`VirtualPool.poll` moves a
virtual clock to the next event (an evaluation's end, a compile's end while an evaluator holds
for one, a hold's re-check), so thousands of evaluations on hundreds of simulated GPUs take
seconds, and the loop proposes, tells and dispatches between events as it does between polls.

What an evaluation answers and how long it takes is :class:`~.gpu.GpuModel`'s, as in the Ray
actors.  The admission is RayPool's: each evaluator runs ``lanes`` requests and queues up to
``lookahead`` more, up to ``room_lookahead`` while its compile slots have room (the room as of
the last event, as RayPool's last answer); with ``hold_for_ready`` a free lane starts only a
compiled request (the first queued one that is, :func:`~search.engine.pool.next_in_queue`)
and asks for one more request every ``ready_wait_s`` while none is, up to ``max_lookahead``, and
with ``anticipate`` so does an evaluator whose lanes all run while nothing it queues is compiled
(RayPool on its compile reports); a request started on an
idle evaluator with nothing queued is compiled in its evaluation (one lane) or announced then
(several, as the worker does).  One evaluation holds the device at a time, in start order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Collection

from search.config import RunConfig, SimulationConfig
from search.engine.messages import EvalRequest
from search.engine.pool import Completed, PoolEvent, PoolStats, next_in_queue, queue_depths
from search.evaluate.simulated.compiles import CompileSlots
from search.evaluate.simulated.gpu import GpuModel


@dataclass
class _Running:
    request: EvalRequest
    finish: float
    event: PoolEvent


@dataclass
class _Evaluator:
    name: str
    compiles: CompileSlots
    queue: list[tuple[float, EvalRequest]] = field(default_factory=list)  # (queued at, request)
    running: list[_Running] = field(default_factory=list)
    device_free: float = 0.0
    busy_s: float = 0.0
    busy_since: float | None = None
    room: int = 0
    room_load: int = 0
    starved_load: int | None = None
    recheck_at: float | None = None  # a holding lane asks again then
    reported_at: float | None = None  # its last compile report that anticipated (see VirtualPool._anticipated)
    quiet: tuple[int, int, float] | None = None  # (queued, running, until): a hold that needs no new answer
    evaluations: int = 0


class VirtualPool:
    def __init__(self, evaluators: int, settings: SimulationConfig, seed: int, lanes: int = 1, lookahead: int = 0,
                 max_lookahead: int = 0, hold_for_ready: bool = False, ready_wait_s: float = 0.5,
                 room_lookahead: int | None = None, anticipate: bool = False) -> None:
        self.now = 0.0
        self.gpu = GpuModel(settings, seed)
        self.lanes = max(1, lanes)
        self.lookahead, self.max_lookahead = lookahead, max_lookahead
        self.room_lookahead = max_lookahead if room_lookahead is None else room_lookahead
        self.hold_for_ready = hold_for_ready and lookahead > 0
        self.anticipate = anticipate and self.hold_for_ready
        self.ready_wait_s = ready_wait_s
        self.evaluators = [_Evaluator(name=f"gpu{i}", compiles=CompileSlots(settings.compile_slots, self.clock))
                           for i in range(evaluators)]
        self.compile_ahead = lookahead > 0
        self._inflight: list[str] | None = None  # inflight()'s answer until the next change

    @classmethod
    def for_run(cls, evaluators: int, config: RunConfig) -> VirtualPool:
        """The pool a run of ``config`` would drive on ``evaluators`` simulated GPUs: its queue
        depths, lanes and holds as the driver gives them to RayPool."""
        ev = config.evaluation
        lookahead, room = queue_depths(evaluators, ev.compile_ahead, ev.compile_ahead_max, ev.compile_ahead_total)
        return cls(evaluators, config.simulation, config.seed, lanes=ev.lanes, lookahead=lookahead,
                   max_lookahead=ev.compile_ahead_max, room_lookahead=room, hold_for_ready=ev.hold_for_ready,
                   anticipate=ev.compile_before_need)

    def clock(self) -> float:
        return self.now

    # --- admission (RayPool's) -------------------------------------------------------------

    @property
    def size(self) -> int:
        return len(self.evaluators)

    def _load(self, ev: _Evaluator) -> int:
        return len(ev.running) + len(ev.queue)

    def _capacity(self, ev: _Evaluator) -> int:
        held = ev.starved_load + 1 if ev.starved_load is not None else 0
        return max(self.lanes + self.lookahead, min(self.lanes + self.room_lookahead, ev.room_load + ev.room),
                   min(self.lanes + self.max_lookahead, held))

    def free_slots(self) -> int:
        return sum(max(0, self._capacity(ev) - self._load(ev)) for ev in self.evaluators)

    def submit(self, request: EvalRequest) -> None:
        open_ = [ev for ev in self.evaluators if self._load(ev) < self._capacity(ev)]
        if not open_:
            raise RuntimeError("submit() without a free slot")
        ev = min(open_, key=self._load)
        self._inflight = None
        if len(ev.running) >= self.lanes or ev.queue:
            ev.queue.append((self.now, request))
            if self.compile_ahead:
                self._announce(ev, request)
        else:
            self._start(ev, request, queued_at=self.now)

    def inflight(self) -> list[str]:
        # Worked out again only after a change: the loop asks once or more per proposal.
        if self._inflight is None:
            self._inflight = [r.request.candidate_id for ev in self.evaluators for r in ev.running] + \
                [req.candidate_id for ev in self.evaluators for _, req in ev.queue]
        return list(self._inflight)

    def inflight_count(self) -> int:
        return sum(self._load(ev) for ev in self.evaluators)  # 64 lengths, not a list of a thousand ids

    def holding(self) -> bool:
        return any(ev.starved_load is not None for ev in self.evaluators)

    def withdraw_queued(self) -> list[str]:
        out = [req.candidate_id for ev in self.evaluators for _, req in ev.queue]
        self._inflight = None
        for ev in self.evaluators:
            ev.queue.clear()
        return out

    def withdraw(self, candidate_ids: Collection[str]) -> list[str]:
        wanted, out = set(candidate_ids), []
        for ev in self.evaluators:
            kept = [(at, req) for at, req in ev.queue if req.candidate_id not in wanted]
            if len(kept) == len(ev.queue):
                continue
            for _, req in ev.queue:
                if req.candidate_id in wanted:
                    out.append(req.candidate_id)
                    ev.compiles.forget(req.candidate_id)  # a compile still waiting for a slot gives it up
            ev.queue, ev.quiet = kept, None  # what it holds for changed: asked again at the next event
        if out:
            self._inflight = None
        return out

    def _announce(self, ev: _Evaluator, request: EvalRequest) -> None:
        ev.compiles.announce(request.candidate_id, self.gpu.compile_seconds(request),
                             self.gpu.expected_compile_seconds(request))

    # --- time -------------------------------------------------------------------------------

    def _start(self, ev: _Evaluator, request: EvalRequest, queued_at: float) -> None:
        cid = request.candidate_id
        compile_s = self.gpu.compile_seconds(request)
        if self.compile_ahead and self.lanes > 1:
            self._announce(ev, request)  # the worker announces what a free lane starts
        finish_compile = ev.compiles.claim(cid) if self.compile_ahead else None
        if finish_compile is None:
            finish_compile = self.now + compile_s  # compiled inside the evaluation
        finish_compile = max(finish_compile, self.now)  # compiled ahead, perhaps long ago
        verdict = self.gpu.verdict(request)
        on_device = max(finish_compile, ev.device_free)
        finish = on_device + verdict.device_s
        ev.device_free = finish
        stages = {"queued": self.now - queued_at, "compile_wait": finish_compile - self.now,
                  "compile_ahead": compile_s, "settle": on_device - finish_compile}
        outcome = self.gpu.outcome(request, verdict, stages, self.now, finish, ev.name, finish - self.now)
        if ev.busy_since is None:
            ev.busy_since = self.now
        ev.running.append(_Running(request=request, finish=finish, event=Completed(outcome)))

    def _fill(self, ev: _Evaluator) -> None:
        """Start queued requests on free lanes (the compiled ones first), or hold."""
        if not ev.queue or len(ev.running) >= self.lanes:
            ev.recheck_at = None  # nothing to hold for (as RayPool's answer says)
            ev.starved_load = self._anticipated(ev)
        while ev.queue and len(ev.running) < self.lanes:
            if ev.quiet is not None and ev.quiet[:2] == (len(ev.queue), len(ev.running)) and self.now < ev.quiet[2]:
                return  # holding, and nothing it holds for can have changed since it was last asked
            ev.quiet = None
            ids = [req.candidate_id for _, req in ev.queue]
            waited = self.now - ev.queue[0][0]
            limit = ev.queue[0][1].limits.case_timeout_s
            needs_answer = len(ids) >= 2 or self.hold_for_ready
            index: int | None = 0
            if needs_answer and waited <= limit:
                # Only the first compiled request matters to next_in_queue: asking about every
                # queued one on every event was most of this pool's time at 64 evaluators.
                ready = next(({cid} for cid in ids if ev.compiles.is_ready(cid)), set())
                index = next_in_queue(ids, ready, waited, limit, hold=self.hold_for_ready)
            if index is None:
                if ev.starved_load is None or ev.recheck_at is None or self.now >= ev.recheck_at:
                    ev.starved_load = self._load(ev)  # one more request, as each unanswered hold asks
                    ev.recheck_at = self.now + self.ready_wait_s
                # Until a compile ends, the hold's re-check is due or the head's wait runs out, the
                # answer stays the same for the same queue: worked out again on every event, it was
                # most of this pool's time at 64 evaluators.
                ends = ev.compiles.next_finish()
                until = min(ev.recheck_at, ev.queue[0][0] + limit, ends if ends is not None else float("inf"))
                ev.quiet = (len(ev.queue), len(ev.running), until)
                return
            ev.starved_load, ev.recheck_at = None, None
            queued_at, request = ev.queue.pop(index)
            self._inflight = None  # the order changes: running first
            self._start(ev, request, queued_at)

    def _anticipated(self, ev: _Evaluator) -> int | None:
        """RayPool's rule after each compile report (every ``ready_wait_s`` here, the pool's
        ``room_every_s``): while every lane runs and nothing queued is compiled, the load it holds
        one more than; None once one is (or without ``anticipate``)."""
        if not self.anticipate or not ev.queue or len(ev.running) < self.lanes:
            ev.reported_at = None
            return None
        if any(ev.compiles.is_ready(req.candidate_id) for _, req in ev.queue):
            ev.reported_at = None
            return None
        if ev.starved_load is not None and ev.reported_at is not None and self.now < ev.reported_at + self.ready_wait_s:
            return ev.starved_load
        ev.reported_at = self.now
        return self._load(ev)

    def _next_event(self) -> float | None:
        times = [r.finish for ev in self.evaluators for r in ev.running]
        for ev in self.evaluators:
            if ev.reported_at is not None and len(ev.running) >= self.lanes:
                times.append(ev.reported_at + self.ready_wait_s)  # its next report may take one more
            if ev.starved_load is not None and ev.recheck_at is not None:
                times.append(ev.recheck_at)
                end = ev.compiles.next_finish()
                if end is not None:
                    times.append(end)
        return min(times) if times else None

    def poll(self, timeout: float) -> list[PoolEvent]:
        """Move the clock to the next event and report what finished by then (``timeout`` is real
        time and means nothing here: the next event is always at hand)."""
        for ev in self.evaluators:
            self._fill(ev)
        when = self._next_event()
        if when is None:
            return []
        self.now = max(self.now, when)
        events: list[PoolEvent] = []
        for ev in self.evaluators:
            done = [r for r in ev.running if r.finish <= self.now]
            if not done:
                continue
            ev.running = [r for r in ev.running if r.finish > self.now]
            self._inflight = None
            for r in sorted(done, key=lambda r: r.finish):
                events.append(r.event)
                ev.compiles.forget(r.request.candidate_id)
                ev.evaluations += 1
            if not ev.running and ev.busy_since is not None:
                ev.busy_s += max(r.finish for r in done) - ev.busy_since
                ev.busy_since = None
        for ev in self.evaluators:
            ev.room, ev.room_load = ev.compiles.room(), self._load(ev)  # what RayPool's room question learns
            self._fill(ev)
        return events

    def stats(self) -> PoolStats:
        busy = {}
        for ev in self.evaluators:
            spell = self.now - ev.busy_since if ev.busy_since is not None else 0.0
            busy[ev.name] = min(1.0, (ev.busy_s + spell) / self.now) if self.now > 0 else 0.0
        return PoolStats(evaluators=len(self.evaluators), ready=len(self.evaluators), busy_fraction=busy)

    def shutdown(self) -> None:
        pass
