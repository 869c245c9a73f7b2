from __future__ import annotations

import json
import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from population.config import SelectionConfig, SelectionKind
from population.rng import rng_from_json, rng_state_to_json
from population.selection import rank_softmax, rank_softmax_weights, select, tournament

configs = st.builds(SelectionConfig, kind=st.sampled_from(SelectionKind),
                    tournament_size=st.integers(1, 8), temperature=st.floats(0.01, 10.0))


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 30), seed=st.integers(0, 2**32), config=configs)
def test_selection_is_a_member_and_deterministic_for_a_seed(n: int, seed: int, config: SelectionConfig) -> None:
    ranked = [f"m{i}" for i in range(n)]
    picks_a = [select(ranked, random.Random(seed), config) for _ in range(3)]
    rng = random.Random(seed)
    picks_b = [select(ranked, rng, config) for _ in range(20)]
    assert picks_a == [picks_b[0]] * 3
    assert all(p in ranked for p in picks_b)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 30), seed=st.integers(0, 2**32), steps=st.integers(0, 50), config=configs)
def test_a_restored_rng_state_continues_the_same_sequence(n: int, seed: int, steps: int,
                                                          config: SelectionConfig) -> None:
    ranked = list(range(n))
    rng = random.Random(seed)
    for _ in range(steps):
        select(ranked, rng, config)
    saved = rng_state_to_json(rng)
    restored = rng_from_json(json.loads(json.dumps(saved)))  # through real JSON text
    assert [select(ranked, rng, config) for _ in range(25)] == [select(ranked, restored, config) for _ in range(25)]


def test_empty_island_selects_nothing() -> None:
    assert select([], random.Random(0), SelectionConfig()) is None
    with pytest.raises(ValueError):
        tournament([], random.Random(0), 2)


def test_full_tournament_picks_the_best_and_size_one_is_uniform() -> None:
    ranked = list(range(10))
    rng = random.Random(1)
    assert {tournament(ranked, rng, 10) for _ in range(50)} == {0}
    counts = Counter(tournament(ranked, rng, 1) for _ in range(5000))
    assert set(counts) == set(ranked) and min(counts.values()) > 350  # expectation 500 each


def test_tournament_pressure_grows_with_size() -> None:
    ranked = list(range(20))
    rng = random.Random(3)
    means = [sum(tournament(ranked, rng, k) for _ in range(3000)) / 3000 for k in (1, 2, 4, 8)]
    assert means == sorted(means, reverse=True) and means[0] > 8 and means[-1] < 2.5


def test_rank_softmax_temperature_moves_from_greedy_to_uniform() -> None:
    ranked = list(range(10))
    rng = random.Random(2)
    assert {rank_softmax(ranked, rng, 1e-4) for _ in range(200)} == {0}
    hot = Counter(rank_softmax(ranked, rng, 1e4) for _ in range(5000))
    assert min(hot.values()) > 380
    warm = Counter(rank_softmax(ranked, rng, 0.3) for _ in range(5000))
    assert warm[0] > warm[4] > warm[9]


def test_rank_softmax_frequencies_match_the_documented_weights() -> None:
    ranked = list(range(5))
    w = rank_softmax_weights(5, 0.5)
    rng = random.Random(4)
    n = 20000
    counts = Counter(rank_softmax(ranked, rng, 0.5) for _ in range(n))
    for r in ranked:
        expected = w[r] / sum(w)
        assert abs(counts[r] / n - expected) < 0.015, (r, counts[r] / n, expected)


def test_a_handicap_of_zero_picks_as_no_handicap_and_a_handicapped_member_wins_less() -> None:
    ranked = [f"m{i}" for i in range(8)]
    for config in (SelectionConfig(tournament_size=3), SelectionConfig(kind=SelectionKind.RANK_SOFTMAX)):
        plain, zero = random.Random(4), random.Random(4)
        assert [select(ranked, plain, config) for _ in range(200)] == \
            [select(ranked, zero, config, [0.0] * 8) for _ in range(200)]  # the same draws, the same picks
        # The best with 8 children in flight at 0.5 ranks each competes as rank 4: drawn far less.
        rng_a, rng_b = random.Random(11), random.Random(11)
        as_is = Counter(select(ranked, rng_a, config) for _ in range(2000))
        busy = Counter(select(ranked, rng_b, config, [4.0] + [0.0] * 7) for _ in range(2000))
        assert busy["m0"] < as_is["m0"] / 2 and busy["m1"] > as_is["m1"]
        assert sum(busy.values()) == 2000
