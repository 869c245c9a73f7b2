"""The budget of a session as people read it: evaluations of the maximum, minutes of the
maximum, and an ETA from the session's own rate (the live panel, the log and the summary)."""

from __future__ import annotations

import time

from population.records import C

from search.engine.loop import SearchLoop


def describe_budget(max_evals: int | None, max_minutes: float | None) -> str:
    """``up to 10 evaluations (whole run) or 1.5 minutes (this session)``."""
    parts = []
    if max_evals is not None:
        parts.append(f"{max_evals} evaluations (whole run)")
    if max_minutes is not None:
        parts.append(f"{max_minutes:g} minutes (this session)")
    return "budget: up to " + " or ".join(parts) if parts else "budget: none (stops when nothing is left to propose)"


def budget_progress(loop: SearchLoop) -> str:
    """``evals 4/10  min 0.8/1.5  ETA 0.7 min`` for the loop's session right now (no ETA once it stops)."""
    minutes = (time.monotonic() - loop.stats.started) / 60
    done = int(loop.run.store.counter(C.GPU_EVALUATIONS))
    parts = [f"evals {done}/{loop.max_evals if loop.max_evals is not None else '-'}"]
    max_minutes = (loop.deadline - loop.stats.started) / 60 if loop.deadline is not None else None
    parts.append(f"min {minutes:.1f}/{'-' if max_minutes is None else format(max_minutes, '.1f')}")
    etas = []
    if max_minutes is not None:
        etas.append(max(max_minutes - minutes, 0.0))
    rate = loop.stats.evals_per_minute()
    if loop.max_evals is not None and rate > 0:
        etas.append(max(loop.max_evals - done, 0) / rate)
    if loop.stop_requested:  # no estimate once the session is ending: it would count down to nothing
        return "  ".join(parts)
    parts.append(f"ETA {min(etas):.1f} min" if etas else "ETA -")
    return "  ".join(parts)
