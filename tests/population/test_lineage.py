from __future__ import annotations

from pathlib import Path

import pytest

from population import lineage
from population.config import FamilyConfig, PopulationConfig
from population.models import Candidate, EvalResult, NewCandidate, Origin, State
from population.run import Run

CONFIG = PopulationConfig(seed=0, families=(FamilyConfig(name="a", capacity=50, tuning_budget=0),
                                            FamilyConfig(name="b")))


def add(run: Run, source: str, parents: tuple[str, ...] = (), fp: str = "s", params: dict | None = None,
        family: str = "a") -> Candidate:
    origin = {0: Origin.SEED, 1: Origin.LLM, 2: Origin.CROSSOVER}[len(parents)]
    return run.add_candidate(NewCandidate(family=family, origin=origin, parent_ids=parents, source=source,
                                          fingerprint=fp, params=params or {}))


def verify(run: Run, c: Candidate, ms: float) -> None:
    run.tell(c.id, State.VERIFIED, result=EvalResult(candidate_id=c.id, geomean_ms=ms))


@pytest.fixture
def run(tmp_path: Path) -> Run:
    r = Run.create(tmp_path / "r", CONFIG)
    yield r
    r.close()


def test_ancestors_follow_both_parents_and_visit_a_shared_one_once(run: Run) -> None:
    root = add(run, "root")
    left = add(run, "left", (root.id,))
    right = add(run, "right", (root.id,))
    cross = add(run, "cross", (left.id, right.id))
    kid = add(run, "kid", (cross.id,))
    add(run, "unrelated")
    assert [c.id for c in lineage.ancestors(run.store, kid.id)] == [cross.id, right.id, left.id, root.id]
    assert lineage.ancestors(run.store, root.id) == []
    assert [c.id for c in lineage.descendants(run.store, root.id)] == [left.id, right.id, cross.id, kid.id]
    assert [c.id for c in lineage.children(run.store, right.id)] == [cross.id]
    assert [c.id for c in lineage.parents(run.store, cross.id)] == [left.id, right.id]
    with pytest.raises(KeyError):
        lineage.ancestors(run.store, "c9999999")


def test_a_thousand_deep_chain(run: Run) -> None:
    prev = add(run, "0")
    first = prev
    for i in range(1, 1000):
        prev = add(run, str(i), (prev.id,))
    anc = lineage.ancestors(run.store, prev.id)
    assert lineage.ancestor_ids(run.store, prev.id) == [c.id for c in anc]
    assert len(anc) == 999 and anc[0].id == lineage.parents(run.store, prev.id)[0].id and anc[-1].id == first.id
    t = lineage.tree(run.store, first.id)  # deep trees build without recursion
    assert t.size() == 1000
    walked = list(t.walk())
    assert walked[-1][0].id == prev.id and walked[-1][1] == 999
    assert t.model_dump_json()  # flat: no recursion limit when exported


def test_tree_and_family_tree_shapes(run: Run) -> None:
    r1, r2 = add(run, "r1"), add(run, "r2")
    a = add(run, "a", (r1.id,))
    b = add(run, "b", (r1.id,))
    c = add(run, "c", (a.id, r2.id))  # crossover: listed under its first parent only
    add(run, "other family", family="b")
    t = lineage.tree(run.store, r1.id)
    assert t.children[r1.id] == (a.id, b.id) and t.children[a.id] == (c.id,)
    assert [(x.id, depth) for x, depth in t.walk()] == [(r1.id, 0), (a.id, 1), (c.id, 2), (b.id, 1)]
    forest = lineage.family_tree(run.store, "a")
    assert [x.root for x in forest] == [r1.id, r2.id]
    assert [x.size() for x in forest] == [4, 1]


def test_diff_shows_source_and_parameter_changes(run: Run) -> None:
    p = add(run, "def k():\n    x = 1\n    return x\n", params={"bm": 32, "warps": 4})
    c = add(run, "def k():\n    x = 2\n    return x\n", (p.id,), params={"bm": 64, "warps": 4})
    d = lineage.diff(run.store, c.id)
    assert f"--- a/{p.id}\n+++ b/{c.id}\n" in d
    assert "-    x = 1\n+    x = 2\n" in d
    assert '- "bm": 32,\n+ "bm": 64,\n' in d
    assert lineage.diff(run.store, p.id, p.id) == ""
    with pytest.raises(ValueError):
        lineage.diff(run.store, p.id)


def test_champion_chain_records_each_takeover(run: Run) -> None:
    s = add(run, "s")
    verify(run, s, 3.0)
    slower = add(run, "slower", (s.id,), fp="t")
    verify(run, slower, 4.0)
    better = add(run, "better", (s.id,), fp="s")
    verify(run, better, 2.0)
    other = add(run, "other", (better.id,), fp="u")
    verify(run, other, 1.0)
    chain = lineage.champion_chain(run.store, "a")
    assert [(e.change.candidate_id, e.change.previous_id, e.change.cause, e.change.family_evals) for e in chain] == [
        (s.id, None, "first", 1), (better.id, s.id, "improved", 3), (other.id, better.id, "matured", 4)]
    assert [e.change.fitness_ms for e in chain] == [3.0, 2.0, 1.0]
    assert lineage.champion_chain(run.store, "b") == []
