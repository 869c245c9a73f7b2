"""Family size domains: a family is verified and timed only where it can win.

A family declares the sizes it is meant for (``n_range`` in :mod:`kernels.families`, inclusive).
Its children are gated and timed on the suite's cases inside that range only, so its fitness is
the geomean over its domain and no child spends GPU time re-timing torch.geqrf where the file
delegates to it (``householder_unblocked`` above its ``max_n``).  The per-case champions (best
median per case over every family) feed the composite export, which stays one file over all
cases; the torch.geqrf reference is timed once on every case.

A domain that holds no case of the configured suite (the CPU smoke suites stop at n = 64)
falls back to the whole suite, so small test suites still evaluate every family.
"""

from __future__ import annotations

from typing import Any, Sequence

from kernels.suites import Case


def n_range_of(family: Any) -> tuple[int, int] | None:
    """The family's declared (lo, hi) range of n, or None (the baseline, or no declaration)."""
    if getattr(family, "baseline", False):
        return None
    value = getattr(family, "n_range", None)
    return (int(value[0]), int(value[1])) if value is not None else None


def domain_cases(cases: Sequence[Case], family: Any) -> list[Case]:
    """The cases of ``cases`` inside the family's domain; all of them if it declares none
    or none falls inside it."""
    span = n_range_of(family)
    if span is None:
        return list(cases)
    inside = [c for c in cases if span[0] <= c.n <= span[1]]
    return inside or list(cases)


def describe_domains(families: dict[str, Any], bench: Sequence[Case]) -> list[str]:
    """One line per family: its domain and how many bench cases it is timed on (for the log)."""
    lines = []
    for name, family in families.items():
        span = n_range_of(family)
        chosen = domain_cases(bench, family)
        if span is None:
            where = "every case"
        elif len(chosen) == len(bench) and not any(span[0] <= c.n <= span[1] for c in bench):
            where = f"n in [{span[0]}, {span[1]}] holds no case of the suite: every case"
        else:
            where = f"n in [{span[0]}, {span[1]}]"
        lines.append(f"{name}: {where} ({len(chosen)}/{len(bench)} bench cases)")
    return lines
