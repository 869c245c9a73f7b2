"""A candidate's compile ahead, as :class:`search.evaluate.compile_ahead.CompileAhead` schedules it.

A :class:`CompileJob` is one candidate's compile: its shapes in groups (the screen's sizes first,
then the rest), each group split over one or more :class:`CompileUnit` processes that share its
kernels out between them.  :class:`AheadResult` is what the evaluation learns of its units."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Collection, Sequence

from kernels.harness.compile_stats import builds_cuda


@dataclass
class CompileUnit:
    """One compile process: some of a candidate's shapes (all of one n)."""

    shapes: list[tuple[int, int]]
    report_path: Path
    shard: tuple[int, int] = (0, 1)  # (index, count) of the processes that share this group's kernels
    group: int = 0  # 0: what the evaluation needs first; 1: the rest of a screened child's sizes
    proc: subprocess.Popen | None = None
    started: float | None = None
    finished: float | None = None
    report: Any = None
    error: str | None = None

    @property
    def sizes(self) -> frozenset[int]:
        return frozenset(n for _, n in self.shapes)

    def needed_for(self, sizes: Collection[int] | None) -> bool:
        return sizes is None or not self.sizes.isdisjoint(sizes)

    def signal(self, signum: int) -> None:
        """Send ``signum`` to the running process and whatever it started."""
        if self.proc is not None and self.finished is None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signum)  # its own session: the whole group
            except (ProcessLookupError, PermissionError, OSError):
                try:
                    self.proc.send_signal(signum)
                except OSError:
                    pass

    def kill(self) -> None:
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # it runs in its own session, with anything it started
        except (ProcessLookupError, PermissionError, OSError):
            proc.kill()
        proc.wait()


@dataclass
class CompileJob:
    candidate_id: str
    path: Path
    units: list[CompileUnit]
    kind: str = ""  # the candidate's family: how many kernels a group takes is learned per family
    seq: int = 0  # announcement order
    urgent: bool = False  # its evaluation waits for it
    announced: float = field(default_factory=time.monotonic)
    # Never stopped by pause(): a CUDA C++ build holds torch's build lock (a file) while it runs,
    # and every process that loads that extension, a timing child included, waits for the lock:
    # stopped while holding it, it deadlocked an H200 search (the timed job, its retry and
    # the rest of the run waited 6 minutes on a SIGSTOPped ``ninja``).
    pausable: bool = True

    @property
    def finished(self) -> bool:
        return all(u.finished is not None for u in self.units)

    @property
    def started(self) -> bool:
        return any(u.started is not None or u.finished is not None for u in self.units)


@dataclass(frozen=True)
class AheadResult:
    """What the evaluation learns about its own compile-ahead."""

    state: str  # "done", "failed" (some shape), "unknown" (never announced), "timeout"
    waited_s: float = 0.0  # on the evaluation's path
    compile_s: float = 0.0  # first start to last finish of its compile processes
    kernels_compiled: int = 0
    kernels_cached: int = 0
    error: str | None = None
    started_late: bool = False  # its compile had not started when its turn came

    @classmethod
    def of(cls, units: list[CompileUnit], waited: float, late: bool) -> AheadResult:
        """The result of finished ``units``, waited for ``waited`` s (``late``: none had started)."""
        starts = [u.started for u in units if u.started is not None]
        ends = [u.finished for u in units if u.finished is not None]
        compile_s = max(ends) - min(starts) if starts and ends else 0.0
        errors = [u.error or getattr(u.report, "error", None) or "compile failed" for u in units
                  if u.report is None or not getattr(u.report, "ok", False)]
        reports = [u.report for u in units if u.report is not None]
        return cls(state="failed" if errors else "done", waited_s=waited, compile_s=compile_s,
                   kernels_compiled=sum(int(getattr(r, "kernels_compiled", 0) or 0) for r in reports),
                   kernels_cached=sum(int(getattr(r, "kernels_cached", 0) or 0) for r in reports),
                   error="; ".join(errors)[:500] if errors else None, started_late=late)


def compile_groups(shapes: Sequence[tuple[int, int]], first: Collection[int] = ()
                   ) -> list[list[tuple[int, int]]]:
    """The shapes of the sizes n in ``first`` (the cascade's screen), then the others; each
    group deduplicated, largest n first (the longest compiles start first)."""
    ordered = sorted(set(shapes), key=lambda s: (-s[1], s[0]))
    groups = [[s for s in ordered if s[1] in first], [s for s in ordered if s[1] not in first]]
    return [g for g in groups if g]


def builds_cuda_file(path: Path) -> bool:
    """Whether the candidate file builds a CUDA C++ extension (False if it cannot be read)."""
    try:
        return builds_cuda(path.read_text())
    except OSError:
        return False
