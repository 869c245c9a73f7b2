"""Human events: what an engineer asked of a run (inject, note, recheck, promote, retire,
pause), and what the driver made of each, kept in the run store.

The store is the channel between the ``qrsearch`` commands and a running driver.
A command appends an event to the ``events`` table through :class:`EventWriter`,
a second writer beside the driver's :class:`~population.store.RunStore`: it takes
no advisory lock (the driver holds that), only SQLite's own write lock for one
short ``BEGIN IMMEDIATE`` transaction, so it waits at most ``busy_timeout`` for a
driver commit and never blocks the driver for longer than one insert.  The driver
reads events after its cursor and records an :class:`EventOutcome` per event in
``kv`` (``human/outcome/<seq>``) in the same transaction as the effect (the
injected candidate, the re-measurement), so a driver killed at any moment neither
loses an event nor applies one twice.

The ``events`` table is additive to schema version 1: stores made before it get it
from the first event written (``CREATE TABLE IF NOT EXISTS``); readers of such a
store see no events.
"""

from __future__ import annotations

import getpass
import json
import os
import sqlite3
import time
from collections.abc import Iterable
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import Field, JsonValue

from population.errors import StoreCorrupt
from population.models import Frozen, NewCandidate, Origin
from population.store_schema import EVENTS_DDL, check_header, check_identity, db_path, note_closed, note_open

CURSOR_KEY = "human/cursor"
OUTCOME_PREFIX = "human/outcome/"
BUSY_TIMEOUT_MS = 10_000


class EventKind(StrEnum):
    INJECT = "inject"        # target: family; data: source, params, fingerprint, file
    NOTE = "note"            # target: candidate id; text: the hypothesis or observation
    RECHECK = "recheck"      # target: candidate id; data: cases (empty: all bench cases)
    PROMOTE = "promote"      # target: candidate id
    RETIRE = "retire"        # target: "family/fingerprint" (a structure)
    PAUSE = "pause"          # target: ""
    UNPAUSE = "unpause"      # target: ""


UNDOABLE = frozenset({EventKind.PROMOTE, EventKind.RETIRE})


class HumanEvent(Frozen):
    """One request, as written by a command; ``seq`` is the store's order of arrival."""

    seq: int = Field(0, ge=0)  # 0 until stored
    kind: EventKind
    target: str = ""
    text: str = Field("", max_length=4000)  # the note, or why
    who: str = Field(min_length=1)
    at: float
    undoes: int | None = None  # the seq of the promote/retire this reverses
    data: dict[str, JsonValue] = Field(default_factory=dict)


class OutcomeStatus(StrEnum):
    APPLIED = "applied"    # done (a note, a promotion, an injected candidate queued)
    QUEUED = "queued"      # a recheck waiting for or on an evaluator
    DONE = "done"          # a recheck that finished (see ``data``)
    REFUSED = "refused"    # could not be applied (the reason says why); nothing changed


class EventOutcome(Frozen):
    seq: int = Field(ge=1)
    status: OutcomeStatus
    detail: str = ""
    candidate_id: str | None = None  # the injected candidate, or a recheck's re-measurement
    at: float
    data: dict[str, JsonValue] = Field(default_factory=dict)


def current_user() -> str:
    """Who asked: the login name (``USER`` when there is no password entry, e.g. in a container)."""
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - getpass raises several kinds when no name is known
        return os.environ.get("USER") or f"uid{os.getuid()}"


def new_event(kind: EventKind, target: str = "", text: str = "", *, undoes: int | None = None,
              data: dict[str, Any] | None = None, who: str | None = None, at: float | None = None) -> HumanEvent:
    return HumanEvent(kind=kind, target=target, text=text, who=who or current_user(),
                      at=time.time() if at is None else at, undoes=undoes, data=data or {})


