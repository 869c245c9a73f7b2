from typing import Annotated, Literal

import optuna
import pytest
from optuna.trial import TrialState
from pydantic import model_validator

from kernels.params import Choice, IntRange, ParamSpace
from search.tuning import TRIAL_ATTR_CANDIDATE, Tuner, TunerExhausted, distributions


class Space(ParamSpace):
    block: Annotated[int, Choice(16, 32, 64)] = 32
    warps: Annotated[int, IntRange(2, 8, step=2, log=True)] = 4
    stages: Annotated[int, IntRange(1, 4)] = 2
    precision: Literal["ieee", "tf32x3"] = "ieee"

    @model_validator(mode="after")
    def _rule(self):
        if self.block == 64 and self.stages > 3:
            raise ValueError("too much shared memory")
        return self


DEFAULTS = Space().as_params()


def test_distributions_mirror_the_space():
    d = distributions(Space)
    assert d["block"].choices == (16, 32, 64)
    assert d["warps"].choices == (2, 4, 6, 8)  # log + step is not an Optuna int: listed
    assert (d["stages"].low, d["stages"].high) == (1, 4)
    assert d["precision"].choices == ("ieee", "tf32x3")


def test_first_ask_is_the_parent_then_new_valid_points(tmp_path):
    tuner = Tuner(tmp_path / "j.log", seed=1)
    first = tuner.ask("fam", "fp1", Space, DEFAULTS)
    assert first.params == DEFAULTS
    tuner.bind(first, "c1")
    tuner.tell(first.study, first.trial_number, 2.0)
    seen = {tuple(sorted(DEFAULTS.items()))}
    for i in range(12):
        p = tuner.ask("fam", "fp1", Space, DEFAULTS)
        Space(**p.params)  # always valid
        key = tuple(sorted(p.params.items()))
        assert key not in seen, "never proposes a point it already evaluated"
        seen.add(key)
        tuner.bind(p, f"c{i + 2}")
        tuner.tell(p.study, p.trial_number, 1.0 + i if i % 3 else None)
    study = tuner.study("fam", "fp1")
    states = [t.state for t in study.get_trials() if TRIAL_ATTR_CANDIDATE in t.user_attrs]
    assert states.count(TrialState.FAIL) == 4 and states.count(TrialState.COMPLETE) == 9
    params, value = tuner.best("fam", "fp1")
    assert value == 2.0 and Space(**params)


def test_budget_per_structure(tmp_path):
    tuner = Tuner(tmp_path / "j.log", trials_per_structure=3)
    for i in range(3):
        p = tuner.ask("fam", "fp", Space, DEFAULTS)
        tuner.bind(p, f"c{i}")
    with pytest.raises(TunerExhausted, match="used its 3 trials"):
        tuner.ask("fam", "fp", Space, DEFAULTS)
    assert tuner.ask("fam", "other", Space, DEFAULTS)  # another structure has its own budget


def test_resume_continues_the_same_study(tmp_path):
    path = tmp_path / "j.log"
    tuner = Tuner(path, seed=3)
    p = tuner.ask("fam", "fp", Space, DEFAULTS)
    tuner.bind(p, "c1")
    pending = tuner.ask("fam", "fp", Space, DEFAULTS)  # in flight when the driver dies
    tuner.bind(pending, "c2")
    tuner.tell(p.study, p.trial_number, 3.0)

    again = Tuner(path, seed=3)
    again.tell(pending.study, pending.trial_number, 1.5)
    again.tell(pending.study, pending.trial_number, 9.9)  # told twice after a resume: ignored
    study = optuna.load_study(study_name="fam:fp", storage=again.storage)
    values = sorted(t.value for t in study.get_trials() if t.state == TrialState.COMPLETE)
    assert values == [1.5, 3.0]
    assert again.trials_used("fam", "fp") == 2


def test_mismatched_parameters_are_not_tunable(tmp_path):
    tuner = Tuner(tmp_path / "j.log")
    with pytest.raises(TunerExhausted, match="do not match"):
        tuner.ask("fam", "fp", Space, {"block": 32, "new_knob": 1})
