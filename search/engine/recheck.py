"""Re-checking a recorded result (``qrsearch recheck``): is the measurement fair?

The candidate and torch.geqrf are timed again in one evaluation child, on the chosen
benchmark cases with new seeds (so fresh inputs), and each case is compared with the
recorded numbers (median, min/max, count).  The question is one-sided — can the
recorded speed be reproduced? — and must survive a shared, noisy machine, where load
only ever adds time.  So a case holds when the fastest re-timed call is no slower than
the recorded median by more than the noise band:

    best ratio = new min / recorded median, divided by the drift (torch.geqrf's new /
    recorded median, clamped to [1/3, 3]: a slower or faster machine, not a different one)
    holds  <=>  best ratio <= 1 + band,  band = max(MIN_BAND, recorded half spread)

where the half spread is (max - min) / 2 / median.  A result that is *faster* on
re-check holds (the claim was "at least this fast").  The median ratio is reported too.
"""

from __future__ import annotations

from typing import Any

from kernels.suites import Case
from population.models import CaseOutcome, EvalResult, State

MIN_BAND = 0.05
MAX_DRIFT = 3.0
SEED_STRIDE = 1_000_003  # new seeds per recheck event: far from the suite's own
_MARK = ":recheck:"


def recheck_id(cid: str, seq: int) -> str:
    """The evaluation id of a re-check (never a candidate id: the loop does not tell it)."""
    return f"{cid}{_MARK}{seq}"


def parse_recheck_id(rid: str) -> tuple[str, int] | None:
    if _MARK not in rid:
        return None
    cid, _, seq = rid.partition(_MARK)
    return (cid, int(seq)) if seq.isdigit() else None


def fresh_cases(cases: list[Case], wanted: list[str], seq: int) -> list[Case]:
    chosen = [c for c in cases if not wanted or c.name in wanted]
    return [c.model_copy(update={"seed": c.seed + SEED_STRIDE * seq}) for c in chosen]


def _half_spread(c: CaseOutcome) -> float:
    if c.min_ms is None or c.max_ms is None or not c.median_ms:
        return 0.0
    return (c.max_ms - c.min_ms) / 2 / c.median_ms


def compare(recorded: EvalResult, baseline: EvalResult | None, state: State, fresh: EvalResult,
            reason: str = "") -> dict[str, Any]:
    """Per case: recorded and new median/min/max/count, geqrf before and now, the median ratio,
    the drift-corrected best ratio, the band and whether it holds; ``holds`` overall."""
    if state is not State.VERIFIED:
        return {"holds": False, "cases": [], "summary": f"the re-check did not verify: {reason or fresh.error}"[:500]}
    before = {c.case: c for c in recorded.cases}
    geqrf_before = {c.case: c.median_ms for c in baseline.cases} if baseline is not None else {}
    rows = []
    for new in fresh.cases:
        old = before.get(new.case)
        if old is None or not old.median_ms or not new.median_ms:
            rows.append({"case": new.case, "holds": False, "why": "no recorded time for this case"})
            continue
        ratio = new.median_ms / old.median_ms
        best = (new.min_ms or new.median_ms) / old.median_ms
        geqrf_then = geqrf_before.get(new.case)
        drift = new.baseline_ms / geqrf_then if new.baseline_ms and geqrf_then else None
        adjusted = best / min(MAX_DRIFT, max(1 / MAX_DRIFT, drift)) if drift else best
        band = max(MIN_BAND, _half_spread(old))
        rows.append({"case": new.case, "recorded_ms": old.median_ms, "recorded_min_ms": old.min_ms,
                     "recorded_max_ms": old.max_ms, "recorded_count": old.count, "recheck_ms": new.median_ms,
                     "recheck_min_ms": new.min_ms, "recheck_max_ms": new.max_ms, "recheck_count": new.count,
                     "geqrf_recorded_ms": geqrf_before.get(new.case), "geqrf_recheck_ms": new.baseline_ms,
                     "ratio": round(ratio, 4), "best_ratio": round(best, 4),
                     "drift": None if drift is None else round(drift, 4),
                     "adjusted_ratio": round(adjusted, 4), "band": round(band, 4),
                     "holds": adjusted <= 1.0 + band})
    holds = bool(rows) and all(r["holds"] for r in rows)
    worst = max((r for r in rows if "adjusted_ratio" in r), key=lambda r: float(r["adjusted_ratio"]), default=None)  # type: ignore[arg-type]
    summary = ("holds" if holds else "does not hold") + (
        f": worst {worst['case']}, best re-timed call {worst['adjusted_ratio']:.3g}x the recorded median "
        f"(band {worst['band']:.0%})"
        if worst else "")
    return {"holds": holds, "cases": rows, "summary": summary}
