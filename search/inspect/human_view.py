"""The engineer's events of a run as the inspection commands show them (read-only).

What each event became (its outcome), and what they add up to: notes per candidate,
promotions and retirements in force, rechecks and their verdicts, disputed results,
whether the run is paused.  Used by ``status``, ``show``, ``lineage``, ``export`` and
the report; works on a running and on a stopped run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from population.events import (EventKind, EventOutcome, HumanEvent, OutcomeStatus, active, describe, is_paused,
                               notes_by_candidate)
from population.records import DISPUTED_KEY
from population.snapshot import RunSnapshot


@dataclass
class HumanView:
    events: list[HumanEvent] = field(default_factory=list)
    outcomes: dict[int, EventOutcome] = field(default_factory=dict)
    disputed: set[str] = field(default_factory=set)
    focus: dict[str, Any] | None = None  # a focused run's objective and progress (search/engine/focus.py)

    @classmethod
    def from_snapshot(cls, snapshot: RunSnapshot) -> HumanView:
        from search.config import FocusConfig
        from search.engine.focus import progress_from_snapshot

        disputed = snapshot.get(DISPUTED_KEY, {})
        focus = progress_from_snapshot(snapshot, FocusConfig.model_validate(snapshot.config.get("focus") or {}))
        return cls(list(snapshot.events), dict(snapshot.outcomes), {cid for ids in disputed.values() for cid in ids},
                   focus)

    def _ok(self, events: list[HumanEvent]) -> list[HumanEvent]:
        """Events the driver did not refuse (a stopped run's events count: they apply on resume)."""
        return [e for e in events if not (e.seq in self.outcomes
                                          and self.outcomes[e.seq].status is OutcomeStatus.REFUSED)]

    @property
    def paused(self) -> bool:
        return is_paused(self._ok(self.events))

    def promotions(self) -> list[HumanEvent]:
        return active(self._ok(self.events), EventKind.PROMOTE)

    def promoted_ids(self) -> list[str]:
        """Promoted candidates, most recent promotion first."""
        return list(dict.fromkeys(e.target for e in reversed(self.promotions())))

    def retirements(self) -> list[HumanEvent]:
        return active(self._ok(self.events), EventKind.RETIRE)

    def retired_structures(self) -> set[str]:
        """``family/fingerprint`` keys."""
        return {e.target for e in self.retirements()}

    def notes(self) -> dict[str, list[HumanEvent]]:
        return notes_by_candidate(self.events, self.outcomes)

    def rechecks(self, cid: str | None = None) -> list[dict[str, Any]]:
        rows = []
        for e in self.events:
            if e.kind is EventKind.RECHECK and (cid is None or e.target == cid):
                out = self.outcomes.get(e.seq)
                rows.append({"seq": e.seq, "candidate": e.target, "who": e.who, "at": e.at, "why": e.text,
                             "cases": e.data.get("cases") or [], "status": out.status.value if out else "not seen",
                             "holds": out.data.get("holds") if out else None,
                             "summary": out.detail if out else "", "remeasure": out.candidate_id if out else None,
                             "comparison": out.data.get("cases", []) if out else []})
        return rows

    def about(self, cid: str, family: str, fingerprint: str) -> list[dict[str, Any]]:
        """Every event that concerns one candidate (its notes, promotions, rechecks, its structure's retirement)."""
        key = f"{family}/{fingerprint}"
        injected = {s for s, o in self.outcomes.items() if o.candidate_id == cid}
        return [self.row(e) for e in self.events
                if e.target in (cid, key) or e.seq in injected or (e.undoes is not None and any(
                    x.seq == e.undoes and x.target in (cid, key) for x in self.events))]

    def row(self, e: HumanEvent) -> dict[str, Any]:
        out = self.outcomes.get(e.seq)
        return {"seq": e.seq, "kind": e.kind.value, "target": e.target, "who": e.who, "at": e.at,
                "when": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(e.at)) + " UTC", "text": e.text,
                "undoes": e.undoes, "status": out.status.value if out else "pending",
                "detail": out.detail if out else "", "candidate": out.candidate_id if out else None,
                "line": describe(e)}

    def rows(self) -> list[dict[str, Any]]:
        return [self.row(e) for e in self.events]

    def summary(self) -> dict[str, Any]:
        return {"paused": self.paused, "events": len(self.events),
                "unapplied": sum(1 for e in self.events if e.seq not in self.outcomes),
                "promoted": self.promoted_ids(), "retired": sorted(self.retired_structures()),
                "disputed": sorted(self.disputed),
                "notes": sum(len(v) for v in self.notes().values()), "rechecks": len(self.rechecks())}
