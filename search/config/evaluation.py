"""``evaluation:``, how candidates are evaluated, and the keys it had before its timing settings
moved into the harness's models (still read, with a warning, until DEPRECATED_REMOVED_IN).
"""

from __future__ import annotations

import warnings
from typing import Literal, Optional

from pydantic import BaseModel, Field, field_validator, model_validator

from kernels.harness.settings import HOST_BOUND_SHARE, RunLimits, TimingPolicy
from search.config.sections import DEPRECATED_REMOVED_IN, _Section


# Keys of ``evaluation:`` before the timing settings moved into the harness's models: old key ->
# (section, field).  They still load (a FutureWarning says where they went; docs/config.md lists them).
DEPRECATED_EVALUATION_KEYS: dict[str, tuple[str, str]] = {
    "case_timeout_s": ("limits", "case_timeout_s"),
    "startup_timeout_s": ("limits", "startup_timeout_s"),
    "min_reps": ("timing", "min_reps"),
    "max_reps": ("timing", "max_reps"),
    "max_seconds_per_case": ("timing", "max_seconds"),
    "target_rel_stderr": ("timing", "target_rel_stderr"),
}



class EvaluationConfig(_Section):
    """The cascade: a cheap verification gate, then timing on the benchmark suite."""

    verify_suite: str = Field("qrv2-quick", description="suite every candidate must pass before it is timed")
    bench_suite: str = Field("qrv2-bench", description="suite whose geometric-mean time is the fitness")
    device: Literal["auto", "cuda", "cpu", "simulated"] = Field(
        "auto", description="where candidates run; 'simulated': a dry run on the GPUs Ray sees (declared ones "
        "count: `ray start --num-gpus=N`), each a real evaluator actor whose GPU work is simulated (see `simulation:`)")
    timing: TimingPolicy = Field(TimingPolicy(), description="how each bench case is timed (the harness's "
                                 "defaults: `qrsearch bench` times the same way)")
    limits: RunLimits = Field(RunLimits(), description="how long a child may take; a hang is killed")
    profile: bool = Field(True, description="profile verified candidates (kernels, syncs) for the LLM prompt "
                          "(only while an LLM endpoint is configured: nothing else reads them)")
    verify_processes: int = Field(
        4, ge=1, description="child processes that verify a candidate at once, its cases grouped by n, so its "
        "kernels compile in parallel (capped at the CPU count); timing always has the device alone")
    family_domains: bool = Field(
        True, description="verify and time each family only on the suites' cases inside its declared range of n "
        "(its domain; fitness is the geomean there); the composite export takes each case's best over all families")
    fast_gates: bool = Field(
        True, description="check the bench cases' gate calls with the fast float64 Q; the verify suite keeps the "
        "reference householder_product construction")
    screen_cases: int = Field(
        2, ge=0, description="the cascade: a child of a structure with a verified best is first gated and timed on "
        "one case of each of this many sizes n of its domain, and stops there (state screened) if it is more than "
        "screen_margin times slower than that best on them; 0: every child gets the full bench")
    screen_margin: float = Field(1.2, gt=1, description="how much slower than its structure best a child may be on "
                                 "the screen and still get the full bench")
    pause_compiles_while_timing: bool = Field(
        True, description="stop the compile-ahead processes (SIGSTOP) while a candidate is timed: a busy host "
        "slowed launch-bound cases 7-22% in an H200 search; off: compiles never pause (more throughput)")
    duel_below_ms: float = Field(
        2.0, ge=0, description="a new champion whose domain has cases under this (its medians) is timed again "
        "against the champion it replaced, both in one process on fresh inputs, on those cases, and keeps the "
        "title only if the pair confirms the margin (maturation.min_improvement); launch-bound medians move "
        "15-40% between processes on an H200, the device time under 1%. 0: no duels")
    pause_compiles_below_ms: float = Field(
        5.0, ge=0, description="with pause_compiles_while_timing, compiles stop only while cases expected to "
        "take less than this are timed (expected: the median of the candidate's structure best, else of its "
        "family champion; a case with neither pauses); 14 compiling CPUs moved cases of 6.8-26 ms by under 1% "
        "on an H200, and cases of 0.1-0.9 ms by 7-19%")
    pause_compiles_host_share: float = Field(
        HOST_BOUND_SHARE, ge=0, le=1, description="with pause_compiles_while_timing, compiles also stop while "
        "cases are timed that the same record shows host-bound, however long: a timed call kept the host for at "
        "least this share of its time (the record's host_ms: its launches and any wait inside it for the device), "
        "so a busy host slows it; 0: by expected length only")
    reuse_processes: bool = Field(
        True, description="run a candidate in the evaluation processes that ran the last candidate of its "
        "structure (children differing only in PARAMS), so start-up is paid once and no process starts before "
        "timing; a case that fails in a reused process is re-run in a fresh one before it is blamed")
    timing_hold: Literal["region", "job"] = Field(
        "region", description="what a bench job has the device alone for: 'region', each timed region (its L2 "
        "flush, the clock's calibration and a profiled call too), sharing the device between them with the other "
        "lanes' untimed work (inputs, warm-ups, re-checks of timed outputs), so two lanes' host-bound re-checks "
        "run at once; 'job', the whole bench job (re-checks included)")
    lanes: int = Field(
        1, ge=1, description="evaluations each evaluator runs at once, so one's compile wait, process starts and "
        "gate calls may overlap another's GPU work; timed calls still have the device alone (a bench job waits for "
        "the others' gate calls and process starts, and they for it). On an H200 two lanes "
        "measured 64% GPU and 22.9 evaluations/min against one lane's 53% and 19.5 "
        "(docs/search-performance.md; runs/h200.yaml uses 2); 1 here, for hosts with few CPUs")
    compile_ahead: int = Field(
        2, ge=0, description="candidates queued per evaluator beyond the ones it runs; their Triton kernels are "
        "compiled ahead (CUDA hidden, on CPUs the timing child does not use) into the run's cache; 0: off")
    compile_ahead_max: int = Field(
        8, ge=0, description="candidates queued per evaluator at most: beyond compile_ahead, an evaluator takes "
        "more while its compile processes would otherwise idle (cheap compiles keep the CPUs busy and the "
        "evaluator finds one ready); at or below compile_ahead: exactly compile_ahead")
    compile_ahead_total: Optional[int] = Field(
        64, ge=1, description="candidates queued beyond the running ones over all evaluators together, about: "
        "with many evaluators each queues fewer (at least one, its next compile; compile_ahead and the room-driven "
        "compile_ahead_max shrink to this total's share), so that the search does not hold hundreds of children "
        "proposed before their siblings' results came back; a lane that holds for a compiled candidate still takes "
        "more, up to compile_ahead_max; none: every evaluator queues compile_ahead, up to compile_ahead_max")
    hold_for_ready: bool = Field(
        True, description="with compile_ahead, a free evaluator starts no candidate whose kernels are still "
        "compiling: it waits for the first queued one that is compiled and takes one more candidate every "
        "0.5 s meanwhile (up to compile_ahead_max), so a cheap child runs while a long compile goes on; "
        "false: it starts the head and waits inside it")
    compile_before_need: bool = Field(
        False, description="with hold_for_ready, an evaluator whose lanes all run while every candidate it queues "
        "is still compiling takes one more each time it reports its compiles (every 0.5 s), up to "
        "compile_ahead_max, so that one is compiled when a lane frees rather than the lane holding for it; "
        "false: it takes more only once a lane holds. At 64 simulated GPUs it raised the busy fraction from 0.846 to "
        "0.876 in virtual time, but not on a loopback Ray cluster (0.811 against 0.835), where each report is an "
        "actor call (docs/scale.md, 'Compiling before the need')")
    hold_fair_share: bool = Field(
        True, description="while an evaluator holds for a compiled candidate, the families whose candidates compile "
        "fastest are proposed first, but only among those that have not had more than their share of the run's "
        "children (evaluated plus in flight); false: the fastest first whatever they had, which at many "
        "evaluators gives most evaluations to the families that compile fast, converged or not (at 16 simulated "
        "evaluators 80% went to two families of five)")
    skip_empty_families: int = Field(
        16, ge=0, description="a family whose immediate operators had no child to offer is passed over, at most this "
        "many times in a row, until one of its evaluations is told, its queued or in-flight children change or a "
        "structure is retired (at 64 evaluators empty proposals were 6 to 18 per evaluation, most of the driver's "
        "CPU); 0: every family is tried again for every free slot. Parents and Optuna's points are drawn at random, "
        "so a retry may find a child: the limit keeps a family with nothing in flight in the draw")
    withdraw_overtaken: bool = Field(
        False, description="when a candidate becomes its island's best of its structure, the children of the best "
        "it displaced that are still queued on an evaluator (not started) are taken back: recorded rejected "
        "('withdrawn before it started'), their Optuna trials pruned and given back to the structure's budget; "
        "false: they run as proposed")

    @model_validator(mode="before")
    @classmethod
    def _flat_timing_keys(cls, data: object) -> object:
        """Deprecated: the flat keys of earlier configs (``case_timeout_s``, ``max_seconds_per_case``, ...),
        moved onto ``timing`` and ``limits``.  A key given both ways is an error, not a silent choice."""
        if not isinstance(data, dict) or not any(k in data for k in DEPRECATED_EVALUATION_KEYS):
            return data
        data = dict(data)
        moved = []
        for old, (section, field) in DEPRECATED_EVALUATION_KEYS.items():
            if old not in data:
                continue
            sub = data.get(section, {})
            if isinstance(sub, BaseModel):
                sub = sub.model_dump(exclude_unset=True)  # only what was set explicitly can clash
            if not isinstance(sub, dict):
                return data  # the section's own validation reports it (and the old key as unknown)
            if field in sub:
                raise ValueError(f"{old} (deprecated) and {section}.{field} both given; keep {section}.{field}")
            data[section] = {**sub, field: data.pop(old)}
            moved.append(f"{old} -> {section}.{field}")
        # FutureWarning, not DeprecationWarning: the reader is whoever wrote the YAML, and Python
        # shows FutureWarning to end users by default.
        warnings.warn(f"deprecated evaluation keys (they still work; removed in {DEPRECATED_REMOVED_IN}; see "
                      "docs/config.md): " + ", ".join(moved),
                      FutureWarning, stacklevel=2)
        return data

    @field_validator("verify_suite", "bench_suite")
    @classmethod
    def _known_suite(cls, value: str) -> str:
        from kernels.suites import suite_names

        if value not in suite_names():
            raise ValueError(f"unknown suite {value!r}; known: {', '.join(suite_names())}")
        return value
