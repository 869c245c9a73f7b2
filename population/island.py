"""An island: a bounded set of verified candidates of one family, ranked by fitness."""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Set

from population.models import Candidate, State, id_sort_key

RankKey = tuple[float, tuple[int, str]]


def rank_key(candidate: Candidate) -> RankKey:
    # Ties on fitness go to the older candidate, so the order is total and reproducible.
    assert candidate.fitness_ms is not None
    return (candidate.fitness_ms, id_sort_key(candidate.id))


class Island:
    def __init__(self, family: str, index: int, capacity: int) -> None:
        self.family = family
        self.index = index
        self.capacity = capacity
        self._keys: list[RankKey] = []
        self._members: dict[str, Candidate] = {}

    def __len__(self) -> int:
        return len(self._members)

    def __contains__(self, cid: object) -> bool:
        return cid in self._members

    def __iter__(self) -> Iterator[Candidate]:
        return iter(self.ranked())

    def get(self, cid: str) -> Candidate | None:
        return self._members.get(cid)

    def add(self, candidate: Candidate) -> None:
        if candidate.state is not State.VERIFIED:
            raise ValueError(f"{candidate.id}: only verified candidates join an island")
        if candidate.family != self.family or candidate.island != self.index:
            raise ValueError(f"{candidate.id} belongs to {candidate.family}/{candidate.island}, "
                             f"not {self.family}/{self.index}")
        if candidate.id in self._members:
            raise ValueError(f"{candidate.id} is already on island {self.family}/{self.index}")
        bisect.insort(self._keys, rank_key(candidate))
        self._members[candidate.id] = candidate

    def remove(self, cid: str) -> Candidate:
        candidate = self._members.pop(cid)
        key = rank_key(candidate)
        del self._keys[bisect.bisect_left(self._keys, key)]
        return candidate

    def ranked(self) -> list[Candidate]:
        """Members best first (lowest geometric-mean time)."""
        return [self._members[k[1][1]] for k in self._keys]

    def best(self) -> Candidate | None:
        return self._members[self._keys[0][1][1]] if self._keys else None

    def contains_content(self, candidate: Candidate) -> bool:
        key = candidate.content_key
        return any(m.content_key == key for m in self._members.values())

    def enforce_capacity(self, exempt: Set[str]) -> list[Candidate]:
        """Evict the worst non-exempt members until the island fits its capacity.

        If only exempt members (champion, protected maturing bests) are left above
        capacity, the island stays over capacity: they must not be lost.
        """
        evicted: list[Candidate] = []
        pos = len(self._keys) - 1
        while len(self._members) > self.capacity and pos >= 0:
            cid = self._keys[pos][1][1]
            if cid not in exempt:
                evicted.append(self.remove(cid))
            pos -= 1
        return evicted
