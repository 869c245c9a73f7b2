"""A run whose evaluators are all gone (dead, restarting, or lost with their node) stops, resumable,
after ``ray.no_evaluator_minutes``, instead of waiting for its time budget or for ever."""

from __future__ import annotations

import time

from population.models import State
from search.config import RayConfig
from tests.search.engine.test_loop import config, families, make_loop  # noqa: F401 (families: a fixture)
from tests.search.fakes import FakePool, default_judge

LIMIT_MIN = 0.003  # 0.18 s


def steps_for(loop, seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end and not loop.finished:
        loop.step(timeout=0.01)


def test_a_run_whose_evaluators_are_gone_stops_resumable(tmp_path, families):  # noqa: F811
    pool = FakePool(size=2)
    judged: list[str] = []

    def judge_then_die(request):
        judged.append(request.candidate_id)
        if len(judged) == 5:
            pool.up = False  # the node leaves: what is still in flight is lost
        return default_judge(request)

    pool.judge = judge_then_die
    loop = make_loop(config(tmp_path, ray=RayConfig(no_evaluator_minutes=LIMIT_MIN)), families, pool=pool,
                     max_evals=50)
    loop.deadline = time.monotonic() + 20  # a time budget, so a loop that waits for ever fails, not hangs
    loop.run_until_done()
    assert int(loop.run.store.counter("gpu_evaluations")) == 5  # stopped early, nothing faked
    assert loop.end_state == "stopped" and loop.stop_requested.startswith("no evaluator up for")
    assert str(loop.run.store.run_dir) in loop.stop_requested  # the resume command names the run
    assert loop.run.store.get_json("driver/status")["state"] == "stopped"
    cands = loop.run.store.list_candidates()
    assert any(c.state is State.PENDING for c in cands)  # the lost work waits for the resume
    assert not any(c.state is State.CRASHED for c in cands)  # and nobody was blamed
    assert any("the run stops in" in line for line in loop.logs)


def test_nothing_counts_before_the_first_evaluator_is_up(tmp_path, families):  # noqa: F811
    pool = FakePool(size=1, up=False)  # a cluster whose GPU nodes have not joined yet
    loop = make_loop(config(tmp_path, ray=RayConfig(no_evaluator_minutes=LIMIT_MIN)), families, pool=pool,
                     max_evals=4)
    loop.start()
    steps_for(loop, 0.5)
    assert loop.stop_requested is None
    pool.up = True
    loop.run_until_done()
    assert loop.end_state == "finished" and int(loop.run.store.counter("gpu_evaluations")) == 4


def test_an_evaluator_back_in_time_resets_the_clock(tmp_path, families):  # noqa: F811
    pool = FakePool(size=1)
    loop = make_loop(config(tmp_path, ray=RayConfig(no_evaluator_minutes=0.05)), families, pool=pool,
                     max_evals=6)  # 3 s: wide of a slow machine's step
    loop.start()
    loop.step(timeout=0)
    for _ in range(3):  # down 1.2 s, up again: 3.6 s down in all, never 3 s at once
        pool.up = False
        steps_for(loop, 1.2)
        assert loop.stop_requested is None
        pool.up = True
        loop.step(timeout=0)
    assert sum("evaluators back" in line for line in loop.logs) == 3
    loop.run_until_done()
    assert loop.end_state == "finished" and int(loop.run.store.counter("gpu_evaluations")) == 6