def _has_events(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'events'").fetchone() is not None


def read_events(conn: sqlite3.Connection, after: int = 0) -> list[HumanEvent]:
    """Events with ``seq > after``, oldest first, from any connection to a run store."""
    if not _has_events(conn):
        return []
    rows = conn.execute("SELECT seq, body FROM events WHERE seq > ? ORDER BY seq", (after,)).fetchall()
    return [HumanEvent.model_validate_json(body).model_copy(update={"seq": seq}) for seq, body in rows]


def read_outcomes(conn: sqlite3.Connection) -> dict[int, EventOutcome]:
    rows = conn.execute("SELECT value FROM kv WHERE substr(key, 1, ?) = ?",
                        (len(OUTCOME_PREFIX), OUTCOME_PREFIX)).fetchall()
    outs = [EventOutcome.model_validate_json(v) for (v,) in rows]
    return {o.seq: o for o in outs}


def outcome_key(seq: int) -> str:
    return f"{OUTCOME_PREFIX}{seq:08d}"


def injected_candidate(event: HumanEvent) -> NewCandidate:
    """The candidate an ``inject`` event adds (by the driver, or by the command on a stopped run)."""
    data = event.data
    return NewCandidate(family=event.target, island=0, origin=Origin.HUMAN, source=str(data["source"]),
                        params=dict(data.get("params") or {}),  # type: ignore[arg-type]
                        fingerprint=str(data["fingerprint"]))


def inject_applied(event: HumanEvent, candidate_id: str) -> EventOutcome:
    return EventOutcome(seq=event.seq, status=OutcomeStatus.APPLIED, detail=f"queued as {candidate_id}",
                        at=time.time(), candidate_id=candidate_id)


class EventWriter:
    """Appends events to a run store while a driver (or nobody) has it open for writing."""

    def __init__(self, run_dir: Path | str) -> None:
        self.path = db_path(Path(run_dir))
        check_header(self.path)
        self._conn = sqlite3.connect(self.path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
        note_open(self.path)
        try:
            self._conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            self._conn.execute("PRAGMA synchronous = NORMAL")  # as the driver: a commit survives a kill
            check_identity(self._conn, self.path, integrity=False)
        except sqlite3.DatabaseError as exc:
            self.close()
            raise StoreCorrupt(self.path, f"cannot be read as a run store: {exc}") from exc
        except BaseException:
            self.close()
            raise

    def append(self, event: HumanEvent) -> HumanEvent:
        """Store one event in its own transaction; returns it with its ``seq``."""
        return self.append_all([event])[0]

    def append_all(self, events: Iterable[HumanEvent]) -> list[HumanEvent]:
        out: list[HumanEvent] = []
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            self._conn.execute(EVENTS_DDL)
            for event in events:
                cur = self._conn.execute(
                    "INSERT INTO events(kind, target, at, body) VALUES (?, ?, ?, ?)",
                    (event.kind.value, event.target, event.at, event.model_dump_json(exclude={"seq"})))
                out.append(event.model_copy(update={"seq": int(cur.lastrowid or 0)}))
            self._conn.execute("COMMIT")
        except BaseException:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            raise
        return out

    def events(self, after: int = 0) -> list[HumanEvent]:
        return read_events(self._conn, after)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None  # type: ignore[assignment]
            note_closed(self.path)

    def __enter__(self) -> EventWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --- what the events add up to (pure functions over the event list) -------------------------


def active(events: Iterable[HumanEvent], kind: EventKind) -> list[HumanEvent]:
    """Promotions or retirements still in force: those no later ``--undo`` reversed, oldest first."""
    chosen = [e for e in events if e.kind is kind]
    undone = {e.undoes for e in chosen if e.undoes is not None}
    return [e for e in chosen if e.undoes is None and e.seq not in undone]


def latest_active(events: Iterable[HumanEvent], kind: EventKind, target: str) -> HumanEvent | None:
    hits = [e for e in active(events, kind) if e.target == target]
    return hits[-1] if hits else None


def is_paused(events: Iterable[HumanEvent]) -> bool:
    state = False
    for e in events:
        if e.kind is EventKind.PAUSE:
            state = True
        elif e.kind is EventKind.UNPAUSE:
            state = False
    return state


def notes_by_candidate(events: Iterable[HumanEvent],
                       outcomes: dict[int, EventOutcome] | None = None) -> dict[str, list[HumanEvent]]:
    """Notes per candidate id, oldest first; an ``inject --note`` counts for the injected
    candidate once the driver has given it an id (its outcome)."""
    out: dict[str, list[HumanEvent]] = {}
    for e in events:
        if e.kind is EventKind.NOTE:
            out.setdefault(e.target, []).append(e)
        elif e.kind is EventKind.INJECT and e.text and outcomes and e.seq in outcomes:
            cid = outcomes[e.seq].candidate_id
            if cid:
                out.setdefault(cid, []).append(e)
    return out


def structure_key(family: str, fingerprint: str) -> str:
    return f"{family}/{fingerprint}"


def describe(event: HumanEvent) -> str:
    """One line for logs and tables."""
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(event.at))
    undo = f" (undoes #{event.undoes})" if event.undoes is not None else ""
    why = f": {event.text}" if event.text else ""
    target = f" {event.target}" if event.target else ""
    return f"#{event.seq} {event.kind.value}{undo}{target} by {event.who} at {when} UTC{why}"


def outcome_json(outcome: EventOutcome) -> str:
    return json.dumps(outcome.model_dump(mode="json"), sort_keys=True)
