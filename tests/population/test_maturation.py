"""Scenarios for champions and maturation, written as the story the rules are meant to tell."""

from __future__ import annotations

from population.config import FamilyConfig, PopulationConfig
from population.maturation import StructureStatus
from population.models import State
from population.population import Population
from tests.population.helpers import Maker


def pop(**kw: object) -> Population:
    base: dict[str, object] = dict(name="f", islands=1, capacity=2, tuning_budget=3)
    base.update(kw)
    return Population(PopulationConfig(seed=0, families=(FamilyConfig(**base),)))  # type: ignore[arg-type]


def tuned_champion(p: Population, mk: Maker) -> str:
    """A seed structure tuned to 1.0 ms, filling the island of capacity 2."""
    p.tell(mk(2.0, fingerprint="old"))
    p.tell(mk(1.2, fingerprint="old"))
    c = mk(1.0, fingerprint="old")
    p.tell(c)
    return c.id


def test_slow_new_structure_is_protected_tuned_and_then_wins() -> None:
    p, mk = pop(), Maker()
    champ = tuned_champion(p, mk)
    fresh = mk(1.5, fingerprint="new")  # slower than the tuned champion, and the island is full
    report = p.tell(fresh)
    assert fresh.id not in report.evicted and p.is_member(fresh)
    assert p.structure("f", "new").status is StructureStatus.MATURING
    assert p.champion("f").id == champ
    for t in (1.3, 1.1):
        p.tell(mk(t, fingerprint="new"))
    assert p.champion("f").id == champ  # 2 of 3 tuning evaluations: not judged yet
    winner = mk(0.8, fingerprint="new")
    report = p.tell(winner)
    assert [c.cause for c in report.champion_changes] == ["matured"]
    assert p.champion("f").id == winner.id
    assert p.structure("f", "new").status is StructureStatus.CHAMPION
    assert p.structure("f", "old").status is StructureStatus.MATURED
    assert p.structure("f", "new").tuning_evals == 3 and p.structure("f", "new").best_id == winner.id


def test_without_a_tuning_budget_the_same_idea_is_lost_at_once() -> None:
    p, mk = pop(tuning_budget=0), Maker()
    tuned_champion(p, mk)
    fresh = mk(1.5, fingerprint="new")
    report = p.tell(fresh)
    assert fresh.id in report.evicted
    assert p.structure("f", "new").status is StructureStatus.MATURED


def test_a_structure_without_parameters_is_judged_on_its_first_evaluation() -> None:
    # Nothing to tune (a GPU MODE file as written): waiting for a tuning budget would wait forever.
    p, mk = pop(), Maker()
    champ = tuned_champion(p, mk)
    slow = mk(1.5, fingerprint="bare-slow", params={})
    p.tell(slow)
    assert p.structure("f", "bare-slow").status is StructureStatus.MATURED and p.champion("f").id == champ
    crashed = mk(None, fingerprint="bare-crash", params={})
    p.tell(crashed)
    assert p.structure("f", "bare-crash").status is StructureStatus.RETIRED
    fast = mk(0.5, fingerprint="bare-fast", params={})
    report = p.tell(fast)
    assert [c.cause for c in report.champion_changes] == ["matured"] and p.champion("f").id == fast.id
    assert p.structure("f", "bare-fast").status is StructureStatus.CHAMPION


def test_a_maturing_structure_faster_than_the_champion_waits_for_its_budget() -> None:
    p, mk = pop(), Maker()
    champ = tuned_champion(p, mk)
    fast = mk(0.5, fingerprint="new")
    assert p.tell(fast).champion_changes == ()
    assert p.champion("f").id == champ
    p.tell(mk(None, fingerprint="new"))  # failed tuning attempts still spend the budget
    p.tell(mk(None, fingerprint="new"))
    report = p.tell(mk(None, fingerprint="new"))
    assert p.champion("f").id == fast.id and report.champion_changes[0].previous_id == champ


def test_a_structure_that_loses_is_then_evicted_like_anyone() -> None:
    p, mk = pop(tuning_budget=1), Maker()
    tuned_champion(p, mk)
    first = mk(1.6, fingerprint="new")
    # The island is full: the unprotected 1.2 ms member makes room, not the slower newcomer.
    assert p.tell(first).evicted == ("c0000002",)
    second = mk(1.7, fingerprint="new")
    assert p.tell(second).evicted == (second.id,)
    assert p.structure("f", "new").status is StructureStatus.MATURED
    assert p.tell(mk(1.1, fingerprint="old")).evicted == (first.id,)  # no longer protected
    assert len(p.members("f", 0)) == 2


def test_protection_moves_to_the_structures_new_best() -> None:
    p, mk = pop(tuning_budget=5), Maker()
    tuned_champion(p, mk)
    a = mk(1.9, fingerprint="new")
    p.tell(a)
    b = mk(1.8, fingerprint="new")
    report = p.tell(b)
    assert a.id in report.evicted and p.is_member(b)  # a is no longer the protected best


def test_champion_structure_tuning_improves_the_champion_at_once() -> None:
    p, mk = pop(), Maker()
    tuned_champion(p, mk)
    better = mk(0.9, fingerprint="old")
    assert [c.cause for c in p.tell(better).champion_changes] == ["improved"]


