"""Evaluating candidates on one device: the cascade, and its outcome as data.

This is what an evaluator actor runs; it needs neither Ray nor the run store,
so it is tested directly.  The candidate travels as source text and is written
to ``cand_<sha>.py`` (Triton kernels cannot be pickled).  A candidate runs in warm
spare children that have already imported torch, or, with ``reuse_processes``, in
the children that ran the last candidate of its structure (children that differ
only in PARAMS): their start-up is then paid once, and no process starts between
two evaluations to be waited for before timing.  A reused child that fails a case
has its job re-run whole in a fresh one (:func:`kernels.harness.runner.run_candidate`),
so only the candidate that causes a crash, a hang or a wrong answer is blamed.

A worker runs up to ``lanes`` evaluations at once (``evaluate`` is thread-safe), so that
one lane's compile wait, process starts and gate calls overlap another lane's GPU work;
timed calls still own the device (:mod:`search.evaluate.device_gate`), and the processes
are managed in :mod:`search.evaluate.children`.
"""

from __future__ import annotations

import os
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from kernels.candidate import materialize
from kernels.harness.hooks import RunHooks
from kernels.harness.job import CandidateJob
from kernels.harness.process import ChildProcess, child_env
from kernels.harness.results import SuiteReport
from kernels.harness.runner import run_candidate, run_candidate_parallel, shape_groups
from kernels.params import structure_fingerprint
from kernels.suites import Case
from search.engine.cascade import is_screened_out
from search.evaluate.children import ChildPool
from search.evaluate.compile_ahead import CompileAhead
from search.evaluate.compile_jobs import AheadResult
from search.evaluate.device_gate import DeviceGate, Hold, RegionTurns
from search.engine.messages import EvalOutcome, EvalRequest
from search.evaluate.outcome import merge_reports, outcome_from_reports

__all__ = ["EvalOutcome", "EvalRequest", "Worker", "merge_reports", "outcome_from_reports"]

