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
    cap is reached; the median is reported with min, max and count;
  * what else the timed regions cost is reported beside their time: how long the host took
    to enqueue a call (near the time itself, the GPU waited for the host, which a busy host
    slows) and the device allocator's calls inside them (a cudaMalloc or cudaFree stalls the
    call, and its time is in the median).

A timed region holds one call, or (``TimingPolicy.region == "gpumode"``) GPU MODE qr_v2's
batch of fresh inputs called back to back, timed together and divided by their count: the
same rules hold for each of them.

How many calls and for how long is a :class:`~kernels.harness.settings.TimingPolicy`.

A timed region (its flush included) and the clock's calibration run inside a
:class:`DeviceTurn`: the device to this process alone.  Alone on a machine a turn costs
nothing; a search evaluator with several lanes gives the device to one lane's timed region at
a time and lets the lanes' untimed work (inputs, warm-ups, re-checks) run together between
them (:class:`kernels.harness.child.PipeTurn`).  The time budget of a case counts no waiting
for turns.
"""

from __future__ import annotations

import math
import statistics
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, TypeVar

import torch

from kernels.inputs import generate_input
from kernels.harness.results import TimingStats
from kernels.harness.settings import TimingPolicy
from kernels.suites import Case
from kernels.verify import VerifyResult, outputs_share_memory, verify_many

Kernel = Callable[[torch.Tensor], object]
T = TypeVar("T")

L2_FLUSH_BYTES = 256 * 1024 * 1024


def timed_input_seed(case: Case, rep: int) -> int:
    """Seeds for timed calls: distinct from the case seed and from each other."""
    return case.seed * 7919 + 104729 * (rep + 1)


class DeviceTurn:
    """The device to this process alone, for one timed region: ``with turn(): ...``.

    This base class is for a process alone on its device (a benchmark, a test): its turn is
    always granted.  Subclasses ask for it (:meth:`_acquire`) and give it back (:meth:`_release`);
    ``waited_s`` sums the seconds spent asking.  Turns do not nest: an inner one is the outer one."""

    def __init__(self) -> None:
        self.waited_s = 0.0
        self._held = False

    @contextmanager
    def __call__(self) -> Iterator[None]:
        if self._held:  # inside a turn already: the outer one gives it back
            yield
            return
        began = time.perf_counter()
        self._acquire()
        self.waited_s += time.perf_counter() - began
        self._held = True
        try:
            yield
        finally:
            self._held = False
            self._release()

    def _acquire(self) -> None:
        """Wait until nothing else runs on the device (nothing to wait for when alone)."""

    def _release(self) -> None:
        """Let others use the device again."""


@dataclass(frozen=True)
class RegionNotes:
    """What a timed region cost besides its time: the host's enqueueing and the device allocator."""

    host_ms: float  # start mark to the region's return, before the synchronisation
    allocator_calls: int | None = None  # cudaMalloc + cudaFree inside the region (None: not counted)
    alloc_retries: int | None = None  # cudaMallocs that failed and were retried after freeing the cache


ALLOCATOR_CALLS = ("num_device_alloc", "num_device_free")


def allocator_counts(stats: dict[str, Any]) -> tuple[int, int] | None:
    """(device allocation and free calls, retried allocations) so far, from
    ``torch.cuda.memory_stats``; None where this torch does not count them."""
    if not all(key in stats for key in ALLOCATOR_CALLS) or "num_alloc_retries" not in stats:
        return None
    return sum(int(stats[key]) for key in ALLOCATOR_CALLS), int(stats["num_alloc_retries"])


def allocator_delta(before: tuple[int, int] | None, after: tuple[int, int] | None) -> tuple[int | None, int | None]:
    if before is None or after is None:
        return None, None
    return after[0] - before[0], after[1] - before[1]


class DeviceClock:
    """Flush, start mark, end mark: CUDA events on a GPU, a host timer on CPU.  Its timed
    regions and its calibration run in ``turn``'s turns; ``last`` holds the latest region's
    :class:`RegionNotes` (None on the host timer)."""

    def __init__(self, device: torch.device, turn: DeviceTurn | None = None) -> None:
        self.device = device
        self.cuda = device.type == "cuda"
        self.turn = turn if turn is not None else DeviceTurn()
        self._flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device=device) if self.cuda else None
        self.last: RegionNotes | None = None
        if self.cuda:
            with self.turn():  # the empty region's cost must not include another process's kernels
                self.overhead_ms = self._calibrate()
        else:
            self.overhead_ms = 0.0

    def timed(self, fn: Callable[[], T]) -> tuple[T, float]:
        """In one turn: flush, then :meth:`region` of ``fn``."""
        with self.turn():
            self.flush()
            return self.region(fn)

    def flush(self) -> None:
        if self._flush is not None:
            self._flush.zero_()
            torch.cuda.synchronize(self.device)

    def region(self, fn: Callable[[], T]) -> tuple[T, float]:
        """Run ``fn`` and return (its result, elapsed ms minus calibrated overhead)."""
        if not self.cuda:
            t0 = time.perf_counter()
            out = fn()
            self.last = None  # the host timer's time is all host: nothing to tell apart
            return out, (time.perf_counter() - t0) * 1e3
        before = allocator_counts(torch.cuda.memory_stats(self.device))
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        t0 = time.perf_counter()
        start.record()
        out = fn()
        host_ms = (time.perf_counter() - t0) * 1e3
        torch.cuda.synchronize()  # the whole device: other streams count too
        end.record()
        end.synchronize()
        calls, retries = allocator_delta(before, allocator_counts(torch.cuda.memory_stats(self.device)))
        self.last = RegionNotes(host_ms=host_ms, allocator_calls=calls, alloc_retries=retries)
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
    return calls_verified(kernel, case, [seed], device, clock, exact_q)


