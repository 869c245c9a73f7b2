"""What the search loop needs from evaluators, as a Protocol: Ray actors in
production (:mod:`search.evaluate.ray_pool`), fakes in tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Collection, Protocol, Sequence, Union

from search.engine.messages import EvalOutcome, EvalRequest


@dataclass(frozen=True)
class Completed:
    outcome: EvalOutcome


@dataclass(frozen=True)
class Lost:
    """The evaluator failed, not the candidate: the loop re-queues it."""

    candidate_id: str
    reason: str


PoolEvent = Union[Completed, Lost]


def event_id(event: PoolEvent) -> str:
    """The evaluation id an event is about (a candidate's, a re-check's or a duel's)."""
    return event.outcome.candidate_id if isinstance(event, Completed) else event.candidate_id


@dataclass(frozen=True)
class PoolStats:
    evaluators: int
    ready: int
    busy_fraction: dict[str, float] = field(default_factory=dict)
    restarts: int = 0

    @property
    def mean_busy(self) -> float:
        return sum(self.busy_fraction.values()) / len(self.busy_fraction) if self.busy_fraction else 0.0


class EvaluatorPool(Protocol):
    """Evaluators, each running up to its ``lanes`` requests at once with a queue behind them."""

    @property
    def size(self) -> int:
        """Evaluators (not lanes)."""
        ...

    def free_slots(self) -> int:
        """Requests the pool takes now: free lanes and queue places over every evaluator."""
        ...

    def submit(self, request: EvalRequest) -> None:
        """Start ``request`` on a free lane or queue it; RuntimeError without a free slot."""
        ...

    def poll(self, timeout: float) -> list[PoolEvent]:
        """What finished; an evaluator that dies loses every request in flight on it, each once."""
        ...

    def inflight(self) -> list[str]: ...

    def inflight_count(self) -> int:
        """``len(inflight())`` without building the list: the loop asks per proposal, and at 64
        evaluators a thousand requests are in flight (building the list was 9% of the driver)."""
        ...

    def withdraw_queued(self) -> list[str]:
        """Take back every request not started yet (queued behind a running one), as their ids:
        the loop returns them to pending when it stops."""
        ...

    def withdraw(self, candidate_ids: Collection[str]) -> list[str]:
        """Take back those of ``candidate_ids`` not started yet (queued behind a running one), as their
        ids: they never run and never come back from :meth:`poll`; the others run on."""
        ...

    def holding(self) -> bool:
        """True while an evaluator keeps a lane free because every request queued for it is still
        compiling: the request it asks for next should be cheap to compile."""
        ...

    def stats(self) -> PoolStats: ...

    def shutdown(self) -> None: ...


def queue_depths(evaluators: int, lookahead: int, max_lookahead: int, total: int | None) -> tuple[int, int]:
    """Per evaluator, (requests queued beyond its lanes, at most while its compile processes have
    room) when all evaluators together should queue about ``total``: with many evaluators each
    queues fewer, at least one (its next compile), so that the pool does not hold hundreds of
    children proposed before any of their siblings' results came back.  ``total`` None: the
    configured depths for every evaluator.  A lane that holds for a compiled request still asks
    for more, up to ``max_lookahead`` (RayPool's hold)."""
    if total is None or evaluators <= 0:
        return lookahead, max(lookahead, max_lookahead)
    share = max(1, -(-total // evaluators))
    depth = min(lookahead, share) if lookahead > 0 else 0
    return depth, max(depth, min(max(lookahead, max_lookahead), share))


def next_in_queue(queue: Sequence[str], compiled: Collection[str], head_waited_s: float, head_limit_s: float,
                  hold: bool = False) -> int | None:
    """Which of an evaluator's queued candidates to start: the first whose kernels are compiled,
    so that a long compile (a lookahead_split candidate: about 50 s in 5 processes) does not
    hold the evaluator while others are ready; when none is, the head, or with ``hold`` None
    (start nothing yet: a candidate queued meanwhile may be ready first); the head in any case
    once it has waited ``head_limit_s`` (its case timeout), so that no candidate waits for ever."""
    if head_waited_s > head_limit_s:
        return 0
    first = next((i for i, cid in enumerate(queue) if cid in compiled), None)
    if first is None and not hold:
        return 0
    return first
