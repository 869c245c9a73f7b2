"""Running a search: the driver and its live screen.

``driver`` wires Ray, the store, Optuna, the LLM and the loop together (``launch`` and ``resume``,
signals, the evaluators' start); ``progress`` and ``budget`` are what its screen shows.  This is the
top of ``search/`` below the command line: it imports ``evaluate``, ``inspect`` and ``engine``, and
nothing there imports it.
"""
