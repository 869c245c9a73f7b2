"""Human events in the run store: a second writer beside the driver, durable, ordered, and
what they add up to (promotions and retirements in force, pause, notes); disputed results."""

from __future__ import annotations

import sqlite3
from pathlib import Path
import threading

import pytest

from population.consistency import check_consistency
from population.errors import StoreCorrupt, StoreForeign, StoreNotFound
from population.events import (EventKind, EventOutcome, EventWriter, OutcomeStatus, active, is_paused,
                               latest_active, new_event, notes_by_candidate, read_events)
from population.family import Family
from population.models import NewCandidate, Origin, State
from population.run import load_population
from population.store import RunStore
from tests.population.conftest import CONFIG
from tests.population.helpers import Maker


def test_a_second_writer_appends_while_the_driver_holds_the_store(run):
    with EventWriter(run.store.run_dir) as writer:
        first = writer.append(new_event(EventKind.NOTE, "c0000001", "an idea", who="alice", at=1.0))
        # The driver keeps committing meanwhile; both writers' commits land.
        run.add_counters({"x": 1})
        second = writer.append(new_event(EventKind.PAUSE, who="bob", at=2.0))
    assert (first.seq, second.seq) == (1, 2)
    seen = read_events(run.store.connection)
    assert [(e.seq, e.kind, e.who, e.text) for e in seen] == [(1, EventKind.NOTE, "alice", "an idea"),
                                                              (2, EventKind.PAUSE, "bob", "")]
    assert read_events(run.store.connection, after=1) == [seen[1]]
    assert run.store.counter("x") == 1
    with RunStore.open(run.store.run_dir, readonly=True) as reader:
        assert read_events(reader.connection) == seen


def test_concurrent_writers_lose_nothing(run):
    def write(who: str) -> None:
        with EventWriter(run.store.run_dir) as writer:
            for i in range(20):
                writer.append(new_event(EventKind.NOTE, "c0000001", f"{who} {i}", who=who))

    threads = [threading.Thread(target=write, args=(n,)) for n in ("a", "b", "c")]
    for t in threads:
        t.start()
    for _ in range(20):
        run.add_counters({"driver": 1})  # the driver writing at the same time
    for t in threads:
        t.join()
    events = read_events(run.store.connection)
    assert [e.seq for e in events] == list(range(1, 61))
    assert sorted(e.text for e in events) == sorted(f"{w} {i}" for w in "abc" for i in range(20))


def test_a_store_made_before_the_events_table_gets_it_on_the_first_event(run):
    run.store.connection.execute("DROP TABLE events")
    assert read_events(run.store.connection) == []
    with EventWriter(run.store.run_dir) as writer:
        assert writer.append(new_event(EventKind.PAUSE, who="a")).seq == 1
    assert [e.kind for e in read_events(run.store.connection)] == [EventKind.PAUSE]


def test_the_writer_refuses_what_is_not_a_run_store(tmp_path):
    with pytest.raises(StoreNotFound):
        EventWriter(tmp_path / "nothing")
    (tmp_path / "x").mkdir()
    sqlite3.connect(tmp_path / "x" / "run.sqlite").execute("CREATE TABLE t(a)").connection.commit()
    with pytest.raises(StoreForeign):
        EventWriter(tmp_path / "x")
    (tmp_path / "y").mkdir()
    (tmp_path / "y" / "run.sqlite").write_bytes(b"not a database" * 20)
    with pytest.raises(StoreCorrupt):
        EventWriter(tmp_path / "y")


