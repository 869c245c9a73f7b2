"""LLM edit: an LLM rewrites the parent's code (one parent; the answer arrives asynchronously)."""

from __future__ import annotations

from population.models import Candidate, Origin
from search.mutation.operators.base import ProposalContext


class LLMEdit:
    name = "llm_edit"
    description = "an LLM edits the parent's code (needs an endpoint)"
    origin = Origin.LLM
    needs_llm = True
    default_weight = 0.4

    def parents(self, ctx: ProposalContext, parent: Candidate, island: int) -> tuple[Candidate, ...] | None:
        return (parent,)


OPERATOR = LLMEdit()
