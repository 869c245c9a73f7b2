"""The LLM operators' calls: started while the budget has room, collected into children (or
rejected edits, told as such), and what each answer leaves in the store: its counters, the child it
made, and its typed record (:class:`population.records.LLMCall`, ``llm/call/NNNNNN``).

The loop asks :class:`LLMCalls` to start calls and to collect the answered ones at each step; calls
take seconds, so they stay in flight across steps while Optuna and crossover fill the evaluators."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Callable

from population.models import State
from population.records import OPERATOR_KEY, C, LLMCall, dump, llm_call_key
from population.run import Run
from search.config import BudgetConfig
from search.engine.llm import LLMError, LLMPool, LLMReply
from search.engine.llm_budget import DUPLICATE, LLMBudget
from search.engine.llm_child import RESTORED
from search.engine.proposer import Child, LLMJob, Proposer, RejectedEdit


@dataclass(frozen=True)
class Collected:
    """What one collection found: calls answered, and calls that failed."""

    answered: int = 0
    failed: int = 0


class LLMCalls:
    def __init__(self, llm: LLMPool | None, run: Run, proposer: Proposer, rng: random.Random,
                 log: Callable[[str], None]) -> None:
        self.llm = llm
        self.run = run
        self.proposer = proposer
        self.rng = rng
        self.log = log
        self.jobs: list[LLMJob] = []  # started and not collected yet
        self.off_reason: str | None = None if llm is not None else "no LLM endpoint configured"
        self.budget = LLMBudget(llm.client.config, run.store, log) if llm is not None else None
        self._failure: tuple[str, int] = ("", 0)  # the last error and how often it came in a row

    def start(self, evaluators: int, evals_room: Callable[[], int | None],
              families_in_order: Callable[[], list[str]]) -> None:
        """Start calls while the budget has room; ``evals_room`` is what the evaluation budget
        leaves (None: none), ``families_in_order`` the families to propose from, best first."""
        if self.llm is None or self.budget is None or self.off_reason:
            return
        if self.proposer.llm_weight <= 0:
            return
        # Jobs count until collected, so an instant answer cannot start calls without end; the
        # budget bounds calls plus unevaluated LLM children by what the evaluators can take.
        room = self.budget.room(len(self.jobs), evaluators, evals_room())
        while room > 0 and self.llm.free_slots > 0:
            model = self.budget.pick(self.rng)
            families = families_in_order()
            if model is None or not families:
                return  # every model rests (back-off or pause): Optuna and crossover fill the evaluators
            family = families[0]
            island = self.rng.randrange(len(self.run.population.family(family).islands))
            job = self.proposer.start_llm(family, island, model)
            if job is None:
                return
            self.jobs.append(job)
            room -= 1

    def collect(self, store_child: Callable[[Child], str]) -> Collected:
        """Turn the answered calls into children (stored with ``store_child``) or rejected edits."""
        if not self.jobs:
            return Collected()
        assert self.budget is not None  # jobs exist only with an LLM
        still: list[LLMJob] = []
        answered = failed = 0
        for job in self.jobs:
            if not job.future.done():
                still.append(job)
                continue
            if job.future.cancelled():
                continue
            try:
                reply = job.future.result()
            except LLMError as exc:
                failed += 1
                self._failed(job, str(exc))
                continue
            answered += 1
            made = self.proposer.finish_llm(job, reply)
            with self.run.transaction():
                child_id, kind = record_answer(self.run, job, reply, made, store_child)
                # Counted under the model the job asked for: that is whose share and streak it moves.
                self.budget.answered(job.model, reply.prompt_tokens, reply.completion_tokens, reply.cost_usd,
                                     rejection=None if child_id else kind, child=child_id,
                                     restored=isinstance(made, Child) and made.params_origin == RESTORED)
        self.jobs = still
        return Collected(answered=answered, failed=failed)

    def _failed(self, job: LLMJob, message: str) -> None:
        assert self.budget is not None
        with self.run.transaction():
            self.run.store.add_counters({C.LLM_ERRORS: 1})
            self.budget.failed(job.model, message)
        # The same failure again and again (an endpoint that is down) is said at the 1st, 2nd, 4th, 8th, ...
        # time in a row, with the count, rather than once per call.
        same = self._failure[0] == message
        count = self._failure[1] + 1 if same else 1
        self._failure = (message, count)
        if count & (count - 1) == 0:
            self.log(f"LLM call failed: {message}" if count == 1 else
                     f"LLM call failed {count} times in a row: {message}")

    def evaluated(self, candidate_id: str) -> None:
        """A candidate was evaluated: an LLM child's evaluation counts for the model that proposed it."""
        if self.budget is not None:
            self.budget.evaluated(candidate_id)

    def cancel(self) -> None:
        """Drop the calls not answered yet (the run stops)."""
        for job in self.jobs:
            job.future.cancel()

    def check_spend(self, budget: BudgetConfig) -> None:
        """Turn LLM mutation off for the rest of the run once its token or money budget is spent."""
        if self.llm is None or self.off_reason is not None:
            return
        counters = self.run.store.counters("llm_")
        tokens = counters.get(C.LLM_PROMPT_TOKENS, 0) + counters.get(C.LLM_COMPLETION_TOKENS, 0)
        if budget.max_llm_tokens is not None and tokens >= budget.max_llm_tokens:
            self.off_reason = f"LLM token budget spent ({int(tokens)})"
        elif budget.max_llm_cost_usd is not None and counters.get(C.LLM_COST_USD, 0) >= budget.max_llm_cost_usd:
            self.off_reason = f"LLM money budget spent (${counters.get(C.LLM_COST_USD, 0):.2f})"
        if self.off_reason:
            self.log(f"LLM mutation off: {self.off_reason}")

    def off_or_paused(self) -> bool:
        """No call will start: no endpoint, LLM mutation off, or every model paused."""
        return self.budget is None or self.off_reason is not None or self.budget.all_paused()


def record_answer(run: Run, job: LLMJob, reply: LLMReply, made: Child | RejectedEdit | None,
                  store_child: Callable[[Child], str]) -> tuple[str | None, str]:
    """Store one answered call inside the caller's transaction: ``(child id, kind)``, the id None
    unless a child was accepted, the kind the rejection's (or DUPLICATE when it made nothing new)."""
    n = run.store.add_counters({C.LLM_CALLS: 1, C.LLM_PROMPT_TOKENS: reply.prompt_tokens,
                                C.LLM_COMPLETION_TOKENS: reply.completion_tokens,
                                C.LLM_COST_USD: reply.cost_usd})[C.LLM_CALLS]
    record = LLMCall(model=reply.model, prompt_tokens=reply.prompt_tokens,
                     completion_tokens=reply.completion_tokens, cost_usd=reply.cost_usd,
                     latency_s=round(reply.latency_s, 3), family=job.family,
                     parents=[p.id for p in job.parents], operator=job.operator, at=time.time())
    child_id, kind = None, DUPLICATE
    if isinstance(made, Child):
        child_id = store_child(made)
        record = record.model_copy(update={"child": child_id, "params": made.params_origin})
    elif isinstance(made, RejectedEdit):
        cand = run.add_candidate(made.new)
        run.tell(cand.id, State.REJECTED, reason=made.reason)
        run.store.set_json(OPERATOR_KEY.format(cid=cand.id), made.operator)
        record = record.model_copy(update={"child": cand.id, "rejected": made.reason, "kind": made.kind})
        kind = made.kind
    else:
        record = record.model_copy(update={"duplicate": True})
    run.store.set_json(llm_call_key(int(n)), dump(record))
    return child_id, kind
