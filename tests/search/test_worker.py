"""The evaluation cascade on CPU, as an evaluator actor runs it (no Ray)."""

from pathlib import Path

import pytest

from kernels.families import BASELINE_PATH
from kernels.suites import get_suite
from population.models import CaseStatus, State
from search.worker import EvalRequest, Worker

CANDIDATES = Path(__file__).parents[1] / "kernels" / "candidates"


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    w = Worker(tmp_path_factory.mktemp("work"), name="cpu0")
    yield w
    w.close()


def request(source, **kw):
    verify = list(get_suite("smoke"))[:9]
    bench = list(get_suite("smoke-bench"))[:2]
    base = dict(candidate_id="c0000001", family="f", source=source, verify_suite="smoke", verify_cases=verify,
                bench_suite="smoke-bench", bench_cases=bench, device="cpu", case_timeout_s=20,
                min_reps=3, max_reps=5, max_seconds_per_case=0.2)
    base.update(kw)
    return EvalRequest(**base)


def test_verified_candidate_has_a_fitness_and_per_case_results(worker):
    out = worker.evaluate(request(BASELINE_PATH.read_text(), profile=True))
    assert out.state is State.VERIFIED and out.infra_error is None
    r = out.result
    assert r.geomean_ms and r.geomean_ms > 0
    assert [c.status for c in r.cases] == [CaseStatus.OK, CaseStatus.OK]
    assert all(c.median_ms > 0 and "factor" in c.residuals for c in r.cases)
    assert r.profile and set(r.profile) == {c.case for c in r.cases}
    assert r.versions["torch"] and out.busy_s > 0


@pytest.mark.parametrize("name, state, needle", [
    ("syntax_error", State.FAILED_COMPILE, "syntax error"),
    ("raises", State.CRASHED, "kernel exploded"),
    ("aborts", State.CRASHED, "SIGABRT"),
    ("cached", State.FAILED_VERIFY, ""),
    ("patches_checker", State.REJECTED, "patching a library"),
    ("inplace_view", State.FAILED_VERIFY, "shares memory"),
])
def test_failures_become_states_with_reasons(worker, name, state, needle):
    out = worker.evaluate(request((CANDIDATES / f"{name}.py").read_text()))
    assert out.state is state, out.reason
    assert needle in out.reason
    assert out.result.geomean_ms is None and out.result.error
    assert out.infra_error is None


def test_hang_becomes_timeout(worker):
    out = worker.evaluate(request((CANDIDATES / "sleeper.py").read_text(), case_timeout_s=3))
    assert out.state is State.TIMEOUT and "timed out" in out.reason


def test_stale_output_in_timing_fails_at_the_bench_stage(worker):
    # Two verification calls: the cheat is still honest there and is caught only when timed.
    out = worker.evaluate(request((CANDIDATES / "stale_when_timed.py").read_text(),
                                  verify_cases=list(get_suite("smoke"))[:2]))
    assert out.state is State.FAILED_VERIFY
    assert out.reason.startswith("bench ")


def test_spare_child_is_replaced_after_each_use(worker):
    before = worker._spare
    worker.evaluate(request(BASELINE_PATH.read_text()))
    assert worker._spare is not before and worker._spare.proc.poll() is None
