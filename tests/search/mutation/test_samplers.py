from typing import Annotated, Literal

import optuna

from kernels.params import Choice, IntRange, ParamSpace
from search.mutation.samplers import SteadySpaceTPE, distributions


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


def test_steady_space_tpe_asks_what_optunas_tpe_asks():
    dists = distributions(Space)

    def asks(sampler) -> list[dict]:
        study = optuna.create_study(sampler=sampler)
        out = []
        for i in range(30):
            trial = study.ask(dists)
            out.append(dict(trial.params))
            if i % 3 != 2:  # a third stay running, as candidates in flight do
                study.tell(trial, float(sum((k + 1) * len(repr(v)) for k, v in enumerate(sorted(trial.params.values(), key=repr)))))
        return out

    kwargs = dict(seed=11, multivariate=True, constant_liar=True, n_startup_trials=5)
    assert asks(SteadySpaceTPE(**kwargs)) == asks(optuna.samplers.TPESampler(**kwargs))
