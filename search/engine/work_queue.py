"""The driver's work in memory: pending candidates with their sources, and those sent to evaluators.

A candidate enters with the source it was made from (or read once, on resume) and is never
read back from the store on its way to an evaluator; the per-structure counts the proposer
needs come from here too.  The store stays the truth: the loop re-checks ``pending`` when it
marks a candidate running.
"""

from __future__ import annotations

import collections
import types
from typing import Iterator, Mapping, NamedTuple

from population.models import Candidate


class Queued(NamedTuple):
    candidate: Candidate
    source: str


class WorkQueue:
    def __init__(self) -> None:
        self.pending: collections.deque[Queued] = collections.deque()
        self.urgent = 0  # the leading pending items that were pushed to the front (they go before duels)
        self.sent: dict[str, Queued] = {}  # submitted to the pool, by id: what a tell or a loss needs of it
        # Pending plus sent per structure, kept as items come and go: counted afresh per proposal it
        # was O(in flight), a thousand candidates at 64 evaluators.
        self._counts: collections.Counter[str] = collections.Counter()
        self._families: collections.Counter[str] = collections.Counter()  # the same per family
        self._parents: collections.Counter[str] = collections.Counter()  # the same per parent (each of a child's)

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
        self._count(cand)

    def pop(self) -> Queued:
        self.urgent = max(0, self.urgent - 1)
        item = self.pending.popleft()
        self._uncount(item)
        return item

    def submitted(self, cand: Candidate, source: str) -> None:
        old = self.sent.get(cand.id)
        if old is not None:
            self._uncount(old)
        self.sent[cand.id] = Queued(cand, source)
        self._count(cand)

    def done(self, cid: str) -> Queued | None:
        """Forget a sent candidate (told, lost or withdrawn); None if it was not sent by this queue."""
        item = self.sent.pop(cid, None)
        if item is not None:
            self._uncount(item)
        return item

    def _count(self, cand: Candidate) -> None:
        self._counts[cand.fingerprint] += 1
        self._families[cand.family] += 1
        for parent in cand.parent_ids:
            self._parents[parent] += 1

    def _uncount(self, item: Queued) -> None:
        cand = item.candidate
        keys = [(self._counts, cand.fingerprint), (self._families, cand.family)]
        for counts, key in keys + [(self._parents, parent) for parent in cand.parent_ids]:
            counts[key] -= 1
            if counts[key] <= 0:
                del counts[key]

    def by_structure(self) -> Mapping[str, int]:
        """Pending plus sent (queued or running on an evaluator) candidates per structure
        fingerprint: a read-only view, current as the queue changes."""
        return types.MappingProxyType(self._counts)

    def by_parent(self) -> Mapping[str, int]:
        """Pending plus sent children per parent id (a crossover's counts for both parents)."""
        return types.MappingProxyType(self._parents)

    def by_family(self) -> Mapping[str, int]:
        """Pending plus sent candidates per family, as :meth:`by_structure` counts them."""
        return types.MappingProxyType(self._families)
