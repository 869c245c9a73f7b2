"""Parameter crossover: uniform crossover of two parents' parameters within one structure (immediate).

A mix takes each knob on which the parents differ from one or the other, so a pair that differs
on ``d`` knobs has ``2**d - 2`` mixes that are neither parent.  Which mixes of a pair were drawn
is remembered (a mix is judged once: invalid, rendered before, or proposed), so a pair of
converged mates, whose few mixes were all drawn, costs nothing on later draws (drawing,
validating and rendering the same mixes again was a sixth of the driver at 10,000 evaluations).
"""

from __future__ import annotations

import random
from collections import OrderedDict
from typing import Mapping

from kernels.params import render_params
from population.models import Candidate, NewCandidate, Origin
from search.mutation.operators.base import Child, ProposalContext

ATTEMPTS = 8  # draws of a mixed assignment before giving up (some mixes are invalid in the space)
PAIRS = 4096  # pairs whose drawn mixes are remembered (the least recently used are forgotten)


class Mixes:
    """The mixes drawn per (parent, mate), as bit masks over the knobs they differ on (bit set:
    the mate's value)."""

    def __init__(self, limit: int = PAIRS) -> None:
        self.limit = limit
        self._drawn: OrderedDict[tuple[str, str], set[int]] = OrderedDict()

    def drawn(self, a: str, b: str) -> set[int]:
        key = (a, b)
        drawn = self._drawn.get(key)
        if drawn is None:
            drawn = self._drawn[key] = set()
            if len(self._drawn) > self.limit:
                self._drawn.popitem(last=False)
        else:
            self._drawn.move_to_end(key)
        return drawn


def differing(a: Candidate, b: Candidate) -> list[str]:
    return sorted(k for k in a.params if a.params[k] != b.params.get(k))


def draw(rng: random.Random, knobs: int, drawn: set[int]) -> int | None:
    """A mask not drawn before, neither parent (0: all the parent's; all ones: all the mate's); None
    when every one was."""
    full = (1 << knobs) - 1
    if knobs < 2 or len(drawn) >= full - 1:
        return None
    if len(drawn) * 2 < full:  # most are new: draw until one is
        while True:
            mask = rng.getrandbits(knobs)
            if 0 < mask < full and mask not in drawn:
                return mask
    left = [m for m in range(1, full) if m not in drawn]
    return rng.choice(left)


class ParamCrossover:
    name = "param_crossover"
    description = "two parents of one structure: each parameter taken from one or the other"
    origin = Origin.CROSSOVER
    needs_llm = False
    default_weight = 0.1

    def propose(self, ctx: ProposalContext, family: str, island: int,
                inflight: Mapping[str, int]) -> Child | None:
        a = ctx.select_parent(family, island)
        if a is None:
            return None
        mixes = ctx.operator_state(self.name, Mixes)
        mates = [m for m in ctx.run.population.members(family, island)
                 if m.id != a.id and m.fingerprint == a.fingerprint and m.params != a.params]
        if not mates:
            return None
        b = ctx.rng.choice(mates)
        knobs = differing(a, b)
        drawn = mixes.drawn(a.id, b.id)
        space = ctx.families[family].space
        source: str | None = None
        for _ in range(ATTEMPTS):
            mask = draw(ctx.rng, len(knobs), drawn)
            if mask is None:
                return None  # every mix of this pair was drawn
            drawn.add(mask)
            params = dict(a.params)
            for i, k in enumerate(knobs):
                if mask >> i & 1:
                    params[k] = b.params[k]
            if not ctx.untried(a.source_sha256, params):
                continue  # rendered before from this parent's text: the same child again
            try:
                space(**params)
            except Exception:
                continue
            source = source if source is not None else ctx.run.source(a)
            new = NewCandidate(family=family, island=island, parent_ids=(a.id, b.id), origin=self.origin,
                               source=render_params(source, params), params=params,
                               fingerprint=a.fingerprint, generation=max(a.generation, b.generation) + 1)
            if ctx.fresh(new):
                return Child(new=new)
        return None


OPERATOR = ParamCrossover()
