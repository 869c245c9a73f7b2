import pytest


def pytest_collection_modifyitems(config, items):
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)



def _registry():
    import kernels.families

    return kernels.families


@pytest.fixture(autouse=True, scope="module")
def _family_registry_restored_per_module():
    """Tests that install toy families (tests/search/toy_driver.py, inspect_run.py) replace the
    registry module-wide, some in module-scoped fixtures: each test module gets the registry back
    as it found it, whatever order the modules run in."""
    saved = _registry().FAMILIES
    yield
    _registry().FAMILIES = saved


@pytest.fixture(autouse=True)
def _family_registry_restored():
    """The same for a test that installs toy families itself."""
    saved = _registry().FAMILIES
    yield
    _registry().FAMILIES = saved
