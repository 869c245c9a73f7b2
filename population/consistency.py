"""Cross-table invariants of a run store, checked in one read snapshot.

Used after every kill in the kill test, and available to a ``doctor`` command: a
store that passes holds every committed result exactly once and counters that
equal the rows they count.
"""

from __future__ import annotations

from population.models import FAILURE_STATES, source_hash
from population.sources import SourceReader
from population.store import RunStore

_FAILED = "(" + ", ".join(f"'{s.value}'" for s in FAILURE_STATES) + ")"

# Each query returns offending rows; its label says what they violate.
_QUERIES: tuple[tuple[str, str], ...] = (
    ("result of an unfinished candidate",
     "SELECT r.candidate_id FROM results r JOIN candidates c ON c.id = r.candidate_id "
     "WHERE c.state IN ('pending', 'running') OR c.told_seq IS NULL"),
    ("finished candidate without an evaluation number",
     "SELECT id FROM candidates WHERE state NOT IN ('pending', 'running') AND origin != 'migration' "
     "AND told_seq IS NULL"),
    ("unfinished candidate with an evaluation number",
     "SELECT id FROM candidates WHERE state IN ('pending', 'running') AND told_seq IS NOT NULL"),
    ("verified candidate whose result disagrees with its fitness",
     "SELECT c.id FROM candidates c LEFT JOIN results r ON r.candidate_id = c.id WHERE c.state = 'verified' "
     "AND c.origin != 'migration' AND CASE WHEN json_extract(r.body, '$.focus_ms') IS NULL "
     "THEN r.geomean_ms IS NULL OR r.geomean_ms != c.fitness_ms "  # a focused run ranks by focus_ms
     "ELSE abs(json_extract(r.body, '$.focus_ms') - c.fitness_ms) > 1e-9 * c.fitness_ms END"),
    ("failed candidate without a reason",
     f"SELECT id FROM candidates WHERE state IN {_FAILED} AND trim(reason) = ''"),
    ("migrant that is not a verified copy of a same-family parent",
     "SELECT m.id FROM candidates m LEFT JOIN candidates p ON p.id = m.parent1 WHERE m.origin = 'migration' "
     "AND (p.id IS NULL OR m.state != 'verified' OR p.family != m.family OR p.fitness_ms != m.fitness_ms "
     "OR p.source_sha256 != m.source_sha256 OR p.params != m.params OR m.told_seq IS NOT NULL)"),
    ("current champion that is not a verified island member",
     "SELECT h.candidate_id FROM champions h JOIN candidates c ON c.id = h.candidate_id WHERE h.seq IN "
     "(SELECT max(seq) FROM champions GROUP BY family) AND (c.member != 1 OR c.family != h.family)"),
    ("champion that is not strictly faster than the one before",
     "SELECT h.candidate_id FROM champions h JOIN champions p ON p.family = h.family AND p.seq = "
     "(SELECT max(seq) FROM champions WHERE family = h.family AND seq < h.seq) "
     "WHERE h.fitness_ms >= p.fitness_ms AND h.cause != 'disputed' AND NOT EXISTS (SELECT 1 FROM kv, "
     "json_each(kv.value) fam, json_each(fam.value) d WHERE kv.key = 'population/disputed' "
     "AND d.value = p.candidate_id)"),  # a disputed champion's successor may be slower: it reproduced
    ("structure whose evaluation count disagrees with its candidates",
     "SELECT s.fingerprint FROM structures s WHERE s.evals != (SELECT count(*) FROM candidates c WHERE "
     "c.family = s.family AND c.fingerprint = s.fingerprint AND c.told_seq IS NOT NULL "
     "AND c.state != 'rejected')"),
    ("evaluated structure without a record",
     "SELECT DISTINCT c.fingerprint FROM candidates c LEFT JOIN structures s ON s.family = c.family AND "
     "s.fingerprint = c.fingerprint WHERE c.told_seq IS NOT NULL AND c.state != 'rejected' "
     "AND s.fingerprint IS NULL"),
    ("structure whose best is not its fastest verified candidate",
     "SELECT s.fingerprint FROM structures s WHERE s.best_fitness_ms IS NOT (SELECT min(c.fitness_ms) FROM "
     "candidates c WHERE c.family = s.family AND c.fingerprint = s.fingerprint AND c.told_seq IS NOT NULL) "
     "OR s.best_fitness_ms IS NOT (SELECT fitness_ms FROM candidates WHERE id = s.best_id)"),
)

# counter key -> query for the row count it must equal
_COUNTED: tuple[tuple[str, str], ...] = (
    ("evaluations", "SELECT count(*) FROM candidates WHERE told_seq IS NOT NULL"),
    ("failures", f"SELECT count(*) FROM candidates WHERE state IN {_FAILED}"),
    ("migrants", "SELECT count(*) FROM candidates WHERE origin = 'migration'"),
)


def check_consistency(store: RunStore, *, deep: bool = False) -> list[str]:
    """Every violated invariant as a line; ``deep`` also re-hashes every source blob."""
    problems: list[str] = []
    conn = store.connection
    with store.read():
        for row in conn.execute("PRAGMA foreign_key_check").fetchall():
            problems.append(f"dangling reference: {row}")
        for label, sql in _QUERIES:
            bad = [r[0] for r in conn.execute(sql).fetchall()]
            if bad:
                problems.append(f"{label}: {bad[:10]}")
        counters = store.counters()
        for key, sql in _COUNTED:
            rows = conn.execute(sql).fetchone()[0]
            if counters.get(key, 0) != rows:
                problems.append(f"counter {key} = {counters.get(key, 0)} but {rows} rows")
        told_max = conn.execute("SELECT coalesce(max(told_seq), 0) FROM candidates").fetchone()[0]
        if told_max != counters.get("evaluations", 0):
            problems.append(f"evaluation numbers run to {told_max}, counter says {counters.get('evaluations', 0)}")
        per_family = dict(conn.execute("SELECT family, count(*) FROM candidates WHERE told_seq IS NOT NULL "
                                       "GROUP BY family").fetchall())
        for key, value in counters.items():
            if key.startswith("evals/") and per_family.get(key[6:], 0) != value:
                problems.append(f"counter {key} = {value} but {per_family.get(key[6:], 0)} rows")
        for fam, n in per_family.items():
            if counters.get(f"evals/{fam}") != n:
                problems.append(f"family {fam} has {n} evaluations but no matching counter")
        if deep:
            reader = SourceReader(conn)
            for (sha,) in conn.execute("SELECT sha256 FROM blobs").fetchall():
                delta = reader.delta(sha)
                if delta is not None and reader.delta(delta.base) is not None:
                    problems.append(f"blob {sha} is a delta of {delta.base}, which is not whole")
                    continue
                try:
                    text = reader.text(sha)
                except KeyError as exc:
                    problems.append(str(exc).strip("'\""))
                    continue
                if text is None or source_hash(text) != sha:
                    problems.append(f"blob {sha} does not hash to its key")
    return problems
