"""The harness on CPU: every failure mode becomes a result, the caller survives."""

import time
from pathlib import Path

import pytest

from kernels.families import BASELINE_PATH
from kernels.harness.job import CandidateJob
from kernels.harness.process import child_env
from kernels.harness.runner import run_candidate
from kernels.harness.settings import RunLimits
from kernels.harness.timing import TimingPolicy
from kernels.suites import Case, get_suite

CANDIDATES = Path(__file__).parent / "candidates"
SMALL = [Case(batch=2, n=8, cond=1, seed=1), Case(batch=2, n=12, cond=0, seed=2, case="rankdef"),
         Case(batch=3, n=8, cond=1, seed=3, case="mixed")]
FAST = TimingPolicy(warmup_calls=1, min_reps=3, max_reps=5, max_seconds=1.0)


def run(name, mode="verify", cases=SMALL, **kw):
    kw.setdefault("policy", FAST)
    return run_candidate(CandidateJob(CANDIDATES / f"{name}.py" if name != "baseline" else BASELINE_PATH, cases,
                                      mode=mode, device="cpu", **kw))


def test_baseline_passes_and_is_timed_on_cpu():
    report = run("baseline", mode="bench")
    assert report.ok, [c.message for c in report.cases]
    for c in report.cases:
        assert c.timing is not None and c.timing.timer == "host" and c.timing.count >= 3
        assert c.timing.min_ms <= c.timing.median_ms <= c.timing.max_ms
    assert report.geomean_ms is not None and report.device == "cpu"
    assert report.versions["torch"]


def test_cached_result_fails_on_the_next_fresh_input():
    report = run("cached", mode="bench", cases=SMALL[:1])
    case = report.cases[0]
    assert case.status == "failed_verify"
    assert "warm-up call 1" in case.message


def test_output_replayed_only_when_timed_is_caught():
    report = run("stale_when_timed", mode="bench", cases=SMALL[:1])
    case = report.cases[0]
    assert case.status == "failed_verify" and "timed call" in case.message


def test_hang_is_killed_at_the_limit_and_reported():
    began = time.monotonic()
    report = run("sleeper", limits=RunLimits(case_timeout_s=3, startup_timeout_s=120))
    assert time.monotonic() - began < 60
    assert report.cases[0].status == "timeout" and "killed" in report.cases[0].message
    assert [c.status for c in report.cases[1:]] == ["skipped", "skipped"]


def test_abort_is_reported_as_a_crash():
    report = run("aborts")
    assert report.cases[0].status == "crashed"
    assert "SIGABRT" in report.cases[0].message
    assert {c.status for c in report.cases[1:]} == {"skipped"}


def test_keep_going_runs_the_remaining_cases_in_a_fresh_process():
    report = run("aborts", keep_going=True)
    assert [c.status for c in report.cases] == ["crashed"] * 3


def test_exception_is_an_error_result_and_later_cases_still_run():
    report = run("raises")
    assert [c.status for c in report.cases] == ["error"] * 3
    assert "RuntimeError: kernel exploded" in report.cases[0].message
    assert "candidate line 2" in report.cases[0].message


def test_fail_fast_stops_after_the_first_failure():
    report = run("raises", fail_fast=True)
    assert [c.status for c in report.cases] == ["error", "skipped", "skipped"]


@pytest.mark.parametrize("name, needle", [
    ("syntax_error", "syntax error at line 1"),
    ("no_kernel", "defines no custom_kernel"),
    ("import_error", "No module named 'not_a_real_module_qrsearch'"),
])
def test_unloadable_files_fail_to_compile_with_one_line(name, needle):
    report = run(name, cases=SMALL[:1])
    case = report.cases[0]
    assert case.status == "failed_compile" and needle in case.message
    assert "\n" not in case.message and "Traceback" not in case.message


GPUMODE = TimingPolicy(warmup_calls=1, min_reps=3, max_reps=4, max_seconds=1.0, region="gpumode")


