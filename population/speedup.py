"""Speedups against the torch.geqrf reference measured in the same run.

Results are stored with their times; the readers get speedups from here, computed once when a
run is read (:meth:`population.snapshot.RunSnapshot.results`), against the current champion of
the baseline family.  Pure data, so it lives beside the models it fills in.
"""

from __future__ import annotations

from population.models import EvalResult
from population.outcomes import geomean

__all__ = ["with_speedups"]


def with_speedups(result: EvalResult, baseline: EvalResult | None) -> EvalResult:
    """Fill baseline_ms / speedup per case and overall from the baseline's result."""
    if baseline is None:
        return result
    times = {c.case: c.median_ms for c in baseline.cases if c.median_ms}
    cases = []
    for c in result.cases:
        base = times.get(c.case)
        speed = base / c.median_ms if base and c.median_ms else None
        cases.append(c.model_copy(update={"baseline_ms": base, "speedup": speed}))
    speedups = [c.speedup for c in cases]
    overall = None
    if result.geomean_ms is not None and speedups and all(s for s in speedups):
        overall = geomean(speedups)
    # The reference's geomean over the same cases (a family is timed on its domain only).
    base_gm = geomean([times.get(c.case) for c in result.cases])
    return result.model_copy(update={"cases": tuple(cases), "speedup": overall, "baseline_geomean_ms": base_gm})
