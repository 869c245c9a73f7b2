from __future__ import annotations

from pathlib import Path

import pytest

from population.config import FamilyConfig, PopulationConfig
from population.run import Run

CONFIG = PopulationConfig(seed=3, families=(
    FamilyConfig(name="a", islands=2, capacity=3, tuning_budget=2),
    FamilyConfig(name="b", islands=1, capacity=3, tuning_budget=1)))


@pytest.fixture
def run(tmp_path: Path) -> Run:
    r = Run.create(tmp_path / "run", CONFIG, clock=lambda: 100.0)
    yield r
    r.close()
