"""A resumed run must behave exactly like one that was never interrupted."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from population.config import FamilyConfig, MigrationConfig, PopulationConfig, SelectionConfig, Topology
from population.consistency import check_consistency
from population.models import Candidate, EvalResult, NewCandidate, Origin, State
from population.run import Run, load_population
from population.store import RunStore

CONFIG = PopulationConfig(seed=11, families=(
    FamilyConfig(name="a", islands=3, capacity=4, tuning_budget=2,
                 selection=SelectionConfig(kind="rank_softmax", temperature=0.4),
                 migration=MigrationConfig(topology=Topology.RING, interval=4)),
    FamilyConfig(name="b", islands=2, capacity=3, tuning_budget=1,
                 migration=MigrationConfig(topology=Topology.BEST_TO_WORST, interval=3))))


class Crash(Exception):
    pass


def h(*parts: object) -> int:
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:4], "big")


def finish(run: Run, c: Candidate) -> None:
    """The 'GPU': outcome is a function of the candidate alone."""
    if c.state is State.PENDING:
        run.mark_running(c.id)
    if h(c.id, "fail") % 5 == 0:
        run.tell(c.id, State.FAILED_VERIFY, reason="residual too large")
    else:
        run.tell(c.id, State.VERIFIED, result=EvalResult(candidate_id=c.id, geomean_ms=0.5 + h(c.id) % 1000 / 100))


def step(run: Run, picks: list[str | None], crash_at: str | None = None) -> None:
    i = run.store.get_json("driver.step", 0)
    fam = "a" if i % 3 else "b"
    island = i % len(run.population.family(fam).islands)
    parent = run.select_parent(fam, island)
    picks.append(parent.id if parent else None)
    if crash_at == "select":
        raise Crash
    fp = f"{fam}{h(i, 'fp') % 4}" if parent else f"{fam}seed"
    with run.transaction():  # the child and the driver's step counter commit together
        child = run.add_candidate(NewCandidate(
            family=fam, island=island, parent_ids=(parent.id,) if parent else (),
            origin=Origin.OPTUNA if parent else Origin.SEED, source=f"src {i} {fp}", params={"i": i},
            fingerprint=fp))
        run.set_json("driver.step", i + 1)
    if crash_at == "add":
        raise Crash
    child = run.mark_running(child.id)
    if crash_at == "running":
        raise Crash
    finish(run, child)


def resume(run: Run) -> None:
    for c in run.requeue_inflight():
        finish(run, c)


def table(store: RunStore) -> list[tuple]:
    rows = store.connection.execute("SELECT * FROM candidates ORDER BY seq").fetchall()
    return rows + store.connection.execute("SELECT * FROM structures ORDER BY family, fingerprint").fetchall()


@pytest.mark.parametrize("crash_at", ["select", "add", "running", None])
def test_interrupted_run_equals_uninterrupted_run(tmp_path: Path, crash_at: str | None) -> None:
    n, m = 40, 40
    clock = lambda: 0.0  # noqa: E731  (timestamps are part of what is compared)
    straight = Run.create(tmp_path / "straight", CONFIG, clock=clock)
    straight_picks: list[str | None] = []
    for _ in range(n + m):
        step(straight, straight_picks)

    broken = Run.create(tmp_path / "broken", CONFIG, clock=clock)
    picks: list[str | None] = []
    for _ in range(n):
        step(broken, picks)
    with pytest.raises(Crash) if crash_at else _nothing():
        step(broken, picks, crash_at)
    if crash_at == "select":
        picks.pop()  # that pick was never committed; the resumed driver makes it again
    broken.close()

    resumed = Run.open(tmp_path / "broken", clock=clock)
    resume(resumed)
    while resumed.store.get_json("driver.step") < n + m:
        step(resumed, picks)
    assert picks == straight_picks
    assert resumed.population.snapshot() == straight.population.snapshot()
    assert table(resumed.store) == table(straight.store)
    assert resumed.store.counters() == straight.store.counters()
    assert check_consistency(resumed.store) == [] and resumed.population.invariant_violations() == []
    straight.close()
    resumed.close()


def test_restored_copy_selects_like_the_original(tmp_path: Path) -> None:
    run = Run.create(tmp_path / "r", CONFIG)
    picks: list[str | None] = []
    for _ in range(30):
        step(run, picks)
    run.close()
    shutil.copytree(tmp_path / "r", tmp_path / "copy")
    runs = [Run.open(tmp_path / "r"), Run.open(tmp_path / "copy")]
    seqs = [[run.select_parent("a", k % 3) for k in range(50)] for run in runs]
    assert [c.id for c in seqs[0]] == [c.id for c in seqs[1]]  # type: ignore[union-attr]
    assert len({c.id for c in seqs[0]}) > 1  # type: ignore[union-attr]
    for r in runs:
        r.close()


def test_load_population_matches_the_live_population(tmp_path: Path) -> None:
    run = Run.create(tmp_path / "r", CONFIG)
    picks: list[str | None] = []
    for _ in range(60):
        step(run, picks)
        with RunStore.open(tmp_path / "r", readonly=True) as reader:
            assert load_population(reader).snapshot() == run.population.snapshot()
    run.close()


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return False
