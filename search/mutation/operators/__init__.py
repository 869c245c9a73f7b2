"""Mutation operators as plugins: the registry the proposer draws from by the configured weights.

One module per operator, each exposing ``OPERATOR`` (see :mod:`.base` for the Protocols):

- ``optuna_step``: Optuna proposes new parameters for the parent's structure (immediate);
- ``local_step``: a neighbour of the parent, one or two parameters moved (immediate; an Optuna trial);
- ``param_crossover``: uniform crossover of two parents' parameters in one structure (immediate);
- ``llm_merge``: an LLM merges the code of two parents of different structures;
- ``llm_edit``: an LLM edits the parent's code.

To add an operator: write its module here and add its name to :data:`BUILTIN` (or call
:func:`register` with an object that satisfies the Protocol).  Its name becomes a key of
``mutation:`` in the run config, and each child it makes is recorded under it.
"""

from __future__ import annotations

import importlib

from search.mutation.operators.base import (Child, ImmediateOperator, KernelFamily, LLMOperator, Operator,
                                          ProposalContext)

__all__ = ["BUILTIN", "Child", "ImmediateOperator", "KernelFamily", "LLMOperator", "Operator", "ProposalContext",
           "get", "names", "register", "registry", "unregister"]

# Registration order is the order of every weighted draw among operators: keep it, or runs
# with an unchanged config stop reproducing.  llm_merge precedes llm_edit because the
# proposer of old drew "merge?" first; the same draw now picks the same operator.  New
# operators go at the end.
BUILTIN: tuple[str, ...] = ("optuna_step", "param_crossover", "llm_merge", "llm_edit", "local_step")

_REGISTRY: dict[str, Operator] = {}


def register(operator: Operator) -> Operator:
    """Add an operator; its name must be new and its kind must match ``needs_llm``."""
    name = operator.name
    if name not in BUILTIN:
        _load_builtins()  # built-ins first, whoever registers first: the draw order must not depend on it
    if not name.isidentifier():
        raise ValueError(f"operator name {name!r} must be an identifier (it is a config key)")
    if name in _REGISTRY:
        raise ValueError(f"operator {name!r} is registered already")
    kind = LLMOperator if operator.needs_llm else ImmediateOperator
    if not isinstance(operator, kind):
        raise TypeError(f"operator {name!r}: needs_llm={operator.needs_llm} asks for {kind.__name__} "
                        f"({'parents' if operator.needs_llm else 'propose'}())")
    _REGISTRY[name] = operator
    return operator


def unregister(name: str) -> None:
    """Drop a plugin again (a test's toy operator); the built-ins stay."""
    if name in BUILTIN:
        raise ValueError(f"{name!r} is a built-in operator; give it weight 0 in the config instead")
    _REGISTRY.pop(name, None)


def _load_builtins() -> None:
    # Imported on first use, not at import time: each module is small, but loading them
    # lazily keeps this package importable from search.config without a cycle.
    for module in BUILTIN:
        if module not in _REGISTRY:
            register(importlib.import_module(f"{__name__}.{module}").OPERATOR)


def registry() -> dict[str, Operator]:
    """Every registered operator by name, built-ins first, in registration order."""
    _load_builtins()
    return dict(_REGISTRY)


def names() -> list[str]:
    return list(registry())


def get(name: str) -> Operator:
    ops = registry()
    if name not in ops:
        raise KeyError(f"unknown mutation operator {name!r}; registered: {', '.join(ops)}")
    return ops[name]
