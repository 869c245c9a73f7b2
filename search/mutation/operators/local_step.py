"""Local step: a neighbour of the parent, one or two parameters moved to an adjacent value (immediate).

TPE asks whole new points: its first trials in a family's twenty-odd dimensions are random
ones, far from a hand-tuned seed, and nearly every kernel of such a child compiles anew.  A
local step is the hill-climbing move beside it: from the parent (the structure's best or a
good island member) it changes one parameter (two, with probability ``TWO_MOVES``) to the
next value of its dimension.  Its children stay near the best known point, where a better
one is most likely, and keep most of the parent's kernels: a Triton kernel is compiled per
distinct source and constexprs, so a child that moves a knob only some kernels read finds
the rest in the run's cache.  Each child is a trial of its structure's Optuna study (asked
at the chosen point), so the study stays the record of every evaluation and TPE learns from
these points too.  A parent whose whole neighbourhood was asked already gives way to another.

Neighbours of a value: the values beside it in a numeric :class:`~kernels.params.Choice`
(sorted) or :class:`~kernels.params.IntRange` (one step; a log range doubles or halves);
every other value of a non-numeric choice (booleans, precisions); a float scaled by
``FLOAT_FACTOR`` either way.
"""

from __future__ import annotations

import math
import random
from array import array
from collections import OrderedDict
from typing import Any, Iterator, Mapping

from kernels.params import Choice, Dimension, FloatRange, IntRange, ParamSpace, render_params
from population.models import Candidate, NewCandidate, Origin
from search.mutation.operators.base import Child, ProposalContext

TWO_MOVES = 0.3  # chance that a step moves two parameters instead of one
FLOAT_FACTOR = 1.25
PARENTS = 4  # parents drawn before giving up (each one's whole neighbourhood asked already)
FRONTIERS = 512  # parents whose unjudged neighbourhood is remembered (the least recently used are forgotten)


