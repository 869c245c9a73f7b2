"""Compile-ahead on a simulated GPU: its compile processes as slots in time.

Each candidate announced to the evaluator takes one slot for its compile's seconds (drawn
from the recorded compiles of its family).  A slot that comes free goes to the waiting compile
expected to be cheapest (its family's mean recorded compile, as the real scheduler orders by
its family's last compile), in announcement order among equals; a candidate whose evaluation
waits for its compile goes first; both as in :mod:`search.evaluate.compile_ahead`, so that a
householder child's half second does not wait behind lookahead_split's half minute.

Nothing runs: the schedule is worked out from the clock whenever it is asked about, so a
hundred simulated GPUs cost no thread each.  :meth:`CompileSlots.room` says what
``CompileAhead.room`` says, free slots less the compiles waiting for one, so the pool's
admission and its hold for a compiled candidate work as they do on a GPU.
"""

from __future__ import annotations

import heapq
import threading
import time
from dataclasses import dataclass
from typing import Callable


@dataclass
class _Job:
    announced: float
    seconds: float
    cost: float  # what the scheduler expects it to take: the cheapest expected goes first
    seq: int
    finish: float | None = None  # set once it has a slot


class CompileSlots:
    def __init__(self, slots: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.slots = max(1, slots)
        self.clock = clock
        self._free_at = [0.0] * self.slots  # a heap: when each slot is next free
        self._jobs: dict[str, _Job] = {}
        self._waiting: list[str] = []  # announced, no slot yet, in order
        self._seq = 0
        self._lock = threading.Lock()

    def announce(self, candidate_id: str, seconds: float, expected: float | None = None) -> bool:
        """Queue a compile of ``seconds`` that the scheduler expects to take ``expected`` (None:
        ``seconds``); False if the candidate is known already."""
        with self._lock:
            if candidate_id in self._jobs:
                return False
            self._seq += 1
            seconds = max(0.0, seconds)
            self._jobs[candidate_id] = _Job(announced=self.clock(), seconds=seconds,
                                            cost=seconds if expected is None else expected, seq=self._seq)
            self._waiting.append(candidate_id)
            self._advance(self.clock())
            return True

    def _advance(self, now: float) -> None:
        """Give each slot that came free by ``now`` to the compile the scheduler would have
        started then: the cheapest expected of those announced by the time the slot came free,
        else the next one announced (it found the slot free)."""
        while self._waiting and self._free_at[0] <= now:
            free = self._free_at[0]
            there = [cid for cid in self._waiting if self._jobs[cid].announced <= free]
            if there:
                pick = min(there, key=lambda cid: (self._jobs[cid].cost, self._jobs[cid].seq))
            else:
                pick = min(self._waiting, key=lambda cid: self._jobs[cid].seq)
            self._waiting.remove(pick)
            job = self._jobs[pick]
            start = max(heapq.heappop(self._free_at), job.announced)
            job.finish = start + job.seconds
            heapq.heappush(self._free_at, job.finish)

    def claim(self, candidate_id: str) -> float | None:
        """The candidate's evaluation starts: its compile's finish time (it takes the first slot to
        come free if it had none yet); None if it was never announced."""
        with self._lock:
            now = self.clock()
            self._advance(now)
            job = self._jobs.get(candidate_id)
            if job is None:
                return None
            if job.finish is None:
                self._waiting.remove(candidate_id)
                job.finish = max(heapq.heappop(self._free_at), now) + job.seconds
                heapq.heappush(self._free_at, job.finish)
            return job.finish

    def is_ready(self, candidate_id: str) -> bool:
        """True when an evaluation of the candidate would not wait: compiled, or never announced."""
        with self._lock:
            now = self.clock()
            self._advance(now)
            job = self._jobs.get(candidate_id)
            return job is None or (job.finish is not None and job.finish <= now)

    def room(self) -> int:
        with self._lock:
            now = self.clock()
            self._advance(now)
            free = sum(1 for t in self._free_at if t <= now)
            return max(0, free - len(self._waiting))

    def next_finish(self) -> float | None:
        """When the next compile running now ends (a waiting one then starts), or None."""
        with self._lock:
            now = self.clock()
            self._advance(now)
            later = [t for t in self._free_at if t > now]
            return min(later) if later else None

    def forget(self, candidate_id: str) -> None:
        """An evaluated candidate's compile is no longer needed to be known (its slot stays as scheduled)."""
        with self._lock:
            if candidate_id in self._waiting:
                self._waiting.remove(candidate_id)
            self._jobs.pop(candidate_id, None)
