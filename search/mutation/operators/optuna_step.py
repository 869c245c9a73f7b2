"""Optuna step: the tuner proposes new parameters for the parent's structure (immediate)."""

from __future__ import annotations

from typing import Mapping

from kernels.params import render_params, structure_fingerprint
from population.models import NewCandidate, Origin
from search.mutation.operators.base import Child, ProposalContext


class OptunaStep:
    name = "optuna_step"
    description = "Optuna proposes new parameters for the parent's structure"
    origin = Origin.OPTUNA
    needs_llm = False
    default_weight = 0.5

    def propose(self, ctx: ProposalContext, family: str, island: int,
                inflight: Mapping[str, int]) -> Child | None:
        # Imported here: optuna is heavy, and the registry must load without it (search.config).
        from search.mutation.tuning import TunerExhausted

        parent = ctx.tuning_parent(family, island, inflight)
        if parent is None:
            return None
        fam = ctx.families[parent.family]
        if parent.fingerprint in ctx.retired or not parent.params:
            return None  # retired by an engineer, or nothing to tune (a file without PARAMS)
        limit = ctx.tpe_max_inflight
        if limit is not None and inflight.get(parent.fingerprint, 0) >= limit:
            return None  # crowded: TPE's ask would know none of its in-flight siblings' outcomes
        try:
            proposal = ctx.tuner.ask(parent.family, parent.fingerprint, fam.space, parent.params,
                                     parent_id=parent.id, parent_value=parent.fitness_ms)
        except TunerExhausted:
            return None
        source = render_params(ctx.run.source(parent), proposal.params)
        if structure_fingerprint(source) != parent.fingerprint:
            ctx.tuner.skip(proposal, "the parameters change the code's structure")
            return None
        new = NewCandidate(family=parent.family, island=parent.island, parent_ids=(parent.id,), origin=self.origin,
                           source=source, params=proposal.params, fingerprint=parent.fingerprint,
                           generation=parent.generation + 1)
        if not ctx.fresh(new):
            ctx.tuner.skip(proposal, "the same code and parameters as an existing candidate")
            return None
        return Child(new=new, proposal=proposal)


OPERATOR = OptunaStep()
