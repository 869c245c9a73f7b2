"""Structures and their maturation: a new idea gets tuned before it is judged.

A *structure* is a fingerprint within a family: every candidate that differs from
another only by parameters shares it.  A new structure starts ``maturing``: its
best verified member is protected from eviction while it receives
``tuning_budget`` further evaluations; then it is compared with the champion once
and becomes ``champion`` or ``matured`` (``retired`` if it never verified).
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from population.models import Candidate, CandidateId, FamilyName, Frozen, State


class StructureStatus(StrEnum):
    MATURING = "maturing"   # protected, still receiving its tuning budget
    CHAMPION = "champion"   # holds the family champion
    MATURED = "matured"     # judged (or dethroned); competes by normal rules
    RETIRED = "retired"     # budget spent without a single verified member


class StructureRecord(Frozen):
    family: FamilyName
    fingerprint: str
    first_candidate_id: CandidateId
    created_eval: int = Field(ge=1)          # family evaluation count when first seen
    evals: int = Field(default=0, ge=0)      # evaluations of its candidates, failures included,
                                             # rejections (never run) excluded
    best_id: CandidateId | None = None
    best_fitness_ms: float | None = None
    status: StructureStatus = StructureStatus.MATURING
    concluded_eval: int | None = None        # family evaluation count when judged

    @property
    def tuning_evals(self) -> int:
        """Evaluations after the first one: the tuning this structure has had."""
        return max(0, self.evals - 1)

    def observe(self, candidate: Candidate) -> StructureRecord:
        """Count one more evaluation and keep the best-so-far."""
        update: dict[str, object] = {"evals": self.evals + 1}
        if candidate.state is State.VERIFIED and (
                self.best_fitness_ms is None or candidate.fitness_ms < self.best_fitness_ms):  # type: ignore[operator]
            update.update(best_id=candidate.id, best_fitness_ms=candidate.fitness_ms)
        return self.model_copy(update=update)

    def with_status(self, status: StructureStatus, family_evals: int | None = None) -> StructureRecord:
        update: dict[str, object] = {"status": status}
        if self.status is StructureStatus.MATURING and status is not StructureStatus.MATURING:
            update["concluded_eval"] = family_evals
        return self.model_copy(update=update)


class MaturationPolicy:
    def __init__(self, tuning_budget: int, timeout: int | None = None) -> None:
        self.tuning_budget = tuning_budget
        self.timeout = timeout

    def is_due(self, record: StructureRecord, family_evals: int) -> bool:
        """Has a maturing structure had its budget (or run past its deadline)?"""
        if record.status is not StructureStatus.MATURING:
            return False
        if record.tuning_evals >= self.tuning_budget:
            return True
        return self.timeout is not None and family_evals - record.created_eval >= self.timeout

    def remaining(self, record: StructureRecord) -> int:
        if record.status is not StructureStatus.MATURING:
            return 0
        return max(0, self.tuning_budget - record.tuning_evals)


def protected_ids(records: list[StructureRecord]) -> set[str]:
    """The best member of every maturing structure may not be evicted."""
    return {r.best_id for r in records if r.status is StructureStatus.MATURING and r.best_id}
