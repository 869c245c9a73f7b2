"""The run store: the population's records in one SQLite file that survives a killed driver.

What lives where: ``candidates`` (one row per candidate, its lifecycle state, its
fitness once verified, whether it is an island member, and ``told_seq``, the
global evaluation number at which it finished), ``results`` (one per evaluated
candidate), ``blobs`` (sources by sha256, stored once: whole, or as the span where a child differs from its
parent's whole text, ``source_deltas``, population/sources.py), ``structures``,
``champions`` (history; the last row per family is the current champion),
``rng_states``, ``counters`` and ``kv`` (config and driver state as JSON).
Pending work is the ``pending``/``running`` candidates themselves.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from functools import cached_property
from typing import Any

from population.errors import InvalidTransition
from population.events import EventOutcome, HumanEvent, read_events, read_outcomes
from population.family import ChampionChange
from population.maturation import StructureRecord
from population.models import (Candidate, EvalResult, Frozen, NewCandidate, Origin, State, candidate_id,
                               result_from_json, source_hash)
from population.sources import DELTAS_TABLE, SourceReader, delta_against
from population.store_file import StoreFile
from population.store_rows import (CAND_CHECKED_COLS, CAND_COLS, CAND_INSERT, CHAMP_COLS, STRUCT_COLS,
                                   ChampionEntry, candidate_from_row, candidate_row, candidates_from_rows,
                                   champion_from_row, structure_from_row, structure_row)


class Attempt(Frozen):
    """A finished evaluation as a prompt wants it: what was tried and how it ended."""

    candidate: Candidate
    result: EvalResult | None
    told_seq: int


class RunStore(StoreFile):
    # --- config, key/value, counters, RNG states, blobs ------------------------------------

    def config_json(self) -> str:
        """The run config exactly as given to ``create``."""
        return self._one("SELECT value FROM kv WHERE key = 'config'")

    def get_json(self, key: str, default: Any = None) -> Any:
        text = self._one("SELECT value FROM kv WHERE key = ?", (key,))
        return default if text is None else json.loads(text)

    def set_json(self, key: str, value: Any) -> None:
        if key == "config":
            raise ValueError("the run config is written once, by create()")
        with self.transaction():
            self._write("INSERT INTO kv(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = "
                        "excluded.value", (key, json.dumps(value, allow_nan=False, sort_keys=True)))

    def counter(self, key: str) -> int | float:
        value = self._one("SELECT value FROM counters WHERE key = ?", (key,))
        return 0 if value is None else value

    def counters(self, prefix: str = "") -> dict[str, int | float]:
        rows = self._execute("SELECT key, value FROM counters WHERE substr(key, 1, ?) = ? ORDER BY key",
                             (len(prefix), prefix)).fetchall()
        return dict(rows)

    def add_counters(self, deltas: Mapping[str, int | float]) -> dict[str, int | float]:
        """Add to several counters atomically (e.g. tokens and money of one LLM call)."""
        with self.transaction():
            for key, delta in deltas.items():
                self._write("INSERT INTO counters(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET "
                            "value = value + excluded.value", (key, delta))
            return {k: self.counter(k) for k in deltas}

    def set_counter(self, key: str, value: int | float) -> None:
        with self.transaction():
            self._write("INSERT INTO counters(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET "
                        "value = excluded.value", (key, value))

    def rng_state(self, name: str) -> dict[str, Any] | None:
        return self.get_rng_states().get(name)

    def get_rng_states(self) -> dict[str, dict[str, Any]]:
        return {k: json.loads(v) for k, v in self._execute("SELECT name, state FROM rng_states").fetchall()}

    def set_rng_state(self, name: str, state: Mapping[str, Any]) -> None:
        with self.transaction():
            self._write("INSERT INTO rng_states(name, state) VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET "
                        "state = excluded.state", (name, json.dumps(state, sort_keys=True)))

    def put_source(self, text: str) -> str:
        sha = source_hash(text)
        with self.transaction():
            self._write("INSERT OR IGNORE INTO blobs(sha256, text) VALUES (?, ?)", (sha, text))
        return sha

    @cached_property
    def _sources(self) -> SourceReader:
        return SourceReader(self._conn)

    def _put_child_source(self, sha: str, text: str, parent_id: str | None) -> None:
        """A new text stored once: as its span of difference from its first parent's whole base where
        that is small (population/sources.py), else whole."""
        if self._one("SELECT 1 FROM blobs WHERE sha256 = ?", (sha,)) is not None:
            return
        parent_sha = None if parent_id is None else self._one(
            "SELECT source_sha256 FROM candidates WHERE id = ?", (parent_id,))
        base = None if parent_sha is None else self._sources.base_of(parent_sha)
        delta = None if base is None else delta_against(base[0], base[1], text)
        if delta is None:
            self._write("INSERT INTO blobs(sha256, text) VALUES (?, ?)", (sha, text))
            return
        self._write("INSERT INTO blobs(sha256, text) VALUES (?, '')", (sha,))
        self._write(f"INSERT INTO {DELTAS_TABLE}(sha256, base, head, tail, middle) VALUES (?, ?, ?, ?, ?)",
                    (sha, delta.base, delta.head, delta.tail, delta.middle))

    def kv_items(self) -> dict[str, Any]:
        """Every key/value entry but the config, its JSON parsed (what the driver keeps: population/records.py)."""
        return {k: json.loads(v) for k, v in self._execute("SELECT key, value FROM kv WHERE key != 'config'")}

    def sources(self) -> dict[str, str]:
        """Every source text by sha256."""
        return {sha: self.source(sha) for sha in self.source_hashes()}

    def source_hashes(self) -> list[str]:
        return [sha for (sha,) in self._execute("SELECT sha256 FROM blobs")]

    def source(self, sha256: str) -> str:
        text = self._sources.text(sha256)
        if text is None:
            raise KeyError(f"no source blob {sha256}")
        return text

    # --- candidates ----------------------------------------------------------------------

    def next_seq(self) -> int:
        return (self._one("SELECT max(seq) FROM candidates") or 0) + 1

    def add_candidate(self, new: NewCandidate, now: float | None = None) -> Candidate:
        return self.add_candidates([new], now)[0]

    def add_candidates(self, news: Iterable[NewCandidate], now: float | None = None) -> list[Candidate]:
        """Store ``pending`` children in one transaction; ids continue the creation sequence."""
        stamp = time.time() if now is None else now
        out: list[Candidate] = []
        with self.transaction():
            seq = self.next_seq()
            for new in news:
                cand = new.to_candidate(candidate_id(seq), stamp)
                self._put_child_source(cand.source_sha256, new.source, new.parent_ids[0] if new.parent_ids else None)
                self._write(CAND_INSERT, candidate_row(cand))
                out.append(cand)
                seq += 1
        return out

    def insert_candidate(self, cand: Candidate, *, member: bool = False, told_seq: int | None = None) -> None:
        """Store a candidate made elsewhere (a migrant copy); its source blob must exist."""
        with self.transaction():
            self._write(CAND_INSERT, candidate_row(cand, member=member, told_seq=told_seq))

    def update_candidate(self, cand: Candidate, *, member: bool, told_seq: int | None = None) -> None:
        with self.transaction():
            cur = self._write("UPDATE candidates SET state = ?, reason = ?, fitness_ms = ?, updated_at = ?, "
                              "member = ?, told_seq = coalesce(?, told_seq) WHERE id = ?",
                              (cand.state.value, cand.reason, cand.fitness_ms, cand.updated_at, int(member),
                               told_seq, cand.id))
            if cur.rowcount != 1:
                raise KeyError(f"no candidate {cand.id} in {self.path}")

    def set_member(self, cid: str, member: bool) -> None:
        with self.transaction():
            self._write("UPDATE candidates SET member = ? WHERE id = ?", (int(member), cid))

    def find_candidate(self, cid: str) -> Candidate | None:
        row = self._execute(f"SELECT {CAND_COLS} FROM candidates WHERE id = ?", (cid,)).fetchone()
        return None if row is None else candidate_from_row(row, self.path)

    def get_candidate(self, cid: str) -> Candidate:
        cand = self.find_candidate(cid)
        if cand is None:
            raise KeyError(f"no candidate {cid} in {self.path}")
        return cand

    def list_candidates(self, *, family: str | None = None, state: State | Iterable[State] | None = None,
                        origin: Origin | None = None, fingerprint: str | None = None,
                        members_only: bool = False, limit: int | None = None,
                        newest_first: bool = False) -> list[Candidate]:
        where: list[str] = ["1"]
        params: list[str | int] = []
        if family is not None:
            where.append("family = ?")
            params.append(family)
        if state is not None:
            states = [state] if isinstance(state, State) else list(state)
            where.append(f"state IN ({', '.join('?' * len(states))})")
            params += [s.value for s in states]
        if origin is not None:
            where.append("origin = ?")
            params.append(origin.value)
        if fingerprint is not None:
            where.append("fingerprint = ?")
            params.append(fingerprint)
        if members_only:
            where.append("member = 1")
        sql = (f"SELECT {CAND_CHECKED_COLS} FROM candidates WHERE {' AND '.join(where)} "
               f"ORDER BY seq {'DESC' if newest_first else 'ASC'}")
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return candidates_from_rows(self._execute(sql, params).fetchall(), self.path)

    def count_candidates(self, family: str | None = None) -> int:
        if family is None:
            return self._one("SELECT count(*) FROM candidates")
        return self._one("SELECT count(*) FROM candidates WHERE family = ?", (family,))

    def is_member(self, cid: str) -> bool:
        return bool(self._one("SELECT member FROM candidates WHERE id = ?", (cid,)))

    def told_seq(self, cid: str) -> int | None:
        return self._one("SELECT told_seq FROM candidates WHERE id = ?", (cid,))

    def told_seqs(self) -> dict[str, int]:
        """The evaluation number of every finished candidate."""
        return dict(self._execute("SELECT id, told_seq FROM candidates WHERE told_seq IS NOT NULL").fetchall())

    def mark_running(self, cid: str, now: float | None = None) -> Candidate:
        with self.transaction():
            cand = self.get_candidate(cid).with_state(State.RUNNING, now=time.time() if now is None else now)
            self.update_candidate(cand, member=False)
            return cand

    def requeue(self, cid: str, now: float | None = None) -> Candidate:
        """Put one running candidate back in the queue (its worker was lost, not its fault)."""
        with self.transaction():
            cand = self.get_candidate(cid).with_state(State.PENDING, now=time.time() if now is None else now)
            self.update_candidate(cand, member=False)
            return cand

    def inflight(self) -> list[Candidate]:
        rows = self._execute(f"SELECT {CAND_COLS} FROM candidates WHERE state IN ('pending', 'running') "
                             "ORDER BY seq").fetchall()
        return [candidate_from_row(r, self.path) for r in rows]

    def requeue_inflight(self, now: float | None = None) -> list[Candidate]:
        """After a restart: ``running`` work is ``pending`` again; returns all pending, oldest first."""
        stamp = time.time() if now is None else now
        with self.transaction():
            self._write("UPDATE candidates SET state = 'pending', updated_at = ? WHERE state = 'running'",
                        (stamp,))
            return self.inflight()

    # --- results ---------------------------------------------------------------------------

    def put_result(self, result: EvalResult) -> bool:
        """Store a result once. The same result again is a no-op (False); a different one is an error."""
        body = result.model_dump_json()
        with self.transaction():
            existing = self._one("SELECT body FROM results WHERE candidate_id = ?", (result.candidate_id,))
            if existing is not None:
                if result_from_json(existing) == result:
                    return False
                raise InvalidTransition(f"{result.candidate_id} already has a different result")
            self._write("INSERT INTO results(candidate_id, geomean_ms, speedup, device, error, body) "
                        "VALUES (?, ?, ?, ?, ?, ?)", (result.candidate_id, result.geomean_ms, result.speedup,
                                                      result.device, result.error, body))
            return True

    def results(self) -> dict[str, EvalResult]:
        """Every stored result by candidate id, as stored (times; speedups come from the snapshot)."""
        return {cid: result_from_json(body) for cid, body in self._execute("SELECT candidate_id, body FROM results")}

    def result_ids(self) -> list[str]:
        return [cid for (cid,) in self._execute("SELECT candidate_id FROM results")]

    def result_devices(self) -> dict[str, int]:
        """How many results each device name has (the column the results table keeps beside the body)."""
        return dict(self._execute("SELECT device, count(*) FROM results GROUP BY device"))

    def get_result(self, cid: str) -> EvalResult | None:
        """The result recorded for this very candidate (a migrant copy has none)."""
        body = self._one("SELECT body FROM results WHERE candidate_id = ?", (cid,))
        return None if body is None else result_from_json(body)

    def evaluated_result(self, cid: str) -> EvalResult | None:
        """The measurement behind a candidate's fitness: its own result, or for a migrant
        copy the result of the original it was copied from (same code, same device)."""
        with self.read():
            cand = self.get_candidate(cid)
            while cand.origin is Origin.MIGRATION:
                cand = self.get_candidate(cand.parent_ids[0])
            return self.get_result(cand.id)

    # --- structures and champions ------------------------------------------------------------

    def put_structure(self, rec: StructureRecord) -> None:
        with self.transaction():
            self._write(f"INSERT OR REPLACE INTO structures({STRUCT_COLS}) VALUES ({', '.join('?' * 9)})",
                        structure_row(rec))

    def structures(self, family: str | None = None) -> list[StructureRecord]:
        sql = f"SELECT {STRUCT_COLS} FROM structures"
        rows = (self._execute(sql + " WHERE family = ? ORDER BY created_eval, fingerprint", (family,))
                if family is not None else self._execute(sql + " ORDER BY family, created_eval, fingerprint"))
        return [structure_from_row(r) for r in rows.fetchall()]

    def add_champion_change(self, change: ChampionChange, at: float) -> None:
        with self.transaction():
            self._write("INSERT INTO champions(family, candidate_id, previous_id, fitness_ms, family_evals, "
                        "cause, at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                        (change.family, change.candidate_id, change.previous_id, change.fitness_ms, change.family_evals,
                         change.cause, at))

    def champion_history(self, family: str | None = None) -> list[ChampionEntry]:
        sql = f"SELECT {CHAMP_COLS} FROM champions"
        rows = (self._execute(sql + " WHERE family = ? ORDER BY seq", (family,)) if family is not None
                else self._execute(sql + " ORDER BY seq"))
        return [champion_from_row(r) for r in rows.fetchall()]

    def current_champion_ids(self) -> dict[str, str]:
        rows = self._execute("SELECT family, candidate_id FROM champions WHERE seq IN "
                             "(SELECT max(seq) FROM champions GROUP BY family)").fetchall()
        return dict(rows)

    # --- history for prompts and inspection ----------------------------------------------

    def recent_attempts(self, family: str, limit: int = 20, structure: str | None = None,
                        states: Iterable[State] | None = None) -> list[Attempt]:
        """Finished evaluations of a family (optionally one structure), newest first,
        with their state, reason and result (error text included): what not to repeat."""
        where, params = ["c.family = ?", "c.told_seq IS NOT NULL"], [family]
        if structure is not None:
            where.append("c.fingerprint = ?")
            params.append(structure)
        if states is not None:
            wanted = [s.value for s in states]
            where.append(f"c.state IN ({', '.join('?' * len(wanted))})")
            params += wanted
        cols = ", ".join(f"c.{col.strip()}" for col in CAND_COLS.split(","))
        rows = self._execute(f"SELECT {cols}, r.body FROM candidates c LEFT JOIN results r "
                             f"ON r.candidate_id = c.id WHERE {' AND '.join(where)} "
                             f"ORDER BY c.told_seq DESC LIMIT ?", [*params, limit]).fetchall()
        return [Attempt(candidate=candidate_from_row(r, self.path),
                        result=None if r[18] is None else result_from_json(r[18]), told_seq=r[17])
                for r in rows]

    # --- the engineer's events (population/events.py writes them through its own connection) --

    def events(self, after: int = 0) -> list[HumanEvent]:
        """The engineer's events after seq ``after``, oldest first (none in a store that never had one)."""
        return read_events(self.connection, after)

    def outcomes(self) -> dict[int, EventOutcome]:
        """What the driver made of each event, by event seq."""
        return read_outcomes(self.connection)