def calls_verified(kernel: Kernel, case: Case, seeds: list[int], device: torch.device,
                   clock: DeviceClock | None = None, exact_q: bool = True, previous: list[object] | None = None
                   ) -> tuple[VerifyResult, float | None, float]:
    """A call on a fresh input per seed, back to back (one timed region when a clock is given),
    then every output verified: an output that a later call overwrote fails.  ``previous`` holds
    the last output of an earlier call (kept alive, so its memory cannot be handed out again):
    an output sharing memory with the one before it fails too, and ``previous`` takes the last.

    Returns (the first failing verdict, else the worst passing one; elapsed ms per call or None;
    seconds spent verifying)."""
    inputs = [generate_input(case.batch, case.n, case.cond, seed, case.case, device=device) for seed in seeds]
    givens = [a.clone() for a in inputs]
    if clock is None:
        outs = [kernel(given) for given in givens]
        if device.type == "cuda":
            torch.cuda.synchronize()
        elapsed = None
    else:
        outs, total = clock.timed(lambda: [kernel(given) for given in givens])  # noqa: F821 (called before the del below)
        elapsed = total / len(givens)
    checking = time.perf_counter()
    earlier = previous if previous is not None else []
    # Memory shared with the call before (the previous region's last call, then each other).
    for position, out in enumerate(outs):
        before = earlier[0] if position == 0 and earlier else (outs[position - 1] if position else None)
        if before is not None and outputs_share_memory(before, out):
            shared = VerifyResult(ok=False, message="this call's outputs share memory with the previous call's "
                                  "(each call must return new tensors)")
            return _in_region(shared, position, len(outs)), elapsed, time.perf_counter() - checking
    # Every output at once: the float64 checks of a region of 50 small calls are a few launches.
    verdict, failed_call = verify_many(list(zip(inputs, outs, givens)), exact_q=exact_q)
    if verdict.ok:
        earlier[:] = [outs[-1]]
    del outs, givens, inputs
    return _in_region(verdict, failed_call, len(seeds)), elapsed, time.perf_counter() - checking


def _in_region(verdict: VerifyResult, index: int | None, calls: int) -> VerifyResult:
    """Name the call of a region a failed verdict is about (nothing to name in a one-call region)."""
    if verdict.ok or index is None or calls == 1:
        return verdict
    return verdict.model_copy(update={"message": f"call {index + 1} of {calls}: {verdict.message}"})


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
    notes: list[RegionNotes] = []
    worst: VerifyResult | None = None
    began = time.perf_counter()
    waited_before = clock.turn.waited_s  # waiting for turns is not the case's time
    count = policy.inputs_per_region(case.batch, case.n)
    last_output: list[object] = []
    for rep in range(policy.max_reps):
        seeds = [timed_input_seed(case, rep * count + i) for i in range(count)]
        verdict, elapsed, spent = calls_verified(kernel, case, seeds, device, clock, exact_q=False,
                                                 previous=last_output)
        check_s += spent
        if not verdict.ok:
            where = f"timed call {rep + 1}" if count == 1 else f"timed region {rep + 1} ({count} calls)"
            return None, verdict.model_copy(update={"message": f"{where}: {verdict.message}"})
        assert elapsed is not None
        times.append(elapsed)
        if clock.last is not None:
            notes.append(clock.last)
        if worst is None or (verdict.factor_scaled or 0.0) > (worst.factor_scaled or 0.0):
            worst = verdict
        if len(times) >= policy.min_reps:
            mean = statistics.fmean(times)
            stderr = statistics.stdev(times) / math.sqrt(len(times))
            if mean > 0 and stderr / mean < policy.target_rel_stderr:
                break
            if time.perf_counter() - began - (clock.turn.waited_s - waited_before) > policy.max_seconds:
                break
    assert worst is not None  # max_reps >= 1
    return _stats(times, clock).model_copy(update={"check_s": check_s, "calls_per_region": count,
                                                    **_region_costs(notes, count)}), worst


def _region_costs(notes: list[RegionNotes], calls_per_region: int) -> dict[str, Any]:
    """TimingStats' host and allocator fields from the timed regions' notes."""
    if not notes:
        return {}
    calls = [n.allocator_calls for n in notes]
    retries = [n.alloc_retries for n in notes]
    return {"host_ms": statistics.median(n.host_ms for n in notes) / calls_per_region,
            "allocator_calls": None if None in calls else sum(c for c in calls if c is not None),
            "alloc_retries": None if None in retries else sum(r for r in retries if r is not None)}


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
