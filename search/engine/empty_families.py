"""Families whose last proposal came back empty, passed over until something of theirs changes.

At 64 evaluators, after a few thousand evaluations, most proposals were of families that had
nothing to offer: their structures had used their trial budgets, their parents' neighbourhoods
were asked, their pairs' mixes drawn.  The loop tried them again for every free slot, 6 to 18
proposer calls per evaluation, each walking three operators to nothing (most of the driver's CPU
at 10,000 evaluations).  What a family can offer changes when one of its evaluations is told (a
new parent, a structure maturing, a structure's in-flight count going down), when one of its
children is queued or leaves the queue (an injected structure, an LLM child, a lost evaluation)
or when an engineer retires a structure: the loop's *stamp* of a family reads those.  A family
that came back empty is passed over while its stamp is unchanged, at most
``evaluation.skip_empty_families`` times in a row (0: never passed over).

This is a behaviour choice, not a cache: parents are drawn at random (a tournament, an island
drawn per proposal) and so are Optuna's points, so a second try might have found a child.  Hence
the limit: a family with nothing in flight (its stamp then never changes) is still tried every
so often, as it was on every free slot before.  The loop's end check (nothing left to propose,
nothing in flight) forgets every mark first, so that a run never stops on a family that was only
passed over.
"""

from __future__ import annotations

from typing import Callable, Hashable


class EmptyFamilies:
    def __init__(self, stamp: Callable[[str], Hashable], limit: int = 16) -> None:
        self.stamp = stamp  # what the family's offer depends on (see the module's docstring)
        self.limit = limit  # passes over in a row at most; 0: off
        self._marks: dict[str, list] = {}  # family -> [its stamp when it came back empty, passes since]
        self.passed_over = 0  # proposals not made because of a mark (for a tool's counters)

    def skip(self, family: str) -> bool:
        """Whether to pass ``family`` over now: it came back empty, nothing of it has changed since,
        and it has been passed over fewer than ``limit`` times since."""
        mark = self._marks.get(family)
        if mark is None:
            return False
        if mark[1] < self.limit and mark[0] == self.stamp(family):
            mark[1] += 1
            self.passed_over += 1
            return True
        del self._marks[family]  # changed, or passed over long enough: tried again
        return False

    def came_back_empty(self, family: str) -> None:
        if self.limit > 0:
            self._marks[family] = [self.stamp(family), 0]

    def forget(self) -> None:
        """Every family is tried again (before the loop decides that nothing is left to propose)."""
        self._marks.clear()