class Worker:
    """Runs the cascade for one device, up to ``lanes`` evaluations at once, keeping warm spare
    child processes (:class:`search.evaluate.children.ChildPool`).

    The verify stage runs the verify suite and each bench case's first call in up to
    ``verify_processes`` children at once, grouped by n, so a Triton candidate's kernels
    compile in parallel (when they were not compiled ahead); the bench stage then times the
    bench cases without repeating those calls.  Timed calls own the device
    (:mod:`search.evaluate.device_gate`): a bench-mode job holds the worker's gate exclusively
    for each timed region (``timing_hold: region``) or from its timing child's start to its last
    timed call (``job``), and shared otherwise; the verify stage, and every child's context
    creation, hold it shared (a spare imports torch with no hold, on CPUs other than
    ``timing_cpus``).  So nothing else runs on the device or creates a context there
    while a candidate is timed (an H200 run that started a child during timing measured
    launch-bound cases 20-75% slower), whichever lane does it, and the timing child is pinned to
    ``timing_cpus``, away from the compile-ahead processes and the spares' imports.

    ``prefetch`` announces a candidate that will come next: its kernels compile ahead
    (:mod:`search.evaluate.compile_ahead`) while this one is evaluated.

    Stage times each evaluation reports beside the harness's (``stage_seconds``): ``settle``,
    waiting for the gate in its bench jobs (spares still starting, another lane's gate calls,
    re-checks or timed regions); ``device_wait``, its verify stage waiting for a shared
    hold (another lane's bench job); ``queued``, from the pool's hand-over to its start
    (behind this worker's busy lanes); ``idle``, how long the whole worker had nothing to do
    before it began (0 while another lane was busy).  ``evaluations`` and ``busy_s`` count
    every lane (``busy_s`` sums evaluation seconds, so with lanes it may exceed wall time).
    """

    def __init__(self, workdir: Path, env_extra: dict[str, str] | None = None, name: str = "worker",
                 ahead: CompileAhead | None = None, timing_cpus: frozenset[int] | None = None,
                 lanes: int = 1) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.env = child_env(env_extra)
        self.name = name
        self.ahead = ahead
        self.timing_cpus = timing_cpus
        self.lanes = max(1, lanes)
        self.gate = DeviceGate()
        self.children = ChildPool(self.env, self.gate, lanes=self.lanes, timing_cpus=timing_cpus)
        self.evaluations = 0
        self.busy_s = 0.0
        self._lock = threading.Lock()
        self._active = 0  # evaluations running now, over all lanes
        self._idle_since: float | None = None  # when the last running evaluation ended
        self._first_sizes: dict[str, set[int] | None] = {}  # announced: the sizes n its first stage needs
        # Candidates being evaluated: a prefetch that arrives after its evaluation began (the
        # actor's "ahead" group runs beside its lanes) must not start a compile nobody waits for.
        self._running: set[str] = set()
        self._announcing = threading.Lock()  # a prefetch's check and announce, against evaluate's
        self.children.top_up()

    @property
    def reused(self) -> int:
        """Children handed a second or later job."""
        return self.children.reused

    @staticmethod
    def shapes(request: EvalRequest) -> list[tuple[int, int]]:
        """The (batch, n) shapes the evaluation calls the candidate with: what to compile ahead."""
        return sorted({(c.batch, c.n) for c in [*request.verify_cases, *request.bench_cases]})

    def prefetch(self, request: EvalRequest) -> bool:
        """Announce a candidate this worker evaluates soon; True if its compile was queued."""
        if self.ahead is None:
            return False
        with self._announcing:
            if request.candidate_id in self._running:
                return False
            return self._announce(request)

    def withdraw(self, candidate_id: str) -> None:
        """A prefetched candidate the pool took back before it started: stop compiling it."""
        if self.ahead is None:
            return
        with self._announcing:
            if candidate_id in self._running:
                return  # started after all (it was not queued by the time this came): it needs its kernels
            self.ahead.cancel(candidate_id)
        with self._lock:
            self._first_sizes.pop(candidate_id, None)

    def _announce(self, request: EvalRequest) -> bool:
        assert self.ahead is not None
        path = materialize(request.source, self.workdir / "candidates")
        first = {c.n for c in request.bench_cases if request.screen is not None and c.name in request.screen.cases}
        with self._lock:
            self._first_sizes[request.candidate_id] = first or None
        return self.ahead.announce(request.candidate_id, path, self.shapes(request), first=first,
                                   kind=request.family)

    def _begin(self, request: EvalRequest) -> None:
        """Mark the evaluation begun.  With more than one lane, a request the pool started at
        once (a free lane, nothing queued) is announced here: compiled by the JIT instead, its
        kernels would compile inside the verify stage, holding the device gate against the
        other lane's bench job for seconds."""
        with self._announcing:
            self._running.add(request.candidate_id)
            if self.lanes > 1 and self.ahead is not None:
                self._announce(request)  # no-op when it was prefetched
        with self._lock:
            self._first_sizes.pop(request.candidate_id, None)

    def compiled(self, candidate_ids: list[str]) -> list[str]:
        """Those of the announced ``candidate_ids`` whose first stage would not wait for a compile,
        so that the pool starts one of them rather than wait behind a long compile."""
        if self.ahead is None:
            return list(candidate_ids)
        with self._lock:
            sizes = {cid: self._first_sizes.get(cid) for cid in candidate_ids}
        return [cid for cid in candidate_ids if self.ahead.is_ready(cid, sizes[cid])]

    def ready_within(self, candidate_ids: list[str], timeout_s: float, poll_s: float = 0.02) -> list[str]:
        """Those of ``candidate_ids`` that :meth:`compiled` lists, as soon as there is one, or
        after ``timeout_s`` (then maybe none): the pool's question while it holds a lane free."""
        deadline = time.monotonic() + timeout_s
        while True:
            ready = self.compiled(candidate_ids)
            if ready or time.monotonic() >= deadline:
                return ready
            time.sleep(poll_s)

    def compile_room(self) -> int:
        """How many more candidates this worker could start compiling now (0 without compile-ahead)."""
        return self.ahead.room() if self.ahead is not None else 0

    def _wait_compile(self, request: EvalRequest, sizes: set[int] | None, extra: dict[str, float],
                      ahead: dict[str, float]) -> None:
        if self.ahead is None:
            return
        done: AheadResult = self.ahead.wait(request.candidate_id, timeout=request.limits.case_timeout_s,
                                              sizes=sizes)
        extra["compile_wait"] = extra.get("compile_wait", 0.0) + done.waited_s
        extra["compile_ahead"] = extra.get("compile_ahead", 0.0) + done.compile_s
        if done.state != "unknown":
            ahead["ahead_done"] = float(done.state == "done" and ahead.get("ahead_done", 1.0) == 1.0)
            ahead["ahead_kernels_compiled"] = ahead.get("ahead_kernels_compiled", 0.0) + done.kernels_compiled
            ahead["ahead_kernels_cached"] = ahead.get("ahead_kernels_cached", 0.0) + done.kernels_cached
            ahead["ahead_started_late"] = max(ahead.get("ahead_started_late", 0.0), float(done.started_late))
        else:
            ahead.setdefault("ahead_done", 0.0)

    def _stage(self, request: EvalRequest, path: Path, verify_cases: list[Case], bench_cases: list[Case],
               extra: dict[str, float]) -> tuple[SuiteReport, SuiteReport | None]:
        """Gate ``verify_cases`` and ``bench_cases`` in parallel children (a shared hold), then
        time ``bench_cases`` (an exclusive hold per timed job)."""
        limits = request.limits
        processes = max(1, min(request.verify_processes, os.cpu_count() or 1))
        self.children.startup_timeout_s = limits.startup_timeout_s
        self.children.set_per_lane(processes + 1)  # its verify children and the bench child
        gates = list(verify_cases) + list(bench_cases)
        fast = frozenset(c.name for c in bench_cases) if request.fast_gates else frozenset()
        structure = structure_fingerprint(request.source) if request.reuse_processes else None
        keep = self.children.keeper(structure, timing=False) if structure else None
        reference = (materialize(request.reference_source, self.workdir / "candidates")
                     if request.reference_source is not None else None)
        taken: list[ChildProcess] = []
        try:
            with self.gate.shared() as hold:
                extra["device_wait"] = extra.get("device_wait", 0.0) + hold.waited_s
                taken += [self.children.take(hold, structure) for _ in range(len(shape_groups(gates, processes)))]
                self.children.top_up()  # replacements of spares taken start while the gates run
                spare_lock = threading.Lock()

                def spawn() -> ChildProcess:
                    with spare_lock:
                        if taken:
                            return taken.pop(0)
                    return self.children.take(hold)

                verify = run_candidate_parallel(
                    CandidateJob(path, tuple(gates), suite=request.verify_suite, mode="verify", device=request.device,
                                 limits=limits, fail_fast=True, fast_gate_cases=fast),
                    processes, RunHooks(spawn=spawn, release=keep, fresh=lambda: self.children.new_child(hold)))
            bench = None
            if verify.ok:
                parts: list[SuiteReport] = []
                for cases, paused in self._timing_plan(request, bench_cases, reference is not None):
                    if parts and not parts[-1].ok:
                        break  # fail fast, as one call would
                    parts.append(self._timed(request, path, cases, paused, structure, reference, extra))
                bench = parts[0] if len(parts) == 1 else merge_reports(parts[0], parts[1], list(bench_cases))
        finally:
            for child in taken:  # not needed after all: kept ones stay kept
                if keep is not None and child.jobs > 0 and child.proc.poll() is None:
                    keep(child)
                else:
                    self.children.discard(child)
            self.children.top_up()  # the bench child's replacement (if a spare was used) starts after timing
        return verify, bench

    def _timed(self, request: EvalRequest, path: Path, cases: list[Case], paused: bool, structure: str | None,
               reference: Path | None, extra: dict[str, float]) -> SuiteReport:
        """One bench-mode job: under a shared hold, exclusive for each timed region
        (``timing_hold: region``), or the whole of it (its timing child's start, a fresh
        re-run, the reference timed in the same child) under the exclusive hold (``job``)."""
        keep_timing = self.children.keeper(structure, timing=True) if structure else None
        if request.timing_hold == "region":
            return self._timed_per_region(request, path, cases, paused, structure, reference, extra, keep_timing)
        with self.gate.exclusive() as hold:
            extra["settle"] = extra.get("settle", 0.0) + hold.waited_s
            with self._compiles_stopped(hold, paused):
                return run_candidate(
                    self._bench_job(request, path, cases, reference),
                    RunHooks(spawn=lambda: self.children.timing_child(hold, structure), release=keep_timing,
                             fresh=lambda: self.children.new_child(hold, pinned=True)))

    @staticmethod
    def _bench_job(request: EvalRequest, path: Path, cases: list[Case], reference: Path | None) -> CandidateJob:
        return CandidateJob(path, tuple(cases), suite=request.bench_suite, mode="bench", device=request.device,
                            limits=request.limits, policy=request.timing, fail_fast=True, profile=request.profile,
                            gate=False, reference=reference)

    def _timed_per_region(self, request: EvalRequest, path: Path, cases: list[Case], paused: bool,
                          structure: str | None, reference: Path | None, extra: dict[str, float],
                          keep_timing: Callable[[ChildProcess], None] | None) -> SuiteReport:
        """The bench job under a shared hold, its child's timed regions each in a turn of the
        exclusive one; compiles stop (``paused``) only inside those turns."""
        ahead = self.ahead if paused else None
        turns = RegionTurns(self.gate, self.gate.shared(), on_acquire=ahead.pause if ahead else None,
                            on_release=ahead.resume if ahead else None)
        extra["settle"] = extra.get("settle", 0.0) + turns.hold.waited_s
        try:
            return run_candidate(
                self._bench_job(request, path, cases, reference),
                RunHooks(spawn=lambda: self.children.timing_child(turns.hold, structure), release=keep_timing,
                         fresh=lambda: self.children.new_child(turns.hold, pinned=True), turns=turns))
        finally:
            turns.close()
            extra["settle"] += turns.waited_s

    @contextmanager
    def _compiles_stopped(self, hold: Hold, paused: bool) -> Iterator[None]:
        """The compile-ahead processes stopped (SIGSTOP) for one timed job, if ``paused``.

        CompileAhead's pause is a flag, not a count: with two lanes, one lane's resume would
        restart the compiles under the other lane's paused timing.  So only the exclusive holder
        pauses and resumes, and one holds it at a time: the pairs cannot interleave."""
        if not paused or self.ahead is None:
            yield
            return
        if hold.kind != "exclusive" or not hold.held:
            raise RuntimeError("compiles are paused only by the holder of the exclusive device gate")
        self.ahead.pause()
        try:
            yield
        finally:
            self.ahead.resume()

    def _timing_plan(self, request: EvalRequest, cases: list[Case], recheck: bool) -> list[tuple[list[Case], bool]]:
        """(cases, compiles paused?) in the order they are timed: the cases the request expects
        to be long first, compiles going on, then the rest with compiles stopped.  One part when
        there is nothing to stop, nothing to tell apart, or a re-check (torch.geqrf in the same child)."""
        if self.ahead is None or not request.pause_compiles:
            return [(list(cases), False)]
        if request.pause_cases is None or recheck:
            return [(list(cases), True)]
        quiet = set(request.pause_cases)
        long = [c for c in cases if c.name not in quiet]
        short = [c for c in cases if c.name in quiet]
        return [(part, paused) for part, paused in ((long, False), (short, True)) if part] or [(list(cases), True)]

    def evaluate(self, request: EvalRequest) -> EvalOutcome:
        """Evaluate one request (thread-safe: each of up to ``lanes`` callers is one lane)."""
        started = time.time()
        extra: dict[str, float] = {}
        if request.dispatched_at is not None:
            extra["queued"] = max(0.0, started - request.dispatched_at)  # behind this worker's busy lanes
        with self._lock:
            if self._idle_since is not None:
                # The whole evaluator had nothing to do; no time is idle while another lane works.
                extra["idle"] = max(0.0, started - self._idle_since) if self._active == 0 else 0.0
            self._active += 1
        try:
            outcome = self._evaluate(request, started, extra)
        finally:
            with self._announcing:
                self._running.discard(request.candidate_id)  # evaluated again (after a loss): announced again
            with self._lock:
                self._active -= 1
                if self._active == 0:
                    self._idle_since = time.time()
        with self._lock:
            self.evaluations += 1
            self.busy_s += outcome.busy_s
        return outcome

    def _evaluate(self, request: EvalRequest, started: float, extra: dict[str, float]) -> EvalOutcome:
        path = materialize(request.source, self.workdir / "candidates")
        self._begin(request)
        ahead: dict[str, float] = {}
        plan = request.screen
        screen = [c for c in request.bench_cases if plan is not None and c.name in plan.cases]
        if not screen:
            self._wait_compile(request, None, extra, ahead)
            verify, bench = self._stage(request, path, list(request.verify_cases), list(request.bench_cases), extra)
            return outcome_from_reports(request, verify, bench, started, worker=self.name, extra_stages=extra,
                                        ahead=ahead)
        assert plan is not None
        sizes = {c.n for c in screen}
        self._wait_compile(request, sizes, extra, ahead)
        verify, bench = self._stage(request, path, [c for c in request.verify_cases if c.n in sizes], screen, extra)
        extra["screen"] = verify.wall_s + (bench.wall_s if bench is not None else 0.0)
        passed = verify.ok and bench is not None and bench.ok and bench.geomean_ms is not None
        if passed and is_screened_out(bench.geomean_ms, plan):  # type: ignore[union-attr, arg-type]
            if self.ahead is not None:
                self.ahead.cancel(request.candidate_id)  # its other sizes are never needed
            return outcome_from_reports(request, verify, bench, started, worker=self.name, extra_stages=extra,
                                        ahead=ahead, screened=plan)
        if passed:
            self._wait_compile(request, None, extra, ahead)
            rest = [c for c in request.bench_cases if c.name not in plan.cases]
            verify2, bench2 = self._stage(request, path, [c for c in request.verify_cases if c.n not in sizes],
                                          rest, extra)
            verify = merge_reports(verify, verify2, None)
            bench = merge_reports(bench, bench2, request.bench_cases) if bench2 is not None else None  # type: ignore[arg-type]
        elif self.ahead is not None:
            self.ahead.cancel(request.candidate_id)
        return outcome_from_reports(request, verify, bench, started, worker=self.name, extra_stages=extra,
                                    ahead=ahead)

    def close(self) -> None:
        if self.ahead is not None:
            self.ahead.close()
        self.children.close()
