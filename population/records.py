"""What the search driver keeps in a run store beside the population's own tables: the one record of it.

The population's tables (candidates, results, champions, structures, events) have their
schema in :mod:`population.store_schema`.  The driver also writes key/value JSON (its
status heartbeat, its sessions, LLM call records, tuner trials, notes, the focus
reference) and counters (evaluations, LLM tokens and money, rechecks).  This module
names every such key and counter and gives the JSON records a typed shape; the writers
in ``search/`` and the readers (``status``, ``champions``, ``lineage``, the report) use it
and nothing else.

It lives in ``population/`` rather than ``search/`` because it is pure data (pydantic, no
torch, Ray, Optuna or OpenAI) and because the store's read snapshot
(:mod:`population.snapshot`) parses these records: ``population`` may not import
``search``, so the description of what is stored sits next to the store.

The records read old stores: every field has a default and unknown fields are kept
(``extra="allow"``), so a record written by an older or newer driver still parses.
"""

from __future__ import annotations

from typing import Any, Mapping, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from population.events import CURSOR_KEY

__all__ = ["BASELINE_FAMILY", "CURSOR_KEY", "DISPUTED_KEY", "DRIVER_RNG", "DriverStatus", "FOCUS_REFERENCE_KEY",
           "HEARTBEAT_S", "LLMCall", "LLM_CALL_KEY", "LLM_CALL_PREFIX", "LLM_CHILD_KEY", "LLM_MODEL_COUNTER_PREFIX",
           "LLM_STATE_KEY", "NOTE_KEY", "OPERATOR_KEY", "POPULATION_CONFIG_KEY", "RunCounters", "SESSIONS_KEY", "STATUS_KEY",
           "Session", "TRIAL_KEY", "UTILIZATION_KEY", "Utilization", "C", "dump", "evals_key", "parse", "llm_call_key",
           "prefix_of", "state_counter"]

# The family whose champion is the reference every speedup is measured against (same run, same device).
BASELINE_FAMILY = "torch_geqrf"

# --- key/value entries (JSON) -----------------------------------------------------------------

STATUS_KEY = "driver/status"  # DriverStatus, rewritten every couple of seconds while running (the heartbeat)
SESSIONS_KEY = "driver/sessions"  # list[Session], one per launch or resume
UTILIZATION_KEY = "driver/utilization"  # Utilization, written when a session ends
DRIVER_RNG = "driver/proposals"  # name of the driver's RNG state (rng_states table, not kv)
NOTE_KEY = "llm/note/{cid}"  # the LLM's note on the child it proposed (str)
OPERATOR_KEY = "operator/{cid}"  # the mutation operator that made a child (Origin keeps only its lineage kind)
TRIAL_KEY = "optuna/trial/{cid}"  # the Optuna trial behind a tuned child: {"study", "number", ...}
LLM_CALL_KEY = "llm/call/{n:06d}"  # LLMCall, numbered by the llm_calls counter
LLM_CALL_PREFIX = "llm/call/"
LLM_STATE_KEY = "llm/budget/{model}"  # a model's streak, back-off and pause (search/engine/llm_budget.py)
LLM_CHILD_KEY = "llm/child/{cid}"  # the model that proposed an LLM child (str)
DUELS_KEY = "duels"  # the duels not yet judged and the last duel number (search/engine/duels.py)
DUEL_KEY = "duel/{cid}"  # the verdict of the challenger's duel: defender, per-case ratios, holds
FOCUS_REFERENCE_KEY = "focus/reference"  # per family: the focus reference {"candidate", "focus_ms", ...}
# Written by population itself (population/run.py), named here so that this is the whole list:
POPULATION_CONFIG_KEY = "population.config"
DISPUTED_KEY = "population/disputed"  # {family: [candidate ids whose result did not reproduce]}
# and CURSOR_KEY (population/events.py), and "config" (the run config, written once by RunStore.create).


def evals_key(family: str) -> str:
    return f"evals/{family}"


# A running driver rewrites its status every couple of seconds; one older than this is a dead driver.
HEARTBEAT_S = 30.0


def prefix_of(template: str) -> str:
    """The fixed part of a key template (``"llm/note/{cid}"`` -> ``"llm/note/"``), for scanning."""
    return template.split("{")[0]


def llm_call_key(n: int) -> str:
    return LLM_CALL_KEY.format(n=int(n))


# --- counters ---------------------------------------------------------------------------------


