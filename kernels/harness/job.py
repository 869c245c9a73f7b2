"""The job a parent hands to an evaluation child (written to a JSON file)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from kernels.harness.settings import TimingPolicy
from kernels.suites import Case


class Job(BaseModel):
    model_config = ConfigDict(frozen=True)

    candidate: str
    cases: list[Case]
    mode: Literal["verify", "bench"] = "verify"
    profile: bool = False
    device: str = "auto"
    fail_fast: bool = False  # stop at the first case that does not pass
    # In bench mode, first gate each case with one reference-verified call on its own seed.
    # False only where that exact call already passed in an earlier verify-mode job.
    gate: bool = True
    # Cases (by name) whose verify-mode gate call is checked with the fast float64 Q
    # (kernels.verify.householder_q64) instead of the reference householder_product: the
    # search's bench-case gates, where the reference costs ~1 s per 640x512 batch on CUDA.
    fast_gate_cases: frozenset[str] = frozenset()
    policy: TimingPolicy = TimingPolicy()
    # Bench mode: a second file (torch.geqrf's) timed on the same cases right after the
    # candidate in this same process, so a re-check sees both under identical conditions.
    reference: str | None = None
    # The process may stay for another job after this one (the next candidate is of the same
    # structure); it does only when this one ended cleanly (kernels.harness.child._reusable).
    keep_alive: bool = False
    # Bench mode: ask the parent for the device before each timed region (and the clock's
    # calibration and the profiled call), and give it back after (kernels.harness.child.PipeTurn);
    # the rest of the job shares the device with the parent's other lanes.
    turns: bool = False
