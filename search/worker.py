"""Evaluating one candidate on one device: the cascade, and its outcome as data.

This is what an evaluator actor runs; it needs neither Ray nor the run store,
so it is tested directly.  The candidate travels as source text and is written
to ``cand_<sha>.py`` (Triton kernels cannot be pickled).  Every candidate runs
in fresh child processes (a CUDA error poisons a process, so none is reused);
a warm spare child that has already imported torch hides the start-up cost.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from kernels.candidate import materialize
from kernels.harness.results import CaseResult, SuiteReport
from kernels.harness.runner import ChildProcess, RunLimits, child_env, run_candidate, run_candidate_parallel
from kernels.harness.timing import TimingPolicy
from kernels.suites import Case
from population.models import CaseOutcome, CaseStatus, EvalResult, State


class EvalRequest(BaseModel):
    model_config = ConfigDict(frozen=True)

    candidate_id: str
    family: str
    source: str
    verify_suite: str
    verify_cases: list[Case]
    bench_suite: str
    bench_cases: list[Case]
    device: Literal["auto", "cuda", "cpu"] = "auto"
    case_timeout_s: float = 240.0
    startup_timeout_s: float = 180.0
    min_reps: int = 3
    max_reps: int = 50
    max_seconds_per_case: float = 1.0
    target_rel_stderr: float = 0.01
    profile: bool = False
    verify_processes: int = Field(1, ge=1)
    # A re-check (``qrsearch recheck``): torch.geqrf's source, timed in the candidate's bench child.
    reference_source: str | None = None

    @property
    def deadline_s(self) -> float:
        """Past this, the driver treats the evaluation as lost (the harness limits each case).
        Bench cases count twice: their gate calls in the verify stage, then their timing."""
        cases = len(self.verify_cases) + 2 * len(self.bench_cases)
        return 2 * self.startup_timeout_s + cases * self.case_timeout_s + 60


class EvalOutcome(BaseModel):
    model_config = ConfigDict(frozen=True)

    candidate_id: str
    state: State
    reason: str = ""
    result: EvalResult
    infra_error: str | None = None  # the evaluator, not the candidate, failed: re-queue, blame nobody
    worker: str = ""
    busy_s: float = Field(0.0, ge=0)


_CASE_STATUS: dict[str, CaseStatus] = {
    "passed": CaseStatus.OK, "failed_verify": CaseStatus.FAILED_VERIFY, "timeout": CaseStatus.TIMEOUT,
    "not_run": CaseStatus.SKIPPED,
}


def _state_of(case: CaseResult) -> State:
    if case.status == "rejected" or (case.status == "error" and (case.error or "").startswith("rejected")):
        return State.REJECTED
    return {
        "failed_compile": State.FAILED_COMPILE, "failed_verify": State.FAILED_VERIFY, "timeout": State.TIMEOUT,
        "crashed": State.CRASHED, "error": State.CRASHED,
    }.get(case.status, State.CRASHED)


def _outcome(case: CaseResult) -> CaseOutcome:
    t, v = case.timing, case.verify
    residuals = {}
    if v is not None:
        residuals = {k: x for k, x in (("factor", v.factor_scaled), ("orth", v.orth_scaled),
                                       ("leak", v.leakage_scaled), ("recon", v.recon_scaled)) if x is not None}
    return CaseOutcome(case=case.case.name, status=_CASE_STATUS.get(case.status, CaseStatus.ERROR),
                       median_ms=t and t.median_ms, min_ms=t and t.min_ms, max_ms=t and t.max_ms,
                       count=t and t.count, baseline_ms=case.baseline_ms,
                       residuals=residuals, message=("" if case.ok else case.message)[:2000], wall_s=case.wall_s)


def outcome_from_reports(request: EvalRequest, verify: SuiteReport, bench: SuiteReport | None,
                         started: float, worker: str = "") -> EvalOutcome:
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
    stages = {"verify": verify.wall_s}
    if bench is not None:
        stages["bench"] = bench.wall_s
        stages["rechecks"] = sum(c.timing.check_s for c in bench.cases if c.timing)
        stages["profile"] = sum(c.profile_s or 0.0 for c in bench.cases)
    result = EvalResult(
        candidate_id=request.candidate_id, cases=cases, geomean_ms=geomean, device=report.device_name,
        versions=report.versions, error="" if failed is None else f"{failed.case.name}: {failed.message}"[:4000],
        eval_seconds=finished - started, started_at=started, finished_at=finished, profile=profile,
        stage_seconds=stages)
    if infra is not None:
        return EvalOutcome(candidate_id=request.candidate_id, state=State.CRASHED, reason=infra, result=result,
                           infra_error=infra, worker=worker, busy_s=finished - started)
    if failed is None:
        return EvalOutcome(candidate_id=request.candidate_id, state=State.VERIFIED, result=result, worker=worker,
                           busy_s=finished - started)
    stage = "verify" if any(not c.ok for c in verify.cases) else "bench"
    reason = f"{stage} {failed.case.name}: {failed.message}"[:1000]
    return EvalOutcome(candidate_id=request.candidate_id, state=_state_of(failed), reason=reason, result=result,
                       worker=worker, busy_s=finished - started)


class Worker:
    """Runs the cascade for one device, keeping warm spare child processes.

    The verify stage runs the verify suite and each bench case's first, reference-verified
    call in up to ``verify_processes`` children at once, grouped by n, so a Triton candidate's
    kernels compile in parallel; the bench stage then times the bench cases without repeating
    those calls.  While a candidate is timed nothing else runs for this worker: the spares used
    by an evaluation are replaced only after its bench stage (starting a child imports torch
    and creates a CUDA context; an H200 run that did so measured launch-bound cases 20-75% slower),
    and the bench stage waits until every spare still starting has finished.
    """

    def __init__(self, workdir: Path, env_extra: dict[str, str] | None = None, name: str = "worker") -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.env = child_env(env_extra)
        self.name = name
        self.evaluations = 0
        self.busy_s = 0.0
        self._lock = threading.Lock()
        self._spares: list[ChildProcess] = []
        self._target_spares = 2  # one verify child and the bench child
        self._top_up()

    def _top_up(self) -> None:
        """Start children until ``_target_spares`` live ones wait (extra ones are closed)."""
        with self._lock:
            alive = []
            for child in self._spares:
                if child.proc.poll() is None and len(alive) < self._target_spares:
                    alive.append(child)
                else:
                    child.close()
            self._spares = alive
            while len(self._spares) < self._target_spares:
                self._spares.append(ChildProcess(env=self.env))

    def _take(self) -> ChildProcess:
        """The oldest live spare, else a new child (thread-safe: the verify stage takes several)."""
        with self._lock:
            while self._spares:
                child = self._spares.pop(0)
                if child.proc.poll() is None:
                    return child
                child.close()
        return ChildProcess(env=self.env)

    def _settle(self, timeout: float) -> None:
        """Wait until no spare is still starting (dropping any that died or stalled)."""
        with self._lock:
            spares, self._spares = self._spares, []
        alive = []
        for child in spares:
            if child.wait_warm(timeout):
                alive.append(child)
            else:
                child.close()
        with self._lock:
            self._spares = alive + self._spares

    def evaluate(self, request: EvalRequest) -> EvalOutcome:
        started = time.time()
        path = materialize(request.source, self.workdir / "candidates")
        limits = RunLimits(case_timeout_s=request.case_timeout_s, startup_timeout_s=request.startup_timeout_s)
        policy = TimingPolicy(min_reps=request.min_reps, max_reps=request.max_reps,
                              max_seconds=request.max_seconds_per_case, target_rel_stderr=request.target_rel_stderr)
        processes = max(1, min(request.verify_processes, os.cpu_count() or 1))
        if processes + 1 != self._target_spares:
            self._target_spares = processes + 1
            self._top_up()
        gates = list(request.verify_cases) + list(request.bench_cases)
        reference = (materialize(request.reference_source, self.workdir / "candidates")
                     if request.reference_source is not None else None)
        try:
            verify = run_candidate_parallel(path, gates, processes=processes, suite=request.verify_suite,
                                            mode="verify", device=request.device, limits=limits, fail_fast=True,
                                            spawn=self._take)
            bench = None
            if verify.ok:
                self._settle(request.startup_timeout_s)
                bench = run_candidate(path, request.bench_cases, suite=request.bench_suite, mode="bench",
                                      device=request.device, limits=limits, policy=policy, fail_fast=True,
                                      profile=request.profile, gate=False, spawn=self._take,
                                      reference=reference)
        finally:
            self._top_up()  # the next candidate's children warm up now, before anything is timed
        outcome = outcome_from_reports(request, verify, bench, started, worker=self.name)
        self.evaluations += 1
        self.busy_s += outcome.busy_s
        return outcome

    def close(self) -> None:
        with self._lock:
            for child in self._spares:
                child.close()
            self._spares = []
