from typing import Iterator

import pytest


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    """Ray on this machine for one test module, bound to loopback."""
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", _node_ip_address="127.0.0.1")
    yield
    ray.shutdown()


@pytest.fixture
def own_ray():
    """A Ray temp dir of the test's own for the drivers it starts in subprocesses (tests.search.own_ray)."""
    from tests.search.own_ray import OwnRay

    ray_of_test = OwnRay()
    yield ray_of_test
    ray_of_test.reap()
