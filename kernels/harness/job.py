"""Jobs: what a caller asks :func:`kernels.harness.runner.run_candidate` to evaluate
(:class:`CandidateJob`), and what the runner hands one evaluation child (:class:`Job`, written to
a JSON file): the cases of the caller's job that are still to run."""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, replace
from pathlib import Path
from typing import Iterable, Literal

from pydantic import BaseModel, ConfigDict

from kernels.harness.settings import RunLimits, TimingPolicy
from kernels.suites import Case

Mode = Literal["verify", "bench"]


class Job(BaseModel):
    model_config = ConfigDict(frozen=True)

    candidate: str
    cases: list[Case]
    mode: Mode = "verify"
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


@dataclass(frozen=True)
class CandidateJob:
    """A candidate file to evaluate on ``cases``, how, and within which limits.

    ``mode``: "verify" checks each case's outputs; "bench" also times them (``policy``), and
    ``profile`` adds a profiled call.  ``gate=False`` (bench mode) skips each case's
    reference-verified first call because an earlier verify-mode job ran that exact call; every
    timed output is still verified.  ``fast_gate_cases`` names cases whose gate call is checked
    with the fast float64 Q.  ``reference`` (bench mode): a file timed on each case right after the
    candidate in the same child; its median becomes the case's ``baseline_ms``.

    ``fail_fast`` stops at the first case that does not pass; ``keep_going`` runs the cases after a
    crash or a hang in a fresh child (without it they are reported ``skipped``).  ``suite`` only
    names the cases in the report."""

    candidate: str | Path
    cases: tuple[Case, ...]
    _: KW_ONLY
    suite: str = "custom"
    mode: Mode = "verify"
    profile: bool = False
    device: str = "auto"
    limits: RunLimits = RunLimits()
    policy: TimingPolicy = TimingPolicy()
    keep_going: bool = False
    fail_fast: bool = False
    gate: bool = True
    fast_gate_cases: frozenset[str] = frozenset()
    reference: str | Path | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "cases", tuple(self.cases))

    def on(self, cases: Iterable[Case]) -> "CandidateJob":
        """The same job on other cases."""
        return replace(self, cases=tuple(cases))

    def child_job(self, indices: list[int], *, keep_alive: bool, turns: bool) -> Job:
        """What one child runs: the cases at ``indices``."""
        return Job(candidate=str(Path(self.candidate).resolve()), cases=[self.cases[i] for i in indices],
                   mode=self.mode, profile=self.profile, device=self.device, policy=self.policy,
                   fail_fast=self.fail_fast, gate=self.gate, fast_gate_cases=self.fast_gate_cases,
                   reference=None if self.reference is None else str(Path(self.reference).resolve()),
                   keep_alive=keep_alive, turns=turns and self.mode == "bench")
