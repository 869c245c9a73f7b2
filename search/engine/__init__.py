"""The search itself: ask, mutate, evaluate, tell.

``loop`` runs the steady-state loop over the Protocol in ``pool`` (its ``EvalRequest`` and
``EvalOutcome`` in ``messages``; ``recheck`` re-times a recorded result), which :mod:`search.evaluate`
implements; ``proposer`` makes children with the mutation operators of :mod:`search.mutation` (LLM
edits through ``llm``, ``prompt``, ``edits`` and ``llm_child``, paced by ``llm_budget``, their calls
kept in flight by ``llm_calls``); ``cascade`` and ``domains`` decide where a child is timed; ``duels``
times a new champion against the one it replaced; ``focus`` and ``human`` apply the engineer's focus
and events; ``evaluator_watch`` stops a run whose evaluators are all gone.  Nothing here needs Ray, a
GPU or a network to be tested.
"""
