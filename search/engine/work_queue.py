"""The driver's work in memory: pending candidates with their sources, and those sent to evaluators.

A candidate enters with the source it was made from (or read once, on resume) and is never
read back from the store on its way to an evaluator; the per-structure counts the proposer
needs come from here too.  The store stays the truth: the loop re-checks ``pending`` when it
marks a candidate running.
"""

from __future__ import annotations

import collections
from typing import Iterable, Iterator, NamedTuple

from population.models import Candidate


class Queued(NamedTuple):
    candidate: Candidate
    source: str


class WorkQueue:
    def __init__(self) -> None:
        self.pending: collections.deque[Queued] = collections.deque()
        self.urgent = 0  # the leading pending items that were pushed to the front (they go before duels)
        self.sent: dict[str, Queued] = {}  # submitted to the pool, by id: what a tell or a loss needs of it

    def __len__(self) -> int:
        return len(self.pending)

    def __iter__(self) -> Iterator[Queued]:
        return iter(self.pending)

    def push(self, cand: Candidate, source: str, front: bool = False) -> None:
        """Queue a pending candidate; ``front``: the next free evaluator takes it."""
        if front:
            self.pending.appendleft(Queued(cand, source))
            self.urgent += 1
        else:
            self.pending.append(Queued(cand, source))

    def pop(self) -> Queued:
        self.urgent = max(0, self.urgent - 1)
        return self.pending.popleft()

    def submitted(self, cand: Candidate, source: str) -> None:
        self.sent[cand.id] = Queued(cand, source)

    def done(self, cid: str) -> Queued | None:
        """Forget a sent candidate (told, lost or withdrawn); None if it was not sent by this queue."""
        return self.sent.pop(cid, None)

    def by_structure(self, inflight: Iterable[str]) -> dict[str, int]:
        """Pending plus in-flight (the pool's ids) candidates per structure fingerprint."""
        counts: collections.Counter[str] = collections.Counter(item.candidate.fingerprint for item in self.pending)
        for cid in inflight:
            sent = self.sent.get(cid)
            if sent is not None:  # a recheck's id is not a candidate's
                counts[sent.candidate.fingerprint] += 1
        return dict(counts)
