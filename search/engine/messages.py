"""What an evaluator is asked and what it answers: the messages between the loop, the pool and
the worker (plain pydantic data: the pool Protocol and its fakes need nothing of the worker).

A request carries the candidate's source (Triton kernels cannot be pickled), the cases, and the
run config's ``evaluation.timing`` and ``evaluation.limits`` as they are."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from kernels.harness.settings import RunLimits, TimingPolicy
from kernels.suites import Case
from population.models import EvalResult, State
from search.engine.cascade import ScreenPlan


class EvalRequest(BaseModel):
    # Unknown fields are errors: a misspelt or retired setting must not be dropped silently.
    model_config = ConfigDict(frozen=True, extra="forbid")

    candidate_id: str
    family: str
    source: str
    verify_suite: str
    verify_cases: list[Case]
    bench_suite: str
    bench_cases: list[Case]
    device: Literal["auto", "cuda", "cpu", "simulated"] = "auto"
    # The run config's ``evaluation.timing`` and ``evaluation.limits``, handed to the harness as they are.
    timing: TimingPolicy = TimingPolicy()
    limits: RunLimits = RunLimits()
    profile: bool = False
    verify_processes: int = Field(1, ge=1)
    fast_gates: bool = False  # bench-case gate calls checked with the fast float64 Q
    screen: ScreenPlan | None = None  # the cascade's timing screen (None: full bench at once)
    pause_compiles: bool = True  # stop compile-ahead processes while the bench stage times
    # With pause_compiles: the bench cases timed with compiles stopped (expected launch-bound);
    # the others are timed first, compiles going on.  None: all of them.
    pause_cases: list[str] | None = None
    reuse_processes: bool = True  # run it in the children that ran its structure's last candidate
    timing_hold: Literal["region", "job"] = "region"  # what a bench job holds the device alone for
    dispatched_at: float | None = None  # time.time() when the pool handed it to an evaluator
    # A re-check (``qrsearch recheck``): torch.geqrf's source, timed in the candidate's bench child.
    reference_source: str | None = None

    @property
    def deadline_s(self) -> float:
        """Past this, the driver treats the evaluation as lost (the harness limits each case).
        Bench cases count twice: their gate calls in the verify stage, then their timing.  An
        evaluator with several lanes gets this times its lanes (a lane may wait for the others)."""
        cases = len(self.verify_cases) + 2 * len(self.bench_cases)
        return 2 * self.limits.startup_timeout_s + cases * self.limits.case_timeout_s + 60


class EvalOutcome(BaseModel):
    model_config = ConfigDict(frozen=True)

    candidate_id: str
    state: State
    reason: str = ""
    result: EvalResult
    infra_error: str | None = None  # the evaluator, not the candidate, failed: re-queue, blame nobody
    worker: str = ""
    busy_s: float = Field(0.0, ge=0)
