"""The multi-fidelity cascade: a cheap timing screen between the gates and the full bench.

A child of a structure that already has a verified best is first gated and timed on a few
*screen* cases of its family's domain (one case of each of the ``size`` sizes of n that hold
most of the domain's cases: the shapes that weigh most in its geomean).  If its screen geomean
is more than ``margin`` times its structure best's geomean on the same cases, it stops there:
state ``screened`` (no fitness, never a champion, not a failure), and Optuna is told an
estimate on the fitness scale, the best's fitness scaled by how much slower the child was on
the screen.  Otherwise the remaining cases are gated and timed and the screen's timings count
as part of the full bench.  The screen's shapes compile first, so a screened child never
compiles the rest of its kernels.

Seeds, the reference, a structure's first evaluation and a domain of one size are always
benched in full.
"""

from __future__ import annotations

from collections import Counter
from typing import Mapping, Sequence

from pydantic import BaseModel, ConfigDict

from kernels.suites import Case
from population.models import Candidate, EvalResult
from population.outcomes import CaseStatus, geomean
from population.run import Run


class ScreenPlan(BaseModel):
    """What the worker needs to screen a child (sent inside its EvalRequest)."""

    model_config = ConfigDict(frozen=True)

    cases: list[str]  # names of the screen cases (a subset of the request's bench cases)
    bar_ms: float  # the structure best's geomean over those cases
    best_ms: float  # the structure best's fitness (its geomean over the whole domain)
    margin: float  # screened when the child's screen geomean > margin * bar_ms


def screen_cases(domain: Sequence[Case], size: int) -> list[Case]:
    """One case for each of the ``size`` values of n holding most of ``domain``'s cases (ties:
    smaller n first); empty when that would be the whole domain (nothing to save)."""
    if size <= 0:
        return []
    counts = Counter(c.n for c in domain)
    chosen = sorted(counts, key=lambda n: (-counts[n], n))[:size]
    picked = [next(c for c in domain if c.n == n) for n in sorted(chosen)]
    return [] if len(picked) >= len(domain) else picked


def plan_screen(domain: Sequence[Case], size: int, margin: float, best: EvalResult | None,
                best_fitness_ms: float | None) -> ScreenPlan | None:
    """The screen for a child whose structure's best is ``best`` (None: no screen)."""
    if best is None or best_fitness_ms is None:
        return None
    cases = screen_cases(domain, size)
    if not cases:
        return None
    times: Mapping[str, float | None] = {o.case: o.median_ms for o in best.cases if o.status is CaseStatus.OK}
    bar = geomean([times.get(c.name) for c in cases])
    if bar is None:
        return None  # the best was timed on other cases (a different suite or domain)
    return ScreenPlan(cases=[c.name for c in cases], bar_ms=bar, best_ms=best_fitness_ms, margin=margin)


def is_screened_out(screen_geomean_ms: float, plan: ScreenPlan) -> bool:
    return screen_geomean_ms > plan.margin * plan.bar_ms


def screened_estimate(screen_geomean_ms: float, plan: ScreenPlan) -> float:
    """The fitness-scale value Optuna is told for a screened child."""
    return plan.best_ms * screen_geomean_ms / plan.bar_ms


def structure_best(run: Run, cand: Candidate) -> tuple[EvalResult | None, float | None]:
    """The verified best of the candidate's structure so far: its result and fitness."""
    family = run.population.family(cand.family)
    record = family.structures.get(cand.fingerprint)
    if record is None or record.best_id is None:
        return None, None
    return run.store.evaluated_result(record.best_id), record.best_fitness_ms
