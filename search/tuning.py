"""Optuna parameter tuning: one study per (family, structure).

A structure is a fingerprint of the code with its PARAMS values blanked, so all
candidates that differ only in parameters share a study and TPE learns across
them.  Trials are asked and told by candidate id (ask/tell, never a blocking
objective): the driver evaluates the candidate on a GPU whenever it gets to
it, and a failed candidate is told as FAIL.  Studies live in a journal file in
the run directory, so ``resume`` continues them and optuna-dashboard reads them
(``optuna-dashboard runs/<name>/optuna.journal``).
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import TrialState
from pydantic import ValidationError

from kernels.params import Choice, FloatRange, IntRange, ParamSpace

optuna.logging.set_verbosity(logging.WARNING)

STUDY_ATTR_FAMILY = "family"
STUDY_ATTR_FINGERPRINT = "fingerprint"
TRIAL_ATTR_CANDIDATE = "candidate_id"


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


def _sampler(kind: str, seed: int) -> optuna.samplers.BaseSampler:
    if kind == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if kind == "cmaes":
        # CMA-ES handles the numeric knobs; categoricals fall back to independent random sampling.
        return optuna.samplers.CmaEsSampler(seed=seed, warn_independent_sampling=False)
    return optuna.samplers.TPESampler(seed=seed, multivariate=True, constant_liar=True)


@dataclass(frozen=True)
class Proposal:
    study: str
    trial_number: int
    params: dict[str, Any]
    trial: optuna.Trial


class TunerExhausted(Exception):
    """This structure has used its trial budget, or the space has no untried valid point left."""


class Tuner:
    def __init__(self, path: Path, sampler: str = "tpe", seed: int = 0, trials_per_structure: int = 60) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.storage = JournalStorage(JournalFileBackend(str(path)))
        self.sampler_kind = sampler
        self.seed = seed
        self.trials_per_structure = trials_per_structure
        self._studies: dict[str, optuna.Study] = {}

    @staticmethod
    def study_name(family: str, fingerprint: str) -> str:
        return f"{family}:{fingerprint}"

    def study(self, family: str, fingerprint: str) -> optuna.Study:
        name = self.study_name(family, fingerprint)
        if name not in self._studies:
            # Seed per study, so two studies do not walk in lockstep and a resume samples the same way.
            sampler_seed = (self.seed * 1_000_003 + sum(map(ord, name))) % (2**31)
            study = optuna.create_study(study_name=name, storage=self.storage, direction="minimize",
                                        sampler=_sampler(self.sampler_kind, sampler_seed), load_if_exists=True)
            study.set_user_attr(STUDY_ATTR_FAMILY, family)
            study.set_user_attr(STUDY_ATTR_FINGERPRINT, fingerprint)
            self._studies[name] = study
        return self._studies[name]

    def trials_used(self, family: str, fingerprint: str) -> int:
        """Trials that became candidates (invalid or duplicate asks cost no evaluation)."""
        return sum(TRIAL_ATTR_CANDIDATE in t.user_attrs for t in self.study(family, fingerprint).get_trials(deepcopy=False))

    def ask(self, family: str, fingerprint: str, space: type[ParamSpace], parent_params: Mapping[str, Any],
            max_invalid: int = 50) -> Proposal:
        """New parameters for this structure, valid in ``space`` and not evaluated before."""
        study = self.study(family, fingerprint)
        dists = distributions(space)
        if set(dists) != set(parent_params):
            raise TunerExhausted(f"parameters {sorted(parent_params)} do not match the space {sorted(dists)}")
        trials = study.get_trials(deepcopy=False)
        if not trials:
            # The parent's point first: the study then knows where the known-good region is.
            study.enqueue_trial(dict(parent_params), skip_if_exists=True)
        if self.trials_used(family, fingerprint) >= self.trials_per_structure:
            raise TunerExhausted(f"{study.study_name} used its {self.trials_per_structure} trials")
        seen = {_key(t.params) for t in trials if t.state != TrialState.FAIL or t.user_attrs.get(TRIAL_ATTR_CANDIDATE)}
        repeats = 0
        for _ in range(max_invalid):
            if repeats >= 8:
                # The sampler keeps proposing evaluated points (small spaces, converged TPE):
                # put an untried valid point in front of it instead of giving up.
                fresh = self._unseen_point(space, seen, len(trials))
                if fresh is None:
                    break
                study.enqueue_trial(fresh)
                repeats = 0
            trial = study.ask(dists)
            params = dict(trial.params)
            try:
                space(**params)
            except ValidationError as exc:
                study.tell(trial, state=TrialState.FAIL)
                study.set_user_attr("last_invalid", str(exc.errors()[0]["msg"])[:200])
                continue
            key = _key(params)
            if key in seen:
                # Already evaluated (or running): do not spend a GPU on it again.
                study.tell(trial, state=TrialState.PRUNED)
                repeats += 1
                continue
            return Proposal(study=study.study_name, trial_number=trial.number, params=params, trial=trial)
        raise TunerExhausted(f"{study.study_name}: no new valid point found")

    def _unseen_point(self, space: type[ParamSpace], seen: set[tuple], salt: int) -> dict[str, Any] | None:
        rng = random.Random(self.seed * 7_919 + salt)
        for _ in range(200):
            try:
                params = space.sample(rng).as_params()
            except Exception:
                return None
            if _key(params) not in seen:
                return params
        return None

    def bind(self, proposal: Proposal, candidate_id: str) -> None:
        """Key the trial by the candidate that will be evaluated for it."""
        proposal.trial.set_user_attr(TRIAL_ATTR_CANDIDATE, candidate_id)

    def tell(self, study_name: str, trial_number: int, value: float | None) -> None:
        """``value`` is the fitness (geomean ms); None tells a failure."""
        study = self._studies.get(study_name) or optuna.load_study(study_name=study_name, storage=self.storage)
        trial = study.get_trials(deepcopy=False)[trial_number]
        if trial.state.is_finished():
            return  # told before the driver died; a resume must not tell twice
        if value is None:
            study.tell(trial_number, state=TrialState.FAIL)
        else:
            study.tell(trial_number, value)

    def best(self, family: str, fingerprint: str) -> tuple[dict[str, Any], float] | None:
        study = self.study(family, fingerprint)
        done = [t for t in study.get_trials(deepcopy=False) if t.state == TrialState.COMPLETE]
        if not done:
            return None
        best = min(done, key=lambda t: t.value)  # type: ignore[arg-type, return-value]
        return dict(best.params), float(best.value)  # type: ignore[arg-type]


def _key(params: Mapping[str, Any]) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in params.items()))
