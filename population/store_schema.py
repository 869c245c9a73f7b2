"""The run store's file format: schema, identity marks, and the checks made before use.

A store is ``<run_dir>/run.sqlite`` (plus SQLite's ``-wal``/``-shm`` while open).
Its header carries an application id (a foreign SQLite file is recognised without
reading its tables) and ``user_version`` = :data:`SCHEMA_VERSION`.  Nothing here
ever writes to an existing file: a bad file is reported, not repaired.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from population.errors import StoreCorrupt, StoreForeign, StoreNotFound, StoreTooNew, StoreTooOld

SCHEMA_VERSION = 2
# Schema 1 lacks only the deltas' table (population/sources.py): it is read as it is, and a writer
# opening it adds the table and marks it 2 (store_file.migrate).
MIGRATABLE_VERSIONS = (1,)
APPLICATION_ID = 0x51525352  # "QRSR"
DB_NAME = "run.sqlite"
LOCK_NAME = "run.lock"
_MAGIC = b"SQLite format 3\x00"

DDL = """
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT;
CREATE TABLE kv(key TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT;
CREATE TABLE counters(key TEXT PRIMARY KEY, value ANY NOT NULL) STRICT;
CREATE TABLE rng_states(name TEXT PRIMARY KEY, state TEXT NOT NULL) STRICT;
CREATE TABLE blobs(sha256 TEXT PRIMARY KEY, text TEXT NOT NULL) STRICT;
CREATE TABLE candidates(
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    family TEXT NOT NULL,
    island INTEGER NOT NULL,
    parent1 TEXT REFERENCES candidates(id),
    parent2 TEXT REFERENCES candidates(id),
    origin TEXT NOT NULL,
    source_sha256 TEXT NOT NULL REFERENCES blobs(sha256),
    params TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    generation INTEGER NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    state TEXT NOT NULL,
    reason TEXT NOT NULL,
    fitness_ms REAL,
    member INTEGER NOT NULL DEFAULT 0,
    told_seq INTEGER UNIQUE,
    CHECK ((state = 'verified') = (fitness_ms IS NOT NULL)),
    CHECK (member IN (0, 1) AND (member = 0 OR state = 'verified'))
) STRICT;
CREATE INDEX cand_parent1 ON candidates(parent1);
CREATE INDEX cand_parent2 ON candidates(parent2);
CREATE INDEX cand_family ON candidates(family, seq);
CREATE INDEX cand_told ON candidates(family, told_seq) WHERE told_seq IS NOT NULL;
CREATE INDEX cand_structure ON candidates(family, fingerprint, told_seq);
CREATE INDEX cand_members ON candidates(family, island) WHERE member = 1;
CREATE INDEX cand_inflight ON candidates(seq) WHERE state IN ('pending', 'running');
CREATE TABLE results(
    candidate_id TEXT PRIMARY KEY REFERENCES candidates(id),
    geomean_ms REAL,
    speedup REAL,
    device TEXT NOT NULL,
    error TEXT NOT NULL,
    body TEXT NOT NULL
) STRICT;
CREATE TABLE structures(
    family TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    first_candidate_id TEXT NOT NULL REFERENCES candidates(id),
    created_eval INTEGER NOT NULL,
    evals INTEGER NOT NULL,
    best_id TEXT REFERENCES candidates(id),
    best_fitness_ms REAL,
    status TEXT NOT NULL,
    concluded_eval INTEGER,
    PRIMARY KEY (family, fingerprint)
) STRICT;
CREATE TABLE champions(
    seq INTEGER PRIMARY KEY,
    family TEXT NOT NULL,
    candidate_id TEXT NOT NULL REFERENCES candidates(id),
    previous_id TEXT REFERENCES candidates(id),
    fitness_ms REAL NOT NULL,
    family_evals INTEGER NOT NULL,
    cause TEXT NOT NULL,
    at REAL NOT NULL
) STRICT;
CREATE INDEX champions_family ON champions(family, seq);
"""
# Human events (population/events.py): additive to version 1, so it is also created on demand
# in stores made before it existed.
EVENTS_DDL = ("CREATE TABLE IF NOT EXISTS events(seq INTEGER PRIMARY KEY, kind TEXT NOT NULL, "
              "target TEXT NOT NULL, at REAL NOT NULL, body TEXT NOT NULL) STRICT")
DDL += EVENTS_DDL + ";\n"
# Schema 2: a source kept as the span where it differs from a whole one (population/sources.py);
# its blobs row holds an empty text, so that candidates name it as any other.
DELTAS_DDL = ("CREATE TABLE IF NOT EXISTS source_deltas(sha256 TEXT PRIMARY KEY REFERENCES blobs(sha256), "
              "base TEXT NOT NULL REFERENCES blobs(sha256), head INTEGER NOT NULL, tail INTEGER NOT NULL, "
              "middle TEXT NOT NULL) STRICT")
DDL += DELTAS_DDL + ";\n"


def db_path(run_dir: Path) -> Path:
    """The store file of a run directory (a path to the file itself is accepted too)."""
    run_dir = Path(run_dir)
    return run_dir if run_dir.name == DB_NAME else run_dir / DB_NAME


# Store files this process has open through SQLite.  Closing *any* descriptor of a file drops
# every POSIX lock the process holds on it (fcntl semantics), SQLite's included: another
# process could then checkpoint and truncate the WAL under this one's connection.  So the
# raw header read below is skipped for a file already open here (its header was checked
# when it was opened, and SQL-level identity checks still run).
_OPEN_HERE: dict[Path, int] = {}


def note_open(path: Path) -> None:
    key = Path(path).resolve()
    _OPEN_HERE[key] = _OPEN_HERE.get(key, 0) + 1


def note_closed(path: Path) -> None:
    key = Path(path).resolve()
    if _OPEN_HERE.get(key, 0) <= 1:
        _OPEN_HERE.pop(key, None)
    else:
        _OPEN_HERE[key] -= 1


def check_header(path: Path) -> None:
    """Reject what is visibly not ours from the first 100 bytes, before SQLite touches it."""
    if not path.parent.is_dir():
        raise StoreNotFound(path.parent, "no such run directory")
    if not path.is_file():
        raise StoreNotFound(path, "no run store here (a run directory holds the run.sqlite that `qrsearch launch` "
                                  "writes)")
    if path.resolve() in _OPEN_HERE:
        return
    with open(path, "rb") as fh:
        header = fh.read(100)
    if len(header) < 100:
        raise StoreCorrupt(path, f"truncated: {len(header)} bytes, shorter than an SQLite header")
    if header[:16] != _MAGIC:
        raise StoreCorrupt(path, "not an SQLite database (bad header); the file was left untouched")
    app_id = int.from_bytes(header[68:72], "big")
    if app_id != APPLICATION_ID:
        raise StoreForeign(path, f"an SQLite database of another application (application_id "
                                 f"{app_id:#x}, expected {APPLICATION_ID:#x})")


def check_identity(conn: sqlite3.Connection, path: Path, *, integrity: bool) -> None:
    """Schema version, meta rows and (optionally) SQLite's quick_check, on an open connection."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise StoreTooNew(path, f"schema version {version} is newer than this qrsearch "
                                f"understands ({SCHEMA_VERSION}); upgrade qrsearch to read it")
    if version < SCHEMA_VERSION and version not in MIGRATABLE_VERSIONS:
        raise StoreTooOld(path, f"schema version {version} is older than {SCHEMA_VERSION} "
                                f"and has no migration")
    try:
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    except sqlite3.OperationalError as exc:
        raise StoreCorrupt(path, f"missing tables ({exc})") from exc
    if meta.get("schema_version") != str(version):
        raise StoreCorrupt(path, f"meta.schema_version {meta.get('schema_version')!r} disagrees "
                                 f"with the header ({version})")
    if integrity:
        problems = [r[0] for r in conn.execute("PRAGMA quick_check(5)").fetchall()]
        if problems != ["ok"]:
            raise StoreCorrupt(path, "integrity check failed: " + "; ".join(problems))


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
