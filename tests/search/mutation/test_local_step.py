"""The local step: neighbours in every kind of dimension, and its children as Optuna trials."""

from __future__ import annotations

import random

import optuna
import pytest

from kernels.families import FAMILIES
from kernels.params import Choice, FloatRange, IntRange, structure_fingerprint
from population.consistency import check_consistency
from population.models import Origin, State
from search.config import MutationMix
from search.mutation.operators.local_step import Frontier, LocalStep, neighbourhood, neighbours, step
from search.engine.proposer import OPERATOR_KEY
from search.mutation.tuning import TRIAL_ATTR_CANDIDATE
from tests.search.engine.test_loop import config, families, make_loop  # noqa: F401 - the fixture
from tests.search.fakes import TOY_SOURCE, ToySpace

BlockedWYSpace, LookaheadSplitSpace = FAMILIES["blocked_wy"].space, FAMILIES["lookahead_split"].space


def test_neighbours_are_the_adjacent_values_of_each_kind_of_dimension():
    assert neighbours(Choice(16, 64, 32), 32) == [16, 64]  # sorted, whatever the declared order
    assert neighbours(Choice(16, 32, 64), 16) == [32]  # an end has one
    assert neighbours(Choice(False, True), True) == [False]
    assert neighbours(Choice("ieee", "tf32x3"), "ieee") == ["tf32x3"]
    assert neighbours(Choice(0, 96, 128), 0) == [96]  # 0 (a register cap of none) is a number like the rest
    assert neighbours(Choice(7), 7) == []
    assert neighbours(IntRange(1, 6), 6) == [5]
    assert neighbours(IntRange(2, 12, step=2), 4) == [2, 6]
    assert neighbours(IntRange(1, 64, log=True), 8) == [4, 16]
    low, high = neighbours(FloatRange(0.1, 1.0), 0.5)  # sorted, like the others
    assert high == pytest.approx(0.625) and low == pytest.approx(0.4)
    assert neighbours(FloatRange(0.1, 1.0), 1.0) == [pytest.approx(0.8)]


@pytest.mark.parametrize("space", [ToySpace, BlockedWYSpace, LookaheadSplitSpace])
def test_a_step_moves_the_asked_number_of_parameters_each_to_a_neighbour(space):
    rng = random.Random(5)
    base = space().as_params()
    dims = space.dimensions()
    for moves in (1, 2):
        for _ in range(50):
            out = step(space, base, rng, moves)
            assert out is not None and set(out) == set(base)
            moved = [k for k in base if out[k] != base[k]]
            assert len(moved) == moves
            assert all(out[k] in neighbours(dims[k], base[k]) for k in moved)
    assert step(ToySpace, ToySpace().as_params(), rng, 4) is None  # three knobs cannot make four moves


def test_the_neighbourhood_is_every_one_and_two_move_point_once():
    base = ToySpace().as_params()  # block 16 (8|32), warps 4 (2|8), stages 2 (1|3): six single moves
    points = list(neighbourhood(ToySpace, base, random.Random(1), two_first=False))
    keys = [tuple(sorted(p.items())) for p in points]
    assert len(keys) == len(set(keys)) == 6 + 12  # 6 one-move, 3 pairs of knobs x 2 x 2 two-move points
    moved = [sum(p[k] != base[k] for k in base) for p in points]
    assert moved == sorted(moved)  # one-move points first
    first = list(neighbourhood(ToySpace, base, random.Random(1), two_first=True))
    assert sum(first[0][k] != base[k] for k in base) == 2 and len(first) == 18


