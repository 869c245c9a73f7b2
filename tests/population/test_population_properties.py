"""Property tests: random sequences of evaluations against independent oracles.

The oracle here recomputes, from the full history of what was told, what the
rules promise (champion, structure bests and counts, who may be evicted), instead
of trusting the population's own bookkeeping.
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from population.config import FamilyConfig, MigrationConfig, PopulationConfig, SelectionConfig, Topology
from population.maturation import StructureStatus
from population.models import Candidate, Origin, State
from population.population import Population
from tests.population.helpers import Maker

# One step: (family index, island, structure index or None for a new one,
#            fitness, or None for a failed evaluation, or -1 for a rejection that never ran)
steps = st.lists(st.tuples(st.integers(0, 1), st.integers(0, 2), st.one_of(st.none(), st.integers(0, 5)),
                           st.one_of(st.none(), st.just(-1.0), st.floats(0.1, 10.0))), min_size=1, max_size=80)
family_configs = st.builds(
    lambda islands, capacity, budget, timeout, topology, interval, margin: FamilyConfig(
        name="x", islands=islands, capacity=capacity, tuning_budget=budget, maturation_timeout=timeout,
        migration=MigrationConfig(topology=topology, interval=interval), min_improvement=margin),
    st.integers(1, 3), st.integers(1, 4), st.integers(0, 4), st.one_of(st.none(), st.integers(1, 10)),
    st.sampled_from(Topology), st.integers(0, 4), st.sampled_from([0.0, 0.0, 0.05, 0.3]))


def make_population(fc: FamilyConfig) -> Population:
    fams = (fc.model_copy(update={"name": "a"}), fc.model_copy(update={"name": "b", "islands": 2}))
    return Population(PopulationConfig(seed=7, families=fams))


def drive(pop: Population, plan: list[tuple[int, int, int | None, float | None]], check: bool = True) -> None:
    maker = Maker()
    told: dict[str, list[Candidate]] = {"a": [], "b": []}
    fps: dict[str, list[str]] = {"a": [], "b": []}
    crowned_first: dict[str, set[str]] = {"a": set(), "b": set()}
    last_champion_time: dict[str, float] = {}
    known: dict[str, Candidate] = {}
    for fam_i, island, struct, fitness in plan:
        name = "ab"[fam_i]
        fam = pop.family(name)
        island %= len(fam.islands)
        if struct is None or struct >= len(fps[name]):
            fps[name].append(f"{name}-s{len(fps[name])}")
            fp = fps[name][-1]
        else:
            fp = fps[name][struct]
        parent = pop.select_parent(name, island)
        rejected = fitness == -1.0
        cand = maker(None if rejected else fitness, fingerprint=fp, island=island,
                     parent=parent.id if parent else None, family=name, state=State.REJECTED if rejected else None)
        before = {m.id for m in fam.members()}
        report = pop.tell(cand)
        told[name].append(cand)
        known.update({c.id: c for c in (cand, *report.migrants)})
        for ch in report.champion_changes:
            if ch.cause == "first":
                crowned_first[name].add(pop.family(name).champion.fingerprint)  # type: ignore[union-attr]
        if check:
            check_step(pop, name, before, report, told[name], crowned_first[name], last_champion_time, known)


def check_step(pop: Population, name: str, before: set[str], report, told: list[Candidate],
               crowned_first: set[str], last_time: dict[str, float], known: dict[str, Candidate]) -> None:
    fam = pop.family(name)
    members = fam.members()
    ids = {m.id for m in members}
    champ = fam.champion
    exempt = ({champ.id} if champ else set()) | {
        r.best_id for r in fam.structures.values() if r.status is StructureStatus.MATURING and r.best_id}
    # A champion is never lost, and it only ever gets faster.
    verified = [c for c in told if c.state is State.VERIFIED]
    if verified:
        assert champ is not None and champ.id in ids
        assert champ.fitness_ms <= last_time.get(name, float("inf"))
        last_time[name] = champ.fitness_ms
    # Nothing exempt is evicted; every evicted id was a member, or just arrived.
    assert not set(report.evicted) & exempt
    assert set(report.evicted) <= before | {report.candidate.id} | {m.id for m in report.migrants}
    # Protected bests are members.
    assert exempt <= ids
    # Capacity holds unless only exempt members remain above it.
    for isl in fam.islands:
        assert len(isl) <= isl.capacity or all(m.id in exempt for m in isl.ranked())
        assert all(m.state is State.VERIFIED and m.family == name and m.island == isl.index for m in isl.ranked())
    # Failures are never members; migrants never cross families.
    assert all(c.id not in ids for c in told if c.state is not State.VERIFIED)
    for other in pop.families.values():
        assert all(m.family == other.name for m in other.members())
    # Structure records equal what the history says.
    budget = fam.config.tuning_budget
    assert set(fam.structures) == {c.fingerprint for c in told if c.state is not State.REJECTED}
    for fp, rec in fam.structures.items():
        mine = [c for c in told if c.fingerprint == fp and c.state is not State.REJECTED]
        assert rec.evals == len(mine)
        fits = [c.fitness_ms for c in mine if c.state is State.VERIFIED]
        assert rec.best_fitness_ms == (min(fits) if fits else None)
        if fp not in crowned_first and fam.config.maturation_timeout is None:
            assert (rec.status is StructureStatus.MATURING) == (rec.tuning_evals < budget)
    # No verified candidate of a judged structure beats the champion by more than the margin;
    # with no margin the champion is the fastest of them.
    if champ is not None:
        judged = [c for c in verified if fam.structures[c.fingerprint].status is not StructureStatus.MATURING]
        margin = fam.config.min_improvement
        fastest = min(c.fitness_ms for c in judged)
        assert fastest >= champ.fitness_ms * (1.0 - margin) and champ in judged
        if margin == 0.0:
            assert champ.fitness_ms == fastest
        assert fam.structures[champ.fingerprint].status is StructureStatus.CHAMPION
    # Migrants are verified copies of a same-family parent on another island.
    for mig in report.migrants:
        src = known[mig.parent_ids[0]]
        assert mig.origin is Origin.MIGRATION and mig.state is State.VERIFIED and src.family == mig.family == name
        assert (src.content_key, src.fitness_ms, src.fingerprint) == (mig.content_key, mig.fitness_ms,
                                                                     mig.fingerprint)
        assert src.island != mig.island
    assert pop.invariant_violations() == []


@settings(max_examples=150, deadline=None)
@given(fc=family_configs, plan=steps)
def test_rules_hold_after_every_evaluation(fc: FamilyConfig, plan) -> None:
    drive(make_population(fc), plan)


@settings(max_examples=40, deadline=None)
@given(fc=family_configs, plan=steps, cut=st.integers(0, 80), kind=st.sampled_from(["tournament", "rank_softmax"]))
def test_snapshot_restore_continues_identically(fc: FamilyConfig, plan, cut: int, kind: str) -> None:
    fc = fc.model_copy(update={"selection": SelectionConfig(kind=kind, temperature=0.7)})
    cut = min(cut, len(plan))
    live = make_population(fc)
    drive(live, plan[:cut], check=False)
    restored = Population.from_snapshot(json.loads(json.dumps(live.snapshot())))
    assert restored.snapshot() == live.snapshot()
    picks_live = [live.select_parent("a", i % len(live.family("a").islands)) for i in range(10)]
    picks_rest = [restored.select_parent("a", i % len(restored.family("a").islands)) for i in range(10)]
    assert picks_live == picks_rest


@settings(max_examples=30, deadline=None)
@given(fc=family_configs, plan=steps)
def test_same_history_gives_the_same_population(fc: FamilyConfig, plan) -> None:
    a, b = make_population(fc), make_population(fc)
    drive(a, plan, check=False)
    drive(b, plan, check=False)
    assert a.snapshot() == b.snapshot()


def test_long_seeded_histories_keep_every_rule() -> None:
    """Hypothesis favours short histories; these reach full islands, many structures, many migrations."""
    import random
    for seed in range(4):
        rng = random.Random(seed)
        fc = FamilyConfig(name="x", islands=3, capacity=rng.randint(2, 5), tuning_budget=rng.randint(1, 4),
                          maturation_timeout=rng.choice([None, 15]),
                          migration=MigrationConfig(topology=rng.choice(list(Topology)), interval=rng.randint(1, 5)))
        plan = [(rng.randint(0, 1), rng.randint(0, 2), rng.choice([None, *range(12)]),
                 rng.choice([None, -1.0, *(rng.uniform(0.1, 10) for _ in range(6))])) for _ in range(400)]
        pop = make_population(fc)
        drive(pop, plan)
        assert sum(len(f.structures) for f in pop.families.values()) > 20
