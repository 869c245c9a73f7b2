"""An evaluation's outcome from the harness's reports: state, reason and result as data.

The worker runs the cascade (gates, screen, bench) and hands the reports here; what
comes back is what the loop tells the population, a failure being a state with its
reason and never a fake score.
"""

from __future__ import annotations

import time

from kernels.harness.results import CaseResult, SuiteReport
from kernels.suites import Case
from population.models import CaseOutcome, EvalResult, State
from population.outcomes import CaseStatus
from search.engine.cascade import ScreenPlan, screened_estimate
from search.engine.messages import EvalOutcome, EvalRequest
from search.numbers import ms as fmt_ms, significant

__all__ = ["merge_reports", "outcome_from_reports"]

# The candidate's state after its first failed case (a case status is a verdict on one case; the
# state is the candidate's lifecycle, so the two stay apart).
_FAILED_STATE: dict[CaseStatus, State] = {
    CaseStatus.FAILED_COMPILE: State.FAILED_COMPILE, CaseStatus.FAILED_VERIFY: State.FAILED_VERIFY,
    CaseStatus.TIMEOUT: State.TIMEOUT, CaseStatus.REJECTED: State.REJECTED,
}



def _state_of(case: CaseResult) -> State:
    # The child reports a candidate that patched the checker as an error whose message says so.
    if case.status is CaseStatus.ERROR and (case.error or "").startswith("rejected"):
        return State.REJECTED
    return _FAILED_STATE.get(case.status, State.CRASHED)


def _outcome(case: CaseResult) -> CaseOutcome:
    t, v = case.timing, case.verify
    residuals = {}
    if v is not None:
        residuals = {k: x for k, x in (("factor", v.factor_scaled), ("orth", v.orth_scaled),
                                       ("leak", v.leakage_scaled), ("recon", v.recon_scaled)) if x is not None}
    return CaseOutcome(case=case.case.name, status=case.status,
                       median_ms=t.median_ms if t else None, min_ms=t.min_ms if t else None,
                       max_ms=t.max_ms if t else None, count=t.count if t else None,
                       host_ms=t.host_ms if t else None, allocator_calls=t.allocator_calls if t else None,
                       baseline_ms=case.baseline_ms,
                       residuals=residuals, message=("" if case.ok else case.message)[:2000], wall_s=case.wall_s)


def outcome_from_reports(request: EvalRequest, verify: SuiteReport, bench: SuiteReport | None,
                         started: float, worker: str = "", extra_stages: dict[str, float] | None = None,
                         ahead: dict[str, float] | None = None, screened: ScreenPlan | None = None) -> EvalOutcome:
    """The outcome of an evaluation from its verify and bench reports; ``screened`` says the
    bench report is the cascade's screen, which the candidate failed to pass."""
    finished = time.time()
    report = bench if bench is not None else verify
    failed = next((c for c in verify.cases if not c.ok), None)
    if failed is None and bench is not None:
        failed = next((c for c in bench.cases if not c.ok), None)
    infra = verify.infra_error or (bench.infra_error if bench else None)
    profile = None
    if bench is not None and failed is None:
        profile = {c.case.name: c.profile.model_dump(mode="json") for c in bench.cases if c.profile is not None} or None
    cases = tuple(_outcome(c) for c in (bench.cases if bench is not None else verify.cases))
    if failed is not None and bench is None:
        # Show the verification failure, not a table of skipped timings.
        cases = tuple(_outcome(c) for c in verify.cases)
    geomean = bench.geomean_ms if (bench is not None and failed is None) else None
    stages = {"verify": verify.wall_s, "startup": verify.startup_s, **(extra_stages or {})}
    jit = {"compiled": float(verify.jit_compiled), "cache_hits": float(verify.jit_cache_hits), **(ahead or {})}
    if bench is not None:
        stages["bench"] = bench.wall_s
        stages["startup"] += bench.startup_s
        stages["rechecks"] = sum(c.timing.check_s for c in bench.cases if c.timing)
        stages["profile"] = sum(c.profile_s or 0.0 for c in bench.cases)
        jit["compiled"] += bench.jit_compiled
        jit["cache_hits"] += bench.jit_cache_hits
    result = EvalResult(
        candidate_id=request.candidate_id, cases=cases, geomean_ms=geomean, device=report.device_name,
        versions=report.versions, error="" if failed is None else f"{failed.case.name}: {failed.message}"[:4000],
        eval_seconds=finished - started, started_at=started, finished_at=finished, profile=profile,
        stage_seconds=stages, jit=jit)
    if infra is not None:
        return EvalOutcome(candidate_id=request.candidate_id, state=State.CRASHED, reason=infra, result=result,
                           infra_error=infra, worker=worker, busy_s=finished - started)
    if failed is None and screened is not None and bench is not None and bench.geomean_ms is not None:
        plan, gm = screened, bench.geomean_ms
        result = result.model_copy(update={"geomean_ms": None, "fidelity": "screen", "screen": {
            "geomean_ms": gm, "bar_ms": plan.bar_ms, "margin": plan.margin,
            "estimate_ms": screened_estimate(gm, plan)}})
        reason = (f"screened: {fmt_ms(gm)} ms on {', '.join(plan.cases)} is {significant(gm / plan.bar_ms)}x its "
                  f"structure best's {fmt_ms(plan.bar_ms)} ms (limit {plan.margin:g}x)")
        return EvalOutcome(candidate_id=request.candidate_id, state=State.SCREENED, reason=reason, result=result,
                           worker=worker, busy_s=finished - started)
    if failed is None:
        return EvalOutcome(candidate_id=request.candidate_id, state=State.VERIFIED, result=result, worker=worker,
                           busy_s=finished - started)
    stage = "verify" if any(not c.ok for c in verify.cases) else "bench"
    reason = f"{stage} {failed.case.name}: {failed.message}"[:1000]
    return EvalOutcome(candidate_id=request.candidate_id, state=_state_of(failed), reason=reason, result=result,
                       worker=worker, busy_s=finished - started)


def merge_reports(first: SuiteReport, second: SuiteReport, order: list[Case] | None) -> SuiteReport:
    """Two reports of one candidate as one (the cascade's screen and the rest): cases in
    ``order`` (else first's then second's), times and counts summed."""
    cases = list(first.cases) + list(second.cases)
    if order is not None:
        by_name = {c.case.name: c for c in cases}
        cases = [by_name[c.name] for c in order if c.name in by_name]
    known = first if first.device != "unknown" else second
    return SuiteReport(candidate=first.candidate, suite=first.suite, mode=first.mode, device=known.device,
                       device_name=known.device_name, versions=known.versions, cases=cases,
                       wall_s=first.wall_s + second.wall_s, infra_error=first.infra_error or second.infra_error,
                       startup_s=first.startup_s + second.startup_s,
                       jit_compiled=first.jit_compiled + second.jit_compiled,
                       jit_cache_hits=first.jit_cache_hits + second.jit_cache_hits)
