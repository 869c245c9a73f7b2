"""The result vocabulary every package shares: how one case of an evaluation ended, and the geomean.

It lives here, in ``population`` (the pure-data package: stdlib and pydantic only), and ``kernels``
imports it: the harness writes these values and the run store keeps them, so one enum with one
spelling serves both, with no bridge between two vocabularies.  This module imports nothing from
``population`` itself, so the evaluation child pays only for ``enum`` and ``math``.

The spellings are the run store's (``ok``, ``skipped``), so every store written before the
vocabularies merged opens unchanged; the harness's old spellings (``passed``, ``not_run``, as in
bench JSON files) still load as aliases.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from enum import StrEnum


class CaseStatus(StrEnum):
    OK = "ok"  # verified (and, in a bench, timed)
    FAILED_VERIFY = "failed_verify"  # an output broke a residual gate or an alias/mutation check
    FAILED_COMPILE = "failed_compile"  # the candidate did not load, or its kernels did not compile
    REJECTED = "rejected"  # the static source screen refused the file
    ERROR = "error"  # the candidate raised
    CRASHED = "crashed"  # the evaluation process died (segfault, abort, CUDA error)
    TIMEOUT = "timeout"  # past the case limit; the process was killed
    SKIPPED = "skipped"  # not run: an earlier case crashed, hung or failed

    @property
    def ok(self) -> bool:
        return self is CaseStatus.OK

    @classmethod
    def _missing_(cls, value: object) -> CaseStatus | None:
        # The harness's spellings before the merge (bench --json files keep them).
        return _ALIASES.get(value) if isinstance(value, str) else None


_ALIASES: dict[str, CaseStatus] = {"passed": CaseStatus.OK, "not_run": CaseStatus.SKIPPED}


def geomean(values: Iterable[float | None]) -> float | None:
    """The geometric mean; None if there is nothing to average or any value is missing, not positive
    or not finite (a failed or untimed case has no place in a mean)."""
    vals = list(values)
    if not vals or any(v is None or not (v > 0 and math.isfinite(v)) for v in vals):
        return None
    return math.exp(math.fsum(math.log(v) for v in vals) / len(vals))  # type: ignore[arg-type]
