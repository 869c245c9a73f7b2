"""Simulated GPUs: an evaluator that replaces only the GPU work (``evaluation.device: simulated``).

Everything else of a simulated run is the product: the driver, ``RayPool`` and one Ray actor
per declared GPU, the store, the proposer, Optuna, the cascade, compile-ahead scheduling and the
engineer's events.  The simulated worker answers the actor's calls as the real one does, after
delays drawn from a recorded H200 search (:mod:`.recorded`), with per-case times from a
synthetic landscape over each family's real parameter space, whose optimum is known
(:mod:`.landscape`).  It imports neither torch nor Triton, so hundreds of simulated GPUs fit
on one machine.

- ``recorded.py`` — the recorded run as data (stage times, screen and failure counts by family,
  timing noise) and how it is derived from a device-run folder (``tools/sim_model.py``);
  ``h200-run-m.json`` is a 10-minute H200 search's (docs/search-performance.md).
- ``landscape.py`` — per-case times of any candidate of a registered family: its parameters'
  distance from a seeded optimum, times the recorded seed times, with the recorded noise.
- ``compiles.py`` — compile-ahead as an evaluator's pool of compile slots in time.
- ``gpu.py`` — what a simulated GPU answers and how long it is busy (no clock).
- ``worker.py`` — the :class:`~search.evaluate.worker.Worker` interface, simulated in real time.
"""
