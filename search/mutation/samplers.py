"""How a study samples: a family's parameter space as Optuna distributions, and the sampler that
each study of :mod:`search.mutation.tuning` asks through."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator

import numpy as np
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
    """Multivariate TPE for one study whose every trial is asked in the same distributions, by
    one process (the tuner asks each study in its family's space, a new space being a new study,
    and the driver is the journal's only writer).  It draws what Optuna's ``TPESampler`` draws
    (``tests/search/mutation/test_samplers.py`` holds it to that), at less cost per ask:

    - the intersection of the trials' spaces is worked out until it is not empty, then kept
      (Optuna re-reads every trial since the oldest one running at each ask);
    - each trial's parameters in TPE's internal form are worked out once: a trial's parameters
      never change once set, and Optuna converts every trial's every parameter at each ask
      (with 39 knobs and a few hundred trials, a third of an ask);
    - the relative sample is not also written to the trial's system attributes: Optuna does that
      so that other processes' constant liar sees a trial's parameters before they are set, and
      here every other trial's parameters are set when it is read (one journal log an ask less).

    While :meth:`accepting` holds a test, it also takes the best candidate *that passes it* of the
    ones TPE draws and scores for an ask (24 by default), where Optuna takes the best one: the
    tuner passes its space's constraints and the points asked before.  Without it, most of the
    tuner's asks in a constrained space (``cuda_blocked``'s) drew an invalid point first, each
    told PRUNED and followed by a whole new ask, 2.8 TPE builds a proposal.  When no candidate
    passes, the best one is taken as Optuna takes it (the tuner then prunes it and asks again).
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._steady: dict[str, BaseDistribution] = {}
        self._rows: dict[int, tuple[float, ...]] = {}  # trial number -> internal values, steady space order
        self._accept: Callable[[dict[str, Any]], bool] | None = None

    @contextmanager
    def accepting(self, test: Callable[[dict[str, Any]], bool]) -> Iterator[None]:
        """Asks in this block take the best drawn candidate for which ``test(params)`` holds."""
        self._accept = test
        try:
            yield
        finally:
            self._accept = None

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        if not self._steady:
            self._steady = super().infer_relative_search_space(study, trial)
        return dict(self._steady)

    def sample_relative(self, study: optuna.Study, trial: FrozenTrial,
                        search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        if self._group:  # not how the tuner makes it: Optuna's own path
            return super().sample_relative(study, trial, search_space)
        return self._sample_relative(study, trial, search_space)

    def _get_internal_repr(self, trials: list[FrozenTrial], search_space: dict[str, BaseDistribution],
                           study: optuna.Study) -> dict[str, np.ndarray]:
        steady = self._steady
        if len(search_space) != len(steady) or any(steady.get(n) is not d for n, d in search_space.items()):
            # A single knob sampled independently (Optuna's distributions compare slowly: by identity here).
            return super()._get_internal_repr(trials, search_space, study)
        names = list(search_space)
        rows = []
        for trial in trials:
            row = self._rows.get(trial.number)
            if row is None:
                params = trial.params
                complete = search_space.keys() <= params.keys()
                if not complete:  # asked by another process and still being set: Optuna's way
                    params = self._get_params(trial, study)
                    if not search_space.keys() <= params.keys():
                        continue
                row = tuple(search_space[n].to_internal_repr(params[n]) for n in names)
                if complete:
                    self._rows[trial.number] = row
            rows.append(row)
        columns = list(zip(*rows)) if rows else [() for _ in names]
        return {n: np.asarray(column) for n, column in zip(names, columns)}

    def _compute_acquisition_func(self, samples: dict[str, np.ndarray], mpe_below: Any, mpe_above: Any) -> np.ndarray:
        values = super()._compute_acquisition_func(samples, mpe_below, mpe_above)
        if self._accept is None or samples.keys() != self._steady.keys():
            return values
        return rule_out_unacceptable(values, samples, self._steady, self._accept)


def rule_out_unacceptable(values: np.ndarray, samples: dict[str, np.ndarray],
                          space: dict[str, BaseDistribution], accept: Callable[[dict[str, Any]], bool]) -> np.ndarray:
    """``values`` (TPE's acquisition per drawn candidate; the best is taken, ties to the first) with
    every candidate that ranks above the best acceptable one set to minus infinity, so that the
    best acceptable one is taken; ``values`` unchanged when none is acceptable.  Candidates are
    tested best first, and only until one passes."""
    rejected: list[int] = []
    for i in np.argsort(-values, kind="stable"):
        params = {name: dist.to_external_repr(samples[name][i].item()) for name, dist in space.items()}
        if accept(params):
            if not rejected:
                return values
            out = values.copy()
            out[rejected] = -np.inf
            return out
        rejected.append(i)
    return values


def sampler_for(kind: str, seed: int) -> optuna.samplers.BaseSampler:
    if kind == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if kind == "cmaes":
        # CMA-ES handles the numeric knobs; categoricals fall back to independent random sampling.
        return optuna.samplers.CmaEsSampler(seed=seed, warn_independent_sampling=False)
    return SteadySpaceTPE(seed=seed, multivariate=True, constant_liar=True)
