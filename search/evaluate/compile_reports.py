"""The evaluators' compile reports, for :class:`search.evaluate.ray_pool.RayPool`: how many more
requests each could compile now (its room) and which of its queue is compiled, asked only where
the answer could change what the pool does, and collected without waiting."""

from __future__ import annotations

import time

import ray
from ray.exceptions import RayError

from search.evaluate.slots import Slot


class CompileReports:
    """RayPool's compile reports (a part of RayPool: the settings and slots are its own)."""

    lanes: int
    lookahead: int
    anticipate: bool
    room_every_s: float

    @property
    def _room_cap(self) -> int:
        raise NotImplementedError

    def _ready(self) -> list[Slot]:
        raise NotImplementedError

    def _wants_report(self, slot: Slot) -> bool:
        """Whether a compile report from the slot could change what the pool does: its room lets
        it hold more; with anticipation, while nothing it queues is known compiled, a report may
        name one (started without a question) or take one more request.  At 64 evaluators a
        report from each every half second was six actor calls an evaluation."""
        if self._room_cap > self.lookahead:
            return True
        return self.anticipate and slot.ready_ref is None and bool(slot.queue) and not slot.knows_compiled()

    def _ask_room(self) -> None:
        """Collect the evaluators' answers to "how many more could you compile now, and which of
        your queue is compiled?" and ask again every ``room_every_s`` (never waiting: the answer
        counts from the next call)."""
        if self._room_cap <= self.lookahead and not self.anticipate:
            return
        now = time.monotonic()
        slots = self._ready()
        asked = {s.room_ref: s for s in slots if s.room_ref is not None}
        if asked:  # one wait for all of them (one per slot was a round of calls per admission)
            answered, _ = ray.wait(list(asked), num_returns=len(asked), timeout=0)
            for ref in answered:
                slot = asked[ref]
                try:
                    room, compiled = ray.get(ref)
                    slot.room, slot.room_load = int(room), slot.room_ref_load
                    slot.compiled.update(compiled)
                except RayError:
                    slot.room = 0
                slot.room_ref = None
                self._anticipate(slot)
        for slot in slots:
            if slot.room_ref is None and now - slot.room_asked >= self.room_every_s and self._wants_report(slot):
                # Asked after the prefetches sent so far (one concurrency group, in order): the
                # answer counts the requests it holds now.
                queued = [r.candidate_id for r in slot.queue]
                slot.compiled.intersection_update(queued)  # started or withdrawn since: no longer asked about
                slot.room_ref, slot.room_ref_load = slot.actor.compile_state.remote(queued), slot.load
                slot.room_asked = now

    def _anticipate(self, slot: Slot) -> None:
        """After a compile report: while every lane runs and nothing queued is compiled, one more
        request (as a holding lane asks), so that its compile starts before a lane frees; nothing
        more once one is.  A lane that holds keeps its own question's count."""
        if self.anticipate and slot.ready_ref is None and slot.up and slot.running >= self.lanes:
            slot.starved_load = slot.load if slot.queue and not slot.knows_compiled() else None