def test_undo_promote_retire_pause_and_notes():
    def ev(seq, kind, target="", undoes=None, text=""):
        return new_event(kind, target, text, undoes=undoes, who="a").model_copy(update={"seq": seq})

    events = [ev(1, EventKind.PROMOTE, "c1"), ev(2, EventKind.PROMOTE, "c2"), ev(3, EventKind.PROMOTE, "c1", undoes=1),
              ev(4, EventKind.PAUSE), ev(5, EventKind.UNPAUSE), ev(6, EventKind.PAUSE),
              ev(7, EventKind.NOTE, "c2", text="n"), ev(8, EventKind.INJECT, "f", text="hand"),
              ev(9, EventKind.RETIRE, "f/s1"), ev(10, EventKind.RETIRE, "f/s1", undoes=9)]
    assert [e.target for e in active(events, EventKind.PROMOTE)] == ["c2"]
    assert latest_active(events, EventKind.PROMOTE, "c1") is None
    assert active(events, EventKind.RETIRE) == []
    assert is_paused(events) and not is_paused(events[:5])
    outcomes = {8: EventOutcome(seq=8, status=OutcomeStatus.APPLIED, candidate_id="c9", at=0.0)}
    notes = notes_by_candidate(events, outcomes)
    assert {k: [e.text for e in v] for k, v in notes.items()} == {"c2": ["n"], "c9": ["hand"]}


def test_a_disputed_champion_hands_on_the_title_and_is_never_crowned(run):
    make = Maker("b")
    fam = Family.fresh(CONFIG.families[1], 3)
    fast, slow = make(1.0), make(2.0)
    for c in (slow, fast):
        fam.tell(c, lambda: "c0000099", 0.0)
    assert fam.champion.id == fast.id
    changes, _ = fam.dispute(fast.id)
    assert [(c.candidate_id, c.cause) for c in changes] == [(slow.id, "disputed")]
    assert fam.invariant_violations() == []
    assert Family.from_snapshot(fam.snapshot()).disputed == {fast.id}
    # A dispute without a rival keeps the champion until any undisputed result verifies.
    alone = Family.fresh(CONFIG.families[1], 3)
    only = make(1.0)
    alone.tell(only, lambda: "c0000098", 0.0)
    assert alone.dispute(only.id)[0] == [] and alone.champion.id == only.id
    slower = make(5.0)
    report = alone.tell(slower, lambda: "c0000097", 0.0)
    assert [c.candidate_id for c in report.champion_changes] == [slower.id]


def test_run_dispute_is_persisted(run):
    cands = run.add_candidates([NewCandidate(family="b", origin=Origin.SEED, source=f"s{i}", fingerprint="fp")
                                for i in range(2)])
    from population.models import EvalResult
    for cand, ms in zip(cands, (1.0, 2.0)):
        run.tell(cand.id, State.VERIFIED, result=EvalResult(candidate_id=cand.id, geomean_ms=ms))
    assert run.champion("b").id == cands[0].id
    assert [c.cause for c in run.dispute(cands[0].id)] == ["disputed"]
    assert check_consistency(run.store) == []
    again = load_population(run.store)
    assert again.family("b").is_disputed(cands[0].id) and again.champion("b").id == cands[1].id
    assert run.store.current_champion_ids()["b"] == cands[1].id


def test_reading_beside_the_writer_in_one_process_keeps_its_locks(run, tmp_path):
    """A raw read of the store file in the writer's process (the header check) used to drop
    the process's POSIX locks; another process's event writer then checkpointed the WAL away
    under the driver, whose later commits were lost ("disk I/O error" for the next reader)."""
    import subprocess
    import sys

    run_dir = run.store.run_dir
    code = (f"from population.events import *; w = EventWriter({str(run_dir)!r}); "
            f"w.append(new_event(EventKind.PAUSE, who='x')); w.close()")
    for i in range(3):
        with RunStore.open(run_dir, readonly=True) as reader:  # in the driver's process
            reader.counters()
        subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2])
        run.store.set_json("k", i)
    seen = subprocess.run([sys.executable, "-c", f"import sqlite3; print(sqlite3.connect({str(run_dir / 'run.sqlite')!r})"
                           ".execute(\"SELECT value FROM kv WHERE key = 'k'\").fetchone()[0])"],
                          capture_output=True, text=True, check=True)
    assert seen.stdout.strip() == "2"
    assert len(read_events(run.store.connection)) == 3
