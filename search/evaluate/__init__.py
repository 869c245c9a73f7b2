"""Evaluating candidates on devices, and the driver that runs a search.

``pool`` is the Protocol the loop talks to, with its message types; ``worker`` evaluates
candidates on one device (gates, screen, bench; up to ``lanes`` at once) without Ray, with its
processes in ``children`` and the ``device_gate`` that gives timed calls the device alone, and
``outcome`` turns its reports into the outcome the loop is told; ``ray_pool`` puts workers on Ray
actors; ``compile_ahead`` compiles the next candidates' kernels while one is timed (an n with many
kernels split over processes: ``kernels.harness.compile_shards``); ``recheck``
re-times a recorded result; ``driver`` wires Ray, the store, Optuna, the LLM and the loop together,
with its live screen (``progress``, ``budget``).
"""
