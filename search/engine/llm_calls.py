"""What an answered LLM call leaves in the store: its counters, the child it made (or the rejected
edit, told as such), and its typed record (:class:`population.records.LLMCall`, ``llm/call/NNNNNN``)."""

from __future__ import annotations

import time
from typing import Callable

from population.models import State
from population.records import OPERATOR_KEY, C, LLMCall, dump, llm_call_key
from population.run import Run
from search.engine.llm import LLMReply
from search.engine.llm_budget import DUPLICATE
from search.engine.proposer import Child, LLMJob, RejectedEdit


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
