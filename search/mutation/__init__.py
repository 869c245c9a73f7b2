"""How children are made: the mutation operators and the Optuna tuner they draw from.

``operators`` holds the operators as plugins behind the ``Operator`` Protocol (``operators/base.py``),
and their registry, against which ``search.config`` checks the ``mutation:`` keys; ``tuning`` keeps one
Optuna study per family and structure (written through ``journal``, sampled through ``samplers``).
It imports nothing else of ``search``: the config and the engine stand on it.
"""
