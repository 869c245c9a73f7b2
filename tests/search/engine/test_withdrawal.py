"""evaluation.withdraw_overtaken: when a candidate becomes its island's best, the children of the
best it displaced that still wait in an evaluator's queue are taken back, recorded rejected, and
their Optuna trials pruned and given back; other children run on."""

from __future__ import annotations

from dataclasses import dataclass, field

import optuna

from kernels.params import render_params
from population.consistency import check_consistency
from population.models import EvalResult, NewCandidate, Origin, State
from search.config import EvaluationConfig
from search.engine.messages import EvalOutcome
from search.engine.proposer import TRIAL_KEY, Child
from search.mutation.tuning import TRIAL_ATTR_SKIPPED
from tests.search.engine.test_loop import config, families, make_loop  # noqa: F401 - the fixture
from tests.search.fakes import TOY_SOURCE, FakePool, ToySpace
from tests.search.mutation.test_carry import FP, _verified


@dataclass
class QueuingPool(FakePool):
    """Takes requests and runs none of them until told: the first ``running`` count as started,
    the rest as queued (only those can be withdrawn)."""

    running: int = 1
    size: int = 8
    withdrawn: list[str] = field(default_factory=list)

    def poll(self, timeout: float) -> list:
        return []

    def withdraw(self, candidate_ids) -> list[str]:
        queued = [r.candidate_id for r in self._flight[self.running:]]
        out = [cid for cid in queued if cid in set(candidate_ids)]
        self._flight = [r for r in self._flight if r.candidate_id not in out]
        self.withdrawn += out
        return out


def _child_of(loop, parent, params: dict) -> str:
    """A local-step-like child of ``parent``: a trial of the structure's study, stored and queued."""
    proposal = loop.tuner.ask_at("toy", FP, ToySpace, parent.params, params, parent_id=parent.id,
                                 parent_value=parent.fitness_ms)
    new = NewCandidate(family="toy", island=parent.island, origin=Origin.OPTUNA, parent_ids=(parent.id,),
                       source=render_params(TOY_SOURCE, params), params=params, fingerprint=FP,
                       generation=parent.generation + 1)
    return loop._store_child(Child(new=new, proposal=proposal, operator="local_step"))


def _tell(loop, cid: str, ms: float) -> None:
    loop._told(EvalOutcome(candidate_id=cid, state=State.VERIFIED, result=EvalResult(candidate_id=cid, geomean_ms=ms)))


def _setup(tmp_path, families, on: bool):
    loop = make_loop(config(tmp_path, evaluation=EvaluationConfig(verify_suite="smoke-quick", bench_suite="smoke-bench",
                                                                  device="cpu", withdraw_overtaken=on)),
                     families, pool=QueuingPool(), max_evals=100)
    for c in loop.run.store.list_candidates():  # the seeds are not part of this
        loop.run.mark_running(c.id)
        loop.run.tell(c.id, State.CRASHED, reason="not this test's")
    best = _verified(loop, {"block": 16, "warps": 4, "stages": 2}, 5.0)
    other = _verified(loop, {"block": 8, "warps": 4, "stages": 2}, 6.0)
    kids = [_child_of(loop, best, {"block": 16, "warps": w, "stages": 2}) for w in (1, 2, 8)]
    cousin = _child_of(loop, other, {"block": 8, "warps": 2, "stages": 2})
    newcomer = _child_of(loop, other, {"block": 32, "warps": 4, "stages": 2})
    loop._dispatch()  # all five sent: kids[0] runs, the rest wait in the queue
    assert loop.pool.inflight() == [*kids, cousin, newcomer]
    return loop, best, kids, cousin, newcomer


def test_the_displaced_bests_queued_children_are_withdrawn_and_their_trials_given_back(tmp_path, families):
    loop, best, kids, cousin, newcomer = _setup(tmp_path, families, on=True)
    used = loop.tuner.trials_used("toy", FP)
    _tell(loop, newcomer, 2.0)  # the island's best now, in place of `best`
    assert loop.pool.withdrawn == kids[1:]  # not the running one, not the other member's child
    assert loop.stats.withdrawn == {"toy": 2} and set(loop.queue.sent) == {kids[0], cousin}
    store = loop.run.store
    study = loop.tuner.study("toy", FP).get_trials(deepcopy=False)
    for cid in kids[1:]:
        cand = store.get_candidate(cid)
        assert cand.state is State.REJECTED and "withdrawn before it started" in cand.reason and best.id in cand.reason
        trial = study[store.get_json(TRIAL_KEY.format(cid=cid))["number"]]
        assert trial.state is optuna.trial.TrialState.PRUNED and "withdrawn" in trial.user_attrs[TRIAL_ATTR_SKIPPED]
    assert loop.tuner.trials_used("toy", FP) == used - 2  # their places in the budget are back
    assert int(store.counter("gpu_evaluations")) == 1  # a withdrawal is no evaluation
    assert check_consistency(store, deep=True) == []
    # A resumed run reads the budget from the journal the same way.
    loop.tuner.flush()
    from search.mutation.tuning import Tuner

    again = Tuner(loop.tuner.path, seed=loop.config.seed)
    assert again.trials_used("toy", FP) == used - 2


def test_off_nothing_is_withdrawn(tmp_path, families):
    loop, _, kids, cousin, newcomer = _setup(tmp_path, families, on=False)
    _tell(loop, newcomer, 2.0)
    assert loop.pool.withdrawn == [] and set(loop.queue.sent) == {*kids, cousin}
