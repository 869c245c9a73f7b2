"""The in-memory population: every family, and the operations a search driver calls.

Pure data: no I/O here.  :mod:`population.run` pairs it with a :class:`RunStore`
so that every change is persisted; :func:`population.loader.load_population`
rebuilds it from a store.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from population.config import FamilyConfig, PopulationConfig
from population.family import Family, TellReport
from population.maturation import StructureRecord
from population.migration import inspiration
from population.models import Candidate, candidate_id


class Population:
    def __init__(self, config: PopulationConfig, families: dict[str, Family] | None = None) -> None:
        self.config = config
        self.families: dict[str, Family] = families if families is not None else {
            f.name: Family.fresh(f, config.seed) for f in config.families}
        # Selection consumes RNG without a store write; the run persists dirty streams
        # with its next commit, so a resume replays exactly from the last commit.
        self.dirty_rngs: set[str] = set()
        # Migrant ids for pure in-memory use, kept clear of a store's c0000001.. range.
        self._local_ids = (candidate_id(n) for n in itertools.count(10**7 + 1))

    def family(self, name: str) -> Family:
        try:
            return self.families[name]
        except KeyError:
            raise KeyError(f"unknown family {name!r}; known: {sorted(self.families)}") from None

    def add_family(self, config: FamilyConfig) -> Family:
        if config.name in self.families:
            raise ValueError(f"family {config.name!r} already exists")
        self.config = self.config.with_family(config)
        fam = Family.fresh(config, self.config.seed)
        self.families[config.name] = fam
        self.dirty_rngs.add(config.name)
        return fam

    # --- what the driver asks --------------------------------------------------------------

    def select_parent(self, family: str, island: int = 0, exclude: frozenset[str] = frozenset(),
                      handicap: Callable[[Candidate], float] | None = None) -> Candidate | None:
        """A parent from the island's verified members (not of the ``exclude`` structures), or None."""
        fam = self.family(family)
        self.dirty_rngs.add(family)
        return fam.select_parent(island, exclude, handicap)

    def champion(self, family: str) -> Candidate | None:
        return self.family(family).champion

    def champions(self) -> dict[str, Candidate | None]:
        return {name: fam.champion for name, fam in self.families.items()}

    def inspiration(self, family: str) -> list[Candidate]:
        """Other families' champions, to be read by a mutation, never mixed into this family."""
        self.family(family)
        return inspiration(self.champions(), family)

    def members(self, family: str, island: int) -> list[Candidate]:
        return self.family(family).island(island).ranked()

    def structure(self, family: str, fingerprint: str) -> StructureRecord | None:
        return self.family(family).structures.get(fingerprint)

    def maturing(self, family: str) -> list[StructureRecord]:
        return self.family(family).maturing()

    def is_member(self, candidate: Candidate) -> bool:
        fam = self.families.get(candidate.family)
        return fam is not None and 0 <= candidate.island < len(fam.islands) \
            and candidate.id in fam.islands[candidate.island]

    def evaluations(self, family: str | None = None) -> int:
        if family is not None:
            return self.family(family).evals
        return sum(f.evals for f in self.families.values())

    # --- what the driver reports ---------------------------------------------------------

    def tell(self, candidate: Candidate, new_id: Callable[[], str] | None = None,
             now: float = 0.0) -> TellReport:
        """Take a finished evaluation into account.

        ``new_id`` names migrant copies; a run passes the store's allocator.  Without
        it (pure in-memory use) ids continue a private sequence.
        """
        fam = self.family(candidate.family)
        return fam.tell(candidate, new_id or (lambda: next(self._local_ids)), now)

    # --- persistence ---------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        return {"config": self.config.model_dump(mode="json"),
                "families": {name: fam.snapshot() for name, fam in sorted(self.families.items())}}

    @classmethod
    def from_snapshot(cls, data: dict[str, Any]) -> Population:
        config = PopulationConfig.model_validate(data["config"])
        fams = {name: Family.from_snapshot(fd) for name, fd in data["families"].items()}
        return cls(config, fams)

    def invariant_violations(self) -> list[str]:
        return [p for fam in self.families.values() for p in fam.invariant_violations()]
