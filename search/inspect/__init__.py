"""Read-only views of a run: what ``champions``, ``lineage``, ``show``, ``report`` and ``export`` show.

Everything here reads a run store and never writes it, and imports neither torch, optuna, openai
nor ray, so inspecting a run is fast and works on a machine without a GPU.

Everything starts from one read of the store, :meth:`population.store.RunStore.snapshot`
(a frozen :class:`population.snapshot.RunSnapshot`, speedups computed there): ``view.py``
(:class:`RunView`: champions, best per case, progress, failures, metadata), ``lineage_view.py``
(its lineage views, over :class:`population.lineage.Lineage`), ``best.py`` (best per shape and
overall), ``human_view.py`` (the engineer's events), ``eval_seconds.py`` (where evaluation time
goes), ``sessions.py``; then ``report*.py`` and ``export.py``.  What the driver stores is
described once, in :mod:`population.records`.
"""
