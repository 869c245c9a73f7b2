"""The device gate: timed calls own the GPU (search/evaluate/device_gate.py).

Every test waits on events and on the gate's own state (who holds it, who waits), never on a
sleep, so a loaded CI machine makes them slower, not wrong.  ``LIMIT`` only turns a hang (the
bug these tests look for) into a failure."""

from __future__ import annotations

import threading
import time
from typing import Callable

import pytest

from search.evaluate.device_gate import DeviceGate, GateState, Hold

LIMIT = 30.0  # seconds before a wait that should have ended counts as a hang


def until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + LIMIT
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.001)


class Taker:
    """A thread that takes one hold, records when it got it, and keeps it until told."""

    def __init__(self, gate: DeviceGate, kind: str, log: list[str] | None = None, name: str = "") -> None:
        self.gate, self.kind, self.log, self.name = gate, kind, log, name or kind
        self.got = threading.Event()
        self.let_go = threading.Event()
        self.error: BaseException | None = None
        self.hold: Hold | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            hold = self.gate.exclusive() if self.kind == "exclusive" else self.gate.shared()
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            self.error = exc
            self.got.set()
            return
        with hold:
            self.hold = hold
            if self.log is not None:
                self.log.append(self.name)
            self.got.set()
            self.let_go.wait(LIMIT)

    def start(self) -> "Taker":
        self.thread.start()
        return self

    def finish(self) -> None:
        self.let_go.set()
        self.thread.join(LIMIT)
        assert not self.thread.is_alive(), f"{self.name} did not finish"
        assert self.error is None, self.error


def test_shared_holds_run_together():
    gate = DeviceGate()
    both_in = threading.Barrier(3, timeout=LIMIT)  # breaks (and the test fails) unless all three are in at once
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            with gate.shared():
                both_in.wait()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(LIMIT)
    assert errors == [] and gate.state() == GateState(readers=0, writer=False, writers_waiting=0, readers_waiting=0)


def test_an_exclusive_hold_keeps_readers_and_other_writers_out():
    gate = DeviceGate()
    held = gate.exclusive()
    reader, writer = Taker(gate, "shared").start(), Taker(gate, "exclusive").start()
    until(lambda: gate.state().readers_waiting == 1 and gate.state().writers_waiting == 1, "both wait")
    assert gate.try_shared() is None
    assert not reader.got.is_set() and not writer.got.is_set()
    held.release()
    # The waiting writer goes first (writer preference); the reader only after it.
    writer.got.wait(LIMIT)
    assert writer.got.is_set() and not reader.got.is_set()
    assert gate.state().writer and gate.state().readers == 0
    writer.finish()
    reader.got.wait(LIMIT)
    assert reader.got.is_set() and gate.state().readers == 1 and not gate.state().writer
    reader.finish()


def test_an_exclusive_hold_waits_for_every_shared_one():
    gate = DeviceGate()
    first, second = gate.shared(), gate.try_shared()
    assert second is not None
    writer = Taker(gate, "exclusive").start()
    until(lambda: gate.state().writers_waiting == 1, "the writer waits")
    first.release()
    assert gate.state().writers_waiting == 1 and not writer.got.is_set()  # one reader is still in
    second.release()
    writer.got.wait(LIMIT)
    assert writer.got.is_set() and gate.state().writer
    writer.finish()


def test_a_waiting_writer_is_not_starved_by_new_readers():
    """Writer preference: once a bench job waits, no new gate call gets in before it, although
    only shared holds are in; the readers that were in finish, then the writer, then the rest."""
    gate = DeviceGate()
    log: list[str] = []
    early = Taker(gate, "shared", log, "early").start()
    early.got.wait(LIMIT)
    writer = Taker(gate, "exclusive", log, "writer").start()
    until(lambda: gate.state().writers_waiting == 1, "the writer waits")
    late = [Taker(gate, "shared", log, f"late{i}").start() for i in range(3)]
    until(lambda: gate.state().readers_waiting == 3, "the late readers wait")
    assert gate.try_shared() is None  # a non-waiting ask is refused too
    early.finish()
    writer.got.wait(LIMIT)
    assert log == ["early", "writer"]
    writer.finish()
    for taker in late:
        taker.got.wait(LIMIT)
    assert log[:2] == ["early", "writer"] and sorted(log[2:]) == ["late0", "late1", "late2"]
    until(lambda: gate.state().readers == 3, "the late readers are in together")
    for taker in late:
        taker.finish()


def test_waiting_writers_are_served_in_arrival_order():
    gate = DeviceGate()
    log: list[str] = []
    held = gate.exclusive()
    writers = []
    for i in range(3):
        writers.append(Taker(gate, "exclusive", log, f"w{i}").start())
        until(lambda: gate.state().writers_waiting == i + 1, f"w{i} waits")
    held.release()
    for taker in writers:
        taker.got.wait(LIMIT)
        assert log[-1] == taker.name
        taker.finish()
    assert log == ["w0", "w1", "w2"]