def test_a_judged_loser_that_later_tunes_past_the_champion_overtakes() -> None:
    p, mk = pop(tuning_budget=0), Maker()
    tuned_champion(p, mk)
    p.tell(mk(1.5, fingerprint="new"))
    assert p.structure("f", "new").status is StructureStatus.MATURED
    late = mk(0.7, fingerprint="new")
    assert [c.cause for c in p.tell(late).champion_changes] == ["overtook"]
    assert p.structure("f", "old").status is StructureStatus.MATURED


def test_a_structure_that_never_verifies_retires_and_can_come_back() -> None:
    p, mk = pop(tuning_budget=1), Maker()
    champ = tuned_champion(p, mk)
    p.tell(mk(None, fingerprint="new"))
    p.tell(mk(None, fingerprint="new", state=State.CRASHED))
    assert p.structure("f", "new").status is StructureStatus.RETIRED
    assert p.champion("f").id == champ
    late = mk(0.6, fingerprint="new")
    p.tell(late)
    assert p.champion("f").id == late.id and p.structure("f", "new").status is StructureStatus.CHAMPION


def test_maturation_deadline_judges_an_untuned_structure() -> None:
    p, mk = pop(tuning_budget=10, maturation_timeout=3), Maker()
    tuned_champion(p, mk)
    idle = mk(1.7, fingerprint="idle")
    p.tell(idle)  # family evaluation 4
    p.tell(mk(1.1, fingerprint="old"))
    p.tell(mk(1.15, fingerprint="old"))
    assert p.structure("f", "idle").status is StructureStatus.MATURING
    report = p.tell(mk(1.12, fingerprint="old"))  # evaluation 7: 3 after it appeared
    assert p.structure("f", "idle").status is StructureStatus.MATURED
    assert p.structure("f", "idle").concluded_eval == 7 and idle.id in report.evicted


def test_first_verified_candidate_becomes_champion_even_after_failures() -> None:
    p, mk = pop(), Maker()
    p.tell(mk(None, fingerprint="s"))
    assert p.champion("f") is None
    c = mk(3.0, fingerprint="s")
    assert [x.cause for x in p.tell(c).champion_changes] == ["first"]
    assert p.structure("f", "s").status is StructureStatus.CHAMPION


def test_ties_keep_the_incumbent_champion() -> None:
    p, mk = pop(tuning_budget=0), Maker()
    c = mk(1.0, fingerprint="a")
    p.tell(c)
    p.tell(mk(1.0, fingerprint="b"))
    p.tell(mk(1.0, fingerprint="a"))
    assert p.champion("f").id == c.id


def test_a_challenger_within_the_margin_does_not_take_the_title() -> None:
    p, mk = pop(tuning_budget=0, capacity=10, min_improvement=0.05), Maker()
    c = mk(1.0, fingerprint="a")
    p.tell(c)
    p.tell(mk(0.96, fingerprint="a"))  # 4% faster: noise at a 5% margin
    p.tell(mk(0.951, fingerprint="b"))  # another structure, judged at once, still inside
    assert p.champion("f").id == c.id
    assert p.invariant_violations() == []  # a judged structure inside the margin is no violation
    winner = mk(0.94, fingerprint="b")  # 6% faster
    report = p.tell(winner)
    assert p.champion("f").id == winner.id
    assert [(ch.cause, ch.previous_id) for ch in report.champion_changes] == [("overtook", c.id)]


def test_a_matured_structure_must_clear_the_margin_too() -> None:
    p, mk = pop(tuning_budget=1, capacity=10, min_improvement=0.05), Maker()
    c = mk(1.0, fingerprint="old")
    p.tell(c)
    p.tell(mk(0.97, fingerprint="new"))
    p.tell(mk(0.98, fingerprint="new"))  # budget spent: judged with its best, 3% faster
    assert p.champion("f").id == c.id
    assert p.family("f").structures["new"].status is StructureStatus.MATURED
    assert p.invariant_violations() == []


def test_maturing_list_reports_remaining_budget_oldest_first() -> None:
    p, mk = pop(tuning_budget=2, capacity=10), Maker()
    tuned_champion(p, mk)
    p.tell(mk(3.0, fingerprint="x"))
    p.tell(mk(3.0, fingerprint="y"))
    p.tell(mk(3.0, fingerprint="x"))
    fam = p.family("f")
    assert [(r.fingerprint, fam.policy.remaining(r)) for r in p.maturing("f")] == [("x", 1), ("y", 2)]


def test_rejections_never_ran_so_they_spend_no_budget() -> None:
    p, mk = pop(tuning_budget=1), Maker()
    tuned_champion(p, mk)
    p.tell(mk(None, fingerprint="junk", state=State.REJECTED))
    assert p.structure("f", "junk") is None
    fresh = mk(1.5, fingerprint="new")
    p.tell(fresh)
    p.tell(mk(None, fingerprint="new", state=State.REJECTED))
    assert p.structure("f", "new").evals == 1 and p.structure("f", "new").status is StructureStatus.MATURING
