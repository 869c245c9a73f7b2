"""Builders shared by the population tests."""

from __future__ import annotations

from population.models import Candidate, Origin, State, candidate_id, source_hash


class Maker:
    """Makes finished candidates with fresh store-style ids, for pure in-memory tests."""

    def __init__(self, family: str = "f") -> None:
        self.family = family
        self.seq = 0

    def __call__(self, fitness: float | None, *, fingerprint: str = "s0", island: int = 0,
                 parent: str | None = None, state: State | None = None, params: dict | None = None,
                 family: str | None = None) -> Candidate:
        self.seq += 1
        state = state or (State.VERIFIED if fitness is not None else State.FAILED_VERIFY)
        return Candidate(
            id=candidate_id(self.seq), family=family or self.family, island=island,
            parent_ids=(parent,) if parent else (), origin=Origin.LLM if parent else Origin.SEED,
            source_sha256=source_hash(f"src {fingerprint} {self.seq}"), params={"n": self.seq} if params is None else params,
            fingerprint=fingerprint, created_at=0.0, updated_at=0.0, state=state,
            reason="" if state is State.VERIFIED else "wrong answer",
            fitness_ms=fitness if state is State.VERIFIED else None)
