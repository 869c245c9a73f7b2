"""A run as frozen, in-memory data: what ``status``, ``champions``, ``lineage`` and the report read.

:meth:`RunStore.snapshot` reads every table the readers need inside one read
transaction, so the picture is consistent even while a driver is writing, and the
readers never touch SQL.  Lineage questions over it are answered in memory by
:mod:`population.lineage` (``snapshot_*`` functions).

Speedups are computed here and only here for readers: a result is stored with its times,
and :attr:`RunSnapshot.results` fills in per-case and overall speedups against the
current champion of the baseline family (:data:`population.records.BASELINE_FAMILY`) of
the same run.  A run without a baseline result yet shows the results as stored.
"""

from __future__ import annotations

import json
import sqlite3
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from population.events import EventOutcome, HumanEvent
from population.models import Candidate, EvalResult, Origin, result_from_json
from population.records import (BASELINE_FAMILY, LLM_CALL_PREFIX, SESSIONS_KEY, STATUS_KEY, DriverStatus, LLMCall,
                                RunCounters, Session, parse, prefix_of)
from population.sources import SourceReader
from population.speedup import with_speedups
from population.store_rows import ChampionEntry

if TYPE_CHECKING:
    from population.store import RunStore

V = TypeVar("V")


class StoredRows(Mapping[str, V]):
    """Rows of a store's table that never change once written (results, source blobs), keyed as
    the snapshot's read transaction saw them and read from the file on first use.

    A run of 50,000 candidates holds about 2 GB of sources and 100 MB of results: reading and
    parsing them all took most of an inspection command's time, and most commands need a few
    (``show`` one, ``status`` the latest 200).  A row written once and never changed, read later
    for a key the snapshot saw, is the row the snapshot would have read, so the picture stays
    consistent."""

    def __init__(self, path: Path, keys: Iterable[str], table: str, key: str, value: str,
                 parse: Callable[[str], V]) -> None:
        self._path, self._keys = path, frozenset(keys)
        self._one = f"SELECT {value} FROM {table} WHERE {key} = ?"
        self._all = f"SELECT {key}, {value} FROM {table}"
        self._table, self._key, self._value = table, key, value
        self._parse = parse
        self._rows: dict[str, V] = {}
        self._conn: sqlite3.Connection | None = None

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            from population.store_file import read_connection

            self._conn = read_connection(self._path)
            weakref.finalize(self, self._conn.close)
        return self._conn

    def __getitem__(self, key: str) -> V:
        if key not in self._keys:
            raise KeyError(key)
        if key not in self._rows:
            value = self._read(key)
            if value is None:
                raise KeyError(key)
            self._rows[key] = value
        return self._rows[key]

    def _read(self, key: str) -> V | None:
        row = self._connection().execute(self._one, (key,)).fetchone()
        return None if row is None else self._parse(row[0])

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def load_all(self) -> dict[str, V]:
        """Every row, in one read (for readers that go through them all: a report, best per case)."""
        if len(self._rows) < len(self._keys):
            for key, text in self._connection().execute(self._all):
                if key in self._keys and key not in self._rows:
                    self._rows[key] = self._parse(text)
        return self._rows

    def scan(self, paths: Sequence[str], array: str, item_paths: Sequence[str],
             width: int = 16) -> Iterator[tuple[str, list[Any], list[list[Any]]]]:
        """Per row: its JSON value's fields at ``paths``, and the fields at ``item_paths`` (``$.case``)
        of each element of its array at ``array`` (``$.cases``), in array order.  SQLite parses each
        row once and extracts all of them in one call (the first ``width`` elements; a row with
        more is read again by itself): on a store of 50,000 results, finish times and case times
        in less than half a second, where parsing the rows took five."""
        def extract(count: int) -> tuple[str, list[str]]:  # of two paths or more: a JSON array
            wanted = [*paths, *(f"{array}[{i}]{p.removeprefix('$')}" for i in range(count) for p in item_paths)]
            return f"json_extract({self._value}, {', '.join('?' * len(wanted))})", wanted

        step, first = len(item_paths), len(paths)
        width = max(width, 2)
        fields, params = extract(width)
        rows = self._connection().execute(
            f"SELECT {self._key}, json_array_length({self._value}, ?), {fields} FROM {self._table}", (array, *params))
        for key, length, text in rows:
            if key not in self._keys:
                continue
            count = length or 0
            if count > width:
                fields_all, params_all = extract(count)
                text = self._connection().execute(f"SELECT {fields_all} FROM {self._table} WHERE {self._key} = ?",
                                                  (*params_all, key)).fetchone()[0]
            values = json.loads(text)
            flat = values[first:first + count * step]
            yield key, values[:first], [flat[i:i + step] for i in range(0, len(flat), step)]

    def values(self):  # type: ignore[override]
        return self.load_all().values()

    def items(self):  # type: ignore[override]
        return self.load_all().items()


class StoredSources(StoredRows[str]):
    """The store's source texts by sha256, as :class:`StoredRows` reads them; a text kept as a delta
    of a whole one (population/sources.py) is joined on first use."""

    def __init__(self, path: Path, keys: Iterable[str]) -> None:
        super().__init__(path, keys, "blobs", "sha256", "text", str)
        self._reader: SourceReader | None = None

    def _read(self, key: str) -> str | None:
        if self._reader is None:
            self._reader = SourceReader(self._connection())
        return self._reader.text(key)

    def load_all(self) -> dict[str, str]:
        for key in self._keys:
            self[key]
        return self._rows


