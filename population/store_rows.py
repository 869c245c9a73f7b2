"""Conversions between store rows and models, in one place so the columns stay in step."""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from population.errors import StoreCorrupt
from population.family import ChampionChange
from population.maturation import StructureRecord
from population.models import Candidate, Frozen, Origin, State, canonical_params

CAND_COLS = ("seq, id, family, island, parent1, parent2, origin, source_sha256, params, fingerprint, "
             "generation, created_at, updated_at, state, reason, fitness_ms, member, told_seq")
CAND_INSERT = f"INSERT INTO candidates({CAND_COLS}) VALUES ({', '.join('?' * 18)})"


def _one_of(column: str, values: Iterable[str]) -> str:
    listed = ", ".join(f"'{v}'" for v in values)
    return f"{column} IN ({listed})"


def _chars(column: str, allowed: str, longest: int) -> str:
    return f"length({column}) BETWEEN 1 AND {longest} AND {column} NOT GLOB '*[^{allowed}]*'"


_ID_CHARS, _FAMILY_CHARS = "-A-Za-z0-9_.:", "-A-Za-z0-9_."
_ONE_PARENT = (Origin.LLM, Origin.OPTUNA, Origin.MIGRATION)
# True for a row that passes every check of Candidate's validation (field constraints and
# _consistent) that the schema does not already make: such a row is built without validating
# it again, which is most of the cost of reading 50,000 candidates.  False for any doubt (a
# failure's reason without a letter or digit, say): that row is validated as any other, so the
# test may be stricter than the model, never looser.  The params' JSON is checked in Python
# (candidates_from_rows), where it is parsed.
ROW_PLAIN = " AND ".join([
    _chars("id", _ID_CHARS, 64), _chars("family", _FAMILY_CHARS, 64), "island >= 0", "generation >= 0",
    f"(parent1 IS NULL OR {_chars('parent1', _ID_CHARS, 64)})",
    f"(parent2 IS NULL OR {_chars('parent2', _ID_CHARS, 64)})",
    "id IS NOT parent1 AND id IS NOT parent2",
    f"CASE WHEN origin = '{Origin.SEED.value}' THEN parent1 IS NULL AND parent2 IS NULL "
    f"WHEN {_one_of('origin', _ONE_PARENT)} THEN (parent1 IS NULL) + (parent2 IS NULL) = 1 "
    f"WHEN origin = '{Origin.CROSSOVER.value}' THEN parent1 IS NOT NULL AND parent2 IS NOT NULL "
    f"ELSE {_one_of('origin', [o for o in Origin if o not in (Origin.SEED, Origin.CROSSOVER, *_ONE_PARENT)])} END",
    "length(source_sha256) = 64 AND source_sha256 NOT GLOB '*[^0-9a-f]*'",
    "length(fingerprint) BETWEEN 1 AND 256", _one_of("state", State),
    f"CASE WHEN state = '{State.VERIFIED.value}' THEN fitness_ms > 0 AND fitness_ms <= 1.7976931348623157e308 "
    f"ELSE fitness_ms IS NULL END",
    f"(NOT {_one_of('state', [s for s in State if s.is_failure])} OR reason GLOB '*[A-Za-z0-9]*')",
])
CAND_CHECKED_COLS = f"{CAND_COLS}, {ROW_PLAIN}"
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
        raise StoreCorrupt(path, f"candidate row {row[1]!r} does not validate ({_one_line(exc)}): edited outside "
                                 f"qrsearch or damaged; restore the store from a copy, or start a new run from the "
                                 f"run's config.yaml") from exc


def _one_line(exc: ValueError) -> str:
    """What is wrong with a row, on one line (pydantic's own text takes four per field)."""
    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(map(str, e['loc'])) + ': ' if e['loc'] else ''}"
                         f"{e['msg'].removeprefix('Value error, ')}" for e in exc.errors())
    return " ".join(str(exc).split())


def candidates_from_rows(rows: Iterable[tuple[Any, ...]], path: Path) -> list[Candidate]:
    """Candidates from rows read with :data:`CAND_CHECKED_COLS`: a row that passed the checks is
    built without validating it again, any other is validated (and a bad one reported)."""
    out = []
    for row in rows:
        cand = _checked_candidate(row) if row[18] else None
        out.append(candidate_from_row(row, path) if cand is None else cand)
    return out


_SCALARS = frozenset({str, int, bool, type(None)})
_decode = json.JSONDecoder().raw_decode
# Every field set, as validation of a stored row sets them: the checked rows are copies of it
# (model_copy takes trusted values, unvalidated, and is the cheapest public way to build a model).
_TEMPLATE = Candidate(id="c0", family="f", island=0, parent_ids=(), origin=Origin.SEED, source_sha256="0" * 64,
                      params={}, fingerprint="f", generation=0, created_at=0.0, updated_at=0.0,
                      state=State.PENDING, reason="", fitness_ms=None)


def _checked_candidate(row: tuple[Any, ...]) -> Candidate | None:
    text = row[8]
    try:
        params, end = _decode(text)  # json.loads without its checks of its arguments, once a row
    except ValueError:
        return None
    if end != len(text) or type(params) is not dict or not all(
            type(v) in _SCALARS or (type(v) is float and math.isfinite(v)) for v in params.values()):
        return None  # what the Params type or canonical_params would refuse
    return _TEMPLATE.model_copy(update={
        "id": row[1], "family": row[2], "island": row[3],
        "parent_ids": tuple(p for p in (row[4], row[5]) if p is not None), "origin": Origin(row[6]),
        "source_sha256": row[7], "params": params, "fingerprint": row[9], "generation": row[10],
        "created_at": row[11], "updated_at": row[12], "state": State(row[13]), "reason": row[14],
        "fitness_ms": row[15]})


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
