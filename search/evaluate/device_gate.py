"""Timed calls own the GPU: a per-device readers-writer gate for one evaluator's lanes.

An evaluator runs up to ``evaluation.lanes`` evaluations at once, so that one lane's compile
wait, process starts and gate calls overlap another lane's GPU work.  What must never overlap a
timed call is anything else on its device: another process's kernels, or a new CUDA context (a
child process that starts creates one; an H200 run measured launch-bound cases 20-75% slower when
a child started during timing).  So everything a worker does on its device holds the gate:

- **exclusive**: each timed region of a bench-mode job (its L2 flush, the clock's calibration
  and a profiled call too: :class:`RegionTurns`), or with ``evaluation.timing_hold: job`` the
  whole job (its re-checks, the reference timed in the same child, duels, ``qrsearch recheck``,
  the timing child's start);
- **shared**: the rest of a bench job (its timing child's start, fresh inputs, warm-ups, the
  re-checks of timed outputs), the verify stage's gate calls (several children at once, several
  lanes at once), and every child's CUDA context creation (a spare's imports before it need no
  hold: :mod:`search.evaluate.children`).

With holds per region, two lanes' bench jobs interleave: lane A's timed region, then lane B's
(A's next shared hold waits behind B's waiting exclusive one), then both lanes' re-checks at
once, whose host-bound launches leave the device idle when one runs alone.

The gate prefers writers: once a bench job waits, no new shared hold is granted, so a stream of
gate calls and process starts cannot starve it; waiting bench jobs go in arrival order.  A shared
hold may add another shared hold to itself without waiting (:meth:`Hold.share`): a child that a
stage starts joins that stage, and the stage's end does not end the child's start.

There are no timeouts here on purpose: every holder is bounded by the harness's own limits (a
case that hangs is killed at its case timeout, a child not warm within its start-up limit is
closed), and a gate that gave up waiting would let exactly the overlap it exists to prevent.
What could still deadlock is a thread waiting for the gate while it holds a hold it waited for
(a writer-preferring gate cannot grant a reader's second hold while a writer waits for the
first): that is refused with an error rather than left to hang.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Callable, Literal

Kind = Literal["shared", "exclusive"]


@dataclass(frozen=True)
class GateState:
    """The gate at one moment (for tests and for a worker's own checks)."""

    readers: int  # shared holds now
    writer: bool  # an exclusive hold now
    writers_waiting: int
    readers_waiting: int


class Hold:
    """One hold on a :class:`DeviceGate`, released once (a second release does nothing).

    A context manager: ``with gate.exclusive() as hold: ...`` releases it however the block ends.
    ``waited_s`` is how long it took to get (0 for :meth:`share` and :meth:`DeviceGate.try_shared`)."""

    def __init__(self, gate: "DeviceGate", kind: Kind, waited_s: float, owner: int | None) -> None:
        self._gate = gate
        self.kind: Kind = kind
        self.waited_s = waited_s
        self._owner = owner  # the thread that waited for it (None: it never waited)
        self._held = True

    @property
    def held(self) -> bool:
        return self._held

    def share(self) -> "Hold":
        """Another shared hold, granted at once because this one is held (no writer can be in):
        what a stage gives a child process it starts, so the child's start stays covered after
        the stage ends.  Only a shared hold can share: nothing may start during a timed job."""
        if self.kind != "shared":
            raise RuntimeError("an exclusive hold cannot share: nothing else may start while a job is timed")
        return self._gate._join(self)

    def release(self) -> None:
        self._gate._release(self)

    def __enter__(self) -> "Hold":
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"Hold({self.kind}, held={self._held})"


class DeviceGate:
    """A writer-preferring readers-writer gate (threading-based; see the module docstring)."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._readers = 0
        self._writer = False
        self._writers_waiting = 0
        self._readers_waiting = 0
        self._next_ticket = 0  # waiting writers are served in ticket order
        self._serving = 0
        self._skipped: set[int] = set()  # tickets of writers that left the line before their turn
        self._waited: dict[int, int] = {}  # thread id -> holds it waited for and still holds

    # --- taking ----------------------------------------------------------------------------

    def shared(self) -> Hold:
        """A shared hold: waits while a bench job runs or waits for the gate."""
        hold = self._wait_shared(None)
        assert hold is not None  # nothing to cancel the wait
        return hold

    def shared_unless(self, cancel: threading.Event, poll_s: float = 0.05) -> Hold | None:
        """A shared hold as :meth:`shared` grants it, or None once ``cancel`` is set (checked at
        least every ``poll_s``): what a spare waits with before creating its context, so that a
        caller who claims it can start it under its own hold instead."""
        return self._wait_shared(cancel, poll_s)

    def _wait_shared(self, cancel: threading.Event | None, poll_s: float = 0.05) -> Hold | None:
        me = self._check_not_holding("a shared hold")
        began = time.monotonic()
        with self._cond:
            self._readers_waiting += 1
            try:
                while self._writer or self._writers_waiting:
                    if cancel is None:
                        self._cond.wait()
                        continue
                    if cancel.is_set():
                        return None
                    self._cond.wait(poll_s)
                if cancel is not None and cancel.is_set():
                    return None
            finally:
                self._readers_waiting -= 1
            self._readers += 1
            self._waited[me] = self._waited.get(me, 0) + 1
        return Hold(self, "shared", time.monotonic() - began, me)

    def try_shared(self) -> Hold | None:
        """A shared hold if one is granted now (no bench job runs or waits), else None; never
        waits, so a thread that holds the gate may ask."""
        with self._cond:
            if self._writer or self._writers_waiting:
                return None
            self._readers += 1
        return Hold(self, "shared", 0.0, None)

    def exclusive(self) -> Hold:
        """The exclusive hold: waits until no shared hold is left and every bench job that asked
        earlier is done; shared holds asked for meanwhile wait behind it."""
        me = self._check_not_holding("the exclusive hold")
        began = time.monotonic()
        with self._cond:
            ticket = self._next_ticket
            self._next_ticket += 1
            self._writers_waiting += 1
            try:
                while self._writer or self._readers or ticket != self._serving:
                    self._cond.wait()
            except BaseException:
                # Interrupted while waiting (KeyboardInterrupt in the waiting thread): give up the
                # place in line without blocking the writers behind it or the readers.
                self._writers_waiting -= 1
                self._skip_ticket(ticket)
                self._cond.notify_all()
                raise
            self._writers_waiting -= 1
            self._writer = True
            self._waited[me] = self._waited.get(me, 0) + 1
        return Hold(self, "exclusive", time.monotonic() - began, me)

    def state(self) -> GateState:
        with self._cond:
            return GateState(readers=self._readers, writer=self._writer, writers_waiting=self._writers_waiting,
                             readers_waiting=self._readers_waiting)

    # --- internals -------------------------------------------------------------------------

    def _check_not_holding(self, what: str) -> int:
        me = threading.get_ident()
        with self._cond:
            if self._waited.get(me, 0):
                raise RuntimeError(f"this thread already holds the device gate; waiting for {what} could "
                                   "deadlock (a waiting bench job blocks a second shared hold)")
        return me

    def _skip_ticket(self, ticket: int) -> None:
        """A writer left the line: tickets are served in order, so a skipped one is remembered
        until its turn comes (then passed over)."""
        self._skipped.add(ticket)
        self._advance_locked()

    def _advance_locked(self) -> None:
        while self._serving in self._skipped:
            self._skipped.discard(self._serving)
            self._serving += 1

    def _join(self, hold: Hold) -> Hold:
        with self._cond:
            if not hold.held:
                raise RuntimeError("a released hold cannot share")
            self._readers += 1  # a reader is in, so no writer is: nothing to wait for
        return Hold(self, "shared", 0.0, None)

    def _release(self, hold: Hold) -> None:
        with self._cond:
            if not hold._held:
                return
            hold._held = False
            if hold.kind == "exclusive":
                self._writer = False
                self._serving += 1
                self._advance_locked()
            else:
                self._readers -= 1
            if hold._owner is not None:
                left = self._waited.get(hold._owner, 0) - 1
                if left > 0:
                    self._waited[hold._owner] = left
                else:
                    self._waited.pop(hold._owner, None)
            # Everyone re-checks: a writer waits for readers == 0, readers for no writer, and the
            # next writer for its ticket; one notify_all per release cannot lose a wakeup.
            self._cond.notify_all()


class RegionTurns:
    """A bench job's turns on a gate (:class:`kernels.harness.hooks.Turns`): it holds the gate
    shared, and exclusively for each timed region its child asks for.

    Between two regions the shared hold is asked for anew rather than downgraded: a lane
    waiting for its own region then goes first, so the two lanes' regions come back to back
    and their re-checks run together after them.  ``on_acquire`` runs once the exclusive hold
    is granted, ``on_release`` before it is given back (the compile-ahead pause: only the
    exclusive holder may stop and restart compiles).  ``hold`` is the current hold, for children
    started under it; :meth:`close` releases it."""

    def __init__(self, gate: DeviceGate, hold: Hold, on_acquire: Callable[[], None] | None = None,
                 on_release: Callable[[], None] | None = None) -> None:
        if hold.kind != "shared" or not hold.held:
            raise RuntimeError("region turns start from a held shared hold")
        self._gate = gate
        self.hold = hold
        self._on_acquire = on_acquire
        self._on_release = on_release
        self.waited_s = 0.0
        self.regions = 0

    def acquire(self) -> float:
        if self.hold.kind == "exclusive" and self.hold.held:
            return 0.0
        self.hold.release()
        self.hold = self._gate.exclusive()
        self.regions += 1
        if self._on_acquire is not None:
            self._on_acquire()
        self.waited_s += self.hold.waited_s
        return self.hold.waited_s

    def release(self) -> float:
        if self.hold.kind != "exclusive" or not self.hold.held:
            return 0.0
        try:
            if self._on_release is not None:
                self._on_release()
        finally:
            self.hold.release()
            self.hold = self._gate.shared()
        self.waited_s += self.hold.waited_s
        return self.hold.waited_s

    def close(self) -> None:
        self.hold.release()
