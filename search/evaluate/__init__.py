"""Evaluating candidates on devices: the implementations of :mod:`search.engine.pool`.

``worker`` evaluates candidates on one device (gates, screen, bench; up to ``lanes`` at once) without
Ray, with its processes in ``children`` and the ``device_gate`` that gives timed calls the device
alone, and ``outcome`` turns its reports into the outcome the loop is told; ``ray_pool`` puts workers
on Ray actors (``admission`` says how much each may hold, ``slots`` keeps the pool's books on each);
``compile_ahead`` compiles the next candidates' kernels while one is timed (an n with many kernels
split over processes: ``kernels.harness.compile_shards``; a candidate's processes in ``compile_jobs``,
what they cost in ``compile_costs``); ``simulated`` stands in for GPUs with recorded timings.  The
driver that wires them to the loop is :mod:`search.run`.
"""
