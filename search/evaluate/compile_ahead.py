"""Compiling the next candidates' Triton kernels while the current one is evaluated.

An evaluator learns of its next candidates early (the pool hands it a short lookahead queue:
:meth:`search.evaluate.worker.Worker.prefetch`).  For each one, :class:`CompileAhead` starts an
ahead-of-time compile (``kernels.harness.precompile.start_precompile``) into the run's
Triton cache: a process that hides CUDA and launches nothing on the GPU, pinned to CPUs the
timing child does not use, so it may overlap timing.  When the candidate's turn comes the
worker waits for its compile (usually long finished) and the evaluation children's JIT then
hits the cache.  A candidate's shapes are compiled in one group (two with a screen: the
screen's sizes first, then the rest), each split over several processes that share its
kernels out between them (``kernels.harness.compile_shards``): every process runs every
shape of its group and compiles only the kernels it owns, so a kernel several sizes use is
compiled once (lookahead_split's n is a runtime argument: n = 352 and 512 share kernels), and
the group's latency does not grow with its kernel count (lookahead_split compiles about 30).
A group takes as many processes as it has sizes n the first time its family is seen, then
about one per ``KERNELS_PER_SHARD`` kernels that its family's last compile of it had to
compile (kernels found in the cache cost nothing); at most ``max_shards``
(:mod:`search.evaluate.compile_costs` learns both; :mod:`search.evaluate.compile_jobs` holds a
candidate's units and the result its evaluation reads).

Up to ``parallel`` processes run at once.  Which starts next: a candidate whose turn came
before its compile finished goes first (it is waited for); then the groups an evaluation
needs first, cheapest first (the CPU seconds its family's last compile of that group took:
a householder child's one kernel does not wait behind a lookahead_split child's thirty, so
the evaluator finds something compiled sooner), in announcement order among equals; the
rest of a screened child's sizes (needed only if it passes its screen) when nothing else
waits.  :meth:`CompileAhead.room` says how many more processes could start at once, so the
pool hands an evaluator more candidates while its compile CPUs would otherwise idle.

The evaluator asks :meth:`CompileAhead.is_ready` so that it evaluates first a queued
candidate whose compile is done, rather than wait for the head of its queue (a
lookahead_split candidate compiles for about 50 s in 5 processes, a householder one in 3 s).

The compiler is injected (``start``/``read``), so the scheduling is tested with a fake one.
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Callable, Collection, Mapping, Sequence

from search.evaluate.compile_costs import CompileCosts
from search.evaluate.compile_jobs import AheadResult, CompileJob, CompileUnit, builds_cuda_file, compile_groups

StartFn = Callable[..., subprocess.Popen]
ReadFn = Callable[[Path], Any]


class CompileAhead:
    def __init__(self, cache_dir: Path, workdir: Path, cpus: Sequence[int] | None = None, *,
                 start: StartFn | None = None, read: ReadFn | None = None, target: Any = None,
                 parallel: int | None = None, env_extra: Mapping[str, str] | None = None,
                 poll_s: float = 0.05, max_shards: int | None = None) -> None:
        self._server: Any = None
        if start is None or read is None:
            from kernels.harness import precompile  # the real compiler; tests inject a fake
            from kernels.harness.compile_server import CompileForkServer

            if start is None:
                # One process imports torch and Triton once and forks a child per compile.
                self._server = CompileForkServer(Path(cache_dir), env_extra, cpus)
                start = self._server.start
            read = read or precompile.read_report
            target = target if target is not None else precompile.CompileTarget()
        self._start, self._read, self._target = start, read, target
        self.cache_dir = Path(cache_dir)
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.cpus = list(cpus) if cpus else None
        # One process per CPU given (each compiles serially), unless told otherwise.
        self.parallel = max(1, parallel if parallel is not None else len(self.cpus or [0]))
        # Processes one group may be split over: a third of them, so one candidate cannot take all.
        self.costs = CompileCosts(max_shards if max_shards is not None else self.parallel // 3)
        self._seq = 0
        self.env_extra = dict(env_extra or {})
        self._jobs: dict[str, CompileJob] = {}
        self._order: list[str] = []  # candidates in announcement order
        self._lock = threading.Lock()
        self._poll_s = poll_s
        self._closed = threading.Event()
        self._paused = False
        self._pump_thread = threading.Thread(target=self._pump_forever, daemon=True, name="compile-ahead")
        self._pump_thread.start()

    # --- scheduling ---------------------------------------------------------------------

    def announce(self, candidate_id: str, path: Path, shapes: Sequence[tuple[int, int]],
                 first: Collection[int] = (), kind: str = "") -> bool:
        """Queue a compile for a candidate coming up (the sizes n in ``first`` first); False if
        it is already known.  ``kind`` (its family) tells how many kernels each n took before."""
        with self._lock:
            if candidate_id in self._jobs or self._closed.is_set():
                return False
            units = []
            for g, group in enumerate(compile_groups(shapes, first)):
                count = self.costs.shards_for(kind, group)
                for index in range(count):
                    name = f"{candidate_id}.g{g}.s{index}of{count}"
                    units.append(CompileUnit(group, self.workdir / f"{name}.precompile.json", shard=(index, count),
                                             group=min(g, 1)))
            self._seq += 1
            self._jobs[candidate_id] = CompileJob(candidate_id, Path(path), units, kind=kind, seq=self._seq,
                                                  pausable=not builds_cuda_file(Path(path)))
            self._order.append(candidate_id)
            self._pump_locked()
        return True

    def is_ready(self, candidate_id: str, sizes: Collection[int] | None = None) -> bool:
        """True if an evaluation of the candidate on ``sizes`` (all if None) would not wait for
        a compile: its units for them are finished, or it was never announced."""
        with self._lock:
            job = self._jobs.get(candidate_id)
            if job is None:
                return True
            return all(u.finished is not None for u in job.units if u.needed_for(sizes))

    def room(self) -> int:
        """Compile processes that could start now with nothing to do: ``parallel`` less those
        running and the first-stage units still waiting (a screened child's rest only fills
        CPUs nothing else wants).  The pool hands this evaluator more candidates while > 0."""
        with self._lock:
            if self._closed.is_set():
                return 0
            busy = sum(1 for job in self._jobs.values() for u in job.units
                       if u.finished is None and (u.proc is not None or (u.started is None and u.group == 0)))
            return max(0, self.parallel - busy)

    def running(self) -> list[str]:
        with self._lock:
            return [cid for cid, job in self._jobs.items()
                    if any(u.proc is not None and u.finished is None for u in job.units)]

    def queued(self) -> list[str]:
        """Candidates with a compile process still to start."""
        with self._lock:
            return [cid for cid in self._order if any(u.started is None and u.finished is None
                                                      for u in self._jobs[cid].units)]

    def _pump_forever(self) -> None:
        while not self._closed.wait(self._poll_s):
            with self._lock:
                self._pump_locked()

    def _pump_locked(self) -> None:
        active = 0
        for job in self._jobs.values():
            for unit in job.units:
                if unit.proc is not None and unit.finished is None:
                    if unit.proc.poll() is not None:
                        self._finish_locked(unit)
                        self.costs.learn(job, unit)
                    else:
                        active += 1
        if self._closed.is_set() or self._paused or active >= self.parallel:
            return
        waiting = [(self._priority(job, unit), job, unit) for job in self._jobs.values() for unit in job.units
                   if unit.started is None and unit.finished is None]
        waiting.sort(key=lambda item: item[0])
        for _, job, unit in waiting:
            if active >= self.parallel:
                return
            self._start_locked(job, unit)
            active += unit.finished is None

    def _priority(self, job: CompileJob, unit: CompileUnit) -> tuple[int, int, float, int, int]:
        """Waited-for first; then first-stage groups, cheapest first; then the rest, in order."""
        cost = self.costs.expected_cost(job.kind, unit.sizes) if unit.group == 0 else 0.0
        return (0 if job.urgent else 1, unit.group, cost, job.seq, unit.shard[0])

    def _start_locked(self, job: CompileJob, unit: CompileUnit) -> None:
        unit.started = time.monotonic()
        try:
            unit.proc = self._start(job.path, unit.shapes, cache_dir=self.cache_dir, target=self._target,
                                    report_path=unit.report_path, cpus=self.cpus, env_extra=self.env_extra,
                                    shard=unit.shard)
        except Exception as exc:  # a compiler that cannot start: the JIT compiles as before
            unit.finished = time.monotonic()
            unit.error = f"could not start the compile: {type(exc).__name__}: {exc}"[:500]

    def _finish_locked(self, unit: CompileUnit) -> None:
        unit.finished = time.monotonic()
        try:
            unit.report = self._read(unit.report_path)
        except Exception as exc:
            unit.error = f"unreadable compile report: {type(exc).__name__}: {exc}"[:500]
        if unit.report is None and unit.error is None:
            code = unit.proc.returncode if unit.proc else "?"
            unit.error = f"the compile wrote no report (exit code {code})"

    # --- the evaluation's side ----------------------------------------------------------

    def wait(self, candidate_id: str, timeout: float, sizes: Collection[int] | None = None) -> AheadResult:
        """Block until the candidate's compile is done (at most ``timeout`` s); a compile not
        finished yet moves to the front of the line.

        With ``sizes``, wait only for the units of those n and keep the candidate (its other
        units go on compiling; wait again, or :meth:`cancel`); otherwise forget it."""
        began = time.monotonic()
        with self._lock:
            job = self._jobs.get(candidate_id)
            if job is None:
                return AheadResult(state="unknown")
            units = [u for u in job.units if u.needed_for(sizes)]
            late = not any(u.started is not None or u.finished is not None for u in units)
            job.urgent = True  # its units start before anyone else's
            self._pump_locked()
        deadline = began + timeout
        while True:
            with self._lock:
                self._pump_locked()
                if all(u.finished is not None for u in units):
                    break
            if time.monotonic() >= deadline:
                for unit in job.units:
                    unit.kill()
                with self._lock:
                    self._forget_locked(candidate_id)
                return AheadResult(state="timeout", waited_s=time.monotonic() - began, started_late=late,
                                   error=f"compile not done after {timeout:g} s; killed")
            time.sleep(self._poll_s)
        with self._lock:
            if sizes is None:
                self._forget_locked(candidate_id)
        return AheadResult.of(units, time.monotonic() - began, late)

    def pause(self) -> None:
        """Stop every compile process (SIGSTOP) but CUDA C++ builds (see ``CompileJob.pausable``),
        and start no new one until :meth:`resume`.

        For the timing child's sake: an H200 search that compiled on the other 14 cores while
        timing measured launch-bound cases (0.1-1.5 ms) 7-22% off a standalone bench, while
        every longer case agreed within 1.4% (a busy host slows the launch path)."""
        with self._lock:
            self._paused = True
            self._signal_locked(signal.SIGSTOP)

    def resume(self) -> None:
        with self._lock:
            self._paused = False
            self._signal_locked(signal.SIGCONT)
            self._pump_locked()

    def _signal_locked(self, signum: int) -> None:
        for job in self._jobs.values():
            if job.pausable:
                for unit in job.units:
                    unit.signal(signum)

    def cancel(self, candidate_id: str) -> None:
        """Stop and forget whatever the candidate still compiles (a screened child's rest)."""
        with self._lock:
            job = self._jobs.get(candidate_id)
        if job is None:
            return
        for unit in job.units:
            unit.kill()
        with self._lock:
            self._forget_locked(candidate_id)

    def _forget_locked(self, candidate_id: str) -> None:
        self._jobs.pop(candidate_id, None)
        if candidate_id in self._order:
            self._order.remove(candidate_id)
        self._pump_locked()

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            jobs = list(self._jobs.values())
            self._jobs.clear()
            self._order.clear()
        for job in jobs:
            for unit in job.units:
                unit.kill()
        if self._server is not None:
            self._server.close()
