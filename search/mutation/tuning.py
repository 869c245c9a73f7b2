"""Optuna parameter tuning: one study per (family, structure).

A structure is a fingerprint of the code with its PARAMS values blanked, so all
candidates that differ only in parameters share a study and TPE learns across
them.  Trials are asked and told by candidate id (ask/tell, never a blocking
objective): the driver evaluates the candidate on a GPU whenever it gets to
it, and a failed candidate is told as FAIL.  The studies are a faithful record:
every trial ends COMPLETE, FAIL or PRUNED as its candidate ended, keyed by the
candidate id; the parent's point is told with its measured value (never asked
again); an ask that repeats an evaluated point is told that point's value
(``duplicate_of``), an invalid or unusable ask is PRUNED with the reason; a trial
whose driver was killed before its candidate was stored is told FAIL with
``lost`` when the run resumes (:meth:`Tuner.reconcile`).  Studies live in a journal file in
the run directory, so ``resume`` continues them and optuna-dashboard reads them
(``optuna-dashboard runs/<name>/optuna.journal``); it is written in batches
(:mod:`search.mutation.journal`): a trial is on disk once bound to its candidate, a tell once told,
and an ask that never became a candidate with the next of those.
"""

from __future__ import annotations

import logging
import math
import random
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import AbstractSet, Any, Callable, Mapping

import optuna
from optuna.distributions import BaseDistribution
from optuna.storages import JournalStorage
from optuna.trial import FrozenTrial, TrialState
from pydantic import ValidationError

from kernels.params import ParamSpace
from search.mutation import asks
from search.mutation.journal import BufferedJournal
from search.mutation.samplers import SteadySpaceTPE, distributions, sampler_for

optuna.logging.set_verbosity(logging.WARNING)

STUDY_ATTR_FAMILY = "family"
STUDY_ATTR_FINGERPRINT = "fingerprint"
# What every study minimises: the candidate's fitness, the geometric mean of its benchmark medians in ms
# (of the focused cases in a focused run; a screened child's estimate on the same scale).
METRIC_NAME = "geomean_ms"
TRIAL_ATTR_CANDIDATE = "candidate_id"
TRIAL_ATTR_SEED = "seed"  # the parent's own point, told with its measured value
TRIAL_ATTR_DUPLICATE = "duplicate_of"  # the trial number whose evaluation this ask repeated
TRIAL_ATTR_SKIPPED = "skipped"  # why a PRUNED ask was not evaluated
TRIAL_ATTR_LOST = "lost"  # its driver died before the candidate was stored