class WithSpeedups(Mapping[str, EvalResult]):
    """Stored results with speedups against a baseline result, each worked out on first use."""

    def __init__(self, stored: Mapping[str, EvalResult], base: EvalResult) -> None:
        self._stored, self._base = stored, base
        self._done: dict[str, EvalResult] = {}

    def __getitem__(self, key: str) -> EvalResult:
        if key not in self._done:
            self._done[key] = with_speedups(self._stored[key], self._base)
        return self._done[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._stored)

    def __len__(self) -> int:
        return len(self._stored)

    def __contains__(self, key: object) -> bool:
        return key in self._stored


@dataclass(frozen=True)
class RunSnapshot:
    """One consistent read of a run store.  Frozen: the readers share it and never write back.

    Mappings are plain dicts for speed (a run has thousands of candidates); treat them as
    read-only."""

    run_dir: Path
    config_json: str  # the run config exactly as given to ``create`` ("" for none)
    candidates: tuple[Candidate, ...]  # in creation order
    told: Mapping[str, int]  # candidate id -> the evaluation number at which it finished
    stored_results: Mapping[str, EvalResult]  # candidate id -> its own result, as stored
    history: tuple[ChampionEntry, ...]  # champion changes, oldest first
    current: Mapping[str, str]  # family -> current champion id
    counters: Mapping[str, int | float]
    kv: Mapping[str, Any]  # every key/value entry but the config (keys: population/records.py)
    sources: Mapping[str, str]  # sha256 -> source text
    devices: Mapping[str, int]  # the results' device names and how many results each
    events: tuple[HumanEvent, ...]  # the engineer's events, oldest first
    outcomes: Mapping[int, EventOutcome]  # event seq -> what the driver made of it
    taken_at: float  # wall clock of the read (heartbeats are judged against it)

    # --- derived, computed once on first use --------------------------------------------------

    @cached_property
    def config(self) -> dict[str, Any]:
        return json.loads(self.config_json or "{}")

    @cached_property
    def by_id(self) -> dict[str, Candidate]:
        return {c.id: c for c in self.candidates}

    @property
    def baseline_id(self) -> str | None:
        return self.current.get(BASELINE_FAMILY)

    @property
    def baseline(self) -> EvalResult | None:
        """The baseline champion's result (the speedup reference), as stored."""
        base = self.baseline_id
        return self.stored_results.get(base) if base else None

    @cached_property
    def results(self) -> Mapping[str, EvalResult]:
        """Every candidate's own result with speedups against this run's baseline: the one place
        readers get speedups from (each worked out when first read)."""
        base = self.baseline
        return self.stored_results if base is None else WithSpeedups(self.stored_results, base)

    def original(self, cid: str) -> Candidate:
        """A migrant copy's original (same code, measured once); anything else itself."""
        cand = self.by_id[cid]
        while cand.origin is Origin.MIGRATION and cand.parent_ids and cand.parent_ids[0] in self.by_id:
            cand = self.by_id[cand.parent_ids[0]]
        return cand

    def result(self, cid: str) -> EvalResult | None:
        """The measurement behind a candidate (a migrant's original's), with speedups."""
        return self.results.get(self.original(cid).id)

    def source(self, cid: str) -> str:
        return self.sources[self.by_id[cid].source_sha256]

    # --- the driver's records (population/records.py) -----------------------------------------

    @cached_property
    def status(self) -> DriverStatus:
        return parse(DriverStatus, self.kv.get(STATUS_KEY))

    @cached_property
    def sessions(self) -> tuple[Session, ...]:
        return tuple(parse(Session, s) for s in self.kv.get(SESSIONS_KEY) or [] if isinstance(s, dict))

    @cached_property
    def run_counters(self) -> RunCounters:
        return RunCounters.of(self.counters)

    @cached_property
    def llm_calls(self) -> tuple[LLMCall, ...]:
        return tuple(parse(LLMCall, v) for k, v in sorted(self.kv.items())
                     if k.startswith(LLM_CALL_PREFIX) and isinstance(v, dict))

    def entries(self, template: str) -> dict[str, Any]:
        """Entries of one key template, by the part after its prefix
        (``entries(NOTE_KEY)`` -> ``{candidate id: note}``)."""
        prefix = prefix_of(template)
        return {k[len(prefix):]: v for k, v in self.kv.items() if k.startswith(prefix)}

    def get(self, key: str, default: Any = None) -> Any:
        value = self.kv.get(key)
        return default if value is None else value

    def started(self) -> float | None:
        """When the run started: its first session, else its first candidate."""
        starts = [s.started for s in self.sessions if s.started]
        if starts:
            return min(starts)
        return min((c.created_at for c in self.candidates), default=None)


def read_snapshot(store: RunStore) -> RunSnapshot:
    """Read a snapshot through the store's API, in one read transaction (results and sources: which
    exist, read when first used)."""
    with store.read():
        return RunSnapshot(
            run_dir=store.run_dir, config_json=store.config_json() or "",
            candidates=tuple(store.list_candidates()), told=store.told_seqs(),
            stored_results=StoredRows(store.path, store.result_ids(), "results", "candidate_id", "body",
                                      result_from_json),
            history=tuple(store.champion_history()), current=store.current_champion_ids(),
            counters=store.counters(), kv=store.kv_items(),
            sources=StoredSources(store.path, store.source_hashes()),
            devices=store.result_devices(), events=tuple(store.events()), outcomes=store.outcomes(),
            taken_at=time.time())
