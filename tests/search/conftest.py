"""Fixtures shared by the search tests."""

import pytest


@pytest.fixture
def own_ray():
    """A Ray temp dir of the test's own for the drivers it starts in subprocesses (tests.search.own_ray)."""
    from tests.search.own_ray import OwnRay

    ray_of_test = OwnRay()
    yield ray_of_test
    ray_of_test.reap()
