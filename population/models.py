"""Immutable records of the search: candidates, their lifecycle, and evaluation results.

Every model is a frozen snapshot (like Optuna's ``FrozenTrial``): a state change
produces a new object through :meth:`Candidate.with_state`, so a reference held by
a scheduler never changes under it.  Failure is a state with a reason, never a
fake score: only ``verified`` candidates carry a fitness.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from enum import StrEnum
from functools import cached_property
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue, model_validator

from population.errors import InvalidTransition
from population.outcomes import CaseStatus


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Origin(StrEnum):
    """The lineage kind of a candidate, which fixes its number of parents.

    The search's mutation operators (``search.mutation.operators``) each declare one: ``optuna``
    (Optuna step), ``llm`` (LLM edit), ``crossover`` (parameter crossover and LLM merge, both
    of two parents).  The driver records the operator's own name beside it, so adding an
    operator needs no new value here and stores written before keep their values.
    """

    SEED = "seed"
    LLM = "llm"
    OPTUNA = "optuna"
    MIGRATION = "migration"
    CROSSOVER = "crossover"
    HUMAN = "human"  # injected by an engineer (``qrsearch inject``) or a re-measurement they asked for


class State(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    VERIFIED = "verified"
    FAILED_COMPILE = "failed_compile"
    FAILED_VERIFY = "failed_verify"
    CRASHED = "crashed"
    TIMEOUT = "timeout"
    REJECTED = "rejected"
    # Passed its gates but was clearly slower than its structure's best on the cheap timing
    # screen, so it was never fully benched: no fitness, never a champion, not a failure.
    SCREENED = "screened"

    @property
    def is_terminal(self) -> bool:
        return self not in _IN_FLIGHT

    @property
    def is_failure(self) -> bool:
        return self.is_terminal and self not in (State.VERIFIED, State.SCREENED)

    @property
    def is_in_flight(self) -> bool:
        return self in _IN_FLIGHT


_IN_FLIGHT = frozenset({State.PENDING, State.RUNNING})
FAILURE_STATES: tuple[State, ...] = tuple(s for s in State if s.is_failure)


def can_transition(old: State, new: State) -> bool:
    """The lifecycle: pending -> running -> terminal, with running -> pending for a requeue.

    pending -> terminal is allowed because some outcomes are known without a GPU
    (a static check rejects the source, a compile fails in the driver).
    """
    if old is State.PENDING:
        return new is not State.PENDING
    if old is State.RUNNING:
        return new is not State.RUNNING
    return False


JsonScalar = bool | int | float | str | None
Params = dict[str, JsonScalar]
CandidateId = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.:-]+$")]
Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
FamilyName = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")]


def source_hash(text: str) -> str:
    """Content address of a source text; the store keeps one copy per hash."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def canonical_params(params: Mapping[str, JsonScalar]) -> str:
    """One spelling per parameter assignment, so equal assignments compare equal as text."""
    return json.dumps(params, sort_keys=True, separators=(",", ":"), allow_nan=False)


def candidate_id(seq: int) -> str:
    """Ids derive from the store's creation sequence, so they survive a resume unchanged."""
    return f"c{seq:07d}"


def id_sort_key(cid: str) -> tuple[int, str]:
    # "c9999999" < "c10000000" must hold once the sequence outgrows the padding.
    return (len(cid), cid)


class Candidate(Frozen):
    id: CandidateId
    family: FamilyName
    island: int = Field(ge=0)
    parent_ids: tuple[CandidateId, ...] = Field(default=(), max_length=2)
    origin: Origin
    source_sha256: Sha256
    params: Params = Field(default_factory=dict)
    fingerprint: str = Field(min_length=1, max_length=256)
    generation: int = Field(default=0, ge=0)
    created_at: float
    updated_at: float
    state: State = State.PENDING
    reason: str = ""
    fitness_ms: float | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Candidate:
        canonical_params(self.params)  # rejects NaN/inf, which would break dedup and JSON
        n = len(self.parent_ids)
        if self.origin is Origin.SEED and n:
            raise ValueError("a seed has no parents")
        if self.origin in (Origin.LLM, Origin.OPTUNA, Origin.MIGRATION) and n != 1:
            raise ValueError(f"origin {self.origin} needs exactly one parent")
        if self.origin is Origin.CROSSOVER and n != 2:
            raise ValueError("a crossover needs exactly two parents")
        if self.id in self.parent_ids:
            raise ValueError("a candidate cannot be its own parent")
        if self.state is State.VERIFIED:
            if self.fitness_ms is None or not (self.fitness_ms > 0 and math.isfinite(self.fitness_ms)):
                raise ValueError("a verified candidate needs a positive finite fitness_ms")
        elif self.fitness_ms is not None:
            raise ValueError(f"only verified candidates have a fitness (state {self.state})")
        if self.state.is_failure and not self.reason.strip():
            raise ValueError(f"state {self.state} needs a reason")
        return self

    @property
    def content_key(self) -> tuple[str, str]:
        """Two candidates with this key equal run the very same code."""
        return (self.source_sha256, canonical_params(self.params))

    def with_state(self, state: State, *, reason: str = "", fitness_ms: float | None = None,
                   now: float | None = None) -> Candidate:
        """The next lifecycle snapshot; raises :class:`InvalidTransition` on an illegal move."""
        if not can_transition(self.state, state):
            raise InvalidTransition(f"{self.id}: {self.state} -> {state} is not allowed")
        data = self.model_dump()
        data.update(state=state, reason=reason, fitness_ms=fitness_ms,
                    updated_at=self.updated_at if now is None else now)
        # Validate again: the invariants (reason on failure, fitness iff verified) must hold.
        return Candidate.model_validate(data)


