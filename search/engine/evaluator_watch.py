"""Whether a run still has evaluators to wait for.

A run whose every evaluator is gone (dead, restarting, or lost with its node) for
``ray.no_evaluator_minutes`` stops, resumable: otherwise it would wait for its time budget, or for
ever without one.  Before the first evaluator is up nothing counts: a cluster's GPU nodes may take
minutes to join."""

from __future__ import annotations

import time
from typing import Callable

from search.engine.pool import PoolStats


class EvaluatorWatch:
    def __init__(self, limit_minutes: float, log: Callable[[str], None]) -> None:
        self.limit_minutes = limit_minutes
        self.log = log
        self._seen_up = False
        self._none_since: float | None = None  # when the last evaluator went, while none is up

    def gone(self, stats: PoolStats) -> bool:
        """Whether no evaluator has been up for the limit, told the pool's stats of now."""
        now = time.monotonic()
        if stats.ready > 0:
            if self._none_since is not None:
                self.log(f"evaluators back: {stats.ready} of {stats.evaluators} up")
            self._seen_up, self._none_since = True, None
            return False
        if not self._seen_up:
            return False
        if self._none_since is None:
            self._none_since = now
            self.log(f"no evaluator is up ({stats.evaluators} restarting, or lost with their node); "
                     f"the run stops in {self.limit_minutes:g} min unless one comes back")
            return False
        return now - self._none_since >= self.limit_minutes * 60