def test_a_shared_hold_shares_at_once_even_while_a_writer_waits_and_the_writer_waits_for_the_share():
    """How a starting child stays covered: the stage that starts it shares its hold with it, so
    the child's start outlives the stage, and a bench job that waits meanwhile waits for both."""
    gate = DeviceGate()
    stage = gate.shared()
    writer = Taker(gate, "exclusive").start()
    until(lambda: gate.state().writers_waiting == 1, "the writer waits")
    child = stage.share()  # granted at once: a reader is in, so no writer can be
    assert child.held and child.kind == "shared" and child.waited_s == 0.0
    stage.release()
    assert not writer.got.is_set() and gate.state().readers == 1
    child.release()
    writer.got.wait(LIMIT)
    assert writer.got.is_set()
    with pytest.raises(RuntimeError, match="cannot share"):
        writer.hold.share()  # type: ignore[union-attr]  # nothing may start during a timed job
    writer.finish()
    with pytest.raises(RuntimeError, match="released"):
        stage.share()


def test_an_exception_releases_the_hold_and_a_second_release_does_nothing():
    gate = DeviceGate()
    with pytest.raises(ValueError):
        with gate.exclusive():
            raise ValueError("a bench job that blew up")
    with pytest.raises(ValueError):
        with gate.shared():
            raise ValueError("a gate call that blew up")
    assert gate.state() == GateState(readers=0, writer=False, writers_waiting=0, readers_waiting=0)
    hold = gate.shared()
    hold.release()
    hold.release()  # harmless: the count does not go below what is held
    other = gate.shared()
    assert gate.state().readers == 1
    other.release()
    with gate.exclusive() as again:
        assert again.held
    assert not again.held


def test_waiting_for_the_gate_while_holding_it_is_refused_instead_of_deadlocking():
    gate = DeviceGate()
    with gate.shared():
        with pytest.raises(RuntimeError, match="already holds"):
            gate.exclusive()
        with pytest.raises(RuntimeError, match="already holds"):
            gate.shared()  # with a writer waiting, this would wait for ever
        extra = gate.try_shared()  # never waits, so it may ask
        assert extra is not None
        extra.release()
    with gate.exclusive():
        with pytest.raises(RuntimeError, match="already holds"):
            gate.shared()
    # A hold taken here and released by another thread frees this thread to wait again.
    hold = gate.shared()
    releaser = threading.Thread(target=hold.release)
    releaser.start()
    releaser.join(LIMIT)
    with gate.exclusive():
        pass


def test_a_writer_interrupted_while_waiting_leaves_the_line_without_blocking_the_next():
    gate = DeviceGate()
    held = gate.shared()
    real_wait = gate._cond.wait
    interrupt: dict[str, int | None] = {"thread": None}

    def wait(timeout: float | None = None) -> bool:
        if threading.get_ident() == interrupt["thread"]:
            raise KeyboardInterrupt  # what a signal raises in a waiting thread
        return real_wait(timeout)

    gate._cond.wait = wait  # type: ignore[method-assign]
    first = Taker(gate, "exclusive", name="interrupted").start()
    until(lambda: gate.state().writers_waiting == 1, "the first writer waits")
    second = Taker(gate, "exclusive", name="second").start()
    until(lambda: gate.state().writers_waiting == 2, "the second writer waits behind it")
    reader = Taker(gate, "shared").start()
    until(lambda: gate.state().readers_waiting == 1, "a reader waits")
    interrupt["thread"] = first.thread.ident
    with gate._cond:
        gate._cond.notify_all()  # the first writer wakes, still has to wait, and its wait raises
    first.thread.join(LIMIT)
    assert isinstance(first.error, KeyboardInterrupt)
    assert gate.state().writers_waiting == 1 and not second.got.is_set()
    held.release()
    second.got.wait(LIMIT)
    assert second.got.is_set(), "the writer behind an interrupted one never got its turn"
    assert not reader.got.is_set()
    second.finish()
    reader.got.wait(LIMIT)
    assert reader.got.is_set()
    reader.finish()
    assert gate.state() == GateState(readers=0, writer=False, writers_waiting=0, readers_waiting=0)


