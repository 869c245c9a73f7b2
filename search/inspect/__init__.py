"""Read-only views of a run: what ``champions``, ``lineage``, ``show``, ``report`` and ``export`` show.

Everything here reads a run store and never writes it, and imports neither torch, optuna, openai
nor ray, so inspecting a run is fast and works on a machine without a GPU.
"""
