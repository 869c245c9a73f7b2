"""What an evaluation produces: plain, JSON-round-trippable records.

A case's status is :class:`population.outcomes.CaseStatus`, the vocabulary the run store keeps too, and
the geomean is :func:`population.outcomes.geomean`: one copy of each (see that module for why it lives
in ``population``).
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from kernels.suites import Case
from kernels.verify import VerifyResult
from population.outcomes import CaseStatus, geomean



class TimingStats(BaseModel):
    """Per-call times in milliseconds (median is what we rank by)."""

    model_config = ConfigDict(frozen=True)

    median_ms: float
    min_ms: float
    max_ms: float
    mean_ms: float
    stderr_ms: float
    count: int
    timer: Literal["cuda_events", "host"]
    overhead_ms: float = 0.0  # calibrated sync/record cost already subtracted
    calls_per_region: int = 1  # fresh inputs called back to back per timed region (GPU MODE's way: more than 1)
    check_s: float = 0.0  # seconds spent verifying the warm-up and timed outputs (not timed)
    # The median time a call kept the host (from the start mark to the call's return, before the
    # synchronisation: its launches, and any wait inside it for the device): near median_ms, the
    # GPU waited for the host or the host for the GPU inside the call, and either way a busy host
    # slows it.  None on the host timer (CPU), whose time is all host.
    host_ms: float | None = None
    # cudaMalloc / cudaFree calls the caching allocator made inside the timed regions (and failed
    # cudaMallocs it retried after freeing its cache): a call that allocates outside the cache
    # stalls on the device, and that time is in the median.  None off CUDA.
    allocator_calls: int | None = None
    alloc_retries: int | None = None

    @property
    def rel_stderr(self) -> float:
        return self.stderr_ms / self.mean_ms if self.mean_ms > 0 else math.inf


class KernelShare(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    calls: int
    total_ms: float
    share: float


class ProfileSummary(BaseModel):
    """What torch.profiler saw in one call: where the time goes."""

    model_config = ConfigDict(frozen=True)

    kernels_per_call: int
    device_ms: float
    top_kernels: list[KernelShare]
    syncs: int
    memcpys: int
    achieved_tflops: float | None = None
    achieved_gbps: float | None = None
    floor_fraction: float | None = None


class CaseResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    case: Case
    status: CaseStatus
    verify: VerifyResult | None = None
    timing: TimingStats | None = None
    profile: ProfileSummary | None = None
    error: str | None = None
    baseline_ms: float | None = None
    wall_s: float | None = None  # the whole case in the child: input, compile, calls, checks, profile
    profile_s: float | None = None

    @property
    def ok(self) -> bool:
        return self.status is CaseStatus.OK

    @property
    def speedup(self) -> float | None:
        if self.ok and self.timing and self.baseline_ms and self.timing.median_ms > 0:
            return self.baseline_ms / self.timing.median_ms
        return None

    @property
    def message(self) -> str:
        if self.error:
            return self.error
        return self.verify.message if self.verify else ""


class SuiteReport(BaseModel):
    """All cases of one candidate on one suite and device."""

    model_config = ConfigDict(frozen=True)

    candidate: str
    suite: str
    mode: Literal["verify", "bench"]
    device: str
    device_name: str
    versions: dict[str, str]
    cases: list[CaseResult]
    wall_s: float = 0.0
    # Set when the evaluation process itself never came up (not the candidate's fault).
    infra_error: str | None = None
    # Seconds from handing a job to a child until it was ready (a spare still importing torch
    # shows here); in a parallel report the longest group's.
    startup_s: float = 0.0
    # Triton JIT compiles and cache hits the children counted (a precompiled candidate hits).
    jit_compiled: int = 0
    jit_cache_hits: int = 0

    @property
    def ok(self) -> bool:
        return bool(self.cases) and all(c.ok for c in self.cases)

    @property
    def geomean_ms(self) -> float | None:
        if not self.ok or self.mode != "bench":
            return None
        return geomean([c.timing.median_ms for c in self.cases if c.timing])

    @property
    def geomean_speedup(self) -> float | None:
        if not self.ok:
            return None
        speedups = [c.speedup for c in self.cases]
        if any(s is None for s in speedups):
            return None
        return geomean([s for s in speedups if s is not None])

    def with_baseline(self, baseline: "SuiteReport") -> "SuiteReport":
        """Attach the baseline's per-case medians (matched by case name)."""
        times = {c.case.name: c.timing.median_ms for c in baseline.cases if c.ok and c.timing}
        cases = [c.model_copy(update={"baseline_ms": times.get(c.case.name)}) for c in self.cases]
        return self.model_copy(update={"cases": cases})

    def failures(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for c in self.cases:
            if not c.ok:
                counts[c.status.value] = counts.get(c.status.value, 0) + 1
        return counts

    def to_json(self) -> dict[str, Any]:
        data = self.model_dump(mode="json")
        data["ok"] = self.ok
        data["geomean_ms"] = self.geomean_ms
        data["geomean_speedup"] = self.geomean_speedup
        for raw, case in zip(data["cases"], self.cases):
            raw["name"] = case.case.name
            raw["speedup"] = case.speedup
        return data