def test_gpu_mode_regions_time_fresh_inputs_back_to_back_and_report_per_call():
    report = run("baseline", mode="bench", cases=SMALL[:1], policy=GPUMODE)
    assert report.ok, [c.message for c in report.cases]
    timing = report.cases[0].timing
    # 2x8x8 float32 inputs: GPU MODE's 256 MB would hold millions, it takes at most 50.
    assert timing is not None and timing.calls_per_region == 50 and timing.count >= 3
    assert run("baseline", mode="bench", cases=SMALL[:1]).cases[0].timing.calls_per_region == 1


def test_outputs_written_into_the_same_buffers_every_call_fail_either_way():
    # GPU MODE's region checks its outputs after the last call, when the first ones are overwritten;
    # one call per region checks that an output shares no memory with the call before it.
    report = run("reuses_output", mode="bench", cases=SMALL[:1], policy=GPUMODE)
    assert not report.ok and "timed region 1 (50 calls)" in report.cases[0].message
    report = run("reuses_output", mode="bench", cases=SMALL[:1])
    assert not report.ok and "share memory with the previous call" in report.cases[0].message


@pytest.mark.parametrize("batch, n, calls", [(20, 32, 50), (40, 176, 50), (40, 352, 13), (640, 512, 1),
                                             (60, 1024, 1), (8, 2048, 2), (2, 4096, 2)])
def test_gpu_mode_region_sizes_are_gpu_modes_for_the_benchmark_shapes(batch, n, calls):
    assert TimingPolicy(region="gpumode").inputs_per_region(batch, n) == calls
    assert TimingPolicy().inputs_per_region(batch, n) == 1


def test_a_gpu_mode_submission_that_imports_its_task_types_runs_unchanged():
    report = run("gpumode_task")
    assert report.ok, [c.message for c in report.cases]


def test_returning_a_view_of_the_input_is_rejected():
    report = run("inplace_view", cases=SMALL[:1])
    assert report.cases[0].status == "failed_verify" and "shares memory" in report.cases[0].message


def test_scribbling_over_the_input_is_rejected():
    report = run("mutates_input", cases=SMALL[:1])
    assert report.cases[0].status == "failed_verify" and "modified its input" in report.cases[0].message


def test_patching_the_checker_is_rejected_before_it_runs():
    report = run("patches_checker", cases=SMALL[:1])
    assert report.cases[0].status == "rejected"
    assert "torch.linalg.householder_product" in report.cases[0].message


