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


def tournament(ranked: Sequence[T], rng: random.Random, size: int, handicap: Sequence[float] | None = None) -> T:
    """Best of ``size`` distinct members drawn uniformly (all of them if fewer); with ``handicap``,
    the member at rank r competes as rank r + handicap[r] (the same draws: without a handicap
    the same member wins)."""
    if not ranked:
        raise ValueError("cannot select from an empty ranking")
    k = min(size, len(ranked))
    # Sampling rank positions means "best of the sample" is just the smallest index.
    drawn = rng.sample(range(len(ranked)), k)
    if handicap is None:
        return ranked[min(drawn)]
    return ranked[min(drawn, key=lambda r: (r + handicap[r], r))]


def rank_softmax_weights(n: int, temperature: float) -> list[float]:
    if n == 1:
        return [1.0]
    # Subtracting nothing is safe: the exponent is in [-1/T, 0], so the largest weight is 1.
    return [math.exp(-(r / (n - 1)) / temperature) for r in range(n)]


def rank_softmax(ranked: Sequence[T], rng: random.Random, temperature: float,
                 handicap: Sequence[float] | None = None) -> T:
    """Pick rank r with probability proportional to exp(-(r / (n-1)) / temperature); with
    ``handicap``, rank r weighs as rank r + handicap[r]."""
    if not ranked:
        raise ValueError("cannot select from an empty ranking")
    weights = rank_softmax_weights(len(ranked), temperature)
    if handicap is not None and len(ranked) > 1:
        weights = [w * math.exp(-(h / (len(ranked) - 1)) / temperature) for w, h in zip(weights, handicap, strict=True)]
    total = math.fsum(weights)
    u = rng.random() * total
    acc = 0.0
    for item, w in zip(ranked, weights, strict=True):
        acc += w
        if u < acc:
            return item
    return ranked[-1]  # u == total up to rounding


def select(ranked: Sequence[T], rng: random.Random, config: SelectionConfig,
           handicap: Sequence[float] | None = None) -> T | None:
    """A member by the configured rule; ``handicap``: ranks each member competes below its own
    (the search's: children of it in flight, ``selection.inflight_penalty``)."""
    if not ranked:
        return None
    if config.kind is SelectionKind.TOURNAMENT:
        return tournament(ranked, rng, config.tournament_size, handicap)
    return rank_softmax(ranked, rng, config.temperature, handicap)