class NewCandidate(Frozen):
    """What the driver knows about a child before the store gives it an id."""

    family: FamilyName
    island: int = Field(default=0, ge=0)
    parent_ids: tuple[CandidateId, ...] = Field(default=(), max_length=2)
    origin: Origin
    source: str
    params: Params = Field(default_factory=dict)
    fingerprint: str = Field(min_length=1, max_length=256)
    generation: int = Field(default=0, ge=0)

    @cached_property
    def source_sha256(self) -> str:
        """The source's hash, computed once: the driver's duplicate check and the store both need it."""
        return source_hash(self.source)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> NewCandidate:
        copied = super().model_copy(update=update, deep=deep)
        copied.__dict__.pop("source_sha256", None)  # the cached hash belongs to the original's source
        return copied

    def to_candidate(self, cid: str, now: float) -> Candidate:
        return Candidate(id=cid, family=self.family, island=self.island, parent_ids=self.parent_ids,
                         origin=self.origin, source_sha256=self.source_sha256, params=self.params,
                         fingerprint=self.fingerprint, generation=self.generation,
                         created_at=now, updated_at=now)


class _Measured(Frozen):
    # Residuals of a broken kernel are often NaN or inf; keep them through JSON instead of
    # pydantic's default of writing null, which would then fail to load.
    model_config = ConfigDict(frozen=True, extra="forbid", ser_json_inf_nan="constants")


class CaseOutcome(_Measured):
    case: str = Field(min_length=1)
    status: CaseStatus
    median_ms: float | None = None
    min_ms: float | None = None
    max_ms: float | None = None
    count: int | None = Field(default=None, ge=0)  # timed calls behind the median
    host_ms: float | None = Field(default=None, ge=0)  # the median time a timed call kept the host
    allocator_calls: int | None = Field(default=None, ge=0)  # cudaMalloc/cudaFree inside the timed regions
    baseline_ms: float | None = None
    speedup: float | None = None
    residuals: dict[str, float] = Field(default_factory=dict)
    message: str = ""
    wall_s: float | None = Field(default=None, ge=0)  # evaluating this case, checks and profiling included


class EvalResult(_Measured):
    candidate_id: CandidateId
    cases: tuple[CaseOutcome, ...] = ()
    geomean_ms: float | None = None
    # A focused run's fitness: the geomean of its focused cases only (None: the suite geomean).
    focus_ms: float | None = None
    baseline_geomean_ms: float | None = None
    speedup: float | None = None
    device: str = ""
    versions: dict[str, str] = Field(default_factory=dict)
    error: str = ""
    eval_seconds: float | None = Field(default=None, ge=0)
    started_at: float | None = None
    finished_at: float | None = None
    profile: dict[str, JsonValue] | None = None
    # Where the evaluation's wall time went: "verify" and "bench" stages, and within the
    # bench stage "rechecks" (verifying warm-up and timed outputs) and "profile".
    stage_seconds: dict[str, float] = Field(default_factory=dict)
    # Triton JIT in the evaluation's children ("compiled", "cache_hits") and its compile-ahead
    # ("ahead_kernels_compiled", "ahead_kernels_cached", "ahead_done" 1/0).
    jit: dict[str, float] = Field(default_factory=dict)
    # "full": timed on every bench case; "screen": only on the cascade's screen cases (a
    # screened candidate). ``screen`` then holds geomean_ms (its screen geomean), bar_ms (its
    # structure best's on the same cases), margin, and estimate_ms (the best's fitness scaled
    # by geomean_ms / bar_ms: what Optuna is told).
    fidelity: str = "full"
    screen: dict[str, float] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _positive_time(self) -> EvalResult:
        g = self.geomean_ms
        if g is not None and not (g > 0 and math.isfinite(g)):
            raise ValueError("geomean_ms must be positive and finite when present")
        if self.focus_ms is not None and not (self.focus_ms > 0 and math.isfinite(self.focus_ms)):
            raise ValueError("focus_ms must be positive and finite when present")
        return self

    @property
    def fitness_ms(self) -> float | None:
        """What the population ranks by: the focused geomean in a focused run, else the suite's."""
        return self.focus_ms if self.focus_ms is not None else self.geomean_ms


def result_json(result: EvalResult) -> str:
    return result.model_dump_json()


def result_from_json(text: str) -> EvalResult:
    return EvalResult.model_validate_json(text)


def jsonable(value: Any) -> Any:
    """Round-trip through JSON to check and normalise a value meant for the store."""
    return json.loads(json.dumps(value, allow_nan=False))
