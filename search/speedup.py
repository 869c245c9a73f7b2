"""Speedups against the torch.geqrf reference measured in the same run."""

from __future__ import annotations

import math

from population.models import EvalResult
from search.config import BASELINE_FAMILY

__all__ = ["BASELINE_FAMILY", "with_speedups"]


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
        overall = math.exp(sum(math.log(s) for s in speedups) / len(speedups))  # type: ignore[arg-type]
    base_gm = baseline.geomean_ms if len(times) == len(result.cases) else None
    return result.model_copy(update={"cases": tuple(cases), "speedup": overall, "baseline_geomean_ms": base_gm})
