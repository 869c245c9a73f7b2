"""A study's trial asked in one journal log.

``Study.ask(distributions)`` writes a trial as one log to create it and then one log per knob
(``set_trial_param``), each followed by a replay of the journal: 25 logs and 24 replays for a
23-knob family, a fifth of the driver's CPU at 64 simulated GPUs (cProfile, docs/scale.md).
The tuner knows every knob of every trial before it is written (a trial is asked in its
family's whole space), so here the point is drawn first, as ``Study.ask`` draws it, and the
trial is written once, running, with its parameters (the journal's own create-with-template
log, which ``Study.add_trial`` uses too).

:func:`ask_sampled` draws in the order ``Study.ask`` does (the sampler's relative sample,
then each knob outside it from ``sample_independent``, in the distributions' order), so a study
draws the same points either way (``tests/search/mutation/test_asks.py``).  It is for samplers
whose relative sample writes nothing to the trial (:class:`SteadySpaceTPE`, ``RandomSampler``);
a study with enqueued trials is asked by ``Study.ask``, which hands those out first.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Mapping

import optuna
from optuna.distributions import BaseDistribution, check_distribution_compatibility
from optuna.samplers import RandomSampler
from optuna.trial import FrozenTrial, TrialState

from search.mutation.samplers import SteadySpaceTPE


def draws_in_one_log(sampler: optuna.samplers.BaseSampler) -> bool:
    """Whether :func:`ask_sampled` asks as ``Study.ask`` would with this sampler (one whose relative
    sample writes nothing to the trial it is drawn for: that trial is not in the storage yet)."""
    return type(sampler) in (SteadySpaceTPE, RandomSampler) and not getattr(sampler, "_group", False)


def _running(number: int, params: Mapping[str, Any], dists: Mapping[str, BaseDistribution]) -> FrozenTrial:
    return FrozenTrial(number=number, state=TrialState.RUNNING, value=None, datetime_start=datetime.now(),
                       datetime_complete=None, params=dict(params),
                       distributions={name: dists[name] for name in params}, user_attrs={}, system_attrs={},
                       intermediate_values={}, trial_id=-1)


def ask_at(study: optuna.Study, dists: Mapping[str, BaseDistribution], params: Mapping[str, Any]) -> optuna.Trial:
    """A running trial of ``study`` at ``params`` (every knob of ``dists``), written in one log."""
    ordered = {name: params[name] for name in dists}
    for name, dist in dists.items():  # what Trial._suggest checks of a value before it is written
        if not dist._contains(dist.to_internal_repr(ordered[name])):
            raise ValueError(f"{name}={ordered[name]!r} lies outside {dist}")
    trial_id = study._storage.create_new_trial(study._study_id, template_trial=_running(-1, ordered, dists))
    return optuna.Trial(study, trial_id)


def ask_sampled(study: optuna.Study, dists: Mapping[str, BaseDistribution]) -> optuna.Trial:
    """A running trial at the point the study's sampler draws for its next trial, written in one log."""
    sampler = study.sampler
    if not draws_in_one_log(sampler):
        raise TypeError(f"{type(sampler).__name__} writes to the trial it draws for: ask it with Study.ask")
    study._thread_local.cached_all_trials = None  # as Study.ask: the sampler reads the trials afresh
    drawing = _running(study._storage.get_n_trials(study._study_id), {}, dists)
    sampler.before_trial(study, drawing)
    space = sampler.infer_relative_search_space(study, drawing)
    relative = sampler.sample_relative(study, drawing, space)
    params: dict[str, Any] = {}
    for name, dist in dists.items():
        if dist.single():
            value = optuna.distributions._get_single_value(dist)
        elif name in relative and _relative_fits(name, dist, relative, space):
            value = relative[name]
        else:
            value = sampler.sample_independent(study, _running(drawing.number, params, dists), name, dist)
        params[name] = value
    return ask_at(study, dists, params)


def _relative_fits(name: str, dist: BaseDistribution, relative: Mapping[str, Any],
                   space: Mapping[str, BaseDistribution]) -> bool:
    """``Trial._is_relative_param``: the relative sample's value is used where it lies in ``dist``."""
    if name not in space:
        raise ValueError(f"the parameter {name} was sampled by sample_relative but is not in its search space")
    check_distribution_compatibility(space[name], dist)
    return bool(dist._contains(dist.to_internal_repr(relative[name])))
