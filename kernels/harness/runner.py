"""The parent side of an evaluation: a candidate's cases in child processes, within limits, and a
report of every case whatever happens in a child.

A crash (segfault, abort, CUDA error), a hang (killed at the limit) or an exception in the
candidate becomes that case's failed result; the caller never goes down with it.  Cases after a
crash or hang are reported as ``skipped`` unless the job's ``keep_going`` asks for a fresh child to
run them.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kernels.harness.attempt import ChildAttempt, run_attempt
from kernels.harness.hooks import RunHooks
from kernels.harness.job import CandidateJob
from kernels.harness.results import CaseResult, SuiteReport
from kernels.harness.screen import screen_source
from kernels.suites import Case
from population.outcomes import CaseStatus


def _screened(job: CandidateJob) -> dict[int, CaseResult]:
    """Every case rejected, where the source screen refuses the file; else none."""
    path = Path(job.candidate).resolve()
    problems = screen_source(path.read_text(encoding="utf-8", errors="replace")) if path.is_file() else []
    if not problems:
        return {}
    reason = "rejected by the source screen: " + "; ".join(problems[:5])
    return {i: CaseResult(case=c, status=CaseStatus.REJECTED, error=reason) for i, c in enumerate(job.cases)}


def _passed(attempt: ChildAttempt, cases: int) -> bool:
    """Whether an attempt ran all of its ``cases`` and every one passed."""
    return not attempt.infra_error and all(r.ok for r in attempt.results.values()) and len(attempt.results) >= cases


def run_candidate(job: CandidateJob, hooks: RunHooks = RunHooks()) -> SuiteReport:
    """Evaluate ``job``'s candidate on its cases in child processes (``hooks.spawn``) and report
    every case.

    With ``hooks.release`` children stay for another candidate of the same structure.  A job with
    a case that does not pass in a child that ran an earlier candidate is re-run whole in a
    ``hooks.fresh`` one, so a crash, a hang or a wrong answer is blamed only on the candidate that
    caused it, and the verdict is what a fresh process gives."""
    started = time.monotonic()
    cases = job.cases
    results = _screened(job)
    info = ChildAttempt()
    infra_error: str | None = None
    startup_s = 0.0
    jit = [0, 0]
    remaining = [i for i in range(len(cases)) if i not in results]
    while remaining:
        child_job = job.child_job(remaining, keep_alive=hooks.release is not None, turns=hooks.turns is not None)
        child = hooks.spawn()
        reused = child.jobs > 0
        attempt = run_attempt(child, child_job, remaining, job.limits, hooks)
        if reused and not _passed(attempt, len(remaining)):
            # An earlier candidate may have left this process broken: the whole job runs again
            # in a fresh child, whose verdict is the one a fresh process would have given (the
            # same calls in the same order: a candidate that cheats after N calls still does).
            attempt = run_attempt(hooks.fresh(), child_job, remaining, job.limits, hooks)
        if attempt.ready:
            info.device, info.device_name, info.versions = attempt.device, attempt.device_name, attempt.versions
        results.update(attempt.results)
        infra_error = infra_error or attempt.infra_error
        startup_s += attempt.startup_s
        jit[0] += attempt.jit_compiled
        jit[1] += attempt.jit_cache_hits
        if (attempt.stopped and not job.keep_going) or \
                (job.fail_fast and any(not r.ok for r in attempt.results.values())):
            break
        remaining = [i for i in remaining if i not in results]
    for i, case in enumerate(cases):
        if i not in results:
            results[i] = CaseResult(case=case, status=CaseStatus.SKIPPED,
                                    error="not run: an earlier case crashed, hung or failed")
    return SuiteReport(
        candidate=str(job.candidate), suite=job.suite, mode="bench" if job.mode == "bench" else "verify",
        device=info.device, device_name=info.device_name, versions=info.versions,
        cases=[results[i] for i in range(len(cases))], wall_s=time.monotonic() - started, infra_error=infra_error,
        startup_s=startup_s, jit_compiled=jit[0], jit_cache_hits=jit[1],
    )


def shape_groups(cases: list[Case], groups: int) -> list[list[int]]:
    """Split case indices into at most ``groups`` groups, all cases of one n together.

    A Triton candidate compiles once per n (shapes are compile-time constants in our
    families), so groups by n compile in parallel without compiling anything twice.  The
    groups are balanced by a rough cost: a compile per n plus verification, which on CUDA is
    dominated by the reference householder_product's per-matrix cost.
    """
    by_n: dict[int, list[int]] = {}
    for i, case in enumerate(cases):
        by_n.setdefault(case.n, []).append(i)

    def cost(indices: list[int]) -> float:
        return 5.0 + sum(0.002 * cases[i].batch * max(1.0, (cases[i].n / 512) ** 2) for i in indices)

    loads = [0.0] * max(1, min(groups, len(by_n)))
    members: list[list[int]] = [[] for _ in loads]
    for indices in sorted(by_n.values(), key=cost, reverse=True):
        slot = loads.index(min(loads))
        members[slot].extend(indices)
        loads[slot] += cost(indices)
    return [sorted(m) for m in members if m]


def run_candidate_parallel(job: CandidateJob, processes: int, hooks: RunHooks = RunHooks()) -> SuiteReport:
    """:func:`run_candidate` over :func:`shape_groups` of the job's cases, one child process each, at
    once (``hooks`` serve every group; ``on_case`` hears indices within a group).

    Verify mode only: timing must never share the device with another process."""
    if job.mode != "verify":
        raise ValueError("only verify-mode jobs may run in parallel (timing needs the device alone)")
    cases = list(job.cases)
    groups = shape_groups(cases, processes)
    if len(groups) <= 1:
        return run_candidate(job, hooks)
    started = time.monotonic()
    with ThreadPoolExecutor(len(groups), thread_name_prefix="verify") as pool:
        reports = list(pool.map(lambda idx: run_candidate(job.on(cases[i] for i in idx), hooks), groups))
    merged: dict[int, CaseResult] = {}
    for indices, report in zip(groups, reports):
        merged.update(zip(indices, report.cases))
    known = next((r for r in reports if r.device != "unknown"), reports[0])
    return SuiteReport(
        candidate=str(job.candidate), suite=job.suite, mode="verify", device=known.device,
        device_name=known.device_name, versions=known.versions, cases=[merged[i] for i in range(len(cases))],
        wall_s=time.monotonic() - started, infra_error=next((r.infra_error for r in reports if r.infra_error), None),
        startup_s=max(r.startup_s for r in reports), jit_compiled=sum(r.jit_compiled for r in reports),
        jit_cache_hits=sum(r.jit_cache_hits for r in reports))
