"""Waiting for a pool's events in tests: poll until enough have come back or the time is up."""

from __future__ import annotations

import time

from search.engine.pool import EvaluatorPool, PoolEvent


def poll_until(pool: EvaluatorPool, count: int, timeout: float, every: float) -> list[PoolEvent]:
    """The events of ``pool.poll(every)`` calls until ``count`` have come or ``timeout`` seconds pass
    (fewer then: the caller's assertion says what was missing)."""
    events: list[PoolEvent] = []
    deadline = time.monotonic() + timeout
    while len(events) < count and time.monotonic() < deadline:
        events += pool.poll(every)
    return events
