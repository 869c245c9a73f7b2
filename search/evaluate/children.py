"""The evaluation processes of one worker: warm spares, children still starting, children kept
per structure, and the timing children; every context creation covered by the device gate.

Creating a CUDA context must never overlap a timed call (:mod:`search.evaluate.device_gate`).
Importing torch and Triton is host work, 1-3 s of a start.  So a spare starts in two steps: it
is spawned at once, on CPUs other than the timing ones, and imports with no hold (a bench job
may run meanwhile); once it says "loaded", its watcher thread waits for a shared hold, tells it
to create its context, puts it among the spares when it is warm and releases the hold.  A bench
job therefore waits only for contexts being created, not for imports (on an H200 a bench job waited
0.85 s per evaluation for spares that held the gate from spawn).  A child a stage starts directly
(:meth:`ChildPool.new_child`) starts whole under that stage's hold.

Thread-safe: the lanes of a worker take children at once.  A child is handed to one caller only:
every list it can be taken from is changed under one lock, and a spare still starting is
*claimed* by one caller, who waits for its watcher and lends it the caller's own hold for the
context (a caller that holds the gate and waited for the watcher to get its own shared hold
could wait behind a bench job that waits for the caller).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable

from kernels.harness.process import ChildProcess
from kernels.harness.settings import RunLimits
from search.evaluate.device_gate import DeviceGate, Hold


@dataclass(eq=False)
class _Starting:
    """A spare between spawn and warm (or death)."""

    child: ChildProcess
    done: threading.Event = field(default_factory=threading.Event)
    claimed: bool = False  # a caller waits for it: the watcher hands it over instead of keeping it
    lent: Hold | None = None  # the claiming caller's hold, which covers the context's creation
    stop_waiting: threading.Event = field(default_factory=threading.Event)  # claimed or closing


class ChildPool:
    """Spares, starting children and kept children of one worker (see the module docstring).

    ``per_lane`` children is what one evaluation takes at most (its verify children and its
    timing child), so the spares kept warm are ``lanes * per_lane``: two lanes that both start a
    new structure find their children started.  Children kept for a structure are capped the
    same way, at most ``max_kept_structures`` structures (each child holds a device context)."""

    def __init__(self, env: dict[str, str], gate: DeviceGate, lanes: int = 1,
                 timing_cpus: frozenset[int] | None = None, per_lane: int = 2) -> None:
        self.env = env
        self.gate = gate
        self.lanes = max(1, lanes)
        self.timing_cpus = timing_cpus
        self.per_lane = per_lane  # one verify child and the bench child until a request says more
        self.startup_timeout_s = RunLimits().startup_timeout_s  # the latest request's, for spares
        # Five families and the reference take turns: with 3 kept, most evaluations found their
        # structure's children closed and started new ones, and each start held the device gate
        # until warm (H200, 5 families: 0.56-1.44 s of settling per evaluation; 3 families: 0.03 s).
        # Six structures keep about 30 children, each with a device context (about 0.5 GB).
        self.max_kept_structures = 6
        # Spares import while a timed call may run: on the CPUs the timing child does not use.
        self.spare_cpus = _other_cpus(timing_cpus)
        self.reused = 0  # children handed a second or later job
        self._lock = threading.Lock()
        self._spares: list[ChildProcess] = []  # warm, waiting for a job
        self._starting: list[_Starting] = []
        self._kept: OrderedDict[str, list[ChildProcess]] = OrderedDict()  # gate children, most recent last
        self._kept_timing: OrderedDict[str, ChildProcess] = OrderedDict()  # pinned already
        self._to_close: list[ChildProcess] = []  # live children to close once a shared hold is granted
        self._closed = False
        self._closer_wake = threading.Condition(self._lock)  # wakes the closer thread
        self._close_wanted = False
        self._closer = threading.Thread(target=self._close_deferred_forever, daemon=True, name="closer")
        self._closer.start()

    @property
    def target(self) -> int:
        return self.lanes * self.per_lane

    def set_per_lane(self, per_lane: int) -> None:
        with self._lock:
            changed = per_lane != self.per_lane
            self.per_lane = per_lane
        if changed:
            self.top_up()

    def spares(self) -> list[ChildProcess]:
        """The warm spares now (a copy)."""
        with self._lock:
            return list(self._spares)

    def starting(self) -> list[ChildProcess]:
        """The spares still starting now (a copy)."""
        with self._lock:
            return [entry.child for entry in self._starting]

    # --- spares ----------------------------------------------------------------------------

    def top_up(self) -> None:
        """Start spares until ``target`` are warm or starting (extra or dead ones are closed).

        They are spawned now, even during a bench job: their imports are host work on other
        CPUs, and each one's context waits for a shared hold (:meth:`_watch`)."""
        self.discard(*self._prune())
        self._spawn_spares()

    def discard(self, *children: ChildProcess) -> None:
        """Close children no one needs.  A live one holds a device context, whose teardown is
        driver work on the device: it is closed under a shared hold, now if one is granted at
        once, else by the closer thread once a bench job is over."""
        live = [c for c in children if c.proc.poll() is None]
        for child in children:
            if child not in live:
                child.close()
        if not live:
            return
        hold = self.gate.try_shared()
        if hold is None:
            with self._lock:
                self._to_close += live
            self._wake_closer()
            return
        with hold:
            for child in live:
                child.close()

    def _wake_closer(self) -> None:
        with self._lock:
            self._close_wanted = True
            self._closer_wake.notify_all()

    def _prune(self) -> list[ChildProcess]:
        """Drop dead spares and those beyond the target; the ones to close."""
        with self._lock:
            alive: list[ChildProcess] = []
            extra: list[ChildProcess] = []
            for child in self._spares:
                if child.proc.poll() is None and len(alive) + len(self._starting) < self.target:
                    alive.append(child)
                else:
                    extra.append(child)
            self._spares = alive
        return extra

    def _spawn_spares(self) -> None:
        """Spawn what the target lacks, each with a watcher that starts it (see the module docstring)."""
        while True:
            with self._lock:
                if self._closed or len(self._spares) + len(self._starting) >= self.target:
                    return
                entry = _Starting(child=ChildProcess(env=self.env, staged=True))
                if self.spare_cpus:
                    entry.child.pin(self.spare_cpus)
                self._starting.append(entry)
                timeout = self.startup_timeout_s
            threading.Thread(target=self._watch, args=(entry, timeout), daemon=True, name="spare-start").start()

    def _context_hold(self, entry: _Starting) -> tuple[Hold | None, bool]:
        """What covers a loaded spare's context creation: (a hold to release after, covered?).

        A shared hold of the watcher's own, as soon as no bench job runs or waits; or, once a
        caller claims the spare, a share of the caller's shared hold, or the caller's exclusive
        hold itself (its timing child: nothing is timed until the caller has it)."""
        while True:
            with self._lock:
                lent, closed = entry.lent, self._closed
            if closed:
                return None, False
            if lent is not None:
                if lent.kind == "exclusive":
                    return None, lent.held
                return (lent.share(), True) if lent.held else (None, False)
            own = self.gate.shared_unless(entry.stop_waiting)
            if own is not None:
                return own, True
            # Claimed (or closing) while waiting: loop to use the caller's hold.

    def _watch(self, entry: _Starting, timeout: float) -> None:
        """Start a spare: wait for its imports, then create its context under a hold
        (:meth:`_context_hold`); it is then a spare (or handed to the caller who claimed it, or
        closed if it died or stalled), and only then is the hold released, so a bench job that
        gets the gate next finds it warm."""
        hold: Hold | None = None
        warm = False
        try:
            if entry.child.wait_loaded(timeout):
                hold, covered = self._context_hold(entry)
                if covered:
                    entry.child.init()
                    warm = entry.child.wait_warm(timeout)
        except Exception:  # a closed pipe (the pool closed it), a dead child's stdin: not warm
            warm = False
        close = False
        try:
            with self._lock:
                self._starting.remove(entry)
                if not entry.claimed:
                    if warm and not self._closed:
                        self._spares.append(entry.child)
                    else:
                        close = True
            if close:
                entry.child.close()
            entry.done.set()
        finally:
            if hold is not None:
                hold.release()

    def _close_deferred_forever(self) -> None:
        """Close what ``discard`` could not at once, as soon as a shared hold is granted (after
        the bench jobs that run or wait)."""
        while True:
            with self._lock:
                while not self._close_wanted and not self._closed:
                    self._closer_wake.wait()
                if self._closed:
                    return
                self._close_wanted = False
            hold = self.gate.shared()
            try:
                with self._lock:
                    closing, self._to_close = self._to_close, []
                for child in closing:
                    child.close()
            finally:
                hold.release()

    # --- handing children out --------------------------------------------------------------

    def new_child(self, hold: Hold, pinned: bool = False) -> ChildProcess:
        """A new child started under the caller's ``hold`` (its stage's: a verify stage's shared
        hold, or a bench job's exclusive one for its own timing child)."""
        if not hold.held:
            raise RuntimeError("a child may start only while its stage holds the device gate")
        return ChildProcess.pinned(self.timing_cpus, env=self.env) if pinned else ChildProcess(env=self.env)

    def take(self, hold: Hold, structure: str | None = None) -> ChildProcess:
        """A child kept for ``structure``, else the oldest warm spare, else a starting spare
        (waited for), else a new child under ``hold``."""
        while True:
            claimed: _Starting | None = None
            with self._lock:
                kept = self._kept.get(structure or "", [])
                while kept:
                    child = kept.pop()
                    if child.proc.poll() is None:
                        self.reused += 1
                        return child
                    child.close()
                while self._spares:
                    child = self._spares.pop(0)
                    if child.proc.poll() is None:
                        return child
                    child.close()
                claimed = next((e for e in self._starting if not e.claimed), None)
                if claimed is not None:
                    claimed.claimed = True
                    claimed.lent = hold
                    claimed.stop_waiting.set()
            if claimed is None:
                return self.new_child(hold)
            claimed.done.wait()  # bounded by the watcher's start-up timeout
            if claimed.child.warm and claimed.child.proc.poll() is None:
                return claimed.child
            claimed.child.close()

    def timing_child(self, hold: Hold, structure: str | None = None) -> ChildProcess:
        """The pinned child kept for ``structure``'s timing, else a spare pinned now, else a new
        pinned child, under the bench job's ``hold`` (exclusive with ``timing_hold: job``, else
        shared: its timed regions come later, each in a turn of the exclusive hold)."""
        with self._lock:
            kept = self._kept_timing.pop(structure, None) if structure else None
            if kept is not None and kept.proc.poll() is None:
                self.reused += 1
                return kept
        if kept is not None:
            kept.close()
        child = self.take(hold)
        if self.timing_cpus:
            child.pin(self.timing_cpus)
        return child

    def keeper(self, structure: str, timing: bool) -> Callable[[ChildProcess], None]:
        """Where a child that ended a job of ``structure`` cleanly goes: kept for the next one."""

        def keep(child: ChildProcess) -> None:
            closing: list[ChildProcess] = []
            with self._lock:
                if self._closed:
                    closing.append(child)
                elif timing:
                    old = self._kept_timing.pop(structure, None)
                    if old is not None and old is not child:
                        closing.append(old)
                    self._kept_timing[structure] = child
                else:
                    pool = self._kept.setdefault(structure, [])
                    pool.append(child)
                    self._kept.move_to_end(structure)
                    while len(pool) > self.target:
                        closing.append(pool.pop(0))
                closing += self._evict_locked()
            for old in closing:
                old.close()

        return keep

    def _evict_locked(self) -> list[ChildProcess]:
        """The children of the least recently used structures beyond ``max_kept_structures``."""
        out: list[ChildProcess] = []
        for pool in (self._kept, self._kept_timing):
            while len(pool) > self.max_kept_structures:
                _, old = pool.popitem(last=False)
                out += old if isinstance(old, list) else [old]
        return out

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._closer_wake.notify_all()
            kept = [c for pool in self._kept.values() for c in pool] + list(self._kept_timing.values())
            children = self._spares + kept + self._to_close
            self._to_close = []
            starting_entries = list(self._starting)
            starting = [e.child for e in starting_entries]
            self._spares = []
            self._kept.clear()
            self._kept_timing.clear()
        for child in children:
            child.close()
        for entry in starting_entries:
            entry.stop_waiting.set()
        for child in starting:
            # Killed, not closed: its watcher still reads its pipe, sees it end, closes it and
            # releases its hold (closing the pipe under the watcher could hand it a reused fd).
            child.kill()


def _other_cpus(timing_cpus: frozenset[int] | None) -> frozenset[int] | None:
    """This process's CPUs other than ``timing_cpus`` (None: no timing CPUs, or none left)."""
    if not timing_cpus:
        return None
    try:
        rest = frozenset(os.sched_getaffinity(0)) - timing_cpus
    except (AttributeError, OSError):
        return None
    return rest or None
