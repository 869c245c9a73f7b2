"""How the driver starts or reaches Ray (search/run/driver.py ``_init_ray``), with ray.init recorded."""

from __future__ import annotations

import sys
import types

import pytest

from search.config import RunConfig
from search.run.driver import _init_ray


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    seen: list[dict] = []
    fake = types.ModuleType("ray")
    fake.init = lambda **kwargs: seen.append(kwargs)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ray", fake)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    return seen


def test_without_an_address_the_driver_starts_a_local_ray_and_looks_for_no_stale_cluster(calls):
    _init_ray(RunConfig(), None)
    assert [c["address"] for c in calls] == ["local"]


def test_an_address_given_is_the_one_reached(calls, monkeypatch):
    _init_ray(RunConfig(), "ray://head:10001")
    monkeypatch.setenv("RAY_ADDRESS", "http://head:8265")
    _init_ray(RunConfig(), None)
    assert [c["address"] for c in calls] == ["ray://head:10001", "http://head:8265"]


def test_the_actors_output_is_streamed_to_the_driver_only_when_the_config_asks(calls):
    from search.config import RayConfig

    _init_ray(RunConfig(), None)
    _init_ray(RunConfig(ray=RayConfig(log_to_driver=True)), "ray://head:10001")
    assert [c["log_to_driver"] for c in calls] == [False, True]
