"""Requests queued behind an evaluator's running one (its compile-ahead lookahead) are not
running yet: a stop gives them back to the store as pending, for ``resume``."""

from __future__ import annotations

from population.consistency import check_consistency
from population.models import State
from tests.search.fakes import FakePool
from tests.search.engine.test_loop import config, families, make_loop  # noqa: F401 - fixture


class QueuingPool(FakePool):
    """One evaluator with a lookahead queue: the first request runs, the others wait behind it."""

    def withdraw_queued(self) -> list[str]:
        taken = [r.candidate_id for r in self._flight[1:]]
        self._flight = self._flight[:1]
        return taken


def test_queued_requests_are_pending_again_after_a_stop(tmp_path, families):  # noqa: F811
    pool = QueuingPool(size=3)
    loop = make_loop(config(tmp_path), families, pool=pool, max_evals=30)
    loop.start()
    loop.step()  # the evaluator takes one to run and two to queue
    running, *queued = pool.inflight()
    assert len(queued) == 2
    loop.request_stop("test stop")
    store = loop.run.store
    assert pool.inflight() == [running]
    assert store.get_candidate(running).state is State.RUNNING
    assert all(store.get_candidate(cid).state is State.PENDING for cid in queued)
    loop.step()  # the running one finishes; nothing new starts
    assert loop.finished and check_consistency(store, deep=True) == []
    again = {c.id for c in store.inflight()}  # what resume queues again (with the seeds never sent)
    assert set(queued) <= again and running not in again
