"""GPU-only harness behaviour (skipped without CUDA)."""

from pathlib import Path

import pytest

from kernels.families import BASELINE_PATH
from kernels.harness.job import CandidateJob
from kernels.harness.runner import run_candidate
from kernels.harness.timing import TimingPolicy
from kernels.suites import Case

pytestmark = pytest.mark.gpu
CANDIDATES = Path(__file__).parent / "candidates"
CASES = [Case(batch=4, n=64, cond=1, seed=1), Case(batch=4, n=64, cond=0, seed=2, case="rankdef")]
POLICY = TimingPolicy(min_reps=5, max_reps=10, max_seconds=2)


def test_work_on_other_streams_is_timed():
    base = run_candidate(CandidateJob(BASELINE_PATH, tuple(CASES[:1]), mode="bench", policy=POLICY))
    side = run_candidate(CandidateJob(CANDIDATES / "side_stream.py", tuple(CASES[:1]), mode="bench", policy=POLICY))
    assert base.ok and side.ok
    assert side.cases[0].timing.timer == "cuda_events"
    # 20 matmuls of 4096^3 on a side stream take milliseconds; geqrf of 4×64 far less.
    assert side.cases[0].timing.median_ms > base.cases[0].timing.median_ms + 1.0


def test_illegal_address_ends_the_process_and_is_reported():
    report = run_candidate(CandidateJob(CANDIDATES / "illegal_address.py", tuple(CASES), mode="verify", keep_going=True))
    first = report.cases[0]
    assert first.status in ("error", "crashed")
    assert "CUDA" in first.message or "illegal" in first.message
    # keep_going gave the second case a fresh process rather than a poisoned context.
    assert report.cases[1].status in ("error", "crashed")


@pytest.mark.parametrize("batch, n", [(16, 512), (2, 1024)])
def test_fast_q_matches_householder_product_on_the_gpu(batch, n):
    import torch

    from kernels.inputs import generate_input
    from kernels.verify import householder_q64, verify_qr

    a = generate_input(batch, n, 2, seed=11, case="mixed", device="cuda")
    h, tau = torch.geqrf(a.clone())
    expected = torch.linalg.householder_product(h.double(), tau.double())
    assert torch.allclose(householder_q64(h, tau), expected, rtol=0, atol=1e-12)
    exact, fast = verify_qr(a, (h, tau)), verify_qr(a, (h, tau), exact_q=False)
    assert exact.ok and fast.ok and abs(exact.factor_scaled - fast.factor_scaled) < 0.5


def test_allocations_outside_the_cache_and_the_hosts_enqueueing_are_reported_beside_the_time():
    base = run_candidate(CandidateJob(BASELINE_PATH, tuple(CASES[:1]), mode="bench", policy=POLICY))
    alloc = run_candidate(CandidateJob(CANDIDATES / "allocates_outside_cache.py", tuple(CASES[:1]), mode="bench",
                                       policy=POLICY))
    assert base.ok and alloc.ok
    quiet, busy = base.cases[0].timing, alloc.cases[0].timing
    assert quiet.allocator_calls == 0 and quiet.alloc_retries == 0  # warm-ups filled the cache
    assert busy.allocator_calls >= busy.count  # at least a cudaMalloc every timed call
    assert 0 < quiet.host_ms and 0 < busy.host_ms
