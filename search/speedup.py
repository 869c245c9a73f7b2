"""Speedups against the torch.geqrf reference measured in the same run (kept here for the
search's imports; the function lives in :mod:`population.speedup`, the baseline's name in
:mod:`population.records`)."""

from __future__ import annotations

from population.records import BASELINE_FAMILY
from population.speedup import with_speedups

__all__ = ["BASELINE_FAMILY", "with_speedups"]
