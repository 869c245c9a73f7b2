"""Parameter crossover: uniform crossover of two parents' parameters within one structure (immediate)."""

from __future__ import annotations

from typing import Mapping

from kernels.params import render_params
from population.models import NewCandidate, Origin
from search.mutation.operators.base import Child, ProposalContext

ATTEMPTS = 8  # draws of a mixed assignment before giving up (some mixes are invalid in the space)


class ParamCrossover:
    name = "param_crossover"
    description = "two parents of one structure: each parameter taken from one or the other"
    origin = Origin.CROSSOVER
    needs_llm = False
    default_weight = 0.1

    def propose(self, ctx: ProposalContext, family: str, island: int,
                inflight: Mapping[str, int]) -> Child | None:
        a = ctx.run.select_parent(family, island, ctx.retired)
        if a is None:
            return None
        mates = [m for m in ctx.run.population.members(family, island)
                 if m.id != a.id and m.fingerprint == a.fingerprint and m.params != a.params]
        if not mates:
            return None
        b = ctx.rng.choice(mates)
        space = ctx.families[family].space
        source = ctx.run.source(a)
        for _ in range(ATTEMPTS):
            params = {k: (a.params if ctx.rng.random() < 0.5 else b.params)[k] for k in a.params}
            if not ctx.untried(a.source_sha256, params):
                continue  # rendered before from this parent's text: the same child again
            try:
                space(**params)
            except Exception:
                continue
            new = NewCandidate(family=family, island=island, parent_ids=(a.id, b.id), origin=self.origin,
                               source=render_params(source, params), params=params,
                               fingerprint=a.fingerprint, generation=max(a.generation, b.generation) + 1)
            if ctx.fresh(new):
                return Child(new=new)
        return None


OPERATOR = ParamCrossover()
