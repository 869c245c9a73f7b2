"""The worker's child processes under the device gate (search/evaluate/children.py), with fake
children: a spare imports with no hold and creates its context under a shared hold, a bench job
waits only for contexts being created, a claimed spare starts under its claimer's hold (no
deadlock behind a waiting bench job), and no child is handed to two callers."""

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
    """A child whose imports end when the test says (``load``), whose context creation ends
    when the test says (``warm_up``), or when it dies; it records the gate at its ``init``."""

    made: list["FakeChild"] = []
    gate: DeviceGate | None = None

    def __init__(self, env: dict[str, str] | None = None, staged: bool = False) -> None:
        self.proc = FakeProc()
        self.staged = staged
        self.warm = False
        self.jobs = 0
        self.closed = False
        self.cpus: frozenset[int] | None = None
        self.init_state = None  # the gate when init was called
        self._loaded = threading.Event()
        self._inited = threading.Event()
        self._started = threading.Event()
        if not staged:
            self._loaded.set()
            self._inited.set()
        FakeChild.made.append(self)

    @classmethod
    def pinned(cls, cpus: frozenset[int] | None, env: dict[str, str] | None = None,
               staged: bool = False) -> "FakeChild":
        child = cls(env=env, staged=staged)
        child.cpus = cpus
        return child

    def load(self) -> None:
        self._loaded.set()

    def warm_up(self) -> None:
        self._started.set()

    def wait_loaded(self, timeout: float) -> bool:
        self._loaded.wait(timeout)
        return self.proc.alive and self._loaded.is_set()

    def init(self) -> None:
        assert self.staged and self._loaded.is_set() and not self._inited.is_set()
        self.init_state = FakeChild.gate.state() if FakeChild.gate is not None else None
        self._inited.set()

    def wait_warm(self, timeout: float) -> bool:
        self._started.wait(timeout)
        self.warm = self.proc.alive and self._started.is_set() and self._inited.is_set()
        return self.warm

    def pin(self, cpus: frozenset[int]) -> bool:
        self.cpus = cpus
        return True

    def kill(self) -> None:
        self.proc.alive = False
        self._loaded.set()
        self._started.set()

    def close(self) -> None:
        self.kill()
        self.closed = True


@pytest.fixture
def pool(monkeypatch: pytest.MonkeyPatch) -> Iterator[ChildPool]:
    FakeChild.made = []
    monkeypatch.setattr(children_module, "ChildProcess", FakeChild)
    made = ChildPool({}, DeviceGate(), lanes=1, per_lane=2)
    FakeChild.gate = made.gate
    made.startup_timeout_s = LIMIT
    yield made
    made.close()
    FakeChild.gate = None


def test_a_spare_imports_unheld_and_holds_the_gate_only_for_its_context(pool: ChildPool) -> None:
    pool.top_up()
    first, second = FakeChild.made
    assert first.staged and second.staged
    assert pool.gate.state().readers == 0 and pool.spares() == []  # importing: no hold
    first.load()
    until(lambda: first._inited.is_set(), "the loaded spare is told to create its context")
    assert first.init_state is not None and first.init_state.readers == 1  # under its own shared hold
    bench = Taker(pool.gate, "exclusive").start()
    until(lambda: pool.gate.state().writers_waiting == 1, "the bench job waits for the context")
    second.load()  # loaded while a bench job waits: its context waits behind the bench job
    assert not bench.got.is_set()
    first.warm_up()
    bench.got.wait(LIMIT)
    assert bench.got.is_set() and pool.spares() == [first]
    assert not second._inited.is_set()  # nothing creates a context during the bench job
    bench.finish()
    until(lambda: second._inited.is_set(), "the second context after the bench job")
    second.warm_up()
    until(lambda: set(pool.spares()) == {first, second}, "both are spares")
    assert pool.gate.state().readers == 0


def test_spares_spawn_during_a_bench_job_but_no_context_or_close_happens_in_it(pool: ChildPool) -> None:
    live = FakeChild()
    FakeChild.made = []
    with pool.gate.exclusive():
        pool.top_up()
        pool.discard(live)
        assert len(FakeChild.made) == 2 and not live.closed  # spawned; the close waits for the gate
        for child in FakeChild.made:
            child.load()
        threading.Event().wait(0.2)
        assert not any(child._inited.is_set() for child in FakeChild.made)
    until(lambda: all(child._inited.is_set() for child in FakeChild.made) and live.closed,
          "the contexts are created and the child closed after the bench job")
    for child in FakeChild.made:
        child.warm_up()
    until(lambda: len(pool.spares()) == 2, "the spares are warm")
    assert pool.gate.state().readers == 0