def test_candidates_see_no_secrets(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    monkeypatch.setenv("MY_SERVICE_TOKEN", "t0ken")
    assert "OPENAI_API_KEY" not in child_env() and "MY_SERVICE_TOKEN" not in child_env()
    report = run("env_probe", cases=SMALL[:1])
    assert report.ok, report.cases[0].message


def test_candidate_stdout_cannot_forge_results():
    report = run("prints_noise", cases=SMALL[:1])
    assert report.ok
    assert report.cases[0].verify is not None and report.cases[0].verify.ok


def test_profile_summary_on_cpu():
    report = run("baseline", mode="bench", cases=SMALL[:1], profile=True)
    prof = report.cases[0].profile
    assert prof is not None and prof.kernels_per_call >= 1 and prof.top_kernels
    assert abs(sum(k.share for k in prof.top_kernels) - 1.0) < 1e-6 or len(prof.top_kernels) == 5


def test_smoke_suite_is_cpu_friendly():
    cases = get_suite("smoke")
    assert {c.n for c in cases} == {1, 2, 8, 32, 64}
    assert len({c.case for c in cases}) == 9
    report = run("baseline", cases=cases)
    assert report.ok and len(report.cases) == len(cases)


def test_shape_groups_keep_each_n_together_and_cover_every_case():
    from kernels.harness.runner import shape_groups

    cases = list(get_suite("qrv2-quick")) + list(get_suite("qrv2-bench"))
    for k in (1, 2, 4, 16):
        groups = shape_groups(cases, k)
        assert 1 <= len(groups) <= min(k, len({c.n for c in cases}))
        assert sorted(i for g in groups for i in g) == list(range(len(cases)))
        owner = {cases[i].n: gi for gi, g in enumerate(groups) for i in g}
        assert all(owner[cases[i].n] == gi for gi, g in enumerate(groups) for i in g)


def test_parallel_verify_reports_like_the_sequential_run():
    from kernels.harness.runner import run_candidate_parallel

    for name in ("baseline", "raises"):
        path = CANDIDATES / f"{name}.py" if name != "baseline" else BASELINE_PATH
        seq = run_candidate(CandidateJob(path, SMALL, device="cpu"))
        par = run_candidate_parallel(CandidateJob(path, SMALL, device="cpu"), processes=2)
        assert [c.case for c in par.cases] == SMALL
        assert [c.status for c in par.cases] == [c.status for c in seq.cases]
        assert par.ok == seq.ok and par.device == "cpu"


def test_parallel_run_refuses_timing():
    from kernels.harness.runner import run_candidate_parallel

    with pytest.raises(ValueError, match="verify-mode"):
        run_candidate_parallel(CandidateJob(BASELINE_PATH, SMALL, mode="bench"), processes=2)


def test_ungated_bench_verifies_every_output_and_keeps_the_evidence():
    report = run("baseline", mode="bench", cases=SMALL[:1], gate=False)
    case = report.cases[0]
    assert case.ok and case.verify is not None and case.verify.factor_scaled is not None
    # Without the gate call the stale replay starts one call later, still inside the timed calls.
    report = run("stale_when_timed", mode="bench", cases=SMALL[:1], gate=False,
                 policy=TimingPolicy(warmup_calls=1, min_reps=5, max_reps=5, max_seconds=1.0))
    assert report.cases[0].status == "failed_verify" and "timed call" in report.cases[0].message


def test_a_staged_child_loads_then_waits_for_init_before_it_is_warm_and_runs_a_job(tmp_path):
    from kernels.harness.job import Job
    from kernels.harness.process import ChildProcess

    child = ChildProcess(env=child_env(), staged=True)
    try:
        assert not child.wait_warm(0.1)  # not told to init: never warm
        assert child.wait_loaded(120) and child.loaded and not child.warm
        assert not child.wait_warm(0.1)
        child.init()
        assert child.wait_warm(120)
        job = Job(candidate=str(BASELINE_PATH), cases=list(SMALL[:1]), mode="verify", device="cpu")
        job_path = tmp_path / "job.json"
        job_path.write_text(job.model_dump_json())
        child.submit(job_path)
        kinds = []
        while not kinds or kinds[-1] != "done":
            message = child.next_message(time.monotonic() + 120)
            assert message is not None
            kinds.append(message.type)
        assert "case_result" in kinds
    finally:
        child.close()
    quitter = ChildProcess(env=child_env(), staged=True)
    try:
        assert quitter.wait_loaded(120)
        assert quitter.proc.stdin is not None
        quitter.proc.stdin.close()  # no word to init: it ends without touching the device
        assert quitter.proc.wait(60) == 0
    finally:
        quitter.close()
    with pytest.raises(RuntimeError, match="staged"):
        _not_staged_init()


def _not_staged_init() -> None:
    from kernels.harness.process import ChildProcess

    plain = ChildProcess(env=child_env())
    try:
        plain.init()
    finally:
        plain.close()


def test_a_pinned_child_and_every_thread_it_starts_stay_on_its_cpus():
    import os

    from kernels.harness.process import ChildProcess

    cpu = min(os.sched_getaffinity(0))
    child = ChildProcess.pinned(frozenset({cpu}), env=child_env())
    try:
        assert child.wait_warm(120)  # torch imported: its thread pools exist now
        threads = os.listdir(f"/proc/{child.proc.pid}/task")
        assert len(threads) >= 1
        assert all(os.sched_getaffinity(int(t)) == {cpu} for t in threads)
    finally:
        child.close()
    unpinned = ChildProcess.pinned(None, env=child_env())
    try:
        assert os.sched_getaffinity(unpinned.proc.pid) == os.sched_getaffinity(0)
    finally:
        unpinned.close()
