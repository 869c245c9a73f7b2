"""Time a run spent inside its driver sessions (``status``, the report)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from population.records import Session, parse


def session_seconds(sessions: Sequence[Session | Mapping[str, Any]], updated: float | None) -> float | None:
    """Seconds inside sessions, not the gaps between a stop and a resume: a session that
    stamped its end counts to it; one that did not (killed) counts to the next session's start,
    the last one to the run's latest status update.  None before any session."""
    if not sessions:
        return None
    records = [s if isinstance(s, Session) else parse(Session, s) for s in sessions]
    total = 0.0
    for index, session in enumerate(records):
        start = session.started
        if start is None:
            continue
        later = records[index + 1].started if index + 1 < len(records) else updated
        end = session.ended or later
        if end is not None:
            total += max(0.0, end - start)
    return total