def test_spares_import_off_the_timing_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeChild.made = []
    monkeypatch.setattr(children_module, "ChildProcess", FakeChild)
    monkeypatch.setattr(children_module.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    made = ChildPool({}, DeviceGate(), lanes=1, per_lane=1, timing_cpus=frozenset({2, 3}))
    try:
        made.top_up()
        assert [child.cpus for child in FakeChild.made] == [frozenset({0, 1})]
    finally:
        made.close()


def test_an_exclusive_hold_starts_its_own_child_and_inits_no_spare(pool: ChildPool) -> None:
    with pool.gate.exclusive() as hold:
        timing = pool.new_child(hold, pinned=True)  # the bench job's own timing child, started whole
        assert not timing.staged
        pool.top_up()
        for child in FakeChild.made[1:]:
            child.load()
        threading.Event().wait(0.2)
        assert not any(child._inited.is_set() for child in FakeChild.made[1:])
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
        second.load()
        first.load()
        second.warm_up()
        first.warm_up()
        for t in threads:
            t.join(LIMIT)
    assert sorted(map(id, got)) == sorted(map(id, [first, second]))
    assert pool.spares() == [] and len(FakeChild.made) == 2  # claimed, not kept as spares; nothing new


def test_a_claimed_spare_starts_under_the_claimers_hold_while_a_bench_job_waits(pool: ChildPool) -> None:
    """The deadlock this prevents: a verify stage holds the gate shared and waits for a claimed
    spare; a bench job waits for that hold; a spare that waited for a shared hold of its own
    would wait behind the bench job for ever."""
    pool.top_up()
    first, _ = FakeChild.made
    got: list[FakeChild] = []
    with pool.gate.shared() as hold:
        bench = Taker(pool.gate, "exclusive").start()
        until(lambda: pool.gate.state().writers_waiting == 1, "a bench job waits")
        taker = threading.Thread(target=lambda: got.append(pool.take(hold)))  # type: ignore[arg-type, func-returns-value]
        taker.start()
        until(lambda: any(e.claimed for e in pool._starting), "a spare is claimed")
        for child in FakeChild.made:
            child.load()
        until(lambda: any(child._inited.is_set() for child in FakeChild.made), "the claimed one inits")
        claimed = next(child for child in FakeChild.made if child._inited.is_set())
        assert claimed.init_state is not None and claimed.init_state.writers_waiting == 1
        claimed.warm_up()
        taker.join(LIMIT)
        assert got == [claimed] and not bench.got.is_set()
    bench.got.wait(LIMIT)
    bench.finish()


def test_a_timing_child_claimed_under_the_exclusive_hold_starts_under_it(pool: ChildPool) -> None:
    pool.top_up()
    first, second = FakeChild.made
    with pool.gate.exclusive() as hold:
        got: list[FakeChild] = []
        taker = threading.Thread(target=lambda: got.append(pool.timing_child(hold)))  # type: ignore[arg-type, func-returns-value]
        taker.start()
        until(lambda: any(e.claimed for e in pool._starting), "a spare is claimed")
        for child in (first, second):
            child.load()
        until(lambda: any(child._inited.is_set() for child in (first, second)), "the claimed one inits")
        claimed = next(child for child in (first, second) if child._inited.is_set())
        assert claimed.init_state is not None and claimed.init_state.writer  # under the bench job's hold
        claimed.warm_up()
        taker.join(LIMIT)
        assert got == [claimed]
        other = second if claimed is first else first
        assert not other._inited.is_set()  # the unclaimed one waits for the gate


def test_a_spare_that_dies_while_starting_is_closed_and_lets_go(pool: ChildPool) -> None:
    pool.top_up()
    first, second = FakeChild.made
    first.kill()  # died before its first message
    second.load()
    second.warm_up()
    until(lambda: pool.starting() == [] and pool.gate.state().readers == 0, "both starts are over")
    assert first.closed and pool.spares() == [second]
    with pool.gate.shared() as hold:
        assert pool.take(hold) is second
