"""A run: the in-memory population bound to its store, with every change persisted atomically.

This is the object a search driver holds.  Each public method that changes
anything is one store transaction that also saves the selection RNG states
consumed since the last commit, so a driver killed at any moment resumes from
its last commit with the same population, counters and random streams.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from population.config import FamilyConfig, PopulationConfig
from population.errors import InvalidTransition, RunStoreError
from population.family import ChampionChange, Family, TellReport
from population.models import Candidate, EvalResult, NewCandidate, State, candidate_id
from population.population import Population
from population.records import DISPUTED_KEY, POPULATION_CONFIG_KEY, evals_key
from population.rng import derived_rng, rng_from_json, rng_state_to_json
from population.store import RunStore



def rng_name(family: str) -> str:
    return f"select/{family}"


def load_population(store: RunStore) -> Population:
    """Rebuild the in-memory population from a store (a writer's or a read-only one)."""
    with store.read():
        raw = store.get_json(POPULATION_CONFIG_KEY)
        if raw is None:
            raise RunStoreError(store.path, f"not a population run: no {POPULATION_CONFIG_KEY!r} entry")
        config = PopulationConfig.model_validate(raw)
        rngs = store.get_rng_states()
        members = store.list_candidates(members_only=True)
        structures = store.structures()
        champions = store.current_champion_ids()
        counters = store.counters("evals/")
        disputed = store.get_json(DISPUTED_KEY, {}) or {}
    families: dict[str, Family] = {}
    for fc in config.families:
        saved = rngs.get(rng_name(fc.name))
        rng = rng_from_json(saved) if saved else derived_rng(config.seed, rng_name(fc.name))
        families[fc.name] = Family.restore(
            fc, evals=int(counters.get(evals_key(fc.name), 0)), champion_id=champions.get(fc.name),
            members=[m for m in members if m.family == fc.name],
            structures=[s for s in structures if s.family == fc.name], rng=rng,
            disputed=frozenset(disputed.get(fc.name, ())))
    return Population(config, families)


class Run:
    def __init__(self, store: RunStore, population: Population, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.population = population
        self.clock = clock
        self._mutated = False  # the population changed inside the open transaction

    @classmethod
    def create(cls, run_dir: Path | str, config: PopulationConfig, run_config_json: str | None = None,
               clock: Callable[[], float] = time.time) -> Run:
        """A new run. ``run_config_json`` is the whole search config (kept verbatim for the record)."""
        # The population config goes in with the schema: a run killed right after
        # creation must still be resumable.
        store = RunStore.create(run_dir, run_config_json or config.model_dump_json(),
                                initial={POPULATION_CONFIG_KEY: config.model_dump(mode="json")})
        return cls(store, Population(config), clock)

    @classmethod
    def open(cls, run_dir: Path | str, clock: Callable[[], float] = time.time) -> Run:
        """Resume a run for writing (call :meth:`requeue_inflight` next)."""
        store = RunStore.open(run_dir)
        try:
            return cls(store, load_population(store), clock)
        except BaseException:
            store.close()
            raise

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Run:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self, lazy: bool = False) -> Iterator[None]:
        """Group several run calls into one commit (e.g. a child and the LLM tokens it cost);
        ``lazy``: begun at its first write (one that writes nothing commits nothing).

        If the transaction fails after the population changed in memory, the
        population is reloaded from the store, which is the truth.
        """
        outer = not self.store.in_transaction
        try:
            with self.store.transaction(lazy=lazy):
                yield
                if outer:
                    self._flush_rngs()
        except BaseException:
            if outer and self._mutated:
                self.population = load_population(self.store)
            elif outer:
                # The rollback may have dropped RNG states flushed in this transaction.
                self.population.dirty_rngs.update(self.population.families)
            raise
        finally:
            if outer:
                self._mutated = False

    def _flush_rngs(self) -> None:
        for name in sorted(self.population.dirty_rngs):
            self.store.set_rng_state(rng_name(name), rng_state_to_json(self.population.family(name).rng))
        self.population.dirty_rngs.clear()

    # --- reading the population ------------------------------------------------------------

    def select_parent(self, family: str, island: int = 0, exclude: frozenset[str] = frozenset(),
                      handicap: Callable[[Candidate], float] | None = None) -> Candidate | None:
        return self.population.select_parent(family, island, exclude, handicap)

    def champion(self, family: str) -> Candidate | None:
        return self.population.champion(family)

    def inspiration(self, family: str) -> list[Candidate]:
        return self.population.inspiration(family)

    def source(self, candidate: Candidate) -> str:
        return self.store.source(candidate.source_sha256)

    # --- changing it ----------------------------------------------------------------------

    def add_family(self, config: FamilyConfig) -> None:
        with self.transaction():
            self._mutated = True
            self.population.add_family(config)
            self.store.set_json(POPULATION_CONFIG_KEY, self.population.config.model_dump(mode="json"))

    def add_candidate(self, new: NewCandidate) -> Candidate:
        return self.add_candidates([new])[0]

    def add_candidates(self, news: Iterable[NewCandidate]) -> list[Candidate]:
        news = list(news)
        for new in news:
            self.population.family(new.family).island(new.island)  # unknown family/island: fail now
        with self.transaction():
            return self.store.add_candidates(news, self.clock())

    def mark_running(self, cid: str) -> Candidate:
        with self.transaction():
            return self.store.mark_running(cid, self.clock())

    def requeue(self, cid: str) -> Candidate:
        """A running candidate goes back to ``pending`` (e.g. its worker died)."""
        with self.transaction():
            return self.store.requeue(cid, self.clock())

    def requeue_inflight(self) -> list[Candidate]:
        with self.transaction():
            return self.store.requeue_inflight(self.clock())

    def add_counters(self, deltas: Mapping[str, int | float]) -> dict[str, int | float]:
        with self.transaction():
            return self.store.add_counters(deltas)

    def set_json(self, key: str, value: Any) -> None:
        with self.transaction():
            self.store.set_json(key, value)

    def tell(self, cid: str, state: State, *, reason: str = "", result: EvalResult | None = None) -> TellReport:
        """Record a finished evaluation and apply the population rules, in one commit.

        ``verified`` needs a result with ``geomean_ms`` (the fitness).  A failure needs a
        reason; when none is given, the first line of ``result.error`` is used.  Telling the
        same outcome twice is a no-op (``already_recorded``); a different one is an error.
        """
        if not state.is_terminal:
            raise InvalidTransition(f"{cid}: tell() takes a final state, not {state}")
        if result is not None and result.candidate_id != cid:
            raise ValueError(f"result is for {result.candidate_id}, not {cid}")
        if state is State.VERIFIED and (result is None or result.fitness_ms is None):
            raise ValueError(f"{cid}: a verified candidate needs a result with geomean_ms")
        if not reason and state.is_failure and result is not None and result.error.strip():
            reason = result.error.strip().splitlines()[0][:500]
        with self.transaction():
            current = self.store.get_candidate(cid)
            if current.state.is_terminal:
                return self._repeat(current, state, result)
            fitness = result.fitness_ms if state is State.VERIFIED and result is not None else None
            final = current.with_state(state, reason=reason, fitness_ms=fitness, now=self.clock())
            n = self.store.add_counters({"evaluations": 1, "failures": int(state.is_failure)})["evaluations"]
            if result is not None:
                self.store.put_result(result)
            next_seq = [self.store.next_seq()]

            def new_id() -> str:
                next_seq[0] += 1
                return candidate_id(next_seq[0] - 1)

            self._mutated = True
            report = self.population.tell(final, new_id, self.clock())
            self._persist(report, int(n))
            return report

    def dispute(self, cid: str) -> list[ChampionChange]:
        """A result that a recheck did not reproduce: never crowned again (a disputed champion
        hands the title on), in one commit.  Returns the champion changes."""
        cand = self.store.get_candidate(cid)
        with self.transaction():
            self._mutated = True
            fam = self.population.family(cand.family)
            changes, records = fam.dispute(cid)
            disputed = self.store.get_json(DISPUTED_KEY, {}) or {}
            disputed[fam.name] = sorted(fam.disputed, key=lambda c: (len(c), c))
            self.store.set_json(DISPUTED_KEY, disputed)
            for rec in records:
                self.store.put_structure(rec)
            for change in changes:
                self.store.add_champion_change(change, self.clock())
            return changes

    def _repeat(self, current: Candidate, state: State, result: EvalResult | None) -> TellReport:
        if current.state is state and self.store.get_result(current.id) == result:
            return TellReport(candidate=current, already_recorded=True)
        raise InvalidTransition(f"{current.id} is already {current.state}; refusing a different outcome")

    def _persist(self, report: TellReport, told_seq: int) -> None:
        cand = report.candidate
        fam = self.population.family(cand.family)
        self.store.update_candidate(cand, member=self.population.is_member(cand), told_seq=told_seq)
        for migrant in report.migrants:
            self.store.insert_candidate(migrant, member=self.population.is_member(migrant))
        for cid in report.evicted:
            self.store.set_member(cid, False)
        for rec in report.structures:
            self.store.put_structure(rec)
        for change in report.champion_changes:
            self.store.add_champion_change(change, self.clock())
        if report.migrants:
            self.store.add_counters({"migrants": len(report.migrants)})
        self.store.set_counter(evals_key(fam.name), fam.evals)
