"""Taking back queued children whose parent was overtaken (``evaluation.withdraw_overtaken``).

With many evaluators a third of the children in flight wait in an evaluator's queue (compile
ahead) behind the running ones, proposed from the parent their operator drew then.  When a new
candidate becomes its island's best of its structure, the children still queued from the best
it displaced are the stale ones: a one-evaluator search would now step from the new best.  They
are withdrawn before they start: the pool drops them (and their compiles), the store records
them ``rejected`` with the reason (a state for a candidate that never ran: it spends no tuning
budget and counts in no GPU evaluation), and each one's Optuna trial is PRUNED with its place in
the structure's budget given back.  Children of other members are left alone: a tournament
draws them on purpose, and a better best does not make them stale.
"""

from __future__ import annotations

from population.models import Candidate, State
from population.run import Run
from search.engine.pool import EvaluatorPool
from search.engine.work_queue import WorkQueue
from population.records import TRIAL_KEY
from search.mutation.tuning import Tuner


def displaced(run: Run, told: Candidate) -> Candidate | None:
    """The member ``told`` just displaced as its island's best of its structure, or None if it did
    not become that best (or there was none before it)."""
    if told.state is not State.VERIFIED:
        return None
    same = [m for m in run.population.members(told.family, told.island) if m.fingerprint == told.fingerprint]
    if len(same) < 2 or same[0].id != told.id:
        return None
    return same[1]


def withdraw_overtaken(run: Run, pool: EvaluatorPool, queue: WorkQueue, tuner: Tuner, told: Candidate) -> list[str]:
    """Withdraw the queued children of the member ``told`` displaced; returns their ids."""
    old = displaced(run, told)
    if old is None:
        return []
    stale = [cid for cid, item in queue.sent.items()
             if item.candidate.parent_ids[:1] == (old.id,) and item.candidate.fingerprint == told.fingerprint]
    if not stale:
        return []
    taken = pool.withdraw(stale)
    reason = f"withdrawn before it started: its parent {old.id} was overtaken by {told.id}"
    for cid in taken:
        queue.done(cid)
        with run.transaction():
            run.tell(cid, State.REJECTED, reason=reason)
        trial = run.store.get_json(TRIAL_KEY.format(cid=cid))
        if trial:
            tuner.withdraw(trial["study"], trial["number"], reason)
    return taken
