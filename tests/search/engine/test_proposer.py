"""The tuning operators' parent (Proposer.tuning_parent) with optuna.parents_with_budget: never of a
structure whose trial budget is used, and otherwise the same draws as without the key."""

from __future__ import annotations

import random

from search.config import OptunaConfig
from tests.search.engine.test_loop import config, families, make_loop  # noqa: F401  (families: a fixture)


def _loop(tmp_path, families, with_budget: bool):  # noqa: F811
    cfg = config(tmp_path, optuna=OptunaConfig(parents_with_budget=with_budget))
    loop = make_loop(cfg, families, max_evals=20)
    loop.run_until_done()  # island members to draw from
    return loop


def _draws(loop, n: int = 20) -> list[str | None]:
    loop.proposer.rng = random.Random(7)
    out = []
    for i in range(n):
        parent = loop.proposer.tuning_parent("toy", i % 2, {})
        out.append(parent.id if parent else None)
    return out


def test_no_parent_of_a_spent_structure(tmp_path, families, monkeypatch):  # noqa: F811
    on = _loop(tmp_path / "on", families, with_budget=True)
    assert all(_draws(on))  # nothing spent yet: a parent every time
    monkeypatch.setattr(on.tuner, "known_spent", lambda family, fp: True)
    assert _draws(on) == [None] * 20  # every structure spent: no parent to tune
    off = _loop(tmp_path / "off", families, with_budget=False)
    monkeypatch.setattr(off.tuner, "known_spent", lambda family, fp: True)
    assert all(_draws(off))  # without the key, drawn anyway (the operator then finds no trial left)


def test_with_nothing_spent_the_draws_are_the_same(tmp_path, families):  # noqa: F811
    on = _loop(tmp_path / "on", families, with_budget=True)
    off = _loop(tmp_path / "off", families, with_budget=False)
    assert _draws(on) == _draws(off)


def test_known_spent_opens_no_study(tmp_path, families):  # noqa: F811
    loop = _loop(tmp_path, families, with_budget=True)
    before = set(loop.tuner._studies)
    assert not loop.tuner.known_spent("toy", "no-such-structure")
    assert set(loop.tuner._studies) == before
