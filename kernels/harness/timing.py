"""Timing one candidate on one case, inside the evaluation child process.

Rules, each closing a way a benchmark can lie:
  * compile and warm-up calls are not timed (but their outputs are verified);
  * every timed call gets a fresh input (a new seed) and its output is
    verified against a pristine copy, so cached or stale outputs fail (these
    re-checks form Q in float64 by blocked products, ``exact_q=False``: on
    CUDA the reference householder_product costs about 1 s per 640×512 batch);
  * the L2 cache is flushed before every timed call;
  * the end mark is recorded after a whole-device synchronisation, so work a
    candidate queues on other streams is counted; the cost of that
    synchronisation and of the event records is calibrated on an empty region
    in the same process and subtracted;
  * calls repeat until the standard error is under 1% of the mean or a time
    cap is reached; the median is reported with min, max and count.

How many calls and for how long is a :class:`~kernels.harness.settings.TimingPolicy`.
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Callable

import torch

from kernels.inputs import generate_input
from kernels.harness.results import TimingStats
from kernels.harness.settings import TimingPolicy
from kernels.suites import Case
from kernels.verify import VerifyResult, verify_qr

Kernel = Callable[[torch.Tensor], object]

L2_FLUSH_BYTES = 256 * 1024 * 1024


def timed_input_seed(case: Case, rep: int) -> int:
    """Seeds for timed calls: distinct from the case seed and from each other."""
    return case.seed * 7919 + 104729 * (rep + 1)


class DeviceClock:
    """Flush, start mark, end mark: CUDA events on a GPU, a host timer on CPU."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.cuda = device.type == "cuda"
        self._flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device=device) if self.cuda else None
        self.overhead_ms = self._calibrate() if self.cuda else 0.0

    def flush(self) -> None:
        if self._flush is not None:
            self._flush.zero_()
            torch.cuda.synchronize(self.device)

    def region(self, fn: Callable[[], object]) -> tuple[object, float]:
        """Run ``fn`` and return (its result, elapsed ms minus calibrated overhead)."""
        if not self.cuda:
            t0 = time.perf_counter()
            out = fn()
            return out, (time.perf_counter() - t0) * 1e3
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        out = fn()
        torch.cuda.synchronize()  # the whole device: other streams count too
        end.record()
        end.synchronize()
        return out, max(0.0, start.elapsed_time(end) - self.overhead_ms)

    def _calibrate(self, samples: int = 50) -> float:
        times = []
        for _ in range(samples):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            start.record()
            torch.cuda.synchronize()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        return statistics.median(times)


def call_verified(kernel: Kernel, case: Case, seed: int, device: torch.device, clock: DeviceClock | None = None,
                  exact_q: bool = True) -> tuple[VerifyResult, float | None, float]:
    """One call on a fresh input, verified; timed when a clock is given.

    Returns (verdict, elapsed ms or None, seconds spent verifying)."""
    a = generate_input(case.batch, case.n, case.cond, seed, case.case, device=device)
    given = a.clone()
    if clock is None:
        out = kernel(given)
        if device.type == "cuda":
            torch.cuda.synchronize()
        elapsed = None
    else:
        clock.flush()
        out, elapsed = clock.region(lambda: kernel(given))
    checking = time.perf_counter()
    result = verify_qr(a, out, given, exact_q=exact_q)
    del out, given, a
    return result, elapsed, time.perf_counter() - checking


def measure(kernel: Kernel, case: Case, device: torch.device, clock: DeviceClock, policy: TimingPolicy
            ) -> tuple[TimingStats | None, VerifyResult]:
    """Warm up, then time fresh verified calls.

    Returns (stats, the timed calls' worst passing verdict) or (None, the failed verdict)."""
    check_s = 0.0
    for w in range(policy.warmup_calls):
        verdict, _, spent = call_verified(kernel, case, timed_input_seed(case, -2 - w), device, exact_q=False)
        check_s += spent
        if not verdict.ok:
            return None, verdict.model_copy(update={"message": f"warm-up call {w + 1}: {verdict.message}"})
    times: list[float] = []
    worst: VerifyResult | None = None
    began = time.perf_counter()
    for rep in range(policy.max_reps):
        verdict, elapsed, spent = call_verified(kernel, case, timed_input_seed(case, rep), device, clock,
                                                exact_q=False)
        check_s += spent
        if not verdict.ok:
            return None, verdict.model_copy(update={"message": f"timed call {rep + 1}: {verdict.message}"})
        assert elapsed is not None
        times.append(elapsed)
        if worst is None or (verdict.factor_scaled or 0.0) > (worst.factor_scaled or 0.0):
            worst = verdict
        if len(times) >= policy.min_reps:
            mean = statistics.fmean(times)
            stderr = statistics.stdev(times) / math.sqrt(len(times))
            if mean > 0 and stderr / mean < policy.target_rel_stderr:
                break
            if time.perf_counter() - began > policy.max_seconds:
                break
    assert worst is not None  # max_reps >= 1
    return _stats(times, clock).model_copy(update={"check_s": check_s}), worst


def _stats(times: list[float], clock: DeviceClock) -> TimingStats:
    mean = statistics.fmean(times)
    stderr = statistics.stdev(times) / math.sqrt(len(times)) if len(times) > 1 else 0.0
    return TimingStats(
        median_ms=statistics.median(times),
        min_ms=min(times),
        max_ms=max(times),
        mean_ms=mean,
        stderr_ms=stderr,
        count=len(times),
        timer="cuda_events" if clock.cuda else "host",
        overhead_ms=clock.overhead_ms,
    )
