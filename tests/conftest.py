import pytest


def pytest_collection_modifyitems(config, items):
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def _registry_kept():
    """The family registry as it was, put back afterwards."""
    import kernels.families

    saved = kernels.families.FAMILIES
    yield
    kernels.families.FAMILIES = saved


# Tests that install toy families (tests/search/toy_driver.py, inspect_run.py) replace the registry,
# some in module-scoped fixtures: each module and each test gets it back as it found it, whatever
# order the modules run in.
_family_registry_restored_per_module = pytest.fixture(autouse=True, scope="module", name="_registry_per_module")(
    _registry_kept)
_family_registry_restored = pytest.fixture(autouse=True, name="_registry_per_test")(_registry_kept)
