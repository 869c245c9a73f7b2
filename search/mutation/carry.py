"""Carrying a stale child's gain forward (``optuna.carry_gains``).

With many evaluators, dozens of a family's children are in flight at once, each proposed from
the parent its operator drew then.  When one of them comes back faster than its parent while
another member of its island and structure is already faster still, a one-evaluator search
would have gone on from the faster member; the gain found (the knobs the child moved) is
otherwise lost until some later step happens to move the same knobs from there.  This module
remembers such gains as **leads**: the faster member's parameters with the child's moves
applied, and the proposer makes the freshest lead of a family its next child (a trial of the
structure's study at that point, as a local step is), before any operator is drawn.

At one evaluator it fires too, whenever a child of a member that is not its island's best beat
its parent (tournament selection draws such parents); the quality runs in docs/scale.md
section 2 measure both.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, Mapping

from kernels.params import render_params
from population.models import Candidate, NewCandidate, Origin, State
from search.mutation.operators.base import Child, ProposalContext

MAX_MOVES = 3  # a child that moved more knobs than this (a TPE point) is a new point, not a step
LEADS = 16  # leads kept per family, the freshest first out; older ones are stale themselves
OPERATOR = "local_step"  # what a carried child is recorded as: moves of a neighbour, a trial of its study


@dataclass(frozen=True)
class Lead:
    target_id: str  # the member the moves are applied to
    params: dict[str, Any]
    note: str


def moved(parent: Mapping[str, Any], child: Mapping[str, Any]) -> dict[str, Any]:
    """The knobs ``child`` set to another value than ``parent``, with the child's values."""
    return {k: v for k, v in child.items() if k not in parent or parent[k] != v or type(parent[k]) is not type(v)}


class Leads:
    """Per family, the leads not yet proposed, the freshest last."""

    def __init__(self, limit: int = LEADS) -> None:
        self.limit = limit
        self._by_family: dict[str, deque[Lead]] = {}
        self.noted = self.carried = 0  # leads made, and children made of them (the quality runs report them)

    def __len__(self) -> int:
        return sum(len(q) for q in self._by_family.values())

    def pending(self, family: str) -> int:
        return len(self._by_family.get(family, ()))

    def note(self, ctx: ProposalContext, child: Candidate, parent: Candidate | None) -> Lead | None:
        """Remember ``child``'s gain if it beat ``parent`` (its one parent, of its structure) and a
        member of its island and structure is faster than both; returns the lead made, if any."""
        if child.state is not State.VERIFIED or child.origin is not Origin.OPTUNA or parent is None \
                or parent.fitness_ms is None or child.fitness_ms is None or parent.fingerprint != child.fingerprint \
                or not child.fitness_ms < parent.fitness_ms or child.fingerprint in ctx.retired:
            return None
        moves = moved(parent.params, child.params)
        if not moves or len(moves) > MAX_MOVES:
            return None
        members = ctx.run.population.members(child.family, child.island)
        best = next((m for m in members if m.fingerprint == child.fingerprint), None)
        if best is None or best.id in (child.id, parent.id) or best.fitness_ms is None \
                or not best.fitness_ms < child.fitness_ms:
            return None  # the child is its island's best (its gain is in the line already)
        params = {**best.params, **moves}
        if params == best.params:
            return None
        lead = Lead(target_id=best.id, params=params,
                    note=f"{child.id}'s moves over {parent.id} ({', '.join(sorted(moves))}) applied to {best.id}")
        queue = self._by_family.setdefault(child.family, deque())
        queue.append(lead)
        self.noted += 1
        while len(queue) > self.limit:
            queue.popleft()
        return lead

    def propose(self, ctx: ProposalContext, family: str) -> Child | None:
        """A child of the family's freshest usable lead (leads that cannot become one are dropped)."""
        from search.mutation.tuning import TunerExhausted  # optuna is heavy: imported when used

        queue = self._by_family.get(family)
        while queue:
            lead = queue.pop()
            target = ctx.run.population.family(family).find(lead.target_id)
            if target is None or target.fingerprint in ctx.retired:
                continue  # evicted since: its line went on without it
            space = ctx.families[family].space
            if set(space.dimensions()) != set(target.params):
                continue
            try:
                space(**lead.params)
            except Exception:  # a cross-field rule of the space: not a valid point from this member
                continue
            try:
                proposal = ctx.tuner.ask_at(family, target.fingerprint, space, target.params, lead.params,
                                            parent_id=target.id, parent_value=target.fitness_ms)
            except TunerExhausted:
                continue
            if proposal is None:
                continue  # asked before: evaluated, in flight or skipped
            new = NewCandidate(family=family, island=target.island, parent_ids=(target.id,), origin=Origin.OPTUNA,
                               source=render_params(ctx.run.source(target), lead.params), params=lead.params,
                               fingerprint=target.fingerprint, generation=target.generation + 1)
            if not ctx.fresh(new):
                ctx.tuner.skip(proposal, "the same code and parameters as an existing candidate")
                continue
            self.carried += 1
            return Child(new=new, proposal=proposal, note=lead.note)
        return None
