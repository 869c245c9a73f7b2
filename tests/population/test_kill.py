"""Kill test: SIGKILL a writing driver at random moments; nothing committed may be lost or doubled."""

from __future__ import annotations

import os
import random
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from population.consistency import check_consistency
from population.errors import StoreNotFound
from population.models import Origin, State
from population.run import Run, load_population
from population.store import RunStore
from tests.population.kill_child import tokens_of

ROOT = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).with_name("kill_child.py")
ROUNDS = 24


def committed_ids(side: Path) -> list[str]:
    if not side.exists():
        return []
    lines = side.read_text().split("\n")
    return [x for x in lines[:-1] if x]  # the last piece has no newline: it was being written


def check_store(run: Run, side: Path) -> int:
    """Everything the kill test promises, on a freshly reopened run; returns the in-flight count."""
    store = run.store
    assert check_consistency(store, deep=True) == []
    assert run.population.invariant_violations() == []
    ids = committed_ids(side)
    assert len(ids) == len(set(ids)), "a result was logged as committed twice"
    rows = {c.id: c for c in store.list_candidates()}
    told = {cid for cid, c in rows.items() if store.told_seq(cid) is not None}
    missing = [cid for cid in ids if cid not in told]
    assert not missing, f"committed results lost: {missing[:5]}"
    assert all(rows[cid].state.is_terminal for cid in ids)
    results = store.connection.execute("SELECT candidate_id, count(*) FROM results GROUP BY candidate_id "
                                       "HAVING count(*) > 1").fetchall()
    assert results == []
    # Every job the driver started exists exactly once, and every job's cost was booked with its result.
    jobs = sorted(int(c.params["job"]) for c in rows.values() if c.origin is not Origin.MIGRATION)  # type: ignore[arg-type]
    assert jobs == list(range(store.get_json("job", 0)))
    booked = sum(tokens_of(int(rows[cid].params["job"])) for cid in told)  # type: ignore[arg-type]
    assert store.counter("tokens") == booked
    return sum(1 for c in rows.values() if c.state.is_in_flight)


def reader_check(run_dir: Path) -> None:
    """A read-only opener while the child writes: it must see one consistent commit."""
    with RunStore.open(run_dir, readonly=True) as reader:
        with reader.read():
            assert check_consistency(reader) == []
            assert load_population(reader).invariant_violations() == []


def test_sigkill_at_random_moments_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    rng = random.Random(20240607)
    run_dir, side = tmp_path / "run", tmp_path / "committed.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    inflight_seen = early_kills = reads = 0
    for round_no in range(ROUNDS):
        proc = subprocess.Popen([sys.executable, str(CHILD), str(run_dir), str(side), str(round_no)], cwd=ROOT,
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            if round_no > 0 and rng.random() < 0.2:
                time.sleep(rng.uniform(0.0, 0.3))  # during start-up, open, or requeue
                early_kills += 1
            else:
                ready, _, _ = select.select([proc.stdout], [], [], 30)
                assert ready and proc.stdout.readline() == b"ready\n", proc.stderr.read().decode()  # type: ignore[union-attr]
                if run_dir.exists() and rng.random() < 0.5:
                    reader_check(run_dir)
                    reads += 1
                time.sleep(rng.uniform(0.01, 0.3))
            assert proc.poll() is None, "the writer stopped by itself:\n" + proc.stderr.read().decode()  # type: ignore[union-attr]
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            assert proc.returncode == -signal.SIGKILL
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        try:
            run = Run.open(run_dir)
        except StoreNotFound:
            assert committed_ids(side) == []  # killed before the store existed
            continue
        try:
            inflight_seen += check_store(run, side) > 0
        finally:
            run.close()
    assert early_kills >= 2 and reads >= 3 and inflight_seen >= 5
    with RunStore.open(run_dir, readonly=True) as store:
        assert store.counter("evaluations") >= 300  # the loop really ran between kills
        assert store.counter("migrants") > 0 and len(store.champion_history()) > 2
        assert store.list_candidates(state=State.VERIFIED, members_only=True)