def test_local_steps_are_trials_of_the_structures_study_and_find_the_toy_optimum(tmp_path, families):
    cfg = config(tmp_path, mutation=MutationMix({"local_step": 1.0}))
    loop = make_loop(cfg, families, max_evals=40)
    loop.run_until_done()
    store = loop.run.store
    assert check_consistency(store, deep=True) == []
    made = [c for c in store.list_candidates() if store.get_json(OPERATOR_KEY.format(cid=c.id)) == "local_step"]
    assert len(made) >= 20 and all(c.origin is Origin.OPTUNA for c in made)
    by_id = {c.id: c for c in store.list_candidates()}
    dims = ToySpace.dimensions()
    for child in made:
        parent = by_id[child.parent_ids[0]]
        moved = [k for k in child.params if child.params[k] != parent.params[k]]
        assert 1 <= len(moved) <= 2 and all(child.params[k] in neighbours(dims[k], parent.params[k]) for k in moved)
    assert len({tuple(sorted(c.params.items())) for c in made}) == len(made)  # never the same point twice
    # Every child is a trial of its structure's study, keyed by the candidate and told its outcome.
    study = loop.tuner.study("toy", structure_fingerprint(TOY_SOURCE))
    trials = {t.user_attrs.get(TRIAL_ATTR_CANDIDATE): t for t in study.get_trials(deepcopy=False)}
    for child in (c for c in made if c.family == "toy"):
        trial = trials[child.id]
        assert trial.params == child.params
        if child.state is State.VERIFIED:
            assert trial.state is optuna.trial.TrialState.COMPLETE and trial.value == child.fitness_ms
    # Hill-climbing from the seed (16, 4, 2: 2.75 ms) gets within two moves of the optimum (32, 2, 3: 1.0 ms).
    assert loop.run.champion("toy").fitness_ms <= 1.5 and loop.run.champion("toy2").fitness_ms <= 1.5


def test_a_structure_whose_budget_is_used_gets_no_more_local_steps(tmp_path, families):
    from search.mutation.tuning import Tuner

    cfg = config(tmp_path, mutation=MutationMix({"local_step": 1.0}))
    loop = make_loop(cfg, families, max_evals=12)
    loop.tuner = Tuner(cfg.run_dir / "optuna2.journal", seed=1, trials_per_structure=2)
    loop.proposer.tuner = loop.tuner
    loop.run_until_done()
    for family in ("toy", "toy2"):
        assert loop.tuner.trials_used(family, structure_fingerprint(TOY_SOURCE)) <= 2


def test_a_frontier_gives_every_neighbour_once_then_is_spent():
    base = ToySpace().as_params()
    frontier = Frontier(ToySpace, base, random.Random(2))
    seen = []
    for which in (0, 1):
        while (point := frontier.point(which)) is not None:
            seen.append(tuple(sorted(point.items())))
            frontier.judged(which)
    expected = {tuple(sorted(p.items())) for p in neighbourhood(ToySpace, base, random.Random(1), two_first=False)}
    assert len(seen) == len(set(seen)) == len(expected) and set(seen) == expected
    assert frontier.spent


def test_a_parent_with_nothing_new_near_it_is_walked_once(tmp_path, families, monkeypatch):
    cfg = config(tmp_path, mutation=MutationMix({"local_step": 1.0}))
    loop = make_loop(cfg, families, max_evals=4)
    loop.run_until_done()
    proposer, tuner = loop.proposer, loop.tuner
    parent = loop.run.champion("toy")
    # Every point near the parent asked by someone else (TPE, say): the local step has nothing to offer.
    for params in neighbourhood(ToySpace, parent.params, random.Random(0), two_first=False):
        proposal = tuner.ask_at("toy", parent.fingerprint, ToySpace, parent.params, params)
        if proposal is not None:
            tuner.skip(proposal, "asked by the test")
    monkeypatch.setattr(proposer, "tuning_parent", lambda family, island, inflight: parent)
    walks = []
    real = tuner.asked
    monkeypatch.setattr(tuner, "asked", lambda *a: walks.append(a) or real(*a))
    assert LocalStep().propose(proposer, "toy", 0, {}) is None
    assert len(walks) == 1  # the first draw judged every neighbour ...
    assert LocalStep().propose(proposer, "toy", 0, {}) is None
    assert len(walks) == 1  # ... and the next ones know it without looking
