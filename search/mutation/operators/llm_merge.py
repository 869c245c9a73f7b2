"""LLM merge: an LLM combines the code of two parents of different structures (asynchronous)."""

from __future__ import annotations

from population.models import Candidate, Origin
from search.mutation.operators.base import ProposalContext


class LLMMerge:
    name = "llm_merge"
    description = "an LLM merges the code of two parents of different structures (needs an endpoint)"
    origin = Origin.CROSSOVER
    needs_llm = True
    default_weight = 0.1

    def parents(self, ctx: ProposalContext, parent: Candidate, island: int) -> tuple[Candidate, ...] | None:
        # A mate of the same structure has nothing new to offer the merge: that is param_crossover's job.
        others = [m for m in ctx.run.population.members(parent.family, island)
                  if m.fingerprint != parent.fingerprint and m.fingerprint not in ctx.retired]
        if not others:
            return None
        return (parent, ctx.rng.choice(others))


OPERATOR = LLMMerge()