@dataclass(frozen=True)
class KnownOutcome:
    """What the run store says about a trial's candidate, for :meth:`Tuner.reconcile`."""

    finished: bool
    value: float | None  # the fitness when verified; None for a failure or while unfinished


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
        self.journal = BufferedJournal(path)
        self.storage = JournalStorage(self.journal)
        self.sampler_kind = sampler
        self.seed = seed
        self.trials_per_structure = trials_per_structure
        self._studies: dict[str, optuna.Study] = {}
        # (study, trial number) -> asks that repeated its point while it was still running,
        # told the same outcome when it is told.
        self._echoes: dict[tuple[str, int], list[int]] = {}
        # study -> trial number -> point_key of its params: a trial's point never changes once
        # it is asked, and every ask compares the new point with all of them.
        self._keys: dict[str, dict[int, tuple]] = {}
        # study -> what every ask needs of its trials, kept up to date as trials are added
        # (a study only grows, and a trial's point is fixed once asked): the points asked, and the
        # trials that became candidates.  Scanning every trial per ask cost O(trials) per
        # proposal, 9 ms an evaluation at 64 GPUs with a few thousand trials.
        self._index: dict[str, _StudyIndex] = {}
        self._dists: dict[type[ParamSpace], dict[str, BaseDistribution]] = {}

    def _key(self, study: optuna.Study, trial: FrozenTrial) -> tuple:
        if trial.state == TrialState.WAITING:  # enqueued: its point is not its params until asked
            return point_key(trial.params)
        keys = self._keys.setdefault(study.study_name, {})
        key = keys.get(trial.number)
        if key is None:
            key = keys[trial.number] = point_key(trial.params)
        return key

    @staticmethod
    def study_name(family: str, fingerprint: str) -> str:
        return f"{family}:{fingerprint}"

    def study(self, family: str, fingerprint: str) -> optuna.Study:
        name = self.study_name(family, fingerprint)
        if name not in self._studies:
            # Seed per study, so two studies do not walk in lockstep and a resume samples the same way.
            sampler_seed = (self.seed * 1_000_003 + sum(map(ord, name))) % (2**31)
            study = optuna.create_study(study_name=name, storage=self.storage, direction="minimize",
                                        sampler=sampler_for(self.sampler_kind, sampler_seed), load_if_exists=True)
            study.set_user_attr(STUDY_ATTR_FAMILY, family)
            study.set_user_attr(STUDY_ATTR_FINGERPRINT, fingerprint)
            if study.metric_names != [METRIC_NAME]:  # optuna-dashboard shows it instead of "Objective 0"
                with warnings.catch_warnings():  # "experimental" since Optuna 3.2, and stable in use
                    warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                    study.set_metric_names([METRIC_NAME])
            self._studies[name] = study
        return self._studies[name]

    def _indexed(self, study: optuna.Study, trials: list[FrozenTrial] | None = None) -> _StudyIndex:
        """The study's index, brought up to date with trials added since the last call (``trials``:
        the study's trials as just read; each read copies the list of all of them)."""
        index = self._index.get(study.study_name)
        if trials is None:
            trials = study.get_trials(deepcopy=False)
        if index is None:
            index = self._index[study.study_name] = _StudyIndex()
            index.used = sum(_evaluated(t) for t in trials)
        for trial in trials[index.covered:]:
            if trial.state == TrialState.WAITING:
                index.waiting.append(trial.number)
            else:
                index.keys.add(self._key(study, trial))
        index.covered = len(trials)
        if index.waiting:  # enqueued points become their params when asked
            still = []
            for number in index.waiting:
                trial = trials[number]
                if trial.state == TrialState.WAITING:
                    still.append(number)
                else:
                    index.keys.add(self._key(study, trial))
            index.waiting = still
        return index

    def _asked_keys(self, study: optuna.Study, trials: list[FrozenTrial] | None = None) -> set[tuple]:
        if trials is None:
            trials = study.get_trials(deepcopy=False)
        index = self._indexed(study, trials)
        if not index.waiting:
            return index.keys
        return index.keys | {self._key(study, trials[n]) for n in index.waiting}

    def trials_used(self, family: str, fingerprint: str) -> int:
        """Trials that became candidates (the seed point, invalid and duplicate asks cost no evaluation)."""
        return self._indexed(self.study(family, fingerprint)).used

    def ask(self, family: str, fingerprint: str, space: type[ParamSpace], parent_params: Mapping[str, Any],
            max_invalid: int = 50, parent_id: str | None = None, parent_value: float | None = None) -> Proposal:
        """New parameters for this structure, valid in ``space`` and not evaluated before (a new
        study is first told the parent's point: :meth:`_open`)."""
        study, dists, trials = self._open(family, fingerprint, space, parent_params, parent_id, parent_value)
        seen = {self._key(study, t) for t in trials if t.state != TrialState.FAIL or t.user_attrs.get(TRIAL_ATTR_CANDIDATE)}
        evaluated = {self._key(study, t): t for t in trials if TRIAL_ATTR_CANDIDATE in t.user_attrs
                     and TRIAL_ATTR_DUPLICATE not in t.user_attrs}
        repeats = 0
        for _ in range(max_invalid):
            if repeats >= 8:
                # The sampler keeps proposing evaluated points (small spaces, converged TPE):
                # ask an untried valid point instead of giving up.
                fresh = self._unseen_point(space, seen, len(trials))
                if fresh is None:
                    break
                trial = asks.ask_at(study, dists, fresh)
                repeats = 0
            else:
                trial = self._sampled(study, dists, space, seen)
            params = dict(trial.params)
            try:
                space(**params)
            except ValidationError as exc:
                # Not a failed evaluation (nothing ran): pruned, with the constraint it broke.
                trial.set_user_attr(TRIAL_ATTR_SKIPPED, "invalid: " + str(exc.errors()[0]["msg"])[:200])
                study.tell(trial, state=TrialState.PRUNED)
                continue
            key = point_key(params)
            if key in seen:
                # Already evaluated (or running): do not spend a GPU on it again, but tell the
                # study what that evaluation found (or will find).
                self._echo(study, trial, evaluated.get(key))
                repeats += 1
                continue
            return Proposal(study=study.study_name, trial_number=trial.number, params=params, trial=trial)
        raise TunerExhausted(f"{study.study_name}: no new valid point found")

    def _sampled(self, study: optuna.Study, dists: dict[str, BaseDistribution], space: type[ParamSpace],
                 seen: AbstractSet[tuple]) -> optuna.Trial:
        """An asked trial; TPE takes its best drawn point that is valid and not asked before.  In one
        journal log (:mod:`search.mutation.asks`) unless the study holds enqueued trials, which
        ``Study.ask`` hands out first."""
        sampler = study.sampler
        index = self._index.get(study.study_name)  # brought up to date by _open, before this ask
        one_log = asks.draws_in_one_log(sampler) and index is not None and not index.waiting

        def ask() -> optuna.Trial:
            return asks.ask_sampled(study, dists) if one_log else study.ask(dists)

        if not isinstance(sampler, SteadySpaceTPE):
            return ask()

        def acceptable(params: dict[str, Any]) -> bool:
            if point_key(params) in seen:
                return False
            try:
                space(**params)
            except ValidationError:
                return False
            return True

        with sampler.accepting(acceptable):
            return ask()

    def _open(self, family: str, fingerprint: str, space: type[ParamSpace], parent_params: Mapping[str, Any],
              parent_id: str | None, parent_value: float | None
              ) -> tuple[optuna.Study, dict[str, BaseDistribution], list[FrozenTrial]]:
        """The structure's study, its distributions and trials, ready for an ask: a new study is
        first told the parent's point with its measured value (``parent_value``), so it knows
        where the known-good region is without spending an evaluation on it.  Raises
        :class:`TunerExhausted` when the parent's knobs are not the space's, or the budget is used."""
        study = self.study(family, fingerprint)
        if self.spent(family, fingerprint):  # before reading the trials: each read copies their list
            raise TunerExhausted(f"{study.study_name} used its {self.trials_per_structure} trials")
        dists = self._distributions(space)
        if set(dists) != set(parent_params):
            raise TunerExhausted(f"parameters {sorted(parent_params)} do not match the space {sorted(dists)}")
        trials = study.get_trials(deepcopy=False)
        if not trials and parent_value is not None:
            self._tell_seed(study, dists, parent_params, parent_id, parent_value)
            trials = study.get_trials(deepcopy=False)
        if self._indexed(study, trials).used >= self.trials_per_structure:
            raise TunerExhausted(f"{study.study_name} used its {self.trials_per_structure} trials")
        return study, dists, trials

    def ask_at(self, family: str, fingerprint: str, space: type[ParamSpace], parent_params: Mapping[str, Any],
               params: Mapping[str, Any], parent_id: str | None = None,
               parent_value: float | None = None) -> Proposal | None:
        """A trial at a point another operator chose (a local step), so that the study records
        every evaluation of its structure and TPE learns from them too.  None if the point was
        asked before (evaluated, running or skipped); :class:`TunerExhausted` when the
        structure's trial budget is used."""
        study, dists, trials = self._open(family, fingerprint, space, parent_params, parent_id, parent_value)
        if set(dists) != set(params):
            raise TunerExhausted(f"parameters {sorted(params)} do not match the space {sorted(dists)}")
        if point_key(params) in self._asked_keys(study, trials):
            return None
        try:
            trial = asks.ask_at(study, dists, params)
        except ValueError:  # a value outside the study's distributions: no trial of it, nothing written
            return None
        return Proposal(study=study.study_name, trial_number=trial.number, params=dict(trial.params), trial=trial)

    def asked(self, family: str, fingerprint: str) -> AbstractSet[tuple]:
        """The points this structure's study holds (any state), as :func:`point_key` keys: the
        tuner's own set, not a copy (a copy per proposal cost O(trials)); asks after this call may
        or may not show in it."""
        return self._asked_keys(self.study(family, fingerprint))

    def spent(self, family: str, fingerprint: str) -> bool:
        """Whether this structure has used its trial budget; it never gets it back (a study only grows)."""
        index = self._index.get(self.study_name(family, fingerprint))
        if index is not None:
            return index.used >= self.trials_per_structure
        return self.trials_used(family, fingerprint) >= self.trials_per_structure

    def known_spent(self, family: str, fingerprint: str) -> bool:
        """:meth:`spent` from what was read: False for a study not opened (opening would create it)."""
        index = self._index.get(self.study_name(family, fingerprint))
        return index is not None and index.used >= self.trials_per_structure

    def _distributions(self, space: type[ParamSpace]) -> dict[str, BaseDistribution]:
        dists = self._dists.get(space)
        if dists is None:
            dists = self._dists[space] = distributions(space)
        return dists

    def _unseen_point(self, space: type[ParamSpace], seen: set[tuple], salt: int) -> dict[str, Any] | None:
        rng = random.Random(self.seed * 7_919 + salt)
        for _ in range(200):
            try:
                params = space.sample(rng).as_params()
            except Exception:
                return None
            if point_key(params) not in seen:
                return params
        return None

    def _tell_seed(self, study: optuna.Study, dists: dict[str, BaseDistribution], params: Mapping[str, Any],
                   parent_id: str | None, value: float) -> None:
        attrs: dict[str, Any] = {TRIAL_ATTR_SEED: True}
        if parent_id is not None:
            attrs[TRIAL_ATTR_CANDIDATE] = parent_id
        try:
            seed = optuna.trial.create_trial(params=dict(params), distributions=dists, value=value, user_attrs=attrs)
        except ValueError:  # the parent's values lie outside the space (an edited range): nothing to tell
            return
        study.add_trial(seed)

    def _echo(self, study: optuna.Study, trial: optuna.Trial, original: FrozenTrial | None) -> None:
        if original is None:  # a point asked but never evaluated (an unusable ask): nothing to copy
            trial.set_user_attr(TRIAL_ATTR_SKIPPED, "duplicate of an unevaluated ask")
            study.tell(trial, state=TrialState.PRUNED)
            return
        trial.set_user_attr(TRIAL_ATTR_DUPLICATE, original.number)
        trial.set_user_attr(TRIAL_ATTR_CANDIDATE, original.user_attrs[TRIAL_ATTR_CANDIDATE])
        if original.state == TrialState.COMPLETE:
            study.tell(trial, original.value)
        elif original.state.is_finished():
            study.tell(trial, state=original.state)
        else:  # still being evaluated: told with it (see tell)
            self._echoes.setdefault((study.study_name, original.number), []).append(trial.number)

    def bind(self, proposal: Proposal, candidate_id: str) -> None:
        """Key the trial by the candidate that will be evaluated for it; on disk before the store
        commits the candidate that names the trial."""
        proposal.trial.set_user_attr(TRIAL_ATTR_CANDIDATE, candidate_id)
        index = self._index.get(proposal.study)
        if index is not None:  # an asked trial, never a seed's or an echo's: one more evaluated
            index.used += 1
        self.flush()

    def flush(self) -> None:
        """Write what the journal holds for the file (asks, echoes, tells) to it."""
        self.journal.flush()

    def skip(self, proposal: Proposal, reason: str) -> None:
        """An asked point that will not be evaluated (the rendered child was not new): PRUNED."""
        proposal.trial.set_user_attr(TRIAL_ATTR_SKIPPED, reason[:200])
        self._load(proposal.study).tell(proposal.trial_number, state=TrialState.PRUNED)
        self.flush()

    def withdraw(self, study_name: str, trial_number: int, reason: str) -> None:
        """A bound trial whose candidate was taken back before it ran: PRUNED with the reason, and
        its place in the structure's budget given back (its repeats asked meanwhile go with it)."""
        study = self._load(study_name)
        trials = study.get_trials(deepcopy=False)
        for number in [trial_number, *self._echoes.pop((study_name, trial_number), [])]:
            if trials[number].state.is_finished():
                continue
            self.storage.set_trial_user_attr(trials[number]._trial_id, TRIAL_ATTR_SKIPPED, reason[:200])
            study.tell(number, state=TrialState.PRUNED)
        index = self._index.get(study_name)
        if index is not None and TRIAL_ATTR_DUPLICATE not in trials[trial_number].user_attrs:
            index.used = max(0, index.used - 1)
        self.flush()

    def _load(self, study_name: str) -> optuna.Study:
        return self._studies.get(study_name) or optuna.load_study(study_name=study_name, storage=self.storage)

    def tell(self, study_name: str, trial_number: int, value: float | None) -> None:
        """``value`` is the fitness (geomean ms); None tells a failure."""
        study = self._load(study_name)
        for number in [trial_number, *self._echoes.pop((study_name, trial_number), [])]:
            # The one trial, not a list of the study's every trial per tell (O(trials), 1-2 ms at 64 GPUs).
            trial = self.storage.get_trial(self.storage.get_trial_id_from_study_id_trial_number(study._study_id, number))
            if trial.state.is_finished():
                continue  # told before the driver died; a resume must not tell twice
            self._finish(study, trial, value)
        self.flush()

    def _finish(self, study: optuna.Study, trial: FrozenTrial, value: float | None) -> None:
        """What ``study.tell`` does for a running trial, less the deep copy of the trial it returns
        (its every distribution copied: most of a tell's time at one tell an evaluation)."""
        if value is None or not math.isfinite(value):
            state, values = TrialState.FAIL, None
        else:
            state, values = TrialState.COMPLETE, [float(value)]
        study.sampler.after_trial(study, trial, state, values)
        self.storage.set_trial_state_values(trial._trial_id, state, values)

    def reconcile(self, outcome_of: Callable[[str], KnownOutcome | None]) -> int:
        """After a killed driver: settle every trial left RUNNING.  A trial whose candidate the
        store finished is told that outcome; one whose candidate the store never got (or that was
        never bound) is told FAIL with ``lost``; a repeat of a still-running trial waits for it.
        Returns how many trials were told."""
        told = 0
        for summary in self.storage.get_all_studies():
            study = self._load(summary.study_name)
            trials = study.get_trials(deepcopy=False)
            for trial in trials:
                if trial.state != TrialState.RUNNING:
                    continue
                original = trial.user_attrs.get(TRIAL_ATTR_DUPLICATE)
                if original is not None:
                    first = trials[int(original)]
                    if first.state == TrialState.RUNNING:
                        self._echoes.setdefault((study.study_name, first.number), []).append(trial.number)
                        continue
                    study.tell(trial.number, first.value if first.state == TrialState.COMPLETE else None,
                               state=first.state)
                    told += 1
                    continue
                cid = trial.user_attrs.get(TRIAL_ATTR_CANDIDATE)
                known = outcome_of(cid) if cid else None
                if known is not None and not known.finished:
                    continue  # queued again by the resume: told when it is evaluated
                if known is None:
                    self.storage.set_trial_user_attr(trial._trial_id, TRIAL_ATTR_LOST, True)
                    study.tell(trial.number, state=TrialState.FAIL)
                elif known.value is None:
                    study.tell(trial.number, state=TrialState.FAIL)
                else:
                    study.tell(trial.number, known.value)
                told += 1
        self.flush()
        return told

    def best(self, family: str, fingerprint: str) -> tuple[dict[str, Any], float] | None:
        study = self.study(family, fingerprint)
        done = [t for t in study.get_trials(deepcopy=False) if t.state == TrialState.COMPLETE]
        if not done:
            return None
        best = min(done, key=lambda t: t.value)  # type: ignore[arg-type, return-value]
        return dict(best.params), float(best.value)  # type: ignore[arg-type]


@dataclass
class _StudyIndex:
    covered: int = 0  # trials indexed (a study's trials only grow, in number order)
    keys: set[tuple] = field(default_factory=set)  # point keys of indexed trials not waiting
    waiting: list[int] = field(default_factory=list)  # enqueued, not asked yet
    used: int = 0  # trials that became candidates (trials_used)


def _evaluated(trial: FrozenTrial) -> bool:
    attrs = trial.user_attrs
    # A skipped trial bound to a candidate was withdrawn before it ran (Tuner.withdraw): no budget spent.
    return TRIAL_ATTR_CANDIDATE in attrs and not any(k in attrs for k in (
        TRIAL_ATTR_SEED, TRIAL_ATTR_DUPLICATE, TRIAL_ATTR_SKIPPED))


def point_key(params: Mapping[str, Any]) -> tuple:
    """How the tuner tells one point from another (operators that pick points use it too)."""
    return tuple(sorted((k, repr(v)) for k, v in params.items()))
