"""The worker's child processes under the device gate (search/evaluate/children.py), with fake
children: a spare holds the gate from spawn until warm, nothing starts or is closed during a
bench job, and no child is handed to two callers."""

from __future__ import annotations

import itertools
import threading
from typing import Iterator

import pytest

import search.evaluate.children as children_module
from search.evaluate.children import ChildPool
from search.evaluate.device_gate import DeviceGate
from tests.search.evaluate.test_device_gate import LIMIT, Taker, until

_pids = itertools.count(1000)


class FakeProc:
    def __init__(self) -> None:
        self.pid = next(_pids)
        self.alive = True

    def poll(self) -> int | None:
        return None if self.alive else 0


class FakeChild:
    """A child whose start ends when the test says (``warm_up``), or when it dies."""

    made: list["FakeChild"] = []

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self.proc = FakeProc()
        self.warm = False
        self.jobs = 0
        self.closed = False
        self._started = threading.Event()
        FakeChild.made.append(self)

    @classmethod
    def pinned(cls, cpus: frozenset[int] | None, env: dict[str, str] | None = None) -> "FakeChild":
        return cls(env=env)

    def warm_up(self) -> None:
        self._started.set()

    def wait_warm(self, timeout: float) -> bool:
        self._started.wait(timeout)
        self.warm = self.proc.alive and self._started.is_set()
        return self.warm

    def pin(self, cpus: frozenset[int]) -> bool:
        return True

    def kill(self) -> None:
        self.proc.alive = False
        self._started.set()

    def close(self) -> None:
        self.kill()
        self.closed = True


@pytest.fixture
def pool(monkeypatch: pytest.MonkeyPatch) -> Iterator[ChildPool]:
    FakeChild.made = []
    monkeypatch.setattr(children_module, "ChildProcess", FakeChild)
    made = ChildPool({}, DeviceGate(), lanes=1, per_lane=2)
    made.startup_timeout_s = LIMIT
    yield made
    made.close()


def test_a_starting_spare_holds_the_gate_until_warm_and_a_bench_job_waits_for_it(pool: ChildPool) -> None:
    pool.top_up()
    first, second = FakeChild.made
    assert pool.gate.state().readers == 2 and pool.spares() == []
    bench = Taker(pool.gate, "exclusive").start()
    until(lambda: pool.gate.state().writers_waiting == 1, "the bench job waits")
    first.warm_up()
    until(lambda: pool.gate.state().readers == 1, "the warm one lets go")
    assert not bench.got.is_set()
    second.warm_up()
    bench.got.wait(LIMIT)
    assert bench.got.is_set() and pool.starting() == [] and set(pool.spares()) == {first, second}
    bench.finish()


def test_nothing_starts_or_is_closed_during_a_bench_job_and_the_refill_does_it_after(pool: ChildPool) -> None:
    live = FakeChild()
    FakeChild.made = []
    with pool.gate.exclusive():
        pool.top_up()
        pool.discard(live)
        assert FakeChild.made == [] and not live.closed  # deferred: the refill thread waits for the gate
    until(lambda: len(FakeChild.made) == 2 and live.closed, "the refill starts the spares and closes the child")
    for child in FakeChild.made:
        child.warm_up()
    until(lambda: len(pool.spares()) == 2, "the spares are warm")
    assert pool.gate.state().readers == 0


def test_a_waiting_bench_job_defers_the_top_up_too(pool: ChildPool) -> None:
    stage = pool.gate.shared()
    bench = Taker(pool.gate, "exclusive").start()
    until(lambda: pool.gate.state().writers_waiting == 1, "the bench job waits")
    pool.top_up()  # a gate call is in, but a bench job waits: nothing new may get in before it
    assert FakeChild.made == []
    stage.release()
    bench.got.wait(LIMIT)
    assert FakeChild.made == []
    bench.finish()
    until(lambda: len(FakeChild.made) == 2, "the spares start after the bench job")


def test_an_exclusive_hold_starts_its_own_child_but_never_a_spare(pool: ChildPool) -> None:
    with pool.gate.exclusive() as hold:
        timing = pool.new_child(hold, pinned=True)  # the bench job's own timing child
        with pytest.raises(RuntimeError, match="cannot share"):
            pool._spawn_spares(hold)
    assert FakeChild.made == [timing]
    released = pool.gate.shared()
    released.release()
    with pytest.raises(RuntimeError, match="holds the device gate"):
        pool.new_child(released)


def test_a_kept_child_goes_to_one_caller_only(pool: ChildPool) -> None:
    kept = [FakeChild(), FakeChild()]
    for child in kept:
        child.jobs = 1
        pool.keeper("s", timing=False)(child)
    takers = 8
    meet = threading.Barrier(takers, timeout=LIMIT)
    got: list[FakeChild] = []
    lock = threading.Lock()
    with pool.gate.shared() as hold:
        def take() -> None:
            meet.wait()
            child = pool.take(hold, "s")
            with lock:
                got.append(child)  # type: ignore[arg-type]

        threads = [threading.Thread(target=take) for _ in range(takers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(LIMIT)
    assert len(got) == takers and len(set(map(id, got))) == takers
    assert sum(child in got for child in kept) == 2 and pool.reused == 2


def test_a_starting_spare_is_claimed_by_one_caller_who_waits_for_it(pool: ChildPool) -> None:
    pool.top_up()
    first, second = FakeChild.made
    got: list[FakeChild] = []
    with pool.gate.shared() as hold:
        def take() -> None:
            got.append(pool.take(hold))  # type: ignore[arg-type]

        threads = [threading.Thread(target=take) for _ in range(2)]
        for t in threads:
            t.start()
        until(lambda: all(e.claimed for e in pool._starting), "both starting spares are claimed")
        assert got == []  # they wait for the start to end
        second.warm_up()
        first.warm_up()
        for t in threads:
            t.join(LIMIT)
    assert sorted(map(id, got)) == sorted(map(id, [first, second]))
    assert pool.spares() == [] and len(FakeChild.made) == 2  # claimed, not kept as spares; nothing new


def test_a_spare_that_dies_while_starting_is_closed_and_lets_go(pool: ChildPool) -> None:
    pool.top_up()
    first, second = FakeChild.made
    first.kill()  # died before its first message
    second.warm_up()
    until(lambda: pool.gate.state().readers == 0, "both starts are over")
    assert first.closed and pool.spares() == [second]
    with pool.gate.shared() as hold:
        assert pool.take(hold) is second
