"""``mutation:``, the weights of the mutation operators (checked against their registry,
:mod:`search.mutation.operators`), and the keys it had before that registry.
"""

from __future__ import annotations

import warnings
from typing import Any

from pydantic import ConfigDict, Field, RootModel, model_validator

from search.config.sections import DEPRECATED_REMOVED_IN



# The keys ``mutation:`` had before the operator registry, and the operators each one meant.
# "crossover" weighed both two-parent operators: the parameter crossover among the immediate
# proposals and the LLM merge among the LLM calls, so it maps onto both with its weight.
LEGACY_MUTATION_KEYS: dict[str, tuple[str, ...]] = {
    "llm": ("llm_edit",), "optuna": ("optuna_step",), "crossover": ("param_crossover", "llm_merge")}
_LEGACY_DEFAULTS = {"llm": 0.4, "optuna": 0.5, "crossover": 0.1}  # what an omitted old key weighed


def _default_mutation() -> dict[str, float]:
    from search.mutation.operators import registry

    return {name: op.default_weight for name, op in registry().items() if op.default_weight > 0}


class MutationMix(RootModel[dict[str, float]]):
    """Relative weights of the mutation operators, `{operator: weight}` (renormalised over the ones available).

    An operator left out is off.  An immediate operator with weight 0 is never drawn first but still
    makes a child when the drawn one has nothing to offer, so that no evaluator idles.
    """

    model_config = ConfigDict(frozen=True)
    root: dict[str, float] = Field(default_factory=_default_mutation)

    @model_validator(mode="before")
    @classmethod
    def _legacy_keys(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not any(k in LEGACY_MUTATION_KEYS for k in data):
            return data
        new_style = sorted(k for k in data if k not in LEGACY_MUTATION_KEYS)
        if new_style:
            raise ValueError(f"the old keys (llm, optuna, crossover) cannot be mixed with operator names "
                             f"({', '.join(new_style)}): use operator names only")
        old = {**_LEGACY_DEFAULTS, **data}
        weights = {new: old[key] for key, names in LEGACY_MUTATION_KEYS.items() for new in names}
        # FutureWarning is shown to users by default, once per process since it is raised from
        # this one line (old files and stores keep working; they only hear about it).
        warnings.warn(f"mutation: the keys llm/optuna/crossover are deprecated (removed in {DEPRECATED_REMOVED_IN}); "
                      "they now read as "
                      + ", ".join(f"{k}: {v:g}" for k, v in weights.items()) + " (see docs/config.md)",
                      FutureWarning, stacklevel=1)
        return weights

    @model_validator(mode="after")
    def _known_operators(self) -> "MutationMix":
        from search.mutation.operators import registry

        known = registry()
        unknown = [name for name in self.root if name not in known]
        if unknown:
            raise ValueError(f"unknown mutation operator {unknown[0]!r}; registered: {', '.join(known)}")
        negative = [name for name, w in self.root.items() if not w >= 0]
        if negative:
            raise ValueError(f"mutation weight of {negative[0]} must be >= 0")
        if sum(self.root.values()) <= 0:
            raise ValueError("at least one mutation weight must be positive")
        return self

    @property
    def weights(self) -> dict[str, float]:
        return dict(self.root)

    @classmethod
    def reference(cls) -> list[tuple[str, str, float, str]]:
        """Rows for docs/config.md: one per registered operator (name, type, default, meaning)."""
        from search.mutation.operators import registry

        return [(name, "float", op.default_weight, op.description) for name, op in registry().items()]
