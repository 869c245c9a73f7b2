"""The evaluation cascade on CPU, as an evaluator actor runs it (no Ray)."""

import os
from pathlib import Path

import pytest

from kernels.families import BASELINE_PATH
from kernels.harness.settings import RunLimits, TimingPolicy
from kernels.suites import get_suite
from population.models import CaseStatus, State
from search.evaluate.worker import EvalRequest, Worker

CANDIDATES = Path(__file__).parents[2] / "kernels" / "candidates"


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    w = Worker(tmp_path_factory.mktemp("work"), name="cpu0")
    yield w
    w.close()


def request(source, **kw):
    verify = list(get_suite("smoke"))[:9]
    bench = list(get_suite("smoke-bench"))[:2]
    base = dict(candidate_id="c0000001", family="f", source=source, verify_suite="smoke", verify_cases=verify,
                bench_suite="smoke-bench", bench_cases=bench, device="cpu", limits=RunLimits(case_timeout_s=20),
                timing=TimingPolicy(min_reps=3, max_reps=5, max_seconds=0.2))
    base.update(kw)
    return EvalRequest(**base)


def test_verified_candidate_has_a_fitness_and_per_case_results(worker):
    out = worker.evaluate(request(BASELINE_PATH.read_text(), profile=True))
    assert out.state is State.VERIFIED and out.infra_error is None
    r = out.result
    assert r.geomean_ms and r.geomean_ms > 0
    assert [c.status for c in r.cases] == [CaseStatus.OK, CaseStatus.OK]
    assert all(c.median_ms > 0 and "factor" in c.residuals for c in r.cases)
    # On the host timer nothing is told apart from the time (the GPU test records both costs).
    assert all(c.host_ms is None and c.allocator_calls is None for c in r.cases)
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
    out = worker.evaluate(request((CANDIDATES / "sleeper.py").read_text(), limits=RunLimits(case_timeout_s=3)))
    assert out.state is State.TIMEOUT and "timed out" in out.reason


def test_stale_output_in_timing_fails_at_the_bench_stage(worker):
    # At most two calls per verify-stage process (one case of each n): the cheat is still
    # honest there.  The bench process gates nothing again, so its fourth call is a timed
    # one that replays a stale output, and the fast re-check catches it.
    out = worker.evaluate(request((CANDIDATES / "stale_when_timed.py").read_text(),
                                  verify_cases=list(get_suite("smoke"))[:1],
                                  bench_cases=list(get_suite("smoke-bench"))[:1], verify_processes=2))
    assert out.state is State.FAILED_VERIFY
    assert out.reason.startswith("bench ") and "timed call" in out.reason


def test_bench_cases_are_gated_by_reference_calls_in_the_verify_stage(worker):
    # Honest for three calls: three verify cases with one n share a process, so the bench
    # case's gate call is the fourth there and fails before anything is timed.
    *verify, gated = [c for c in get_suite("smoke") if c.n == 8][:4]
    out = worker.evaluate(request((CANDIDATES / "stale_when_timed.py").read_text(), verify_cases=verify,
                                  bench_cases=[gated], verify_processes=1))
    assert out.state is State.FAILED_VERIFY
    assert out.reason.startswith(f"verify {gated.name}")


def test_spare_children_are_replaced_after_each_use(worker):
    before = worker.children.spares() + worker.children.starting()
    worker.evaluate(request(BASELINE_PATH.read_text(), verify_processes=2, reuse_processes=False))
    after = worker.children.spares() + worker.children.starting()  # the replacements start at the end
    processes = min(2, os.cpu_count() or 1)
    assert len(after) == processes + 1  # the verify stage's children and the bench child
    assert not set(map(id, after)) & set(map(id, before))
    assert all(child.proc.poll() is None for child in after)


def test_no_child_starts_while_a_candidate_is_timed(tmp_path, monkeypatch):
    import kernels.harness.process as process_module
    import search.evaluate.children as children_module
    import search.evaluate.worker as worker_module

    started, inits, stage = [], [], {"now": "idle"}
    real_child, real_run = children_module.ChildProcess, worker_module.run_candidate
    real_init = process_module.ChildProcess.init

    def counting_child(*args, **kwargs):
        started.append((stage["now"], kwargs.get("staged", False)))
        return real_child(*args, **kwargs)

    def recording_init(self):
        state = worker.gate.state()
        inits.append((stage["now"], state.readers > 0 or state.writer, state.writer))
        return real_init(self)

    def tracking_run(job, *args, **kwargs):
        stage["now"] = job.mode
        try:
            return real_run(job, *args, **kwargs)
        finally:
            stage["now"] = "idle"

    monkeypatch.setattr(children_module, "ChildProcess", counting_child)
    monkeypatch.setattr(process_module, "ChildProcess", counting_child)
    monkeypatch.setattr(real_child, "init", recording_init)
    monkeypatch.setattr(worker_module, "run_candidate", tracking_run)
    worker = Worker(tmp_path / "work", name="cpu0")  # its spares start under the recorders
    try:
        out = worker.evaluate(request(BASELINE_PATH.read_text(), verify_processes=2))
    finally:
        worker.close()
    assert out.state is State.VERIFIED
    # Spares import whenever (they touch no device); a child started whole never starts in a
    # bench job, and a context is created only under a hold: in a bench job, only the job's own
    # timing child's, under its exclusive hold before anything is timed.
    assert started and all(staged for now, staged in started if now == "bench")
    assert inits and all(covered for _, covered, _ in inits)
    assert all(writer for now, _, writer in inits if now == "bench")


