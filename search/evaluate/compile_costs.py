"""What a family's compiles cost, learned as they finish, and what that decides for the next one.

Per family and group of sizes n: how many kernels its last compile found (each kernel a process
owns is compiled by it or found in the cache), which sets how many processes the next compile of
that group is split over; and the CPU seconds it took, which puts cheap compiles first.  Pure
bookkeeping, apart from the processes, so the scheduler's rules are read in one place."""

from __future__ import annotations

from typing import Sequence

from search.evaluate.compile_jobs import CompileJob, CompileUnit

KERNELS_PER_SHARD = 2  # a forked shard starts in about 0.1 s of CPU (a fresh interpreter took 3 s), a kernel takes 5


class CompileCosts:
    def __init__(self, max_shards: int) -> None:
        self.max_shards = max(1, max_shards)
        # (family, sizes of a group) -> kernels its last compile compiled, and its CPU seconds
        self._kernels_of: dict[tuple[str, frozenset[int]], int] = {}
        self._cost_of: dict[tuple[str, frozenset[int]], float] = {}

    def shards_for(self, kind: str, group: Sequence[tuple[int, int]]) -> int:
        """Processes to split a compile of ``kind`` at the shapes ``group`` over: one per size n
        until that family's compile of those sizes has been seen, then about one per
        ``KERNELS_PER_SHARD`` kernels it compiled; at most ``max_shards``."""
        sizes = frozenset(n for _, n in group)
        kernels = self._kernels_of.get((kind, sizes))
        wanted = len(sizes) if kernels is None else -(-kernels // KERNELS_PER_SHARD)
        return max(1, min(self.max_shards, wanted))

    def expected_cost(self, kind: str, sizes: frozenset[int]) -> float:
        """CPU seconds the family's last compile of these sizes took (0 if never seen: a new
        family's first candidates, the seeds, go first and teach the rest)."""
        return self._cost_of.get((kind, sizes), 0.0)

    def learn(self, job: CompileJob, unit: CompileUnit) -> None:
        """Once every process of the unit's group has reported, remember how many kernels it found
        (each shard counts the kernels it owns, compiled or found in the cache)."""
        group = [u for u in job.units if u.shapes == unit.shapes]
        if not all(u.finished is not None for u in group):
            return
        key = (job.kind, unit.sizes)
        reports = [u.report for u in group]
        if all(r is not None and getattr(r, "ok", False) for r in reports):
            self._kernels_of[key] = max(1, sum(int(getattr(r, "kernels_compiled", 0) or 0) for r in reports))
            # CPU seconds where the report has them (wall time stretches while compiles are paused).
            self._cost_of[key] = sum(float(getattr(r, "cpu_s", 0.0) or 0.0)
                                     or (u.finished or 0.0) - (u.started or 0.0) for r, u in zip(reports, group))
        elif len(group) > 1:
            # A launcher that reads what a launch returns fails in the shards that skip it: the
            # next compile of this group goes unsplit, and splits again once that one succeeds.
            self._kernels_of[key] = 1
