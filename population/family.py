"""A family: islands of one line of hypotheses, its champion, and its structures' records.

Champion rule (what ``tell`` enforces):

1. The first verified candidate of a family becomes champion at once (nothing to
   compare with); its structure becomes ``champion``.
2. A verified candidate of a judged structure (``champion``, ``matured``, or a
   ``retired`` one that finally verified) becomes champion as soon as it is
   faster than the champion by more than ``min_improvement`` (a fraction of the
   champion's time; 0 means any strict improvement).
3. A verified candidate of a ``maturing`` structure never takes the title
   directly.  When the structure has had ``tuning_budget`` evaluations after its
   first (or its deadline passes), its best is compared once with the champion
   by the same rule: faster wins; otherwise it becomes ``matured`` and loses
   protection.  A structure without parameters (e.g. a GPU MODE file as written)
   has nothing to tune: it is judged on its first evaluation.

So no judged verified candidate is faster than the champion by more than
``min_improvement`` (with 0: the champion is the fastest), and it is never evicted.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from population.config import FamilyConfig
from population.island import Island
from population.maturation import MaturationPolicy, StructureRecord, StructureStatus, protected_ids
from population.migration import make_migrant, plan_migrations
from population.models import Candidate, CandidateId, Frozen, Origin, State, id_sort_key
from population.rng import derived_rng, rng_from_json, rng_state_to_json
from population.selection import select


class ChampionChange(Frozen):
    family: str
    candidate_id: CandidateId                # the new champion
    previous_id: CandidateId | None
    fitness_ms: float
    family_evals: int
    cause: str  # first | improved | overtook | matured | disputed (the champion's result did not reproduce)


class TellReport(Frozen):
    """Everything one evaluation changed, so a store can persist it in one transaction."""

    candidate: Candidate
    evicted: tuple[CandidateId, ...] = ()
    structures: tuple[StructureRecord, ...] = ()
    champion_changes: tuple[ChampionChange, ...] = ()
    migrants: tuple[Candidate, ...] = ()
    already_recorded: bool = False  # the same outcome was told before; nothing changed


class Family:
    def __init__(self, config: FamilyConfig, rng: random.Random) -> None:
        self.config = config
        self.name = config.name
        self.rng = rng
        self.islands = [Island(config.name, i, config.capacity) for i in range(config.islands)]
        self.policy = MaturationPolicy(config.tuning_budget, config.maturation_timeout)
        self.champion: Candidate | None = None
        self.structures: dict[str, StructureRecord] = {}
        # Fingerprints still maturing: checked on every tell, so kept apart from the
        # (ever-growing) table of all structures.
        self._maturing: set[str] = set()
        self.evals = 0
        # Results an engineer's recheck did not reproduce: never crowned (a re-measurement
        # of the same code is a new candidate and may be).  Migrant copies share the verdict.
        self.disputed: set[str] = set()

    @classmethod
    def fresh(cls, config: FamilyConfig, seed: int) -> Family:
        return cls(config, derived_rng(seed, f"select/{config.name}"))

    # --- queries -------------------------------------------------------------------------

    def island(self, index: int) -> Island:
        if not 0 <= index < len(self.islands):
            raise IndexError(f"family {self.name} has no island {index} (it has {len(self.islands)})")
        return self.islands[index]

    def find(self, cid: str) -> Candidate | None:
        for island in self.islands:
            member = island.get(cid)
            if member is not None:
                return member
        return None

    def members(self) -> list[Candidate]:
        return [m for island in self.islands for m in island.ranked()]

    def maturing(self) -> list[StructureRecord]:
        """Structures still owed tuning, oldest first (the order they are judged in)."""
        recs = [self.structures[fp] for fp in self._maturing]
        return sorted(recs, key=lambda r: (r.created_eval, id_sort_key(r.first_candidate_id)))

    def exempt_ids(self) -> set[str]:
        exempt = protected_ids([self.structures[fp] for fp in self._maturing])
        if self.champion is not None:
            exempt.add(self.champion.id)
        return exempt

    def select_parent(self, island: int, exclude: frozenset[str] = frozenset(),
                      handicap: Callable[[Candidate], float] | None = None) -> Candidate | None:
        """A parent by the selection rule; ``exclude`` holds fingerprints not to build on (retired);
        ``handicap``: ranks a member competes below its own (see :func:`population.selection.select`)."""
        ranked = [m for m in self.island(island).ranked() if m.fingerprint not in exclude]
        return select(ranked, self.rng, self.config.selection,
                      [handicap(m) for m in ranked] if handicap is not None else None)

    def is_disputed(self, cid: str) -> bool:
        return cid in self.disputed

    def dispute(self, cid: str) -> tuple[list[ChampionChange], list[StructureRecord]]:
        """Mark a result as not reproduced.  A disputed champion loses the title to the fastest
        undisputed member of a judged structure (none: it stays until a rival verifies, see
        :meth:`_faster`).  Returns the champion changes and structure records to persist."""
        self.disputed.add(cid)
        self._spread_disputes()
        changed: dict[str, StructureRecord] = {}
        changes: list[ChampionChange] = []
        if self.champion is not None and self.champion.id in self.disputed:
            judged = [m for m in self.members() if m.id not in self.disputed
                      and self.structures[m.fingerprint].status is not StructureStatus.MATURING]
            if judged:
                best = min(judged, key=lambda m: (m.fitness_ms, id_sort_key(m.id)))
                self._crown(best, "disputed", changed, changes)
        return changes, list(changed.values())

    def _spread_disputes(self) -> None:
        """Migrant copies of a disputed result carry the same measurement: dispute them too."""
        grew = True
        while grew:
            grew = False
            for m in self.members():
                if m.origin is Origin.MIGRATION and m.id not in self.disputed and m.parent_ids \
                        and m.parent_ids[0] in self.disputed:
                    self.disputed.add(m.id)
                    grew = True

    # --- updates -------------------------------------------------------------------------

    def tell(self, candidate: Candidate, new_id: Callable[[], str], now: float) -> TellReport:
        """Take one finished evaluation into account (see the module doc for the rules)."""
        if candidate.family != self.name:
            raise ValueError(f"{candidate.id} is in family {candidate.family}, not {self.name}")
        if not candidate.state.is_terminal:
            raise ValueError(f"{candidate.id} is {candidate.state}; only finished evaluations are told")
        if candidate.origin is Origin.MIGRATION:
            raise ValueError(f"{candidate.id} is a migrant copy; migrants are never evaluated")
        island = self.island(candidate.island)
        if candidate.id in island:
            raise ValueError(f"{candidate.id} was already told")
        self.evals += 1
        changed: dict[str, StructureRecord] = {}
        changes: list[ChampionChange] = []

        fp = candidate.fingerprint
        # A rejected candidate never ran: it spends no tuning budget and founds no structure.
        if candidate.state is not State.REJECTED:
            rec = self.structures.get(fp) or StructureRecord(
                family=self.name, fingerprint=fp, first_candidate_id=candidate.id, created_eval=self.evals)
            rec = rec.observe(candidate)
            if rec.status is StructureStatus.RETIRED and candidate.state is State.VERIFIED:
                rec = rec.with_status(StructureStatus.MATURED)
            self._put(rec, changed)

        if candidate.state is State.VERIFIED:
            island.add(candidate)
            if self.champion is None and candidate.id not in self.disputed:
                self._crown(candidate, "first", changed, changes)
            elif rec.status is not StructureStatus.MATURING and self._faster(candidate):
                cause = "improved" if self.champion is not None and fp == self.champion.fingerprint else "overtook"
                self._crown(candidate, cause, changed, changes)

        # Parameters are part of a structure (the fingerprint keeps their keys), so an empty
        # PARAMS means the whole structure has nothing a tuner could try.
        untunable = fp if candidate.state is not State.REJECTED and not candidate.params else None
        for due in [r for r in self.maturing() if self.policy.is_due(r, self.evals) or r.fingerprint == untunable]:
            self._conclude(due, changed, changes)

        evicted = self._enforce_all()
        migrants: list[Candidate] = []
        interval = self.config.migration.interval
        if interval and self.evals % interval == 0:
            for source, target in plan_migrations(self.islands, self.config.migration.topology):
                migrant = make_migrant(source, target, new_id, now)
                self.islands[target].add(migrant)
                migrants.append(migrant)
            evicted += self._enforce_all()
        if self.disputed:
            self._spread_disputes()
        return TellReport(candidate=candidate, evicted=tuple(evicted), structures=tuple(changed.values()),
                          champion_changes=tuple(changes), migrants=tuple(migrants))

    def _bar(self) -> float:
        """The time a challenger must beat to take the title: the champion's, less the margin."""
        assert self.champion is not None and self.champion.fitness_ms is not None
        return self.champion.fitness_ms * (1.0 - self.config.min_improvement)

    def _faster(self, candidate: Candidate) -> bool:
        assert candidate.fitness_ms is not None
        if candidate.id in self.disputed:
            return False
        if self.champion is not None and self.champion.id in self.disputed:
            return True  # any undisputed judged result beats one that did not reproduce
        return candidate.fitness_ms < self._bar()

    def _put(self, rec: StructureRecord, changed: dict[str, StructureRecord]) -> None:
        self._store_record(rec)
        changed[rec.fingerprint] = rec

    def _store_record(self, rec: StructureRecord) -> None:
        self.structures[rec.fingerprint] = rec
        if rec.status is StructureStatus.MATURING:
            self._maturing.add(rec.fingerprint)
        else:
            self._maturing.discard(rec.fingerprint)

    def _crown(self, winner: Candidate, cause: str, changed: dict[str, StructureRecord],
               changes: list[ChampionChange]) -> None:
        old = self.champion
        if old is not None and old.fingerprint != winner.fingerprint:
            self._put(self.structures[old.fingerprint].with_status(StructureStatus.MATURED, self.evals), changed)
        self._put(self.structures[winner.fingerprint].with_status(StructureStatus.CHAMPION, self.evals), changed)
        self.champion = winner
        assert winner.fitness_ms is not None  # only verified candidates are crowned
        changes.append(ChampionChange(family=self.name, previous_id=old.id if old else None, candidate_id=winner.id,
                                      fitness_ms=winner.fitness_ms, family_evals=self.evals, cause=cause))

    def _conclude(self, rec: StructureRecord, changed: dict[str, StructureRecord],
                  changes: list[ChampionChange]) -> None:
        if rec.best_id is None:
            self._put(rec.with_status(StructureStatus.RETIRED, self.evals), changed)
            return
        best = self.find(rec.best_id)
        assert best is not None, f"protected best {rec.best_id} of {rec.fingerprint} is missing"
        if (self.champion is None and best.id not in self.disputed) or (self.champion is not None
                                                                          and self._faster(best)):
            self._crown(best, "matured" if self.champion else "first", changed, changes)
        else:
            self._put(rec.with_status(StructureStatus.MATURED, self.evals), changed)

    def _enforce_all(self) -> list[str]:
        exempt = self.exempt_ids()
        return [c.id for island in self.islands for c in island.enforce_capacity(exempt)]

    # --- persistence -------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """A JSON-able image of the family; equal images mean equal future behaviour."""
        return {
            "name": self.name,
            "config": self.config.model_dump(mode="json"),
            "evals": self.evals,
            "champion": self.champion.id if self.champion else None,
            "members": [m.model_dump(mode="json") for m in sorted(self.members(), key=lambda c: id_sort_key(c.id))],
            "structures": [self.structures[k].model_dump(mode="json") for k in sorted(self.structures)],
            "rng": rng_state_to_json(self.rng),
            "disputed": sorted(self.disputed, key=id_sort_key),
        }

    @classmethod
    def restore(cls, config: FamilyConfig, *, evals: int, champion_id: str | None, members: list[Candidate],
                structures: list[StructureRecord], rng: random.Random, disputed: frozenset[str] = frozenset()) -> Family:
        fam = cls(config, rng)
        fam.evals = evals
        fam.disputed = set(disputed)
        for m in members:
            fam.island(m.island).add(m)
        for rec in structures:
            fam._store_record(rec)
        if champion_id is not None:
            fam.champion = fam.find(champion_id)
            if fam.champion is None:
                raise ValueError(f"family {fam.name}: champion {champion_id} is not an island member")
        return fam

    @classmethod
    def from_snapshot(cls, data: dict[str, Any]) -> Family:
        return cls.restore(FamilyConfig.model_validate(data["config"]), evals=data["evals"],
                           champion_id=data["champion"],
                           members=[Candidate.model_validate(m) for m in data["members"]],
                           structures=[StructureRecord.model_validate(s) for s in data["structures"]],
                           rng=rng_from_json(data["rng"]), disputed=frozenset(data.get("disputed", ())))

    def invariant_violations(self) -> list[str]:
        """Checks the rules hold; empty when healthy (used by tests and consistency checks)."""
        problems: list[str] = []
        exempt = self.exempt_ids()
        for island in self.islands:
            if len(island) > island.capacity and any(m.id not in exempt for m in island.ranked()):
                problems.append(f"{self.name}/{island.index}: over capacity with evictable members")
        if self.champion is not None and self.find(self.champion.id) is None:
            problems.append(f"{self.name}: champion {self.champion.id} is not a member")
        for rec in self.structures.values():
            if rec.status is StructureStatus.MATURING and rec.best_id and self.find(rec.best_id) is None:
                problems.append(f"{self.name}: protected {rec.best_id} ({rec.fingerprint}) is not a member")
        champs = [r for r in self.structures.values() if r.status is StructureStatus.CHAMPION]
        if self.champion is not None:
            if [r.fingerprint for r in champs] != [self.champion.fingerprint]:
                problems.append(f"{self.name}: champion structure records disagree: {champs}")
            bar = 0.0 if self.champion.id in self.disputed else self._bar()
            for rec in self.structures.values():
                if rec.status in (StructureStatus.MATURED, StructureStatus.CHAMPION) and rec.best_fitness_ms \
                        is not None and rec.best_fitness_ms < bar and rec.best_id not in self.disputed:
                    problems.append(f"{self.name}: judged structure {rec.fingerprint} beats the champion "
                                    f"by more than the margin")
        elif champs:
            problems.append(f"{self.name}: a champion structure without a champion")
        return problems
