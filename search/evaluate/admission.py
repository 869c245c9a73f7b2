"""How many requests an evaluator may hold: the Ray pool's admission rule, apart from Ray.

An evaluator runs up to ``lanes`` requests and queues ``lookahead`` more, so that their kernels
compile ahead; while its compile processes would idle (its last answer to "how much compile room
do you have?") it may hold what it held then plus that room, at most ``room_lookahead`` queued;
while a lane holds for a compiled request (it was "starved"), one more than it held when it last
asked, at most ``max_lookahead`` queued.  Pure arithmetic on what the pool knows of a slot, so it
is tested without actors (tests/search/evaluate/test_pool_admission.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Admission:
    lanes: int = 1  # evaluations in flight per evaluator (0 reads as 1)
    lookahead: int = 0  # queued always
    max_lookahead: int = 0  # queued at most while a lane holds for a compiled request
    room_lookahead: int | None = None  # queued at most while compile CPUs have room (None: max_lookahead)

    @property
    def lanes_in_flight(self) -> int:
        return max(1, self.lanes)

    @property
    def room_cap(self) -> int:
        """The most an evaluator queues on its compile room's word."""
        return self.max_lookahead if self.room_lookahead is None else self.room_lookahead

    def capacity(self, room_load: int, room: int, starved_load: int | None) -> int:
        """Requests a slot may hold (running and queued), from its last room answer (it held
        ``room_load`` and had ``room`` idle compile processes) and, while starved, the load it had
        when it last asked for one more.  It changes only with an answer or a hold, never with a
        submit, so that free slots and submits agree."""
        lanes = self.lanes_in_flight
        held = starved_load + 1 if starved_load is not None else 0  # one more while starved
        return max(lanes + self.lookahead, min(lanes + self.room_cap, room_load + room),
                   min(lanes + self.max_lookahead, held))

    def free(self, load: int, room_load: int, room: int, starved_load: int | None) -> int:
        """Requests a slot that holds ``load`` (running and queued) takes now."""
        return max(0, self.capacity(room_load, room, starved_load) - load)
