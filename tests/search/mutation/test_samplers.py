from typing import Annotated, Literal

import numpy as np
import optuna

from kernels.params import Choice, IntRange, ParamSpace
from search.mutation.samplers import SteadySpaceTPE, distributions, rule_out_unacceptable


class Space(ParamSpace):
    block: Annotated[int, Choice(16, 32, 64)] = 32
    warps: Annotated[int, IntRange(2, 8, step=2, log=True)] = 4
    stages: Annotated[int, IntRange(1, 4)] = 2
    precision: Literal["ieee", "tf32x3"] = "ieee"


def test_distributions_mirror_the_space():
    d = distributions(Space)
    assert d["block"].choices == (16, 32, 64)
    assert d["warps"].choices == (2, 4, 6, 8)  # log + step is not an Optuna int: listed
    assert (d["stages"].low, d["stages"].high) == (1, 4)
    assert d["precision"].choices == ("ieee", "tf32x3")


def _asks(sampler: optuna.samplers.BaseSampler, n: int = 40) -> list[dict]:
    """``n`` asks as the tuner makes them: a third left running (candidates in flight), some told
    pruned (invalid points), the rest told a value that depends on every knob."""
    dists = distributions(Space)
    study = optuna.create_study(sampler=sampler)
    out = []
    for i in range(n):
        trial = study.ask(dists)
        out.append(dict(trial.params))
        if i % 7 == 4:
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        elif i % 3 != 2:
            study.tell(trial, float(sum((k + 1) * len(repr(v)) for k, v in enumerate(sorted(trial.params.values(), key=repr)))))
    return out


def test_steady_space_tpe_asks_what_optunas_tpe_asks():
    kwargs = dict(seed=11, multivariate=True, constant_liar=True, n_startup_trials=5)
    steady = SteadySpaceTPE(**kwargs)
    assert _asks(steady) == _asks(optuna.samplers.TPESampler(**kwargs))
    # Its shortcuts were taken (a renamed Optuna method would leave them unused, unnoticed):
    # every trial's internal values were kept, and no relative sample was written to a trial.
    assert len(steady._rows) >= 30


def test_steady_space_tpe_writes_no_relative_sample_to_the_trials():
    study = optuna.create_study(sampler=SteadySpaceTPE(seed=3, multivariate=True, constant_liar=True, n_startup_trials=2))
    dists = distributions(Space)
    for _ in range(6):
        study.tell(study.ask(dists), 1.0)
    trial = study.ask(dists)
    assert not any(key.startswith("tpe:relative_params") for key in study.trials[trial.number].system_attrs)


def test_the_best_acceptable_candidate_is_taken_ties_to_the_first():
    space = distributions(Space)
    names = list(space)
    # Five drawn candidates in internal form; 'block' is a choice index (0: 16, 1: 32, 2: 64).
    samples = {n: np.zeros(5) for n in names}
    samples["block"] = np.array([2.0, 2.0, 1.0, 0.0, 1.0])
    values = np.array([1.0, 7.0, 3.0, 3.0, 7.0])
    tested = []

    def no_64(params):
        tested.append(params["block"])
        return params["block"] != 64

    out = rule_out_unacceptable(values, samples, space, no_64)
    assert int(np.argmax(out)) == 4  # 7.0 at 1 is a 64; the other 7.0 wins before the 3.0s
    assert tested == [64, 32], "tested best first, and only until one passes"
    assert (values == [1.0, 7.0, 3.0, 3.0, 7.0]).all(), "the caller's values are not changed"
    assert rule_out_unacceptable(values, samples, space, lambda p: True) is values
    assert rule_out_unacceptable(values, samples, space, lambda p: False) is values  # none passes: Optuna's choice


def test_asks_accepting_a_test_draw_only_points_that_pass_it():
    dists = distributions(Space)

    def invalid_points(sampler, accept) -> int:
        study = optuna.create_study(sampler=sampler)
        bad = 0
        for i in range(40):
            if accept and isinstance(sampler, SteadySpaceTPE):
                with sampler.accepting(lambda p: p["block"] != 64 and p["stages"] != 1):
                    trial = study.ask(dists)
            else:
                trial = study.ask(dists)
            p = trial.params
            if i >= 5 and (p["block"] == 64 or p["stages"] == 1):  # past the random start-up trials
                bad += 1
            # The best points are the excluded ones: TPE left to itself keeps drawing them.
            study.tell(trial, 1.0 if p["block"] == 64 or p["stages"] == 1 else 2.0 + p["warps"])
        return bad

    kwargs = dict(seed=5, multivariate=True, constant_liar=True, n_startup_trials=5)
    assert invalid_points(optuna.samplers.TPESampler(**kwargs), accept=False) >= 10
    assert invalid_points(SteadySpaceTPE(**kwargs), accept=True) == 0