def _numeric(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def neighbours(dim: Dimension, value: Any) -> list[Any]:
    """The values one step from ``value`` in ``dim`` (never ``value`` itself)."""
    if isinstance(dim, Choice):
        values = list(dim.values)
        if all(_numeric(v) for v in values) and _numeric(value):
            ordered = sorted(set(values))
            if value not in ordered:
                return ordered[:1] + ordered[-1:]
            i = ordered.index(value)
            return [ordered[j] for j in (i - 1, i + 1) if 0 <= j < len(ordered)]
        return [v for v in values if not (v == value and type(v) is type(value))]
    if isinstance(dim, IntRange):
        if dim.log:
            ups = [min(dim.high, max(value * 2, value + dim.step)), max(dim.low, min(value // 2, value - dim.step))]
            out = [dim.low + round((v - dim.low) / dim.step) * dim.step for v in ups]
        else:
            out = [value - dim.step, value + dim.step]
        return sorted({v for v in out if dim.contains(v) and v != value})
    if isinstance(dim, FloatRange):
        out = [min(dim.high, value * FLOAT_FACTOR), max(dim.low, value / FLOAT_FACTOR)] if value > 0 else \
            [dim.low, dim.high]
        return sorted(v for v in out if not math.isclose(v, value))
    return []


def moves(space: type[ParamSpace], params: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """Every single move from ``params``: (parameter, new value)."""
    dims = space.dimensions()
    return [(name, value) for name in sorted(dims) if name in params for value in neighbours(dims[name], params[name])]


def step(space: type[ParamSpace], params: Mapping[str, Any], rng: random.Random, count: int) -> dict[str, Any] | None:
    """``params`` with ``count`` distinct parameters moved to a neighbour, or None if the space
    has too few movable parameters."""
    singles = moves(space, params)
    names = sorted({name for name, _ in singles})
    if len(names) < count:
        return None
    out = dict(params)
    for name in rng.sample(names, count):
        out[name] = rng.choice([value for n, value in singles if n == name])
    return out


def neighbourhood(space: type[ParamSpace], params: Mapping[str, Any], rng: random.Random,
                  two_first: bool) -> Iterator[dict[str, Any]]:
    """Every point one or two moves from ``params``, shuffled, the one-move points first (the
    two-move ones first if ``two_first``); validity in the space is left to the caller."""
    singles = moves(space, params)
    ones = [{**params, name: value} for name, value in singles]
    rng.shuffle(ones)

    def twos() -> Iterator[dict[str, Any]]:
        pairs = [(a, b) for i, a in enumerate(singles) for b in singles[i + 1:] if a[0] != b[0]]
        rng.shuffle(pairs)
        for (n1, v1), (n2, v2) in pairs:
            yield {**params, n1: v1, n2: v2}

    if two_first:
        yield from twos()
        yield from ones
    else:
        yield from ones
        yield from twos()


class Frontier:
    """A parent's neighbourhood not judged yet, in an order drawn once: its one-move points, and
    its two-move points as pairs of moves, each list walked from a cursor.  A point behind a
    cursor was asked in the study, proposed, or is invalid in the space, and stays so (a study's
    points only grow; validity is the space's), so no later call looks at it again.  Once both
    cursors reach the end the parent has nothing new near it: its later draws cost nothing
    (a parent whose neighbourhood filled was re-walked and re-validated point by point on
    every draw, the most of the driver's time at 10,000 evaluations)."""

    def __init__(self, space: type[ParamSpace], params: Mapping[str, Any], rng: random.Random) -> None:
        self.base = dict(params)
        self.singles = moves(space, params)
        n = len(self.singles)
        self.ones = array("L", range(n))
        rng.shuffle(self.ones)
        # A pair as i * n + j (i < j): 8 bytes, not a tuple of two ints (800-odd pairs a parent).
        self.twos = array("L", (i * n + j for i in range(n) for j in range(i + 1, n)
                                if self.singles[i][0] != self.singles[j][0]))
        rng.shuffle(self.twos)
        self.cursors = [0, 0]  # into ones, twos

    @property
    def spent(self) -> bool:
        return self.cursors[0] >= len(self.ones) and self.cursors[1] >= len(self.twos)

    def point(self, which: int) -> dict[str, Any] | None:
        """The next unjudged point of ``ones`` (0) or ``twos`` (1); None when that list is done."""
        seq = self.ones if which == 0 else self.twos
        at = self.cursors[which]
        if at >= len(seq):
            return None
        if which == 0:
            name, value = self.singles[seq[at]]
            return {**self.base, name: value}
        i, j = divmod(seq[at], len(self.singles))
        (n1, v1), (n2, v2) = self.singles[i], self.singles[j]
        return {**self.base, n1: v1, n2: v2}

    def judged(self, which: int) -> None:
        self.cursors[which] += 1


class Frontiers:
    """Each recent parent's :class:`Frontier`, by candidate id (a candidate's params never change)."""

    def __init__(self, limit: int = FRONTIERS) -> None:
        self.limit = limit
        self._by_parent: OrderedDict[str, Frontier] = OrderedDict()

    def of(self, parent: Candidate, space: type[ParamSpace], rng: random.Random) -> Frontier:
        frontier = self._by_parent.get(parent.id)
        if frontier is None:
            frontier = self._by_parent[parent.id] = Frontier(space, parent.params, rng)
            if len(self._by_parent) > self.limit:
                self._by_parent.popitem(last=False)
        else:
            self._by_parent.move_to_end(parent.id)
        return frontier


class LocalStep:
    name = "local_step"
    description = "a neighbour of the parent: one or two parameters moved to an adjacent value (a trial of its study)"
    origin = Origin.OPTUNA
    needs_llm = False
    default_weight = 0.5

    def propose(self, ctx: ProposalContext, family: str, island: int,
                inflight: Mapping[str, int]) -> Child | None:
        frontiers = ctx.operator_state(self.name, Frontiers)
        tried: set[str] = set()
        for _ in range(PARENTS):
            parent = ctx.tuning_parent(family, island, inflight)
            if parent is None or parent.id in tried:
                continue
            tried.add(parent.id)
            if parent.fingerprint in ctx.retired or not parent.params:
                continue
            space = ctx.families[parent.family].space
            if set(space.dimensions()) != set(parent.params):
                continue  # an LLM child's own knobs: not this space's points
            if ctx.tuner.spent(parent.family, parent.fingerprint):
                continue  # this structure's budget is used: maybe another parent's is not
            frontier = frontiers.of(parent, space, ctx.rng)
            if frontier.spent:
                continue
            child = self._walk(ctx, parent, space, frontier, two_first=ctx.rng.random() < TWO_MOVES)
            if child is not None:
                return child
        return None

    def _walk(self, ctx: ProposalContext, parent: Candidate, space: type[ParamSpace], frontier: Frontier,
              two_first: bool) -> Child | None:
        """The first point of the parent's frontier that becomes a child, judging the points before it."""
        # Imported here: optuna is heavy, and the registry must load without it (search.config).
        from search.mutation.tuning import TunerExhausted, point_key

        asked = ctx.tuner.asked(parent.family, parent.fingerprint)
        parent_source: str | None = None
        for which in ((1, 0) if two_first else (0, 1)):
            while (params := frontier.point(which)) is not None:
                if point_key(params) in asked:
                    frontier.judged(which)
                    continue
                try:
                    space(**params)
                except Exception:  # a cross-field rule (registers, shared memory): another neighbour
                    frontier.judged(which)
                    continue
                # The trial first: a structure whose budget is used says so before any child is rendered.
                try:
                    proposal = ctx.tuner.ask_at(parent.family, parent.fingerprint, space, parent.params, params,
                                                parent_id=parent.id, parent_value=parent.fitness_ms)
                except TunerExhausted:
                    return None  # the point stays: the budget, not the point, said no
                frontier.judged(which)  # asked now, whatever comes of it
                if proposal is None:
                    continue
                parent_source = parent_source if parent_source is not None else ctx.run.source(parent)
                new = NewCandidate(family=parent.family, island=parent.island, parent_ids=(parent.id,),
                                   origin=self.origin, source=render_params(parent_source, params), params=params,
                                   fingerprint=parent.fingerprint, generation=parent.generation + 1)
                if not ctx.fresh(new):
                    ctx.tuner.skip(proposal, "the same code and parameters as an existing candidate")
                    continue
                return Child(new=new, proposal=proposal)
        return None


OPERATOR = LocalStep()
