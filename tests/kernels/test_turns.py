"""A bench job's turns on the device (``RunHooks(turns=...)``): the child asks its parent for
the device before each timed region and gives it back after, with real children on CPU."""

from __future__ import annotations

import time
from pathlib import Path

from kernels.families import BASELINE_PATH
from kernels.harness.hooks import RunHooks
from kernels.harness.job import CandidateJob
from kernels.harness.runner import run_candidate
from kernels.harness.settings import TimingPolicy
from kernels.suites import Case
from population.outcomes import CaseStatus

CASE = Case(batch=2, n=8, cond=1, seed=3, case="dense")


class RecordingTurns:
    """The parent's side, as a lane's gate gives it, slow to grant: each turn waits ``wait_s``."""

    def __init__(self, wait_s: float = 0.0) -> None:
        self.wait_s = wait_s
        self.events: list[str] = []
        self.held = False

    def acquire(self) -> float:
        assert not self.held, "a turn asked for while one is held"
        time.sleep(self.wait_s)
        self.held = True
        self.events.append("acquire")
        return self.wait_s

    def release(self) -> float:
        if self.held:
            self.held = False
            self.events.append("release")
        return 0.0


def test_each_timed_region_is_one_turn_and_waiting_for_turns_is_neither_timed_nor_budgeted():
    turns = RecordingTurns(wait_s=0.5)
    # max_seconds 2 and a standard error that never satisfies: the budget alone could stop the
    # timing, and the 8 regions (about 0.1 s of work each on a loaded 2-core machine) fit it only
    # if the 8 x 0.5 s spent waiting do not count (counted, it stops after the 4th).
    policy = TimingPolicy(warmup_calls=1, min_reps=2, max_reps=8, target_rel_stderr=1e-12, max_seconds=2.0)
    report = run_candidate(CandidateJob(BASELINE_PATH, (CASE,), mode="bench", device="cpu", policy=policy),
                           RunHooks(turns=turns))
    result = report.cases[0]
    assert result.status is CaseStatus.OK, result.error
    assert result.timing is not None and result.timing.count == 8
    assert turns.events == ["acquire", "release"] * 8 and not turns.held
    assert result.timing.max_ms < 400  # a 2x8x8 geqrf: the 500 ms waits are outside the regions


def test_without_turns_the_job_asks_for_none():
    report = run_candidate(CandidateJob(BASELINE_PATH, (CASE,), mode="bench", device="cpu",
                                        policy=TimingPolicy(warmup_calls=0, min_reps=2, max_reps=2)))
    assert report.cases[0].status is CaseStatus.OK


def test_a_child_that_dies_inside_a_timed_region_gives_its_turn_back(tmp_path: Path):
    candidate = tmp_path / "dies_when_timed.py"
    candidate.write_text(
        "import os\nimport torch\n\ncalls = 0\n\n\ndef custom_kernel(A):\n    global calls\n    calls += 1\n"
        "    if calls == 3:  # the warm-up, one timed region, then this one\n        os._exit(7)\n"
        "    return torch.geqrf(A)\n")
    turns = RecordingTurns()
    policy = TimingPolicy(warmup_calls=1, min_reps=5, max_reps=5)
    report = run_candidate(CandidateJob(candidate, (CASE,), mode="bench", device="cpu", policy=policy, gate=False),
                           RunHooks(turns=turns))
    result = report.cases[0]
    assert result.status is CaseStatus.CRASHED and "code 7" in (result.error or "")
    assert turns.events == ["acquire", "release", "acquire", "release"] and not turns.held