def test_many_readers_and_writers_never_overlap_and_nobody_is_left_waiting():
    """No lost wakeups: threads take the gate over and over, each checking on entry what must hold
    (a writer alone, readers without a writer); every one finishes."""
    gate = DeviceGate()
    inside = {"readers": 0, "writers": 0}
    count = threading.Lock()
    broken: list[str] = []
    rounds = 300

    def reader() -> None:
        for _ in range(rounds):
            with gate.shared():
                with count:
                    inside["readers"] += 1
                    if inside["writers"]:
                        broken.append("a reader beside a writer")
                with count:
                    inside["readers"] -= 1

    def writer() -> None:
        for _ in range(rounds // 3):
            with gate.exclusive():
                with count:
                    inside["writers"] += 1
                    if inside["writers"] > 1 or inside["readers"]:
                        broken.append("a writer beside someone")
                with count:
                    inside["writers"] -= 1

    def sharer() -> None:  # a stage handing a share to a child that outlives it
        for _ in range(rounds // 3):
            stage = gate.shared()
            child = stage.share()
            stage.release()
            child.release()

    threads = [threading.Thread(target=f, daemon=True) for f in (reader, reader, reader, writer, writer, sharer)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(LIMIT * 4)
    assert not any(t.is_alive() for t in threads), f"a thread was left waiting: {gate.state()}"
    assert broken == []
    assert gate.state() == GateState(readers=0, writer=False, writers_waiting=0, readers_waiting=0)


def test_shared_unless_waits_behind_a_bench_job_and_gives_up_when_told() -> None:
    gate = DeviceGate()
    assert gate.shared_unless(threading.Event()) is not None  # free: granted at once
    gate = DeviceGate()
    bench = Taker(gate, "exclusive").start()
    bench.got.wait(LIMIT)
    cancel = threading.Event()
    got: list[object] = []
    waiter = threading.Thread(target=lambda: got.append(gate.shared_unless(cancel)))
    waiter.start()
    until(lambda: gate.state().readers_waiting == 1, "it waits behind the bench job")
    cancel.set()
    waiter.join(LIMIT)
    assert got == [None] and gate.state() == GateState(readers=0, writer=True, writers_waiting=0, readers_waiting=0)
    bench.finish()
    late = threading.Event()
    got.clear()
    again = Taker(gate, "exclusive").start()
    again.got.wait(LIMIT)
    waiter = threading.Thread(target=lambda: got.append(gate.shared_unless(late)))
    waiter.start()
    until(lambda: gate.state().readers_waiting == 1, "it waits again")
    again.finish()
    waiter.join(LIMIT)
    hold = got[0]
    assert hold is not None and gate.state().readers == 1
    hold.release()  # type: ignore[attr-defined]


def _lane_with_turns(gate: DeviceGate, regions: int, log: list[tuple[str, int, float, float]], lane: int,
                     region_s: float, recheck_s: float, pauses: list[tuple[str, bool]],
                     started: threading.Barrier) -> None:
    """A bench job as a lane runs it with ``timing_hold: region``: a timed region in a turn, then
    its re-check under the shared hold, ``regions`` times."""
    from search.evaluate.device_gate import RegionTurns

    turns = RegionTurns(gate, gate.shared(), on_acquire=lambda: pauses.append(("pause", gate.state().writer)),
                        on_release=lambda: pauses.append(("resume", gate.state().writer)))
    started.wait(5)  # both jobs began (their shared holds), as two lanes' bench jobs in step
    try:
        for _ in range(regions):
            turns.acquire()
            assert turns.hold.kind == "exclusive" and turns.acquire() == 0.0  # asking again: already its own
            began = time.monotonic()
            time.sleep(region_s)
            log.append(("region", lane, began, time.monotonic()))
            turns.release()
            assert turns.hold.kind == "shared" and turns.release() == 0.0
            began = time.monotonic()
            time.sleep(recheck_s)
            log.append(("recheck", lane, began, time.monotonic()))
    finally:
        turns.close()
    assert not turns.hold.held and turns.regions == regions


def test_region_turns_time_alone_and_let_two_lanes_recheck_together():
    gate = DeviceGate()
    log: list[tuple[str, int, float, float]] = []
    pauses: list[tuple[str, bool]] = []
    started = threading.Barrier(2)
    lanes = [threading.Thread(target=_lane_with_turns, args=(gate, 3, log, lane, 0.05, 0.15, pauses, started))
             for lane in range(2)]
    for t in lanes:
        t.start()
    for t in lanes:
        t.join(10)
    assert not any(t.is_alive() for t in lanes)
    regions = [x for x in log if x[0] == "region"]
    rechecks = [x for x in log if x[0] == "recheck"]
    assert len(regions) == 6 and len(rechecks) == 6
    # A timed region overlaps nothing: no other region, no re-check of either lane.
    for kind, lane, r0, r1 in regions:
        assert not [x for x in log if x != (kind, lane, r0, r1) and x[2] < r1 and r0 < x[3]]
    # Having timed, a lane's re-check waits behind the other lane's waiting region, so the two
    # lanes' re-checks run at once (the point of holding per region): every one overlaps one of
    # the other lane's.
    for _, lane, c0, c1 in rechecks:
        assert any(other != lane and o0 < c1 and c0 < o1 for _, other, o0, o1 in rechecks)
    assert gate.state() == GateState(readers=0, writer=False, writers_waiting=0, readers_waiting=0)
    # Compiles stop and restart only under the exclusive hold, in pairs.
    assert [p[0] for p in pauses] == ["pause", "resume"] * 6 and all(p[1] for p in pauses)


def test_region_turns_start_from_a_shared_hold():
    from search.evaluate.device_gate import RegionTurns

    gate = DeviceGate()
    with gate.exclusive() as hold, pytest.raises(RuntimeError, match="shared"):
        RegionTurns(gate, hold)
