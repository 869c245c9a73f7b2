"""How a caller of :func:`kernels.harness.runner.run_candidate` takes part in an evaluation: where
its child processes come from and go to, what it hears of each case, and when a timed region may
have the device."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

from kernels.harness.process import ChildProcess
from kernels.harness.results import CaseResult


class Turns(Protocol):
    """The parent's side of a bench job's turns (:class:`kernels.harness.child.PipeTurn`): the
    device to the job alone for each of its timed regions, shared between them."""

    def acquire(self) -> float:
        """Wait until the job may have the device alone; the seconds waited."""

    def release(self) -> float:
        """Share the device again (a no-op when not acquired); the seconds waited."""


@dataclass(frozen=True)
class RunHooks:
    """``spawn`` gives the child for each attempt, ``fresh`` the one for a re-run of a job that did
    not pass in a reused child (:func:`~kernels.harness.runner.run_candidate` says why).

    ``release`` lets children stay for another candidate of the same structure: each job asks its
    child to stay, and a child that ends a job cleanly goes to ``release`` (the caller's pool of
    reusable children); without it every child is closed after its job.

    ``on_case`` hears each case's result as it comes, with the case's index in the job.

    ``turns`` (bench mode): the device is the job's alone only for its timed regions, which it
    asks ``turns`` for; without it the caller owns the device throughout."""

    spawn: Callable[[], ChildProcess] = ChildProcess
    fresh: Callable[[], ChildProcess] = ChildProcess
    release: Callable[[ChildProcess], None] | None = None
    on_case: Callable[[int, CaseResult], None] | None = None
    turns: Turns | None = None
