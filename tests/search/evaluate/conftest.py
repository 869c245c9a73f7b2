from typing import Iterator

import pytest


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    """Ray on this machine for one test module, bound to loopback."""
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", _node_ip_address="127.0.0.1")
    yield
    ray.shutdown()

