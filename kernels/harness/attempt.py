"""One job in one evaluation child: the child's messages (:mod:`kernels.harness.protocol`) read
until it ends the job, dies or hangs, each kind of message handled by its own method.

A crash (segfault, abort, CUDA error) or a hang (killed at the limit) becomes the current case's
failed result; the caller never goes down with it.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from kernels.harness.hooks import RunHooks
from kernels.harness.job import Job
from kernels.harness.process import ChildProcess
from kernels.harness.protocol import (GO, CaseFinished, CaseStarted, ChildMessage, Done, Fatal, JitCounts, Ready,
                                      TurnAsked, TurnGivenBack, Unreadable)
from kernels.harness.results import CaseResult
from kernels.harness.settings import RunLimits
from population.outcomes import CaseStatus


@dataclass
class ChildAttempt:
    """What one child made of a job; ``results`` by the caller's case index."""

    results: dict[int, CaseResult] = field(default_factory=dict)
    device: str = "unknown"
    device_name: str = "unknown"
    versions: dict[str, str] = field(default_factory=dict)
    stopped: bool = False  # the child ended before finishing its cases
    infra_error: str | None = None  # the child died or hung before it was ready
    startup_s: float = 0.0  # job handed over -> the child said it was ready
    jit_compiled: int = 0
    jit_cache_hits: int = 0

    @property
    def ready(self) -> bool:
        return self.device != "unknown"


def _tail_line(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return f": {lines[-1][:300]}" if lines else ""


def run_attempt(child: ChildProcess, job: Job, indices: list[int], limits: RunLimits, hooks: RunHooks) -> ChildAttempt:
    """Run ``job`` (the cases at ``indices`` of the caller's list) in ``child``.

    A child that ends the job ready for another goes to ``hooks.release``, any other is closed.
    The child's requests for turns go to ``hooks.turns`` (answered at once without it); waiting
    for one does not count against a case's time limit."""
    return _JobInChild(child, job, indices, limits, hooks).run()


class _JobInChild:
    def __init__(self, child: ChildProcess, job: Job, indices: list[int], limits: RunLimits,
                 hooks: RunHooks) -> None:
        self.child, self.job, self.indices, self.limits, self.hooks = child, job, indices, limits, hooks
        self.attempt = ChildAttempt()
        self.current: int | None = None  # the case running, by its index in the job
        self.phase = "starting the evaluation process"
        self.submitted = 0.0
        self.deadline = 0.0
        # Each handler returns whether the job is over.
        self._handlers: dict[type, Callable[[Any], bool]] = {
            Ready: self._ready, Fatal: self._fatal, CaseStarted: self._case_started,
            CaseFinished: self._case_finished, JitCounts: self._jit, TurnAsked: self._turn,
            TurnGivenBack: self._turn, Done: self._done,
        }

    def run(self) -> ChildAttempt:
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
            handle.write(self.job.model_dump_json())
            job_path = Path(handle.name)
        try:
            self.child.submit(job_path)
            self.submitted = time.monotonic()
            self.deadline = self.submitted + self.limits.startup_timeout_s
            while True:
                try:
                    message = self.child.next_message(self.deadline)
                except TimeoutError:
                    self._timed_out()
                    return self.attempt
                if message is None:
                    self._ended()
                    return self.attempt
                if self._handle(message):
                    return self.attempt
        finally:
            self._hand_back(job_path)

    def _handle(self, message: ChildMessage | Unreadable) -> bool:
        handler = self._handlers.get(type(message))
        return handler(message) if handler is not None else False  # others (loaded, warm, unreadable): none

    # --- the ends of a job that are no message ------------------------------------------

    def _timed_out(self) -> None:
        self.child.kill()
        attempt, current = self.attempt, self.current
        if not attempt.ready:
            attempt.infra_error = f"evaluation process not ready after {self.limits.startup_timeout_s:g} s"
        limit = self.limits.case_timeout_s if current is not None else self.limits.startup_timeout_s
        index = self.indices[current] if current is not None else self.indices[0]
        attempt.results[index] = CaseResult(
            case=self.job.cases[current or 0], status=CaseStatus.TIMEOUT,
            error=f"timed out after {limit:g} s while {self.phase}; process killed")
        attempt.stopped = True

    def _ended(self) -> None:
        """The child's stream ended before it said the job was done: it died."""
        attempt, child = self.attempt, self.child
        description = child.exit_description()
        if not attempt.ready:
            attempt.infra_error = f"evaluation process {description} before it was ready" + \
                _tail_line(child.output_tail())
        if self.current is not None:
            attempt.results[self.indices[self.current]] = CaseResult(
                case=self.job.cases[self.current], status=CaseStatus.CRASHED,
                error=f"evaluation process {description}{_tail_line(child.output_tail())}")
        elif not attempt.results:
            attempt.results[self.indices[0]] = CaseResult(
                case=self.job.cases[0], status=CaseStatus.CRASHED,
                error=f"evaluation process {description} while {self.phase}{_tail_line(child.output_tail())}")
        attempt.stopped = len(attempt.results) < len(self.indices)

    def _hand_back(self, job_path: Path) -> None:
        turns, child = self.hooks.turns, self.child
        if turns is not None:
            turns.release()  # a child that died or hung inside a timed region held the device
        if child.reusable and child.proc.poll() is None and self.hooks.release is not None:
            self.hooks.release(child)
        else:
            child.close()
        job_path.unlink(missing_ok=True)

    # --- the messages -------------------------------------------------------------------

    def _ready(self, message: Ready) -> bool:
        attempt = self.attempt
        attempt.startup_s = time.monotonic() - self.submitted
        attempt.device, attempt.device_name, attempt.versions = message.device, message.device_name, message.versions
        self.phase = "loading the candidate"
        return False

    def _fatal(self, message: Fatal) -> bool:
        for local, index in enumerate(self.indices):
            self.attempt.results[index] = CaseResult(case=self.job.cases[local], status=message.status,
                                                     error=message.error)
        return True

    def _case_started(self, message: CaseStarted) -> bool:
        self.current = message.index
        self.phase = f"running case {self.job.cases[message.index].name}"
        self.deadline = time.monotonic() + self.limits.case_timeout_s
        return False

    def _case_finished(self, message: CaseFinished) -> bool:
        index = self.indices[message.index]
        self.attempt.results[index] = message.result
        if self.hooks.on_case:
            self.hooks.on_case(index, message.result)
        self.current = None
        self.deadline = time.monotonic() + self.limits.case_timeout_s
        return False

    def _jit(self, message: JitCounts) -> bool:
        self.attempt.jit_compiled, self.attempt.jit_cache_hits = message.compiled, message.cache_hits
        return False

    def _turn(self, message: TurnAsked | TurnGivenBack) -> bool:
        turns = self.hooks.turns
        waited = 0.0
        if turns is not None:
            waited = turns.acquire() if isinstance(message, TurnAsked) else turns.release()
        self.deadline += waited
        try:
            self.child.tell(GO)
        except OSError:  # it died meanwhile: its end of stream comes next
            pass
        return False

    def _done(self, message: Done) -> bool:
        self.child.reusable = message.reusable and self.hooks.release is not None
        return True
