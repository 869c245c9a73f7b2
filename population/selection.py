"""Parent selection over an island's ranked, verified members.

Both operators take the ranking (best first) and an explicit ``random.Random``, and
draw from it in a fixed way, so a restored RNG state reproduces the same picks.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import TypeVar

from population.config import SelectionConfig, SelectionKind

T = TypeVar("T")


def tournament(ranked: Sequence[T], rng: random.Random, size: int) -> T:
    """Best of ``size`` distinct members drawn uniformly (all of them if fewer)."""
    if not ranked:
        raise ValueError("cannot select from an empty ranking")
    k = min(size, len(ranked))
    # Sampling rank positions means "best of the sample" is just the smallest index.
    return ranked[min(rng.sample(range(len(ranked)), k))]


def rank_softmax_weights(n: int, temperature: float) -> list[float]:
    if n == 1:
        return [1.0]
    # Subtracting nothing is safe: the exponent is in [-1/T, 0], so the largest weight is 1.
    return [math.exp(-(r / (n - 1)) / temperature) for r in range(n)]


def rank_softmax(ranked: Sequence[T], rng: random.Random, temperature: float) -> T:
    """Pick rank r with probability proportional to exp(-(r / (n-1)) / temperature)."""
    if not ranked:
        raise ValueError("cannot select from an empty ranking")
    weights = rank_softmax_weights(len(ranked), temperature)
    total = math.fsum(weights)
    u = rng.random() * total
    acc = 0.0
    for item, w in zip(ranked, weights, strict=True):
        acc += w
        if u < acc:
            return item
    return ranked[-1]  # u == total up to rounding


def select(ranked: Sequence[T], rng: random.Random, config: SelectionConfig) -> T | None:
    if not ranked:
        return None
    if config.kind is SelectionKind.TOURNAMENT:
        return tournament(ranked, rng, config.tournament_size)
    return rank_softmax(ranked, rng, config.temperature)
