"""read_snapshot(store): one read of everything the read-only commands need, agreeing with the
store's own queries, with speedups computed once; and population.lineage's in-memory walks,
agreeing with its SQL ones.  Run on a fresh store and on one made by the previous version."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

from population import records
from population.lineage import Lineage, ancestor_ids, family_tree
from population.models import State
from population.snapshot import RunSnapshot, StoredRows, read_snapshot
from population.speedup import with_speedups
from population.store import RunStore
from tests.population.data.make_store import T0, build

OLD_STORE = Path(__file__).parent / "data" / "old484_run.sqlite.gz"


def old_run(tmp: Path) -> Path:
    """The store written by commit 484b148 (tests/population/data/make_store.py --old), unpacked."""
    run_dir = tmp / "old484"
    run_dir.mkdir()
    with gzip.open(OLD_STORE, "rb") as src, open(run_dir / "run.sqlite", "wb") as dst:
        shutil.copyfileobj(src, dst)
    return run_dir


@pytest.fixture(params=["new", "old484"])
def run_dir(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    if request.param == "old484":
        return old_run(tmp_path)
    build(tmp_path / "run")
    return tmp_path / "run"


def snap_of(run_dir: Path) -> RunSnapshot:
    with RunStore.open(run_dir, readonly=True) as store:
        return read_snapshot(store)


def test_snapshot_agrees_with_the_store(run_dir: Path) -> None:
    snap = snap_of(run_dir)
    with RunStore.open(run_dir, readonly=True) as store:
        cands = store.list_candidates()
        assert list(snap.candidates) == cands
        assert dict(snap.current) == store.current_champion_ids()
        assert list(snap.history) == store.champion_history()
        assert dict(snap.counters) == store.counters()
        assert dict(snap.told) == {c.id: store.told_seq(c.id) for c in cands if store.told_seq(c.id) is not None}
        assert dict(snap.stored_results) == {c.id: r for c in cands if (r := store.get_result(c.id)) is not None}
        assert {c.id: snap.source(c.id) for c in cands} == {c.id: store.source(c.source_sha256) for c in cands}
        assert snap.config_json == store.config_json()
        base = store.get_result(store.current_champion_ids()[records.BASELINE_FAMILY])
        for cid, result in snap.results.items():
            assert result == with_speedups(store.get_result(cid), base)  # type: ignore[arg-type]
    with pytest.raises(Exception):
        snap.candidates = ()  # type: ignore[misc]  # frozen


def test_the_driver_records_parse(run_dir: Path) -> None:
    snap = snap_of(run_dir)
    assert snap.status.state == "stopped" and snap.status.stop_reason == "budget: 6 evaluations"
    assert snap.status.shown_state(T0 + 10_000) == "stopped"
    assert [s.pid for s in snap.sessions] == [11, 12] and snap.sessions[0].ended is None
    assert snap.started() == T0
    assert [c.model for c in snap.llm_calls] == ["toy-llm"] and snap.llm_calls[0].child == "c0000004"
    assert snap.entries(records.NOTE_KEY) == {"c0000004": "unrolled the panel loop"}
    assert snap.entries(records.TRIAL_KEY) == {"c0000003": {"study": "f/s0", "number": 0}}
    assert snap.entries(records.LLM_STATE_KEY)["toy-llm"]["streak"] == 0
    counters = snap.run_counters
    assert (counters.gpu_evaluations, counters.llm_calls, counters.llm_tokens) == (6, 1, 150)
    assert counters.llm_cost_usd == pytest.approx(0.25)
    assert [e.text for e in snap.events] == ["looks good"]
    # Speedups against the baseline (times 1, 1, 2, 2 ms): the crossover ties it, the Optuna child is half as fast.
    assert snap.results["c0000006"].speedup == pytest.approx(1.0)
    assert snap.results["c0000003"].speedup == pytest.approx(0.5)
    assert snap.result("c0000005") is not None and snap.by_id["c0000005"].state is State.FAILED_VERIFY


def test_in_memory_lineage_agrees_with_the_sql_walks(run_dir: Path) -> None:
    snap = snap_of(run_dir)
    lineage = Lineage(snap)
    with RunStore.open(run_dir, readonly=True) as store:
        for c in snap.candidates:
            assert lineage.ancestor_ids(c.id) == ancestor_ids(store, c.id)
        for family in snap.current:
            assert lineage.family_trees(family) == family_tree(store, family)
    assert lineage.ancestor_ids("c0000006") == ["c0000004", "c0000003", "c0000002"]  # both parents of the crossover
    assert lineage.roots("f") == ["c0000002"]
    assert lineage.tree_children("c0000002") == ["c0000003", "c0000004"]
    assert sorted(lineage.subtree_ids("c0000003")) == ["c0000003", "c0000005", "c0000006"]
    assert lineage.chain("f") == [e.change.candidate_id for e in snap.history if e.change.family == "f"]


def test_a_record_of_another_shape_still_reads() -> None:
    """A status written by some other version (a field of another type) is read as stored, not refused."""
    status = records.parse(records.DriverStatus, {"state": "running", "updated": 5.0, "lost": "two"})
    assert status.state == "running" and status.shown_state(100.0) == "stopped (no heartbeat)"
    assert records.parse(records.Session, None).started is None
    assert records.parse(records.Session, {"started": 1.0, "ended": 2.0, "tag": "x"}).ended == 2.0


@pytest.mark.parametrize("width", [2, 16])
def test_a_scan_of_the_results_reads_what_parsing_them_reads(run_dir: Path, width: int) -> None:
    # width 2: results with more cases than that are read again, one by one.
    stored = snap_of(run_dir).stored_results
    assert isinstance(stored, StoredRows)
    scanned = {cid: (fields, items) for cid, fields, items in
               stored.scan(["$.finished_at", "$.device"], "$.cases", ["$.case", "$.median_ms"], width=width)}
    parsed = {cid: ([r.finished_at, r.device], [[o.case, o.median_ms] for o in r.cases])
              for cid, r in stored.load_all().items()}
    assert scanned == parsed
    assert any(len(items) > 2 for _, items in parsed.values()) and any(not items for _, items in parsed.values())
