"""One number format for every human-facing output: speedups and times with the same
significant figures, in tables, logs, the live panel and the report (JSON keeps raw floats).

``7.92e-05x``, ``0.00x`` and ``0.01x`` for one speedup are what this replaces: positional
notation with three significant figures reads the same everywhere and never rounds a real
value to zero.
"""

from __future__ import annotations

import math
import statistics
from typing import Mapping

SIGNIFICANT = 3
MISSING = "-"

# Said wherever a time or a speedup measured on a CPU is shown: the Triton interpreter runs
# kernels as Python loops, so those numbers rank nothing.
CPU_CAVEAT = "CPU (Triton interpreter): times and speedups are not a speed measurement"


def significant(x: float | None, digits: int = SIGNIFICANT) -> str:
    """``x`` with ``digits`` significant figures, positional from 1e-5 to 1e6 (scientific outside)."""
    if x is None:
        return MISSING
    if x == 0 or not math.isfinite(x):
        return "0" if x == 0 else str(x)
    rounded = float(f"{x:.{digits - 1}e}")  # round first, so 9.996 becomes 10.0, not 10.00
    exponent = math.floor(math.log10(abs(rounded)))
    if -5 <= exponent < 6:
        return f"{rounded:.{max(digits - 1 - exponent, 0)}f}"
    return f"{rounded:.{digits - 1}e}"


def speedup(x: float | None) -> str:
    """A speedup against torch.geqrf: ``1.90x``, ``0.000115x``, ``27.0x``."""
    return MISSING if x is None else significant(x) + "x"


def ms(x: float | None, unit: bool = False) -> str:
    """A time in milliseconds (``unit`` appends `` ms``): ``642``, ``0.0512``, ``1.23e+06``."""
    if x is None:
        return MISSING
    return significant(x) + (" ms" if unit else "")


def on_cpu(device: str | None) -> bool:
    """Whether a result's device string (``cpu``, ``cuda:0``) names a CPU."""
    return str(device or "").lower().startswith("cpu")


def busy(fractions: Mapping[str, float], listed: int = 8) -> str:
    """Evaluators' busy fractions: each one for a few evaluators; for many, the mean, the median and
    the least busy ``listed`` (a line per evaluator of 256 reads as noise; ``--json`` keeps them all)."""
    def one(name: str) -> str:
        return f"{name} {100 * fractions[name]:.0f}%"

    if len(fractions) <= listed:
        return ", ".join(one(k) for k in sorted(fractions, key=_natural))
    values = list(fractions.values())
    least = sorted(fractions, key=lambda k: (fractions[k], _natural(k)))[:listed]
    return (f"{len(values)} evaluators, mean {100 * statistics.fmean(values):.0f}%, "
            f"median {100 * statistics.median(values):.0f}%; least busy: " + ", ".join(one(k) for k in least))


def _natural(name: str) -> tuple:
    """gpu2 before gpu10."""
    head = name.rstrip("0123456789")
    tail = name[len(head):]
    return (head, int(tail) if tail else -1)