def test_stage_seconds_say_where_the_time_went(worker):
    out = worker.evaluate(request(BASELINE_PATH.read_text(), profile=True))
    stages = out.result.stage_seconds
    assert {"verify", "bench", "rechecks", "profile", "startup", "settle"} <= set(stages)
    assert set(stages) <= {"verify", "bench", "rechecks", "profile", "startup", "settle", "device_wait", "idle",
                           "queued"}
    assert 0 <= stages["startup"] < stages["verify"] + stages["bench"]
    assert 0 < stages["rechecks"] < stages["bench"] and 0 < stages["profile"] < stages["bench"]
    assert stages["verify"] + stages["bench"] <= out.result.eval_seconds + 1e-6
    assert all(c.wall_s and c.wall_s > 0 for c in out.result.cases)


def test_children_of_one_structure_share_processes_and_a_crash_blames_only_its_child(tmp_path, monkeypatch):
    """Lever 4 of the throughput issue: children that differ only in PARAMS run through the same
    processes (no start-up, nothing to wait for before timing); the child that crashes in one
    is the only one blamed, and the next one runs normally."""
    import kernels.harness.process as process_module
    import search.evaluate.children as children_module
    from tests.kernels.test_reuse import TEMPLATE

    starts: list[str] = []
    real_child = process_module.ChildProcess

    def counting_child(*args, **kwargs):
        starts.append("start")
        return real_child(*args, **kwargs)

    monkeypatch.setattr(children_module, "ChildProcess", counting_child)
    monkeypatch.setattr(process_module, "ChildProcess", counting_child)
    w = Worker(tmp_path / "work", name="cpu0")
    try:
        def child(cid: str, crash: int = 0):
            return request(TEMPLATE.format(crash=crash, poison=0, thread=0), candidate_id=cid, verify_processes=1)

        first = w.evaluate(child("c0000001"))
        assert first.state is State.VERIFIED, first.reason
        starts.clear()
        crashing = w.evaluate(child("c0000002", crash=1))
        assert crashing.state is State.CRASHED and "exited with code 7" in crashing.reason
        assert w.reused == 1  # it ran in first's gate process, crashed, and was re-run fresh
        third = w.evaluate(child("c0000003"))
        assert third.state is State.VERIFIED, third.reason
        starts.clear()
        reused = w.reused
        fourth = w.evaluate(child("c0000004"))
        assert fourth.state is State.VERIFIED, fourth.reason
        assert starts == []  # no process started for it: gates and timing ran in third's processes
        assert w.reused == reused + 2
        assert fourth.result.stage_seconds["settle"] < 0.5  # nothing was starting before its timing
        other = w.evaluate(request(BASELINE_PATH.read_text(), candidate_id="c0000005"))
        assert other.state is State.VERIFIED and w.reused == reused + 2  # another structure: its own processes
    finally:
        w.close()


def test_a_duel_times_the_defender_in_the_challengers_process_and_a_broken_defender_decides_nothing(worker):
    """What search/engine/duels.py asks of an evaluator: no verify cases, the defender as the
    reference; every case comes back with both medians, or without the defender's when it fails."""
    from population.models import State
    from search.engine.duels import judge

    source = BASELINE_PATH.read_text()
    duel = request(source, candidate_id="c0000002:duel:1", verify_cases=[], reference_source=source)
    out = worker.evaluate(duel)
    assert out.state is State.VERIFIED, out.reason
    assert len(out.result.cases) == 2
    assert all(c.median_ms and c.baseline_ms and c.baseline_ms > 0 for c in out.result.cases)
    broken = (CANDIDATES / "raises.py").read_text()
    out = worker.evaluate(request(source, candidate_id="c0000002:duel:2", verify_cases=[], reference_source=broken))
    assert out.state is State.VERIFIED and all(c.baseline_ms is None for c in out.result.cases)
    assert judge(out.result, out.result, out.state, out.result, margin=0.01)["holds"] is None


def test_the_costs_beside_a_cases_time_reach_its_stored_outcome():
    from kernels.harness.results import CaseResult, TimingStats
    from kernels.suites import Case
    from search.evaluate.outcome import _outcome

    timing = TimingStats(median_ms=5.0, min_ms=4.9, max_ms=5.2, mean_ms=5.0, stderr_ms=0.01, count=3,
                         timer="cuda_events", host_ms=1.25, allocator_calls=6, alloc_retries=0)
    stored = _outcome(CaseResult(case=Case(batch=640, n=512, cond=2, seed=1), status=CaseStatus.OK, timing=timing))
    assert (stored.median_ms, stored.host_ms, stored.allocator_calls) == (5.0, 1.25, 6)
