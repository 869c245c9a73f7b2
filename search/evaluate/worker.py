"""Evaluating one candidate on one device: the cascade, and its outcome as data.

This is what an evaluator actor runs; it needs neither Ray nor the run store,
so it is tested directly.  The candidate travels as source text and is written
to ``cand_<sha>.py`` (Triton kernels cannot be pickled).  A candidate runs in warm
spare children that have already imported torch, or, with ``reuse_processes``, in
the children that ran the last candidate of its structure (children that differ
only in PARAMS): their start-up is then paid once, and no process starts between
two evaluations to be waited for before timing.  A reused child that fails a case
has its job re-run whole in a fresh one (:func:`kernels.harness.runner.run_candidate`),
so only the candidate that causes a crash, a hang or a wrong answer is blamed.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Callable

from kernels.candidate import materialize
from kernels.harness.results import SuiteReport
from kernels.harness.runner import ChildProcess, child_env, run_candidate, run_candidate_parallel, shape_groups
from kernels.params import structure_fingerprint
from kernels.suites import Case
from search.engine.cascade import is_screened_out
from search.evaluate.compile_ahead import AheadResult, CompileAhead
from search.evaluate.messages import EvalOutcome, EvalRequest
from search.evaluate.outcome import merge_reports, outcome_from_reports

__all__ = ["EvalOutcome", "EvalRequest", "Worker", "merge_reports", "outcome_from_reports"]

class Worker:
    """Runs the cascade for one device, keeping warm spare child processes.

    The verify stage runs the verify suite and each bench case's first call in up to
    ``verify_processes`` children at once, grouped by n, so a Triton candidate's kernels
    compile in parallel (when they were not compiled ahead); the bench stage then times the
    bench cases without repeating those calls.  While a candidate is timed nothing else
    starts for this worker: the spares that replace the verify children start as the verify
    stage begins (they import torch while the gates run; starting a child creates a CUDA
    context, and an H200 run that did so during timing measured launch-bound cases 20-75%
    slower), the bench stage waits until every spare still starting has finished, and the
    timing child is pinned to ``timing_cpus``, away from the compile-ahead processes.

    ``prefetch`` announces a candidate that will come next: its kernels compile ahead
    (:mod:`search.evaluate.compile_ahead`) while this one is evaluated.
    """

    def __init__(self, workdir: Path, env_extra: dict[str, str] | None = None, name: str = "worker",
                 ahead: CompileAhead | None = None, timing_cpus: frozenset[int] | None = None) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.env = child_env(env_extra)
        self.name = name
        self.ahead = ahead
        self.timing_cpus = timing_cpus
        self.evaluations = 0
        self.busy_s = 0.0
        self._last_finished: float | None = None
        self._lock = threading.Lock()
        self._spares: list[ChildProcess] = []
        self._first_sizes: dict[str, set[int] | None] = {}  # announced: the sizes n its first stage needs
        self._target_spares = 2  # one verify child and the bench child
        # Children kept for the next candidate of a structure (most recent last): gate
        # children, and one pinned timing child each.  A few structures at most, since each
        # child holds a device context.
        self._kept: OrderedDict[str, list[ChildProcess]] = OrderedDict()
        self._kept_timing: OrderedDict[str, ChildProcess] = OrderedDict()
        self.max_kept_structures = 3
        self.reused = 0  # children handed a second or later job
        self._top_up()

    def _top_up(self) -> None:
        """Start children until ``_target_spares`` live ones wait (extra ones are closed)."""
        with self._lock:
            alive: list[ChildProcess] = []
            for child in self._spares:
                if child.proc.poll() is None and len(alive) < self._target_spares:
                    alive.append(child)
                else:
                    child.close()
            self._spares = alive
            while len(self._spares) < self._target_spares:
                self._spares.append(ChildProcess(env=self.env))

    def _take(self, structure: str | None = None) -> ChildProcess:
        """A child kept for ``structure``, else the oldest live spare, else a new child
        (thread-safe: the verify stage takes several)."""
        with self._lock:
            kept = self._kept.get(structure or "", [])
            while kept:
                child = kept.pop()
                if child.proc.poll() is None:
                    self.reused += 1
                    return child
                child.close()
            while self._spares:
                child = self._spares.pop(0)
                if child.proc.poll() is None:
                    return child
                child.close()
        return ChildProcess(env=self.env)

    def _keeper(self, structure: str, timing: bool) -> Callable[[ChildProcess], None]:
        """Where a child that ended a job of ``structure`` cleanly goes: kept for the next one."""

        def keep(child: ChildProcess) -> None:
            with self._lock:
                if timing:
                    old = self._kept_timing.pop(structure, None)
                    if old is not None and old is not child:
                        old.close()
                    self._kept_timing[structure] = child
                else:
                    self._kept.setdefault(structure, []).append(child)
                    self._kept.move_to_end(structure)
                    while len(self._kept[structure]) > self._target_spares:
                        self._kept[structure].pop(0).close()
                self._evict_locked()

        return keep

    def _evict_locked(self) -> None:
        """Close the children of the least recently used structures beyond ``max_kept_structures``."""
        for pool in (self._kept, self._kept_timing):
            while len(pool) > self.max_kept_structures:
                _, old = pool.popitem(last=False)
                for child in old if isinstance(old, list) else [old]:
                    child.close()

    def _settle(self, timeout: float) -> None:
        """Wait until no spare is still starting (dropping any that died or stalled)."""
        with self._lock:
            spares, self._spares = self._spares, []
        alive = []
        for child in spares:
            if child.wait_warm(timeout):
                alive.append(child)
            else:
                child.close()
        with self._lock:
            self._spares = alive + self._spares

    @staticmethod
    def shapes(request: EvalRequest) -> list[tuple[int, int]]:
        """The (batch, n) shapes the evaluation calls the candidate with: what to compile ahead."""
        return sorted({(c.batch, c.n) for c in [*request.verify_cases, *request.bench_cases]})

    def prefetch(self, request: EvalRequest) -> bool:
        """Announce a candidate this worker evaluates soon; True if its compile was queued."""
        if self.ahead is None:
            return False
        path = materialize(request.source, self.workdir / "candidates")
        first = {c.n for c in request.bench_cases if request.screen is not None and c.name in request.screen.cases}
        with self._lock:
            self._first_sizes[request.candidate_id] = first or None
        return self.ahead.announce(request.candidate_id, path, self.shapes(request), first=first,
                                   kind=request.family)

    def compiled(self, candidate_ids: list[str]) -> list[str]:
        """Those of the announced ``candidate_ids`` whose first stage would not wait for a compile,
        so that the pool starts one of them rather than wait behind a long compile."""
        if self.ahead is None:
            return list(candidate_ids)
        with self._lock:
            sizes = {cid: self._first_sizes.get(cid) for cid in candidate_ids}
        return [cid for cid in candidate_ids if self.ahead.is_ready(cid, sizes[cid])]

    def compile_room(self) -> int:
        """How many more candidates this worker could start compiling now (0 without compile-ahead)."""
        return self.ahead.room() if self.ahead is not None else 0

    def _timing_child(self, structure: str | None = None) -> ChildProcess:
        with self._lock:
            kept = self._kept_timing.pop(structure, None) if structure else None
        if kept is not None and kept.proc.poll() is None:
            self.reused += 1
            return kept  # pinned already
        if kept is not None:
            kept.close()
        child = self._take()
        if self.timing_cpus:
            child.pin(self.timing_cpus)
        return child

    def _fresh_timing_child(self) -> ChildProcess:
        """A new pinned child for a case re-run after it failed in a reused one."""
        return ChildProcess.pinned(self.timing_cpus, env=self.env)

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
        """Gate ``verify_cases`` and ``bench_cases`` in parallel children, then time ``bench_cases``."""
        limits, policy = request.limits, request.timing
        processes = max(1, min(request.verify_processes, os.cpu_count() or 1))
        if processes + 1 != self._target_spares:
            self._target_spares = processes + 1
            self._top_up()
        gates = list(verify_cases) + list(bench_cases)
        fast = frozenset(c.name for c in bench_cases) if request.fast_gates else frozenset()
        structure = structure_fingerprint(request.source) if request.reuse_processes else None
        taken = [self._take(structure) for _ in range(len(shape_groups(gates, processes)))]
        self._top_up()  # replacements of spares taken import torch while the gates run, never while timing
        keep = self._keeper(structure, timing=False) if structure else None
        keep_timing = self._keeper(structure, timing=True) if structure else None
        spare_lock = threading.Lock()

        def spawn() -> ChildProcess:
            with spare_lock:
                if taken:
                    return taken.pop(0)
            return self._take()

        reference = (materialize(request.reference_source, self.workdir / "candidates")
                     if request.reference_source is not None else None)
        try:
            verify = run_candidate_parallel(path, gates, processes=processes, suite=request.verify_suite,
                                            mode="verify", device=request.device, limits=limits, fail_fast=True,
                                            fast_gate_cases=fast, spawn=spawn, release=keep,
                                            fresh=lambda: ChildProcess(env=self.env))
            bench = None
            if verify.ok:
                settling = time.monotonic()
                self._settle(request.limits.startup_timeout_s)
                extra["settle"] = extra.get("settle", 0.0) + time.monotonic() - settling
                parts: list[SuiteReport] = []
                for cases, paused in self._timing_plan(request, bench_cases, reference is not None):
                    if parts and not parts[-1].ok:
                        break  # fail fast, as one call would
                    if paused:
                        self.ahead.pause()  # type: ignore[union-attr]
                    try:
                        parts.append(run_candidate(
                            path, cases, suite=request.bench_suite, mode="bench", device=request.device,
                            limits=limits, policy=policy, fail_fast=True, profile=request.profile, gate=False,
                            spawn=lambda: self._timing_child(structure), reference=reference,
                            release=keep_timing, fresh=self._fresh_timing_child))
                    finally:
                        if paused:
                            self.ahead.resume()  # type: ignore[union-attr]
                bench = parts[0] if len(parts) == 1 else merge_reports(parts[0], parts[1], list(bench_cases))
        finally:
            for child in taken:  # not needed after all: kept ones stay kept
                if keep is not None and child.jobs > 0 and child.proc.poll() is None:
                    keep(child)
                else:
                    child.close()
            self._top_up()  # the bench child's replacement (if a spare was used) starts now, after timing
        return verify, bench

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
        started = time.time()
        extra: dict[str, float] = {}
        if request.dispatched_at is not None:
            extra["queued"] = max(0.0, started - request.dispatched_at)  # behind this worker's current one
        if self._last_finished is not None:
            extra["idle"] = max(0.0, started - self._last_finished)  # this evaluator had nothing to do
        path = materialize(request.source, self.workdir / "candidates")
        with self._lock:
            self._first_sizes.pop(request.candidate_id, None)
        ahead: dict[str, float] = {}
        plan = request.screen
        screen = [c for c in request.bench_cases if plan is not None and c.name in plan.cases]
        if not screen:
            self._wait_compile(request, None, extra, ahead)
            verify, bench = self._stage(request, path, list(request.verify_cases), list(request.bench_cases), extra)
            outcome = outcome_from_reports(request, verify, bench, started, worker=self.name, extra_stages=extra,
                                           ahead=ahead)
            return self._count(outcome)
        assert plan is not None
        sizes = {c.n for c in screen}
        self._wait_compile(request, sizes, extra, ahead)
        verify, bench = self._stage(request, path, [c for c in request.verify_cases if c.n in sizes], screen, extra)
        extra["screen"] = verify.wall_s + (bench.wall_s if bench is not None else 0.0)
        passed = verify.ok and bench is not None and bench.ok and bench.geomean_ms is not None
        if passed and is_screened_out(bench.geomean_ms, plan):  # type: ignore[union-attr, arg-type]
            if self.ahead is not None:
                self.ahead.cancel(request.candidate_id)  # its other sizes are never needed
            outcome = outcome_from_reports(request, verify, bench, started, worker=self.name, extra_stages=extra,
                                           ahead=ahead, screened=plan)
            return self._count(outcome)
        if passed:
            self._wait_compile(request, None, extra, ahead)
            rest = [c for c in request.bench_cases if c.name not in plan.cases]
            verify2, bench2 = self._stage(request, path, [c for c in request.verify_cases if c.n not in sizes],
                                          rest, extra)
            verify = merge_reports(verify, verify2, None)
            bench = merge_reports(bench, bench2, request.bench_cases) if bench2 is not None else None  # type: ignore[arg-type]
        elif self.ahead is not None:
            self.ahead.cancel(request.candidate_id)
        outcome = outcome_from_reports(request, verify, bench, started, worker=self.name, extra_stages=extra,
                                       ahead=ahead)
        return self._count(outcome)

    def _count(self, outcome: EvalOutcome) -> EvalOutcome:
        self.evaluations += 1
        self.busy_s += outcome.busy_s
        self._last_finished = time.time()
        return outcome

    def close(self) -> None:
        if self.ahead is not None:
            self.ahead.close()
        with self._lock:
            kept = [c for pool in self._kept.values() for c in pool] + list(self._kept_timing.values())
            for child in self._spares + kept:
                child.close()
            self._spares = []
            self._kept.clear()
            self._kept_timing.clear()
