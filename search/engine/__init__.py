"""The search itself: ask, mutate, evaluate, tell.

``loop`` runs the steady-state loop over the Protocols in :mod:`search.engine.pool`; ``proposer``
makes children with the mutation operators (Optuna steps in ``tuning``, LLM edits through ``llm``,
``prompt``, ``edits`` and ``llm_child``, paced by ``llm_budget``); ``cascade`` and ``domains`` decide
where a child is timed; ``focus`` and ``human`` apply the engineer's focus and events.  Nothing here
needs Ray, a GPU or a network to be tested.
"""
