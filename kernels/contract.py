"""The QR task contract: what a candidate receives and what it must return.

A candidate is ``custom_kernel(A) -> (H, tau)`` with torch.geqrf's compact
Householder convention.  This module owns the constants of the
contract; the input generator (torch) lives in :mod:`kernels.inputs` and the
properties the output must satisfy in :mod:`kernels.verify`.

``cond`` is a deterministic dynamic-range knob, not an exact condition number:
dense inputs multiply column j by ``10 ** (-cond * j / (n - 1))``.
"""

from __future__ import annotations

# float32's machine epsilon (torch.finfo(torch.float32).eps), written out so that the contract's
# constants, and the suites and floors built on them, import without torch (``qrsearch status``).
EPS32: float = 2.0 ** -23
FACTOR_RTOL: float = 20.0
ORTH_RTOL: float = 100.0

STRESS_CASES: tuple[str, ...] = ("rankdef", "nearrank", "clustered", "band", "rowscale", "nearcollinear")
CASES: tuple[str, ...] = ("dense", "upper", *STRESS_CASES, "mixed")

# Profiles a "mixed" batch draws from, and their weights: dense is about half.
MIXED_PROFILES: tuple[str, ...] = ("dense", *STRESS_CASES)
MIXED_WEIGHTS: tuple[float, ...] = (6.0,) + (1.0,) * len(STRESS_CASES)


def qr_flops(batch: int, n: int) -> float:
    """Householder QR of a square matrix: 4/3 n^3 flops each."""
    return 4.0 / 3.0 * float(n) ** 3 * batch


def qr_min_bytes(batch: int, n: int) -> float:
    """Read A once, write H once (tau is negligible)."""
    return 2.0 * 4.0 * float(n) ** 2 * batch

