"""What a timed region costs besides its time: the host's enqueueing and the device allocator's calls
(kernels/harness/timing.py), and the caveats `qrsearch bench` prints from them."""

import torch

from kernels.harness.results import CaseResult, CaseStatus, SuiteReport, TimingStats
from kernels.harness.settings import TimingPolicy
from kernels.harness.timing import (DeviceClock, RegionNotes, _region_costs, allocator_counts, allocator_delta,
                                    measure)
from kernels.suites import Case
from search.cli.eval_report import timing_caveats


def test_the_host_timer_records_no_costs_beside_the_time():
    """On CPU the region is timed by the host: all of it is host time, and there is no device
    allocator, so nothing is told apart (and nothing reads as host-bound)."""
    case = Case(batch=2, n=8, cond=1, seed=5)
    clock = DeviceClock(torch.device("cpu"))
    stats, verdict = measure(lambda a: torch.geqrf(a), case, torch.device("cpu"), clock,
                             TimingPolicy(min_reps=4, max_reps=4, region="gpumode"))
    assert verdict.ok and stats is not None and stats.count == 4
    assert stats.host_ms is None and stats.allocator_calls is None and stats.alloc_retries is None
    assert clock.last is None


def test_allocator_counts_are_read_from_torch_memory_stats_and_differenced():
    stats = {"num_device_alloc": 5, "num_device_free": 2, "num_alloc_retries": 1, "allocated_bytes.all.current": 9}
    assert allocator_counts(stats) == (7, 1)
    assert allocator_counts({"num_device_alloc": 5}) is None  # a torch that does not count them
    assert allocator_delta((7, 1), (10, 3)) == (3, 2)
    assert allocator_delta(None, (10, 3)) == (None, None)


def test_region_costs_are_the_median_host_time_per_call_and_the_allocator_calls_summed():
    """A region of two calls that the host took 6 ms to enqueue is 3 ms a call: left undivided by
    the region's calls, a GPU MODE region of 50 would read 50 times too host-bound."""
    notes = [RegionNotes(host_ms=4.0, allocator_calls=0, alloc_retries=0),
             RegionNotes(host_ms=8.0, allocator_calls=2, alloc_retries=1),
             RegionNotes(host_ms=6.0, allocator_calls=1, alloc_retries=0)]
    assert _region_costs(notes, 2) == {"host_ms": 3.0, "allocator_calls": 3, "alloc_retries": 1}
    unknown = _region_costs(notes + [RegionNotes(host_ms=6.0)], 1)
    assert unknown["allocator_calls"] is None and unknown["alloc_retries"] is None  # one region unread: no sum
    assert _region_costs([], 1) == {}


def _report(*timings: TimingStats) -> SuiteReport:
    cases = [CaseResult(case=Case(batch=8, n=64 * (i + 1), cond=2, seed=1), status=CaseStatus.OK, timing=t)
             for i, t in enumerate(timings)]
    return SuiteReport(candidate="f.py", suite="s", mode="bench", device="cuda", device_name="GPU", versions={},
                       cases=cases)


def _stats(median: float, timer: str = "cuda_events", **costs) -> TimingStats:
    return TimingStats(median_ms=median, min_ms=median, max_ms=median, mean_ms=median, stderr_ms=0.0, count=3,
                       timer=timer, **costs)


def test_bench_names_the_cases_whose_time_holds_allocator_stalls_or_a_waiting_gpu():
    lines = timing_caveats(_report(_stats(5.0, host_ms=4.5, allocator_calls=0, alloc_retries=0),
                                   _stats(5.0, host_ms=0.3, allocator_calls=6, alloc_retries=2),
                                   _stats(5.0, host_ms=0.3, allocator_calls=0, alloc_retries=0),
                                   _stats(5.0, timer="host", host_ms=5.0)))
    assert len(lines) == 2, lines
    assert lines[0].startswith("dense-8x64-c2: host-bound") and "after 4.50 of its 5.00 ms" in lines[0]
    assert lines[1].startswith("dense-8x128-c2") and "6 cudaMalloc/cudaFree" in lines[1] and "2 of them" in lines[1]
