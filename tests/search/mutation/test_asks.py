from typing import Annotated, Literal

import optuna
import pytest
from optuna.distributions import CategoricalDistribution
from optuna.storages import JournalStorage
from optuna.trial import TrialState

from kernels.params import Choice, IntRange, ParamSpace
from search.mutation import asks
from search.mutation.journal import BufferedJournal
from search.mutation.samplers import SteadySpaceTPE, distributions


class Space(ParamSpace):
    block: Annotated[int, Choice(16, 32, 64)] = 32
    warps: Annotated[int, IntRange(2, 8, step=2, log=True)] = 4
    stages: Annotated[int, IntRange(1, 4)] = 2
    precision: Literal["ieee", "tf32x3"] = "ieee"
    only: Annotated[int, Choice(7)] = 7  # a single-valued knob: never sampled


def _study(tmp_path, name: str, sampler: optuna.samplers.BaseSampler) -> tuple[optuna.Study, BufferedJournal]:
    journal = BufferedJournal(tmp_path / f"{name}.journal")
    return optuna.create_study(study_name=name, storage=JournalStorage(journal), sampler=sampler), journal


def _tell(study: optuna.Study, trial: optuna.Trial, state: TrialState, value: float | None = None) -> None:
    """As the tuner tells (Tuner._finish): the sampler and the storage, not Study.tell, which also
    forgets the study's cached trials."""
    frozen = study._storage.get_trial(trial._trial_id)
    values = None if value is None else [value]
    study.sampler.after_trial(study, frozen, state, values)
    study._storage.set_trial_state_values(trial._trial_id, state, values)


def _run(study: optuna.Study, ask, n: int = 36) -> list[tuple]:
    """``n`` asks as the tuner makes them (a third left running, some pruned, the rest told a value
    that depends on every knob), and each trial as the journal holds it afterwards."""
    for i in range(n):
        trial = ask(study)
        if i % 7 == 4:
            _tell(study, trial, TrialState.PRUNED)
        elif i % 3 != 2:
            _tell(study, trial, TrialState.COMPLETE,
                  float(sum((k + 1) * len(repr(v)) for k, v in enumerate(sorted(trial.params.values(), key=repr)))))
    return [(t.number, t.state, list(t.params.items()), t.distributions, t.value) for t in study.get_trials()]


@pytest.mark.parametrize("make", [
    lambda: SteadySpaceTPE(seed=11, multivariate=True, constant_liar=True, n_startup_trials=5),
    lambda: optuna.samplers.RandomSampler(seed=4),
], ids=["steady-tpe", "random"])
def test_a_one_log_ask_draws_and_records_what_study_ask_does(tmp_path, make):
    dists = distributions(Space)
    optunas, _ = _study(tmp_path, "optuna", make())
    ours, journal = _study(tmp_path, "ours", make())
    expected = _run(optunas, lambda s: s.ask(dists))
    logs = []

    def one_log(study: optuna.Study) -> optuna.Trial:
        before = journal.pending
        trial = asks.ask_sampled(study, dists)
        logs.append(journal.pending - before)
        return trial

    assert _run(ours, one_log) == expected
    assert set(logs) == {1}  # Study.ask writes 1 + the 4 knobs sampled + the single one


def test_a_point_is_asked_in_one_log_in_the_spaces_order_and_checked(tmp_path):
    dists = distributions(Space)
    study, journal = _study(tmp_path, "at", optuna.samplers.RandomSampler(seed=1))
    before = journal.pending
    trial = asks.ask_at(study, dists, {"precision": "tf32x3", "stages": 3, "warps": 8, "block": 64, "only": 7})
    assert journal.pending - before == 1
    frozen = study.get_trials()[trial.number]
    assert frozen.state == TrialState.RUNNING and list(frozen.params) == list(dists)
    assert frozen.params == {"block": 64, "warps": 8, "stages": 3, "precision": "tf32x3", "only": 7}
    with pytest.raises(ValueError, match="stages=9"):
        asks.ask_at(study, dists, {"block": 64, "warps": 8, "stages": 9, "precision": "ieee", "only": 7})
    assert len(study.get_trials()) == 1  # nothing written for the rejected point


def test_samplers_that_write_to_the_drawn_trial_are_asked_by_optuna(tmp_path):
    study, _ = _study(tmp_path, "cma", optuna.samplers.CmaEsSampler(seed=1, warn_independent_sampling=False))
    assert not asks.draws_in_one_log(study.sampler)
    assert not asks.draws_in_one_log(optuna.samplers.TPESampler(seed=1))  # writes its relative sample
    with pytest.raises(TypeError, match="Study.ask"):
        asks.ask_sampled(study, {"x": CategoricalDistribution([1, 2])})


def test_the_tuner_hands_out_an_enqueued_point_first(tmp_path):
    """A journal from before the one-log asks may hold enqueued trials: Study.ask pops them."""
    from search.mutation.tuning import Tuner

    tuner = Tuner(tmp_path / "j.log", seed=2)
    defaults = Space().as_params()
    first = tuner.ask("fam", "fp", Space, defaults, parent_id="c0", parent_value=1.0)
    tuner.bind(first, "c1")
    point = {"block": 16, "warps": 2, "stages": 4, "precision": "tf32x3", "only": 7}
    assert point != first.params
    tuner.study("fam", "fp").enqueue_trial(point)
    assert tuner.ask("fam", "fp", Space, defaults).params == point


def test_the_tuners_asks_are_one_log_each(tmp_path):
    """The tuner takes the one-log path (a fall back to Study.ask would write a log per knob)."""
    from search.mutation.tuning import Tuner

    tuner = Tuner(tmp_path / "j.log", seed=4)
    defaults = Space().as_params()
    tuner.bind(tuner.ask("fam", "fp", Space, defaults, parent_id="c0", parent_value=1.0), "c1")
    for i in range(6):
        before = tuner.journal.pending
        asked = tuner.ask("fam", "fp", Space, defaults)
        assert tuner.journal.pending - before == 1
        tuner.bind(asked, f"c{i + 2}")
    before = tuner.journal.pending
    point = {"block": 64, "warps": 6, "stages": 1, "precision": "tf32x3", "only": 7}
    assert tuner.ask_at("fam", "fp", Space, defaults, point) is not None
    assert tuner.journal.pending - before == 1
