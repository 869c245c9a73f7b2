"""Compile-ahead scheduling with a fake compiler: order, parallelism, waits, failures, CPUs,
and the run's Triton cache across a resume."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from kernels.harness.settings import RunLimits, TimingPolicy
from search.evaluate.compile_ahead import CompileAhead
from search.evaluate.placement import evaluator_env, run_cache_dir, split_cpus
from tests.search.fake_compiler import FakeCompiler


def ahead(tmp_path: Path, compiler: FakeCompiler, parallel: int = 1, cpus=None, max_shards=None) -> CompileAhead:
    return CompileAhead(tmp_path / "cache", tmp_path / "ahead", cpus, start=compiler.start, read=compiler.read,
                        target="fake-target", parallel=parallel, poll_s=0.01, max_shards=max_shards)


def cand(tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text("def custom_kernel(A):\n    return A\n")
    return path


def test_a_new_family_compiles_in_one_process_per_size_in_announcement_order_at_most_parallel_at_once(tmp_path):
    compiler = FakeCompiler(delay=0.4)
    sched = ahead(tmp_path, compiler, parallel=2, max_shards=2)
    try:
        for cid in ("c1", "c2", "c3"):
            assert sched.announce(cid, cand(tmp_path, cid), [(8, 64), (2, 32), (8, 64), (4, 64)])
        assert not sched.announce("c1", cand(tmp_path, "c1"), [(1, 1)])  # known already: not twice
        assert sched.running() == ["c1"] and sched.queued() == ["c2", "c3"]
        # c1's two sizes: two processes sharing its kernels, each running every shape (deduplicated,
        # largest n first).
        assert [c["shapes"] for c in compiler.calls] == [[(4, 64), (8, 64), (2, 32)]] * 2
        assert [c["shard"] for c in compiler.calls] == [(0, 2), (1, 2)]
        first = sched.wait("c1", timeout=30)
        assert first.state == "done" and first.kernels_compiled == 3 and not first.started_late
        assert first.compile_s >= 0.4  # the fake sleeps that long
        deadline = time.monotonic() + 10
        while "c2" not in sched.running() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert "c2" in sched.running()  # slots freed: the next in line started, nobody waited for it
        assert all(c["cache_dir"] == tmp_path / "cache" for c in compiler.calls)
        assert sched.wait("c2", 30).state == "done" and sched.wait("c3", 30).state == "done"
        assert [c["candidate"].stem for c in compiler.calls] == ["c1", "c1", "c2", "c2", "c3", "c3"]
    finally:
        sched.close()


def test_a_candidate_due_before_its_compile_started_goes_first(tmp_path):
    compiler = FakeCompiler(delay=0.3)
    sched = ahead(tmp_path, compiler, parallel=1)
    try:
        for cid in ("c1", "c2", "c3"):
            sched.announce(cid, cand(tmp_path, cid), [(2, 32)])
        got = sched.wait("c3", timeout=30)
        assert got.state == "done" and got.started_late and got.waited_s > 0
        assert [c["candidate"].stem for c in compiler.calls][:2] == ["c1", "c3"]  # c3 jumped the line
        assert sched.wait("unknown", timeout=1).state == "unknown"
        assert sched.wait("c2", timeout=30).state == "done" and sched.queued() == []
    finally:
        sched.close()


def test_a_failed_or_overlong_compile_is_reported_not_raised(tmp_path):
    failing = ahead(tmp_path / "f", FakeCompiler(delay=0.05, ok=False))
    try:
        failing.announce("c1", cand(tmp_path, "c1"), [(2, 32)])
        got = failing.wait("c1", timeout=30)
        assert got.state == "failed" and got.error == "fake compile error"
    finally:
        failing.close()
    slow = ahead(tmp_path / "s", FakeCompiler(delay=30))
    try:
        slow.announce("c1", cand(tmp_path, "c1"), [(2, 32)])
        began = time.monotonic()
        got = slow.wait("c1", timeout=0.3)
        assert got.state == "timeout" and "killed" in (got.error or "")
        assert time.monotonic() - began < 10 and slow.running() == []
    finally:
        slow.close()


def test_compiles_run_on_the_cpus_they_are_given(tmp_path):
    cpus = sorted(os.sched_getaffinity(0))[-1:]
    compiler = FakeCompiler(delay=0.05)
    sched = ahead(tmp_path, compiler, cpus=cpus)
    try:
        sched.announce("c1", cand(tmp_path, "c1"), [(2, 32)])
        assert sched.wait("c1", timeout=30).state == "done"
    finally:
        sched.close()
    assert compiler.calls[0]["cpus"] == cpus
    assert compiler.read(compiler.calls[0]["report"]).affinity == cpus


def test_split_cpus_keeps_timing_and_compiling_apart():
    timing, compiling = split_cpus(range(16), 0, 1)
    assert timing == frozenset({0, 1}) and compiling == frozenset(range(2, 16))
    slices = [split_cpus(range(16), i, 2) for i in range(2)]
    assert slices[0] == (frozenset({0}), frozenset(range(1, 8)))
    assert slices[1] == (frozenset({8}), frozenset(range(9, 16)))
    everything = [c for t, k in slices for c in (*t, *k)]
    assert sorted(everything) == list(range(16))  # no CPU given twice
    assert split_cpus([3], 0, 1) == (frozenset({3}), frozenset({3}))  # one CPU cannot be split
    with pytest.raises(ValueError):
        split_cpus([], 0, 1)


def test_the_runs_triton_cache_and_cuda_builds_survive_resume(tmp_path, monkeypatch):
    import kernels.families

    from search.run.driver import create_run, open_run
    from tests.search.toy_driver import install, toy_config

    monkeypatch.setattr(kernels.families, "FAMILIES", kernels.families.FAMILIES)  # restored after the test
    install()
    config = toy_config(tmp_path, name="cached")
    run = create_run(config)
    env = evaluator_env(config.run_dir, interpret=False)
    cache = Path(env["TRITON_CACHE_DIR"])
    assert cache == run_cache_dir(config.run_dir) and cache.is_relative_to(config.run_dir.resolve())
    builds = Path(env["TORCH_EXTENSIONS_DIR"])
    assert builds.is_relative_to(config.run_dir.resolve()) and builds != cache
    cache.mkdir(parents=True)
    (cache / "kernel.cubin").write_bytes(b"compiled")
    (builds / "qr_ext").mkdir(parents=True)
    (builds / "qr_ext" / "qr_ext.so").write_bytes(b"built")
    run.close()
    _, reopened = open_run(config.run_dir)
    reopened.close()
    assert evaluator_env(config.run_dir, interpret=True) == {**env, "TRITON_INTERPRET": "1"}
    assert (cache / "kernel.cubin").read_bytes() == b"compiled"
    assert (builds / "qr_ext" / "qr_ext.so").read_bytes() == b"built"


def test_a_worker_compiles_announced_candidates_ahead_under_the_interpreter(tmp_path, monkeypatch):
    """The evaluator's side: prefetch starts the compile, evaluate waits for it, reports it,
    and times on the timing CPUs; a candidate nobody announced is compiled by the JIT as before."""
    from kernels.families import get_family
    from kernels.harness.process import ChildProcess
    from kernels.suites import Case, get_suite
    from population.models import State
    from search.evaluate.worker import EvalRequest, Worker

    pinned: list[frozenset[int]] = []
    real_pin = ChildProcess.pin
    monkeypatch.setattr(ChildProcess, "pin", lambda self, cpus: pinned.append(cpus) or real_pin(self, cpus))
    cache = tmp_path / "cache"
    compiler = FakeCompiler(delay=0.2)
    sched = CompileAhead(cache, tmp_path / "ahead", start=compiler.start, read=compiler.read, target="t",
                         poll_s=0.01)
    calls: list[str] = []
    real_pause, real_resume = sched.pause, sched.resume
    monkeypatch.setattr(sched, "pause", lambda: calls.append("pause") or real_pause())
    monkeypatch.setattr(sched, "resume", lambda: calls.append("resume") or real_resume())
    timing = frozenset(sorted(os.sched_getaffinity(0))[:1])
    worker = Worker(tmp_path / "work", {"TRITON_INTERPRET": "1", "TRITON_CACHE_DIR": str(cache)}, name="cpu0",
                    ahead=sched, timing_cpus=timing)
    family = get_family("householder_unblocked")
    source = family.render(family.default_params())

    def request(cid: str) -> EvalRequest:
        return EvalRequest(candidate_id=cid, family=family.name, source=source, verify_suite="smoke",
                           verify_cases=[c for c in get_suite("smoke") if c.n <= 2][:2], bench_suite="custom",
                           bench_cases=[Case(batch=2, n=8, cond=1, seed=5, case="dense")], device="cpu",
                           limits=RunLimits(case_timeout_s=240),
                           timing=TimingPolicy(min_reps=2, max_reps=2, max_seconds=0.1), verify_processes=1,
                           fast_gates=True)

    try:
        first, second = request("c0000001"), request("c0000002")
        assert worker.prefetch(first) and not worker.prefetch(first)
        assert worker.compiled(["c0000001", "c0000002"]) == ["c0000002"]  # c1 compiles (0.2 s); c2 unknown
        deadline = time.monotonic() + 20
        while worker.compiled(["c0000001"]) != ["c0000001"] and time.monotonic() < deadline:
            time.sleep(0.02)
        assert worker.compiled(["c0000001"]) == ["c0000001"]  # what the pool asks before it starts one
        out = worker.evaluate(first)
        assert out.state is State.VERIFIED, out.reason
        units = len(compiler.calls)  # one compile process (one CPU): every shape in it
        assert units == 1 and sorted(compiler.calls[0]["shapes"]) == Worker.shapes(first)
        assert compiler.calls[0]["shard"] == (0, 1)
        assert all(c["cache_dir"] == cache for c in compiler.calls)
        assert out.result.jit["ahead_done"] == 1.0
        assert out.result.jit["ahead_kernels_compiled"] == len(Worker.shapes(first))
        stages = out.result.stage_seconds
        assert stages["compile_ahead"] >= 0.2 and stages["compile_wait"] >= 0  # the fake sleeps 0.2 s
        # The timing child, and only it, runs on the timing CPUs; spares import on the others.
        assert pinned.count(timing) == 1 and all(cpus == timing or not cpus & timing for cpus in pinned)
        assert calls == ["pause", "resume"] * 2  # compiles stood still in each of its 2 timed regions
        unannounced = worker.evaluate(second)
        assert unannounced.state is State.VERIFIED and unannounced.result.jit["ahead_done"] == 0.0
        assert len(compiler.calls) == units
    finally:
        worker.close()


def test_the_screen_sizes_compile_first_and_a_screened_childs_rest_is_cancelled(tmp_path):
    compiler = FakeCompiler(delay=0.3)
    sched = ahead(tmp_path, compiler, parallel=1)
    try:
        shapes = [(4, 32), (8, 64), (2, 128)]
        sched.announce("c1", cand(tmp_path, "c1"), shapes, first={32})
        got = sched.wait("c1", timeout=30, sizes={32})  # the screen's sizes only; the rest goes on
        assert got.state == "done" and got.kernels_compiled == 1
        assert compiler.calls[0]["shapes"] == [(4, 32)] and "c1" in sched.running() + sched.queued()
        sched.cancel("c1")  # screened: its other sizes are never compiled to the end
        assert sched.running() == [] and sched.queued() == []
        assert sched.wait("c1", timeout=1).state == "unknown"
        sched.announce("c2", cand(tmp_path, "c2"), shapes, first={64})
        assert sched.wait("c2", timeout=30, sizes={64}).state == "done"
        rest = sched.wait("c2", timeout=30)  # promising: wait for everything, then forget it
        assert rest.state == "done" and rest.kernels_compiled == 3
        c2 = [c["shapes"] for c in compiler.calls if c["candidate"].stem == "c2"]
        assert c2 == [[(8, 64)], [(2, 128), (4, 32)]]  # the screen's sizes first, then the rest, largest first
        assert sched.running() == [] and sched.queued() == []
    finally:
        sched.close()


def _stopped(pid: int, want: bool = True) -> bool:
    """Whether the process is stopped, once it got there (signals arrive asynchronously)."""
    deadline = time.monotonic() + 10
    while True:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"
        if state == want or time.monotonic() > deadline:
            return state
        time.sleep(0.01)


def test_compiles_pause_while_timing_and_none_starts_until_resumed(tmp_path):
    compiler = FakeCompiler(delay=1.0)
    sched = ahead(tmp_path, compiler, parallel=1)
    try:
        sched.announce("c1", cand(tmp_path, "c1"), [(2, 32)])
        sched.announce("c2", cand(tmp_path, "c2"), [(2, 32)])
        running = sched._jobs["c1"].units[0].proc
        sched.pause()
        assert _stopped(running.pid)
        time.sleep(1.5)  # longer than the fake compile: stopped, it cannot have finished
        assert running.poll() is None and len(compiler.calls) == 1  # and nothing new started
        sched.resume()
        assert not _stopped(running.pid, want=False)
        assert sched.wait("c1", timeout=30).state == "done" and sched.wait("c2", timeout=30).state == "done"
    finally:
        sched.close()


def test_a_cuda_build_is_never_stopped_a_triton_compile_is(tmp_path):
    """A load_inline build holds torch's build lock while it runs; stopped, it would keep every
    process that loads the same extension waiting, the timing child that paused it included."""
    compiler = FakeCompiler(delay=1.0)
    sched = ahead(tmp_path, compiler, parallel=2)
    try:
        cuda = tmp_path / "cuda_cand.py"
        cuda.write_text("from torch.utils.cpp_extension import load_inline\ndef custom_kernel(A):\n    return A\n")
        sched.announce("triton", cand(tmp_path, "c1"), [(2, 32)])
        sched.announce("cuda", cuda, [(2, 32)])
        triton_proc = sched._jobs["triton"].units[0].proc
        cuda_proc = sched._jobs["cuda"].units[0].proc
        sched.pause()
        assert _stopped(triton_proc.pid)
        assert not _stopped(cuda_proc.pid, want=False)
        assert sched.wait("cuda", timeout=30).state == "done"  # it finished while the other stood still
        assert triton_proc.poll() is None
        sched.resume()
        assert sched.wait("triton", timeout=30).state == "done"
    finally:
        sched.close()


def test_is_ready_tells_which_announced_candidates_would_not_wait(tmp_path):
    compiler = FakeCompiler(delay=0.5)
    sched = ahead(tmp_path, compiler, parallel=2, max_shards=2)
    try:
        sched.announce("c1", cand(tmp_path, "c1"), [(2, 32), (2, 64)])
        sched.announce("c2", cand(tmp_path, "c2"), [(2, 32)])  # behind c1's two processes
        assert not sched.is_ready("c1") and not sched.is_ready("c2")
        assert sched.is_ready("never-announced")  # nothing to wait for
        deadline = time.monotonic() + 20
        while not sched.is_ready("c1") and time.monotonic() < deadline:
            time.sleep(0.01)
        assert sched.is_ready("c1") and sched.is_ready("c1", {64})
        assert not sched.is_ready("c2")  # started only as c1's processes finished
        assert sched.wait("c2", timeout=30).state == "done"
    finally:
        sched.close()


def test_a_screened_candidate_is_ready_once_its_screen_sizes_are_compiled(tmp_path):
    compiler = FakeCompiler(delay=0.4)
    sched = ahead(tmp_path, compiler, parallel=1)
    try:
        sched.announce("c1", cand(tmp_path, "c1"), [(2, 32), (2, 64), (2, 128)], first={64})
        deadline = time.monotonic() + 20
        while not sched.is_ready("c1", {64}) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert sched.is_ready("c1", {64}) and not sched.is_ready("c1")
    finally:
        sched.close()


def test_the_evaluator_starts_a_compiled_candidate_before_the_head_of_its_queue():
    from search.engine.pool import next_in_queue

    queue = ["c5", "c6", "c7"]
    assert next_in_queue(queue, {"c7", "c6"}, head_waited_s=3, head_limit_s=240) == 1
    assert next_in_queue(queue, set(), head_waited_s=3, head_limit_s=240) == 0  # none ready: the head
    assert next_in_queue(queue, {"c5", "c7"}, head_waited_s=3, head_limit_s=240) == 0
    # A head that waited its whole case timeout goes next even if others are ready: no one starves.
    assert next_in_queue(queue, {"c7"}, head_waited_s=241, head_limit_s=240) == 0


def test_a_family_that_compiled_many_kernels_splits_the_next_childs_compile_over_more_processes(tmp_path):
    compiler = FakeCompiler(delay=0.2, kernels_at={4096: 13, 512: 2})
    sched = ahead(tmp_path, compiler, parallel=12)  # at most 12 // 3 = 4 processes per group
    shapes = [(2, 4096), (640, 512), (1, 4096)]
    every = [(1, 4096), (2, 4096), (640, 512)]  # what each process runs: all of them, largest n first
    try:
        assert sched.costs.shards_for("lookahead", shapes) == 2  # nothing known yet: one per size n
        sched.announce("c1", cand(tmp_path, "c1"), shapes, kind="lookahead")
        first = sched.wait("c1", timeout=30)
        assert first.state == "done" and first.kernels_compiled == 15  # the shares add up
        assert [(c["shard"], c["shapes"]) for c in compiler.calls] == [((0, 2), every), ((1, 2), every)]
        assert sched.costs.shards_for("lookahead", shapes) == 4  # 15 kernels, about 4 per process, capped at 4
        assert sched.costs.shards_for("blocked", shapes) == 2 and sched.costs.shards_for("lookahead", shapes[:1]) == 1
        compiler.calls.clear()
        sched.announce("c2", cand(tmp_path, "c2"), shapes, kind="lookahead")
        assert not sched.is_ready("c2", {512})
        second = sched.wait("c2", timeout=30)
        assert second.state == "done" and second.kernels_compiled == 15
        assert [(c["shard"], c["shapes"]) for c in compiler.calls] == [((i, 4), every) for i in range(4)]
        assert len({c["report"] for c in compiler.calls}) == 4  # one report each
        assert sched.costs.shards_for("lookahead", shapes) == 4  # the shares' sum is learned, not one share
        compiler.calls.clear()
        sched.announce("c3", cand(tmp_path, "c3"), shapes, kind="blocked")  # another family: nothing known
        assert sched.wait("c3", timeout=30).state == "done"
        assert [c["shard"] for c in compiler.calls] == [(0, 2), (1, 2)]
    finally:
        sched.close()


def test_a_failed_split_compile_fails_the_candidate_and_the_next_one_goes_unsplit(tmp_path):
    compiler = FakeCompiler(delay=0.1, kernels_at={2048: 9})
    sched = ahead(tmp_path, compiler, parallel=9)
    shapes = [(8, 2048)]
    try:
        sched.announce("c1", cand(tmp_path, "c1"), shapes, kind="lookahead")
        assert sched.wait("c1", timeout=30).state == "done" and sched.costs.shards_for("lookahead", shapes) == 3
        compiler.ok = False
        sched.announce("c2", cand(tmp_path, "c2"), shapes, kind="lookahead")
        got = sched.wait("c2", timeout=30)
        assert got.state == "failed" and "fake compile error" in got.error
        assert sched.costs.shards_for("lookahead", shapes) == 1  # maybe the split itself: try it whole
        compiler.ok = True
        sched.announce("c3", cand(tmp_path, "c3"), shapes, kind="lookahead")
        assert sched.wait("c3", timeout=30).state == "done"
        assert compiler.calls[-1]["shard"] == (0, 1) and sched.costs.shards_for("lookahead", shapes) == 3
    finally:
        sched.close()


def test_once_costs_are_known_a_cheap_candidate_compiles_before_an_expensive_one_announced_first(tmp_path):
    compiler = FakeCompiler(delay=0.05, delays={"big1": 0.6, "big2": 0.6, "blocker": 0.4})
    sched = ahead(tmp_path, compiler, parallel=1)
    try:
        for cid, kind in (("big1", "lookahead"), ("small1", "householder")):
            sched.announce(cid, cand(tmp_path, cid), [(2, 32)], kind=kind)
        assert sched.wait("big1", 30).state == "done" and sched.wait("small1", 30).state == "done"
        sizes = frozenset({32})
        assert sched.costs.expected_cost("lookahead", sizes) > sched.costs.expected_cost("householder", sizes) > 0
        assert sched.costs.expected_cost("blocked", sizes) == 0  # never seen: it would go first
        sched.announce("blocker", cand(tmp_path, "blocker"), [(2, 32)], kind="lookahead")  # takes the one CPU
        sched.announce("big2", cand(tmp_path, "big2"), [(2, 32)], kind="lookahead")
        sched.announce("small2", cand(tmp_path, "small2"), [(2, 32)], kind="householder")
        for cid in ("blocker", "big2", "small2"):
            assert sched.wait(cid, 30).state == "done"
        order = [c["candidate"].stem for c in compiler.calls]
        assert order == ["big1", "small1", "blocker", "small2", "big2"]  # the cheap one jumped the line
    finally:
        sched.close()


def test_the_rest_of_a_screened_child_compiles_after_every_first_stage(tmp_path):
    compiler = FakeCompiler(delay=0.2, delays={"c0": 0.5})
    sched = ahead(tmp_path, compiler, parallel=1)
    try:
        sched.announce("c0", cand(tmp_path, "c0"), [(2, 16)])  # occupies the CPU meanwhile
        sched.announce("c1", cand(tmp_path, "c1"), [(4, 32), (2, 64)], first={32})
        sched.announce("c2", cand(tmp_path, "c2"), [(2, 128)])
        assert sched.room() == 0  # one CPU, busy, and first stages waiting
        deadline = time.monotonic() + 30  # nobody waits for any of them: the scheduler's own order
        while (sched.running() or sched.queued()) and time.monotonic() < deadline:
            time.sleep(0.02)
        started = [(c["candidate"].stem, c["shapes"]) for c in compiler.calls]
        assert started == [("c0", [(2, 16)]), ("c1", [(4, 32)]), ("c2", [(2, 128)]), ("c1", [(2, 64)])]
    finally:
        sched.close()


def test_room_counts_idle_compile_processes_and_ignores_speculative_work(tmp_path):
    compiler = FakeCompiler(delay=0.6)
    sched = ahead(tmp_path, compiler, parallel=3, max_shards=1)
    try:
        assert sched.room() == 3
        sched.announce("c1", cand(tmp_path, "c1"), [(2, 32)])
        assert sched.room() == 2  # one running
        sched.pause()  # nothing new starts: what waits is counted as it would be
        sched.announce("c2", cand(tmp_path, "c2"), [(2, 32), (2, 64)], first={32})
        # c2's screen sizes wait and count; its rest is not counted (it only fills idle CPUs)
        assert sched.room() == 1
        sched.announce("c3", cand(tmp_path, "c3"), [(2, 32)])
        assert sched.room() == 0
        sched.resume()
        for cid in ("c1", "c2", "c3"):
            assert sched.wait(cid, 30).state == "done"
        assert sched.room() == 3
        sched.close()
        assert sched.room() == 0  # closed: takes nothing
    finally:
        sched.close()


def test_shards_follow_the_kernels_the_last_compile_had_to_compile_not_those_it_found_cached(tmp_path):
    compiler = FakeCompiler(delay=0.05, kernels_at={512: 12})
    sched = ahead(tmp_path, compiler, parallel=12)
    shapes = [(640, 512)]
    try:
        sched.announce("c1", cand(tmp_path, "c1"), shapes, kind="lookahead")
        assert sched.wait("c1", 30).kernels_compiled == 12 and sched.costs.shards_for("lookahead", shapes) == 4  # capped
        compiler.cached = 2  # each of the 4 processes finds 2 of its 3 kernels compiled already
        sched.announce("c2", cand(tmp_path, "c2"), shapes, kind="lookahead")
        got = sched.wait("c2", 30)
        assert got.kernels_compiled == 4 and got.kernels_cached == 8
        assert sched.costs.shards_for("lookahead", shapes) == 2  # a local step's child: little to compile
    finally:
        sched.close()


def test_a_worker_times_long_cases_with_compiles_going_and_stops_them_for_the_short_ones(tmp_path, monkeypatch):
    import search.evaluate.worker as worker_module
    from kernels.families import get_family
    from kernels.suites import Case, get_suite
    from population.models import State
    from search.evaluate.worker import EvalRequest, Worker

    cache = tmp_path / "cache"
    compiler = FakeCompiler(delay=0.05)
    sched = CompileAhead(cache, tmp_path / "ahead", start=compiler.start, read=compiler.read, target="t",
                         poll_s=0.01)
    timed: list[tuple[list[str], bool]] = []
    real = worker_module.run_candidate

    def recording(job, hooks):
        if job.mode != "bench":
            return real(job, hooks)
        # Whether compiles stood still in each timed region (the job's turns stop them).
        turns, paused = hooks.turns, []
        real_acquire = turns.acquire

        def acquire() -> float:
            waited = real_acquire()
            paused.append(sched._paused)
            return waited

        turns.acquire = acquire
        report = real(job, hooks)
        assert paused and len(set(paused)) == 1 and not sched._paused  # every region alike, restarted after
        timed.append(([c.name for c in job.cases], paused[0]))
        return report

    monkeypatch.setattr(worker_module, "run_candidate", recording)
    worker = Worker(tmp_path / "work", {"TRITON_INTERPRET": "1", "TRITON_CACHE_DIR": str(cache)}, name="cpu0",
                    ahead=sched)
    family = get_family("householder_unblocked")
    long, short = Case(batch=2, n=8, cond=1, seed=5), Case(batch=3, n=4, cond=1, seed=6)

    def request(cid: str, pause_cases):
        return EvalRequest(candidate_id=cid, family=family.name, source=family.render(family.default_params()),
                           verify_suite="smoke", verify_cases=[c for c in get_suite("smoke") if c.n <= 2][:1],
                           bench_suite="custom", bench_cases=[long, short], device="cpu",
                           timing=TimingPolicy(min_reps=2, max_reps=2, max_seconds=0.1), pause_cases=pause_cases)

    try:
        out = worker.evaluate(request("c0000001", [short.name]))
        assert out.state is State.VERIFIED, out.reason
        assert timed == [([long.name], False), ([short.name], True)]  # long first, compiles going on
        assert [c.case for c in out.result.cases] == [long.name, short.name]  # one result, the request's order
        timed.clear()
        assert worker.evaluate(request("c0000002", None)).state is State.VERIFIED
        assert timed == [([long.name, short.name], True)]  # nothing known: every case with compiles stopped
        timed.clear()
        assert worker.evaluate(request("c0000003", [])).state is State.VERIFIED
        assert timed == [([long.name, short.name], False)]  # every case expected long
    finally:
        worker.close()
