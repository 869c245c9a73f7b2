"""Time a run spent inside its driver sessions (``status``, the report)."""

from __future__ import annotations

from typing import Any


def session_seconds(sessions: list[dict[str, Any]], updated: float | None) -> float | None:
    """Seconds inside sessions, not the gaps between a stop and a resume: a session that
    stamped its end counts to it; one that did not (killed) counts to the next session's start,
    the last one to the run's latest status update.  None before any session."""
    if not sessions:
        return None
    total = 0.0
    for index, session in enumerate(sessions):
        start = session.get("started")
        if start is None:
            continue
        later = sessions[index + 1].get("started") if index + 1 < len(sessions) else updated
        end = session.get("ended") or later
        if end is not None:
            total += max(0.0, end - start)
    return total
