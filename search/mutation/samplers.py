"""How a study samples: a family's parameter space as Optuna distributions, and the sampler that
each study of :mod:`search.mutation.tuning` asks through."""

from __future__ import annotations

from typing import Any

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import FrozenTrial

from kernels.params import Choice, FloatRange, IntRange, ParamSpace


def distributions(space: type[ParamSpace]) -> dict[str, BaseDistribution]:
    dists: dict[str, BaseDistribution] = {}
    for name, dim in space.dimensions().items():
        if isinstance(dim, Choice):
            dists[name] = CategoricalDistribution(list(dim.values))
        elif isinstance(dim, IntRange):
            if dim.log and dim.step != 1:  # Optuna's log scale has no step: list the values instead
                dists[name] = CategoricalDistribution(list(range(dim.low, dim.high + 1, dim.step)))
            else:
                dists[name] = IntDistribution(dim.low, dim.high, step=dim.step, log=dim.log)
        elif isinstance(dim, FloatRange):
            dists[name] = FloatDistribution(dim.low, dim.high, log=dim.log)
    return dists


class SteadySpaceTPE(optuna.samplers.TPESampler):
    """Multivariate TPE for a study whose every trial is asked in the same distributions (the
    tuner asks each study in its family's space, a new space being a new study).  Optuna works
    out the intersection of the trials' spaces at each ask, re-reading every trial since the
    oldest one still running: with hundreds of candidates in flight that was a third of an ask.
    Here it is worked out until it is not empty, then kept: later trials, in the same
    distributions, cannot change it."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._steady: dict[str, BaseDistribution] = {}

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        if not self._steady:
            self._steady = super().infer_relative_search_space(study, trial)
        return dict(self._steady)


def sampler_for(kind: str, seed: int) -> optuna.samplers.BaseSampler:
    if kind == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if kind == "cmaes":
        # CMA-ES handles the numeric knobs; categoricals fall back to independent random sampling.
        return optuna.samplers.CmaEsSampler(seed=seed, warn_independent_sampling=False)
    return SteadySpaceTPE(seed=seed, multivariate=True, constant_liar=True)
