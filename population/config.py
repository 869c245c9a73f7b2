"""Configuration of the population: families, their islands, and the policies they run."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field, model_validator

from population.models import FamilyName, Frozen


class SelectionKind(StrEnum):
    TOURNAMENT = "tournament"
    RANK_SOFTMAX = "rank_softmax"


class Topology(StrEnum):
    RING = "ring"
    BEST_TO_WORST = "best_to_worst"


class SelectionConfig(Frozen):
    kind: SelectionKind = SelectionKind.TOURNAMENT
    tournament_size: int = Field(default=3, ge=1)
    # Rank-softmax weight of rank r among n is exp(-(r / (n - 1)) / temperature): the scale
    # does not depend on island size, small values are greedy, large ones near uniform.
    temperature: float = Field(default=0.5, gt=0)


class MigrationConfig(Frozen):
    topology: Topology = Topology.RING
    # Migrate after every `interval` evaluations in the family; 0 turns migration off.
    interval: int = Field(default=0, ge=0)


class FamilyConfig(Frozen):
    name: FamilyName
    islands: int = Field(default=1, ge=1)
    capacity: int = Field(default=16, ge=1)
    # Parameter evaluations a new structure gets before it is compared with the champion.
    tuning_budget: int = Field(default=8, ge=0)
    # A structure still maturing after this many family evaluations is compared anyway, so a
    # search that never tunes it cannot keep it protected forever. None: no deadline.
    maturation_timeout: int | None = Field(default=None, ge=1)
    # A challenger must beat the champion's time by more than this fraction, so timing noise
    # does not crown a tie (0: any strict improvement).
    min_improvement: float = Field(default=0.0, ge=0.0, lt=1.0)
    selection: SelectionConfig = SelectionConfig()
    migration: MigrationConfig = MigrationConfig()


class PopulationConfig(Frozen):
    seed: int = 0
    families: tuple[FamilyConfig, ...] = ()

    @model_validator(mode="after")
    def _unique_names(self) -> PopulationConfig:
        names = [f.name for f in self.families]
        if len(names) != len(set(names)):
            raise ValueError(f"family names must be unique: {names}")
        return self

    def family(self, name: str) -> FamilyConfig:
        for f in self.families:
            if f.name == name:
                return f
        raise KeyError(name)

    def with_family(self, family: FamilyConfig) -> PopulationConfig:
        return PopulationConfig(seed=self.seed, families=(*self.families, family))
