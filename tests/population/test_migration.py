from __future__ import annotations

from population.config import FamilyConfig, MigrationConfig, PopulationConfig, Topology
from population.models import Origin, State
from population.population import Population
from tests.population.helpers import Maker


def pop(topology: Topology, interval: int, islands: int = 3) -> Population:
    fams = (FamilyConfig(name="f", islands=islands, capacity=4, tuning_budget=0,
                         migration=MigrationConfig(topology=topology, interval=interval)),
            FamilyConfig(name="g", islands=1, capacity=4))
    return Population(PopulationConfig(seed=0, families=fams))


def test_ring_sends_each_islands_best_to_the_next_every_k_evaluations() -> None:
    p, mk = pop(Topology.RING, interval=3), Maker()
    a, b = mk(1.0, island=0, fingerprint="s"), mk(2.0, island=1, fingerprint="s")
    assert p.tell(a).migrants == ()
    assert p.tell(b).migrants == ()
    report = p.tell(mk(3.0, island=2, fingerprint="s"))
    moves = sorted((m.parent_ids[0], m.island) for m in report.migrants)
    assert moves == sorted([(a.id, 1), (b.id, 2), ("c0000003", 0)])
    for m in report.migrants:
        assert m.origin is Origin.MIGRATION and m.state is State.VERIFIED and m.family == "f"
        assert p.is_member(m) and m.reason.startswith("migrated from")
    assert p.family("f").island(1).best().parent_ids == (a.id,)  # type: ignore[union-attr]
    assert p.tell(mk(4.0, island=0, fingerprint="s")).migrants == ()  # 4th: not a multiple of 3


def test_ring_does_not_copy_code_the_target_already_holds() -> None:
    p, mk = pop(Topology.RING, interval=1, islands=2), Maker()
    first = p.tell(mk(1.0, island=0, fingerprint="s"))
    assert [m.island for m in first.migrants] == [1]
    second = p.tell(mk(5.0, island=1, fingerprint="s"))
    # island 1's best is the copy of island 0's best, which island 0 already holds
    assert second.migrants == ()


def test_best_to_worst_moves_one_migrant_from_the_fastest_island_to_the_slowest() -> None:
    p, mk = pop(Topology.BEST_TO_WORST, interval=3), Maker()
    p.tell(mk(2.0, island=0, fingerprint="s"))
    fast = mk(1.0, island=1, fingerprint="s")
    p.tell(fast)
    report = p.tell(mk(3.0, island=2, fingerprint="s"))
    assert [(m.parent_ids, m.island) for m in report.migrants] == [((fast.id,), 2)]


def test_best_to_worst_fills_an_empty_island_first() -> None:
    p, mk = pop(Topology.BEST_TO_WORST, interval=2), Maker()
    p.tell(mk(2.0, island=0, fingerprint="s"))
    report = p.tell(mk(1.0, island=0, fingerprint="s"))
    assert [m.island for m in report.migrants] == [2]  # islands 1 and 2 are empty; the last is chosen


def test_migration_never_crosses_families_and_inspiration_shows_other_champions() -> None:
    p, mk = pop(Topology.RING, interval=1), Maker()
    g_champ = mk(0.5, family="g", fingerprint="gs")
    p.tell(g_champ)
    for i in range(6):
        p.tell(mk(1.0 + i, island=i % 3, fingerprint="s"))
    assert all(m.family == "g" for m in p.family("g").members())
    assert all(m.family == "f" for m in p.family("f").members())
    assert [c.id for c in p.inspiration("f")] == [g_champ.id]
    assert [c.id for c in p.inspiration("g")] == [p.champion("f").id]  # type: ignore[union-attr]


def test_a_single_island_family_never_migrates() -> None:
    p, mk = pop(Topology.RING, interval=1, islands=1), Maker()
    assert all(p.tell(mk(1.0 + i, fingerprint="s")).migrants == () for i in range(4))
