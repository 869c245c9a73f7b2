"""Children of one structure run through one process, and a failure is blamed only on the
candidate that caused it: a job that fails in a reused process runs again, whole, in a fresh one."""

from __future__ import annotations

from pathlib import Path

from kernels.harness.hooks import RunHooks
from kernels.harness.job import CandidateJob
from kernels.harness.process import ChildProcess
from kernels.harness.runner import run_candidate
from kernels.harness.timing import TimingPolicy
from kernels.params import structure_fingerprint
from kernels.suites import Case

CASES = [Case(batch=2, n=8, cond=1, seed=1), Case(batch=2, n=12, cond=0, seed=2)]
FAST = TimingPolicy(warmup_calls=1, min_reps=2, max_reps=3, max_seconds=0.5)

# One structure: the PARAMS values decide whether a child crashes, breaks the process for
# whoever runs next in it (replacing torch.geqrf), or leaves a thread running.  The source
# screen rejects files that patch torch or import threading, so the damage is done by a
# module it does not know (reuse_helper): reuse must be safe for whatever gets past it.
TEMPLATE = '''import os

import torch

from tests.kernels import reuse_helper

# qrsearch: params
PARAMS = {{"crash": {crash}, "poison": {poison}, "thread": {thread}}}
# qrsearch: end params

_geqrf = torch.geqrf  # its own, taken before anything replaces torch's


def custom_kernel(A):
    if PARAMS["crash"]:
        os._exit(7)
    out = _geqrf(A)
    if PARAMS["poison"]:
        reuse_helper.break_geqrf()
    if PARAMS["thread"]:
        reuse_helper.leave_a_thread()
    return out
'''


def child_file(tmp_path: Path, name: str, crash: int = 0, poison: int = 0, thread: int = 0) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(TEMPLATE.format(crash=crash, poison=poison, thread=thread))
    return path


class Pool:
    """The caller's side of reuse: children released after a clean job, handed out again."""

    def __init__(self) -> None:
        self.kept: list[ChildProcess] = []
        self.spawned: list[ChildProcess] = []
        self.fresh_spawns = 0

    def spawn(self) -> ChildProcess:
        if self.kept:
            return self.kept.pop()
        child = ChildProcess()
        self.spawned.append(child)
        return child

    def fresh(self) -> ChildProcess:
        self.fresh_spawns += 1
        child = ChildProcess()
        self.spawned.append(child)
        return child

    def release(self, child: ChildProcess) -> None:
        self.kept.append(child)

    def close(self) -> None:
        for child in self.spawned:
            child.close()

    @property
    def hooks(self) -> RunHooks:
        return RunHooks(spawn=self.spawn, fresh=self.fresh, release=self.release)


def run(pool: Pool, path: Path, mode: str = "verify"):
    return run_candidate(CandidateJob(path, tuple(CASES), mode=mode, device="cpu", policy=FAST, fail_fast=True),
                         pool.hooks)


def test_the_template_is_one_structure(tmp_path):
    sources = [child_file(tmp_path, n, **kw).read_text() for n, kw in
               [("a", {}), ("b", {"crash": 1}), ("c", {"poison": 1}), ("d", {"thread": 1})]]
    assert len({structure_fingerprint(s) for s in sources}) == 1


def test_a_crash_in_a_reused_process_is_blamed_on_the_child_that_crashed(tmp_path):
    pool = Pool()
    try:
        first = run(pool, child_file(tmp_path, "first"))
        assert first.ok and len(pool.kept) == 1  # clean: the process stays for the next child
        reused = pool.kept[0]
        crashing = run(pool, child_file(tmp_path, "crashing", crash=1))
        assert reused.jobs == 2  # the second child ran in the first one's process ...
        assert pool.fresh_spawns == 1  # ... crashed there, and ran again in a fresh process ...
        assert crashing.cases[0].status == "crashed"  # ... where it crashed again: it is to blame
        assert pool.kept == []
        third = run(pool, child_file(tmp_path, "third"))
        assert third.ok, [c.message for c in third.cases]  # nothing is blamed on the next child
        bench = run(pool, child_file(tmp_path, "fourth"), mode="bench")
        assert bench.ok and all(c.timing is not None for c in bench.cases)
        assert pool.kept and pool.kept[0].jobs == 2  # timing runs in a reused process too
    finally:
        pool.close()


def test_a_child_that_breaks_its_process_does_not_get_the_next_one_blamed(tmp_path):
    (tmp_path / "honest.py").write_text("import torch\n\n\ndef custom_kernel(A):\n    return torch.geqrf(A)\n")
    pool = Pool()
    try:
        poisoner = run(pool, child_file(tmp_path, "poisoner", poison=1))
        assert poisoner.ok and len(pool.kept) == 1  # it passed; what it broke shows only later
        honest = run(pool, tmp_path / "honest.py")
        assert pool.fresh_spawns == 1  # failed in the reused process, so it ran again fresh ...
        assert honest.ok, [c.message for c in honest.cases]  # ... and passed: not blamed
    finally:
        pool.close()


def test_a_process_left_with_a_running_thread_is_not_reused(tmp_path):
    pool = Pool()
    try:
        report = run(pool, child_file(tmp_path, "threads", thread=1))
        assert report.ok and pool.kept == []  # a thread could run work during the next timing
        assert all(c.proc.poll() is not None for c in pool.spawned)
    finally:
        pool.close()


def test_without_a_release_every_child_runs_in_its_own_process(tmp_path):
    spawned: list[ChildProcess] = []

    def spawn() -> ChildProcess:
        spawned.append(ChildProcess())
        return spawned[-1]

    for name in ("x", "y"):
        report = run_candidate(CandidateJob(child_file(tmp_path, name), tuple(CASES), device="cpu"), RunHooks(spawn=spawn))
        assert report.ok
    assert len(spawned) == 2 and all(c.jobs == 1 and c.proc.poll() is not None for c in spawned)


def test_a_cheat_caught_in_a_fresh_process_is_caught_after_a_reuse_too(tmp_path):
    """The re-run repeats the whole job, so a candidate honest for its first three calls still
    meets its fourth call on the same case as in a fresh process (a re-run of the failed case
    alone would see an honest first call)."""
    from kernels.suites import get_suite

    cases = [c for c in get_suite("smoke") if c.n == 8][:4]
    stale = Path(__file__).parent / "candidates" / "stale_when_timed.py"
    pool = Pool()
    try:
        assert run_candidate(CandidateJob(child_file(tmp_path, "honest"), tuple(cases), device="cpu"),
                             pool.hooks).ok and pool.kept
        fresh = run_candidate(CandidateJob(stale, tuple(cases), device="cpu"))
        after_reuse = run_candidate(CandidateJob(stale, tuple(cases), device="cpu"), pool.hooks)
        assert pool.fresh_spawns == 1
        assert [c.status for c in after_reuse.cases] == [c.status for c in fresh.cases]
        assert after_reuse.cases[3].status == "failed_verify" and all(c.ok for c in after_reuse.cases[:3])
    finally:
        pool.close()
