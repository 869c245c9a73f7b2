"""Families passed over after an empty proposal (evaluation.skip_empty_families): until something of
theirs changes or the limit of passes runs out, and never at the end check, so that a run does not
stop on a family that was only passed over."""

from __future__ import annotations

import collections

from search.engine.empty_families import EmptyFamilies
from tests.search.engine.test_loop import config, families, make_loop  # noqa: F401  (families: a fixture)


def test_a_family_is_passed_over_until_its_stamp_changes():
    stamps = {"a": 1, "b": 1}
    empty = EmptyFamilies(stamps.__getitem__, limit=100)
    assert not empty.skip("a")  # never came back empty
    empty.came_back_empty("a")
    assert empty.skip("a") and empty.skip("a") and not empty.skip("b")
    stamps["a"] = 2  # one of its evaluations was told
    assert not empty.skip("a")
    assert not empty.skip("a")  # the mark went with the change: a new empty proposal sets it again
    empty.came_back_empty("a")
    empty.came_back_empty("b")
    empty.forget()
    assert not empty.skip("a") and not empty.skip("b")
    assert empty.passed_over == 2


def test_a_family_whose_stamp_never_changes_is_tried_again_after_the_limit():
    empty = EmptyFamilies(lambda _f: 0, limit=3)
    empty.came_back_empty("a")
    assert [empty.skip("a") for _ in range(5)] == [True, True, True, False, False]


def test_a_limit_of_zero_never_passes_a_family_over():
    empty = EmptyFamilies(lambda _f: 0, limit=0)
    empty.came_back_empty("a")
    assert not empty.skip("a")


def _loop(tmp_path, families, skip: int, max_evals: int | None = 120):  # noqa: F811
    cfg = config(tmp_path)
    cfg = cfg.model_copy(update={"evaluation": cfg.evaluation.model_copy(update={"skip_empty_families": skip})})
    loop = make_loop(cfg, families, max_evals=max_evals)
    calls: collections.Counter[str] = collections.Counter()
    original = loop.proposer.synchronous

    def counted(family, island, inflight):
        calls[family] += 1
        return original(family, island, inflight)

    loop.proposer.synchronous = counted  # type: ignore[method-assign]
    return loop, calls


def test_the_loop_asks_empty_families_less(tmp_path, families):  # noqa: F811
    on, calls_on = _loop(tmp_path / "on", families, skip=16)
    on.run_until_done()
    off, calls_off = _loop(tmp_path / "off", families, skip=0)
    off.run_until_done()
    assert on.stop_requested.startswith("nothing left to propose") and off.stop_requested == on.stop_requested
    assert on.empty.passed_over > 0 and off.empty.passed_over == 0
    per_eval = [sum(c.values()) / int(lp.run.store.counter("gpu_evaluations"))
                for lp, c in ((on, calls_on), (off, calls_off))]
    assert per_eval[0] < per_eval[1]


def test_the_end_check_tries_the_families_that_were_passed_over(tmp_path, families):  # noqa: F811
    loop, calls = _loop(tmp_path, families, skip=1000, max_evals=12)
    loop.run_until_done()  # champions to build on
    loop.max_evals = None
    loop.stop_requested = None
    for family in ("toy", "toy2"):
        loop.empty.came_back_empty(family)
    before = sum(calls.values())
    assert not loop._propose_now() and sum(calls.values()) == before  # both passed over: nothing asked
    assert not loop._nothing_to_propose()  # asked again, and a child came of it
    assert sum(calls.values()) > before and len(loop.queue) == 1
