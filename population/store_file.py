"""The run store's file: creation, opening and checks, locking, and transactions.

Every change happens inside :meth:`RunStore.transaction` (``BEGIN IMMEDIATE`` ...
``COMMIT``), in WAL mode with ``synchronous=NORMAL``: a commit that returned is in
the OS's hands and survives the process being killed (not a power cut, which
would need ``FULL``).  One writer per run is enforced with an advisory lock file;
any number of readers may open the run read-only while it is being written.
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self

from population.errors import RunStoreError, StoreCorrupt, StoreExists, StoreLocked, StoreReadOnly
from population.store_schema import (APPLICATION_ID, DDL, DELTAS_DDL, LOCK_NAME, SCHEMA_VERSION, check_header,
                                     check_identity, db_path, fsync_dir, note_closed, note_open)

BUSY_TIMEOUT_MS = 10_000


def _is_corruption(exc: sqlite3.DatabaseError) -> bool:
    text = str(exc).lower()
    return "malformed" in text or "not a database" in text or "disk image" in text


class StoreFile:
    def __init__(self, path: Path, conn: sqlite3.Connection, readonly: bool, lock_fd: int | None) -> None:
        self.path = path
        self.run_dir = path.parent
        self.readonly = readonly
        self._conn = conn
        self._lock_fd = lock_fd
        self._depth = 0
        self._begun = False  # the outermost transaction sent its BEGIN (a lazy one: at its first write)
        self._mutex = threading.RLock()
        note_open(path)  # see store_schema.check_header: no raw reads of this file while it is open here
        self._open_here = True

    # --- lifecycle -----------------------------------------------------------------------

    @classmethod
    def create(cls, run_dir: Path | str, config_json: str, initial: Mapping[str, Any] | None = None) -> Self:
        """Make a new store; refuses if one is already there.

        ``initial`` holds key/value entries (JSON-able) written with the schema.  The file
        is built under a temporary name and linked into place, so a process killed during
        creation leaves either no store or a complete one.
        """
        path = db_path(Path(run_dir))
        run_dir = path.parent
        json.loads(config_json)  # the config must be JSON; fail before creating anything
        # Checked before locking so that a live writer yields "exists", not "locked";
        # checked again under the lock against a concurrent creator.
        if path.exists():
            raise StoreExists(path, "a run store already exists; open it to resume, or pick a new run name")
        run_dir.mkdir(parents=True, exist_ok=True)
        lock_fd = _lock(run_dir, path)
        try:
            if path.exists():
                raise StoreExists(path, "a run store already exists; open it to resume, or pick a new run name")
            for stale in run_dir.glob(".run.sqlite.*.tmp*"):
                stale.unlink()  # leftovers of a creator that was killed; we hold the lock
            tmp = run_dir / f".run.sqlite.{os.getpid()}.tmp"
            conn = sqlite3.connect(tmp, isolation_level=None)
            try:
                conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                conn.executescript("BEGIN;" + DDL + "COMMIT;")
                now = repr(time.time())
                conn.executemany("INSERT INTO meta(key, value) VALUES (?, ?)", [
                    ("schema_version", str(SCHEMA_VERSION)), ("application", "qrsearch.population"),
                    ("created_at", now)])
                conn.execute("INSERT INTO kv(key, value) VALUES ('config', ?)", (config_json,))
                conn.executemany("INSERT INTO kv(key, value) VALUES (?, ?)",
                                 [(k, json.dumps(v, allow_nan=False, sort_keys=True))
                                  for k, v in (initial or {}).items()])
                conn.execute("PRAGMA journal_mode = WAL")
            finally:
                conn.close()
            with open(tmp, "rb") as fh:
                os.fsync(fh.fileno())
            try:
                os.link(tmp, path)
            except FileExistsError:
                raise StoreExists(path, "a run store appeared while this one was being created") from None
            finally:
                tmp.unlink()
            fsync_dir(run_dir)
            return cls._connect(path, readonly=False, lock_fd=lock_fd, integrity=False)
        except BaseException:
            os.close(lock_fd)
            raise

    @classmethod
    def open(cls, run_dir: Path | str, readonly: bool = False, *, integrity: bool = True) -> Self:
        """Open an existing store; ``readonly`` opens never block nor disturb a writer.

        ``integrity`` runs SQLite's quick_check, which finds truncation and damaged pages.
        """
        path = db_path(Path(run_dir))
        check_header(path)
        lock_fd = None if readonly else _lock(path.parent, path)
        try:
            return cls._connect(path, readonly=readonly, lock_fd=lock_fd, integrity=integrity)
        except BaseException:
            if lock_fd is not None:
                os.close(lock_fd)
            raise

    @classmethod
    def _connect(cls, path: Path, *, readonly: bool, lock_fd: int | None, integrity: bool) -> Self:
        # Validate through a read-only connection first so that nothing can be written to
        # a file that turns out to be damaged or foreign.
        probe: sqlite3.Connection | None = None
        side_files = [path.with_name(path.name + suffix) for suffix in ("-wal", "-shm")]
        absent = [f for f in side_files if not f.exists()]
        try:
            probe = sqlite3.connect(_read_uri(path, readonly), uri=True, isolation_level=None)
            probe.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            check_identity(probe, path, integrity=integrity)
            if readonly:
                probe.execute("PRAGMA query_only = ON")
                conn, probe = probe, None
            else:
                conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
                conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")
                conn.execute("PRAGMA foreign_keys = ON")
                migrate(conn)
        except (sqlite3.DatabaseError, RunStoreError) as exc:
            if probe is not None:
                probe.close()
                probe = None
            _remove_made(absent)
            if isinstance(exc, StoreCorrupt):  # a failed integrity check: the same advice
                said = str(exc).removeprefix(f"{path}: ")
                raise StoreCorrupt(path, f"{said}; {recovery_hint(path)}") from None
            if isinstance(exc, RunStoreError):
                raise
            raise StoreCorrupt(path, f"cannot be read as a run store: {exc}; {recovery_hint(path)}") from exc
        finally:
            if probe is not None:
                probe.close()
        return cls(path, conn, readonly, lock_fd)

    def close(self) -> None:
        with self._mutex:
            if self._open_here:
                self._open_here = False
                note_closed(self.path)
            self._conn.close()
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def connection(self) -> sqlite3.Connection:
        """For read queries by :mod:`population.lineage` and inspection tools."""
        return self._conn

    # --- transactions ----------------------------------------------------------------------

    @property
    def in_transaction(self) -> bool:
        return self._depth > 0

    @contextmanager
    def transaction(self, lazy: bool = False) -> Iterator[None]:
        """One atomic change; nested uses join the outermost, which alone commits.  ``lazy`` (the
        outermost only): begun at its first write, so that one that writes nothing commits nothing
        (the search loop's step, most of which write nothing at 64 evaluators)."""
        if self.readonly:
            raise StoreReadOnly(self.path, "opened read-only; cannot write")
        with self._mutex:
            outer = self._depth == 0
            if outer:
                self._begun = not lazy
                if self._begun:
                    self._execute("BEGIN IMMEDIATE")
            self._depth += 1
            try:
                yield
            except BaseException:
                self._depth -= 1
                if outer and self._conn.in_transaction:  # SQLite may have rolled back already
                    self._conn.execute("ROLLBACK")
                raise
            self._depth -= 1
            if outer and self._begun:
                try:
                    self._execute("COMMIT")
                except BaseException:
                    if self._conn.in_transaction:  # a failed COMMIT leaves it open
                        self._conn.execute("ROLLBACK")
                    raise

    @contextmanager
    def read(self) -> Iterator[None]:
        """A consistent snapshot for several queries (a reader sees one commit, not half of two)."""
        with self._mutex:
            if self._depth:
                yield
                return
            self._execute("BEGIN")
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                self._conn.execute("COMMIT")

    def _execute(self, sql: str, params: Iterable[Any] = ()) -> sqlite3.Cursor:
        try:
            return self._conn.execute(sql, tuple(params))
        except sqlite3.DatabaseError as exc:
            if _is_corruption(exc):
                raise StoreCorrupt(self.path, str(exc)) from exc
            raise

    def _write(self, sql: str, params: Iterable[Any] = ()) -> sqlite3.Cursor:
        if not self._depth or self.readonly:
            raise RunStoreError(self.path, "writes must happen inside store.transaction()")
        if not self._begun:
            self._execute("BEGIN IMMEDIATE")
            self._begun = True
        return self._execute(sql, params)

    def _one(self, sql: str, params: Iterable[Any] = ()) -> Any:
        row = self._execute(sql, params).fetchone()
        return None if row is None else row[0]



def recovery_hint(path: Path) -> str:
    """What to do with a damaged store, for the one line that reports it."""
    return (f"restore it from a copy, or save what SQLite can read with `sqlite3 {path} .recover | sqlite3 "
            f"{path.with_name('recovered.sqlite')}`; the run's config.yaml can start a new run")


def _remove_made(side_files: list[Path]) -> None:
    """Remove the ``-wal``/``-shm`` files that a failed open created (they were absent before it):
    a damaged store stays as it was found."""
    for side in side_files:
        try:
            side.unlink()
        except FileNotFoundError:
            pass


def _lock(run_dir: Path, path: Path) -> int:
    fd = os.open(run_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise StoreLocked(path, "another process has this run open for writing") from None
    return fd


def migrate(conn: sqlite3.Connection) -> None:
    """Bring a writer's store of an older schema to :data:`SCHEMA_VERSION` in one transaction (schema
    1 lacks only the deltas' table); a store of this schema is left untouched."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version == SCHEMA_VERSION:
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(DELTAS_DDL)
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def read_connection(path: Path) -> sqlite3.Connection:
    """A read-only connection to a store file, as a reader opens it (no ``-shm``/``-wal`` made)."""
    conn = sqlite3.connect(_read_uri(path, True), uri=True, isolation_level=None, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA query_only = ON")
    return conn


def _read_uri(path: Path, readonly: bool) -> str:
    """The URI of the validating (and, for readers, the only) connection.  With no ``-wal``
    file beside the store no writer is live and the last one checkpointed, so a reader opens
    it ``immutable``: SQLite then creates no ``-shm``/``-wal`` files (``mode=ro`` alone would)."""
    uri = f"{path.resolve().as_uri()}?mode=ro"
    if readonly and not path.with_name(path.name + "-wal").exists():
        uri += "&immutable=1"
    return uri
