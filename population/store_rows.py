"""Conversions between store rows and models, in one place so the columns stay in step."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from population.errors import StoreCorrupt
from population.family import ChampionChange
from population.maturation import StructureRecord
from population.models import Candidate, Frozen, canonical_params

CAND_COLS = ("seq, id, family, island, parent1, parent2, origin, source_sha256, params, fingerprint, "
             "generation, created_at, updated_at, state, reason, fitness_ms, member, told_seq")
CAND_INSERT = f"INSERT INTO candidates({CAND_COLS}) VALUES ({', '.join('?' * 18)})"
STRUCT_COLS = ("family, fingerprint, first_candidate_id, created_eval, evals, best_id, best_fitness_ms, "
               "status, concluded_eval")
CHAMP_COLS = "seq, family, candidate_id, previous_id, fitness_ms, family_evals, cause, at"


class ChampionEntry(Frozen):
    """One line of a family's champion history."""

    seq: int
    change: ChampionChange
    at: float


def seq_of(cid: str) -> int:
    """Store ids are ``c`` + creation sequence; anything else was not made by a store."""
    if not (cid.startswith("c") and cid[1:].isdigit()):
        raise ValueError(f"{cid!r} is not a store candidate id (c + sequence number)")
    return int(cid[1:])


def candidate_row(c: Candidate, *, member: bool = False, told_seq: int | None = None) -> tuple[Any, ...]:
    p1 = c.parent_ids[0] if c.parent_ids else None
    p2 = c.parent_ids[1] if len(c.parent_ids) > 1 else None
    return (seq_of(c.id), c.id, c.family, c.island, p1, p2, c.origin.value, c.source_sha256,
            canonical_params(c.params), c.fingerprint, c.generation, c.created_at, c.updated_at,
            c.state.value, c.reason, c.fitness_ms, int(member), told_seq)


def candidate_from_row(row: sqlite3.Row | tuple[Any, ...], path: Path) -> Candidate:
    try:
        return Candidate(id=row[1], family=row[2], island=row[3],
                         parent_ids=tuple(p for p in (row[4], row[5]) if p is not None),
                         origin=row[6], source_sha256=row[7], params=json.loads(row[8]),
                         fingerprint=row[9], generation=row[10], created_at=row[11],
                         updated_at=row[12], state=row[13], reason=row[14], fitness_ms=row[15])
    except (ValidationError, ValueError) as exc:
        raise StoreCorrupt(path, f"candidate row {row[1]!r} does not validate: {exc}") from exc


def structure_row(r: StructureRecord) -> tuple[Any, ...]:
    return (r.family, r.fingerprint, r.first_candidate_id, r.created_eval, r.evals, r.best_id,
            r.best_fitness_ms, r.status.value, r.concluded_eval)


def structure_from_row(row: tuple[Any, ...]) -> StructureRecord:
    return StructureRecord(family=row[0], fingerprint=row[1], first_candidate_id=row[2],
                           created_eval=row[3], evals=row[4], best_id=row[5], best_fitness_ms=row[6],
                           status=row[7], concluded_eval=row[8])


def champion_from_row(row: tuple[Any, ...]) -> ChampionEntry:
    change = ChampionChange(family=row[1], candidate_id=row[2], previous_id=row[3], fitness_ms=row[4],
                            family_evals=row[5], cause=row[6])
    return ChampionEntry(seq=row[0], change=change, at=row[7])