class C:
    """Counter names (the ``counters`` table)."""

    GPU_EVALUATIONS = "gpu_evaluations"  # finished evaluations (one per tell)
    EVALUATIONS = "evaluations"  # the population's own count (told_seq), kept by population/run.py
    BUSY_SECONDS = "busy_seconds"  # evaluator seconds spent on candidates
    LLM_CALLS = "llm_calls"
    LLM_ERRORS = "llm_errors"
    LLM_PROMPT_TOKENS = "llm_prompt_tokens"
    LLM_COMPLETION_TOKENS = "llm_completion_tokens"
    LLM_COST_USD = "llm_cost_usd"
    RECHECKS = "rechecks"
    RECHECKS_DISPUTED = "rechecks_disputed"
    DUELS = "duels"  # a new champion timed against the one it replaced (search/engine/duels.py)
    DUELS_LOST = "duels_lost"


# Per model: llm_model/<field>/<model name, may hold '/'> (search/engine/llm_budget.py owns the fields).
LLM_MODEL_COUNTER_PREFIX = "llm_model/"


def state_counter(state: str) -> str:
    """Finished evaluations that ended in ``state`` (a population State value)."""
    return f"state/{state}"


class _Record(BaseModel):
    # Frozen like the population's models; extra fields kept so that old and new writers agree.
    model_config = ConfigDict(frozen=True, extra="allow")


class RunCounters(_Record):
    """The counters the readers show, typed (a missing counter is 0)."""

    gpu_evaluations: int = 0
    busy_seconds: float = 0.0
    llm_calls: int = 0
    llm_errors: int = 0
    llm_prompt_tokens: int = 0
    llm_completion_tokens: int = 0
    llm_cost_usd: float = 0.0
    rechecks: int = 0
    rechecks_disputed: int = 0
    duels: int = 0
    duels_lost: int = 0

    @classmethod
    def of(cls, counters: Mapping[str, int | float]) -> RunCounters:
        fields = cls.model_fields
        return cls.model_validate({k: v for k, v in counters.items() if k in fields})

    @property
    def llm_tokens(self) -> int:
        return self.llm_prompt_tokens + self.llm_completion_tokens


# --- JSON records -----------------------------------------------------------------------------


class DriverStatus(_Record):
    """The driver's heartbeat (``driver/status``), as ``SearchLoop.status`` writes it."""

    state: str = "created"  # created | running | stopped | finished | ...
    updated: float | None = None  # wall clock of the last write
    session_evaluations: int = 0
    evals_per_minute: float | None = None
    lost: int = 0
    by_state: dict[str, int] = {}
    queue: int = 0
    inflight: int = 0
    llm_inflight: int = 0
    llm: str = ""
    evaluators: int = 0
    evaluators_ready: int = 0
    busy_fraction: dict[str, float] = {}
    driver_seconds: float = 0.0
    stop_reason: str | None = None
    human: dict[str, Any] | None = None
    focus: dict[str, Any] | None = None

    def shown_state(self, now: float) -> str:
        """The state as people should read it: a "running" status without a heartbeat for
        ``HEARTBEAT_S`` is a driver that died without writing "stopped"."""
        if self.state == "running" and (self.updated is None or now - self.updated > HEARTBEAT_S):
            return "stopped (no heartbeat)"
        return self.state

    def alive(self, now: float) -> bool:
        return self.shown_state(now) == "running"


class Session(_Record):
    """One driver session (``driver/sessions`` holds the list, oldest first)."""

    pid: int | None = None
    host: str = ""
    started: float | None = None
    address: str = "local"
    ended: float | None = None  # absent for a session that was killed


class LLMCall(_Record):
    """One answered LLM request (``llm/call/NNNNNN``)."""

    model: str = "?"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float | None = None
    family: str = ""
    parents: list[str] = []
    at: float | None = None
    child: str | None = None  # the child it made (accepted or rejected); none for a duplicate
    params: str | None = None  # where the child's PARAMS came from (kept, restored, ...)
    rejected: str | None = None
    kind: str | None = None
    duplicate: bool | None = None
    operator: str | None = None  # the LLM operator that chose the parents (stores before it: none)


class Utilization(_Record):
    """A session's evaluator and GPU use (``driver/utilization``)."""

    evaluator_busy: dict[str, float] = {}
    gpu_utilization: dict[str, float | None] = {}
    driver_seconds_per_evaluation: float | None = None
    evals_per_minute: float | None = None
    evaluations: int = 0


R = TypeVar("R", bound=BaseModel)


def parse(model: type[R], raw: Any) -> R:
    """A stored record, leniently: one whose fields do not validate (a record of another
    version with a field of another type) is still read, as stored, rather than failing a reader."""
    data = raw if isinstance(raw, dict) else {}
    try:
        return model.model_validate(data)
    except ValidationError:
        return model.model_construct(**data)


def dump(record: BaseModel) -> dict[str, Any]:
    """A record as stored: unset optional fields left out, as the driver always wrote them."""
    return record.model_dump(mode="json", exclude_none=True)
