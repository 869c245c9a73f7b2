"""How many LLM requests may go out now, to which model, and when a model rests.

LLM calls are what a user pays for, so the rules are about waste:

* **Capacity.** Requests in flight plus accepted LLM children not yet evaluated stay at
  most ``queue_per_evaluator`` per evaluator plus ``concurrency``, and never above what the
  evaluation budget can still take (an answer nobody will evaluate is money thrown away).
  So an endpoint that answers at once cannot outrun the evaluators.
* **Streaks.** Every unusable answer of a model (rejected, a duplicate, or a failed call)
  lengthens its streak.  The model then waits ``backoff_initial_s × 2^(streak-1)``, capped
  at ``backoff_max_s``, before its next request, and its share of the ensemble halves with
  each one.  An accepted answer ends the streak.
* **Pause.** At ``max_consecutive_rejections`` the model pauses for ``pause_cooldown_s``,
  with one log line; the run goes on with Optuna and crossover.  After the cool-down one
  request probes it: accepted ends the streak, another unusable answer pauses it again.
* **Ledger.** Per model, counters in the store (requests, answers, accepted, rejections by
  reason, errors, tokens, cost, evaluated children, restored parameter blocks) and its
  streak/back-off/pause state as JSON: a resume continues it and ``qrsearch status`` reads it.
  Wall-clock times, because they outlive the process.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Mapping, Sequence

from population.models import State
from population.records import LLM_CHILD_KEY, LLM_MODEL_COUNTER_PREFIX, LLM_STATE_KEY
from population.store import RunStore
from search.config import LLMConfig
from search.config.sections import LLMModel

# The keys live in population/records.py (the one record of what the driver stores); the short names stay.
COUNTER_PREFIX = LLM_MODEL_COUNTER_PREFIX  # llm_model/<field>/<model name, may hold '/'>
STATE_KEY = LLM_STATE_KEY
CHILD_KEY = LLM_CHILD_KEY  # the model that proposed an LLM child (counts its evaluation)
REJECTED = "rejected:"
DUPLICATE = "duplicate"
ERROR = "error"
MAX_SHARE_HALVINGS = 30  # 2^-30: out of the draw in practice, and no float underflow


def counter_key(field: str, model: str) -> str:
    return f"{COUNTER_PREFIX}{field}/{model}"


@dataclass
class ModelState:
    streak: int = 0  # unusable answers in a row
    not_before: float = 0.0  # wall clock: no request before (back-off)
    paused_until: float | None = None  # wall clock: paused (None: not paused)
    pauses: int = 0
    last_reason: str = ""


class LLMBudget:
    def __init__(self, config: LLMConfig, store: RunStore, log: Callable[[str], None] = print,
                 clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self.store = store
        self.log = log
        self.clock = clock
        self.models: dict[str, LLMModel] = {m.name: m for m in config.models}
        self.state: dict[str, ModelState] = {}
        for name in self.models:
            saved = store.get_json(STATE_KEY.format(model=name))
            self.state[name] = ModelState(**saved) if isinstance(saved, dict) else ModelState()
        # Accepted LLM children a previous session left unevaluated still count against capacity.
        self.unevaluated: set[str] = {
            c.id for state in (State.PENDING, State.RUNNING) for c in store.list_candidates(state=state)
            if store.get_json(CHILD_KEY.format(cid=c.id)) is not None}

    # --- may a request go out? -----------------------------------------------------------

    def room(self, inflight: int, evaluators: int, eval_room: int | None) -> int:
        """How many more requests may start now (before per-model back-off and pauses)."""
        cap = self.config.queue_per_evaluator * evaluators + self.config.concurrency
        room = min(self.config.concurrency - inflight, cap - inflight - len(self.unevaluated))
        if eval_room is not None:
            room = min(room, eval_room - inflight)
        return max(0, room)

    def available(self, name: str, now: float | None = None) -> bool:
        now = self.clock() if now is None else now
        state = self.state[name]
        if state.paused_until is not None and now < state.paused_until:
            return False
        return now >= state.not_before

    def paused(self, name: str) -> bool:
        until = self.state[name].paused_until
        return until is not None and self.clock() < until

    def all_paused(self) -> bool:
        return bool(self.models) and all(self.paused(name) for name in self.models)

    def pick(self, rng: random.Random) -> LLMModel | None:
        """A model by weight, each halved per unusable answer in a row; None while every model waits."""
        now = self.clock()
        ready = [m for m in self.config.models if self.available(m.name, now)]
        if not ready:
            return None
        weights = [m.weight * 0.5 ** min(self.state[m.name].streak, MAX_SHARE_HALVINGS) for m in ready]
        return rng.choices(ready, weights=weights, k=1)[0]

    # --- outcomes ------------------------------------------------------------------------

    def answered(self, name: str, prompt_tokens: int, completion_tokens: int, cost_usd: float,
                 rejection: str | None, child: str | None, restored: bool = False) -> None:
        """One answer: ``child`` for an accepted one, else ``rejection`` (a reason kind or DUPLICATE).
        Tokens and money count either way: the answer was paid for."""
        deltas: dict[str, int | float] = {
            counter_key("requests", name): 1, counter_key("answers", name): 1,
            counter_key("prompt_tokens", name): prompt_tokens,
            counter_key("completion_tokens", name): completion_tokens, counter_key("cost_usd", name): cost_usd}
        if child is not None:
            deltas[counter_key("accepted", name)] = 1
            if restored:
                deltas[counter_key("restored_params", name)] = 1
            self.store.set_json(CHILD_KEY.format(cid=child), name)
            self.unevaluated.add(child)
            self._accepted(name)
        else:
            kind = rejection or "unknown"
            deltas[counter_key(REJECTED + kind, name)] = 1
            self._unusable(name, kind)
        self.store.add_counters(deltas)

    def failed(self, name: str, message: str) -> None:
        """A call that produced no answer (after the client's retries)."""
        self.store.add_counters({counter_key("requests", name): 1, counter_key("errors", name): 1})
        self._unusable(name, f"{ERROR}: {message}")

    def evaluated(self, cid: str) -> None:
        """A candidate finished its evaluation; counts for its model if an LLM proposed it."""
        self.unevaluated.discard(cid)
        name = self.store.get_json(CHILD_KEY.format(cid=cid))
        if name is not None:
            self.store.add_counters({counter_key("evaluated", str(name)): 1})

    def _accepted(self, name: str) -> None:
        state = self._state(name)
        state.streak, state.not_before, state.paused_until, state.last_reason = 0, 0.0, None, ""
        self._save(name)

    def _unusable(self, name: str, reason: str) -> None:
        state = self._state(name)
        now = self.clock()
        state.streak += 1
        state.last_reason = reason[:300]
        delay = min(self.config.backoff_max_s, self.config.backoff_initial_s * 2 ** (state.streak - 1))
        state.not_before = now + delay
        resting = state.paused_until is not None and now < state.paused_until  # answers of calls already out
        if state.streak >= self.config.max_consecutive_rejections and not resting:
            state.paused_until = now + self.config.pause_cooldown_s
            state.pauses += 1
            self.log(f"LLM mutation paused for model {name}: {state.streak} unusable answers in a row "
                     f"(last: {state.last_reason[:160]}); resting {self.config.pause_cooldown_s:g} s, "
                     "the search goes on with Optuna and crossover")
        self._save(name)

    def _state(self, name: str) -> ModelState:
        # A reply may name a model the config does not list (an endpoint alias): track it anyway.
        return self.state.setdefault(name, ModelState())

    def _save(self, name: str) -> None:
        self.store.set_json(STATE_KEY.format(model=name), asdict(self.state[name]))


def model_ledger(counters: Mapping[str, int | float], states: Mapping[str, Any],
                 now: float | None = None) -> dict[str, dict[str, Any]]:
    """Per model, as ``status`` and the report show it: requests, answers, accepted, rejections by
    reason, errors, tokens, cost, evaluated children, restored blocks, and whether it is paused.
    ``states`` maps a model name to its saved :class:`ModelState` JSON."""
    now = time.time() if now is None else now
    out: dict[str, dict[str, Any]] = {}

    def entry(name: str) -> dict[str, Any]:
        return out.setdefault(name, {"requests": 0, "answers": 0, "accepted": 0, "rejected": {}, "errors": 0,
                                     "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0, "evaluated": 0,
                                     "restored_params": 0, "streak": 0, "paused": False, "paused_until": None,
                                     "pauses": 0})

    for key, value in counters.items():
        if not key.startswith(COUNTER_PREFIX):
            continue
        field, _, name = key[len(COUNTER_PREFIX):].partition("/")
        row = entry(name)
        if field.startswith(REJECTED):
            row["rejected"][field[len(REJECTED):]] = int(value)
        elif field == "cost_usd":
            row["cost_usd"] = float(value)
        elif field in row:
            row[field] = int(value)
    for name, saved in states.items():
        if not isinstance(saved, dict):
            continue
        row = entry(name)
        until = saved.get("paused_until")
        row.update(streak=int(saved.get("streak", 0)), pauses=int(saved.get("pauses", 0)),
                   paused=until is not None and now < until, paused_until=until if until and now < until else None)
    for row in out.values():
        row["rejected_total"] = sum(row["rejected"].values())
        row["rejected"] = dict(sorted(row["rejected"].items()))
    return dict(sorted(out.items()))


def read_ledger(store: RunStore, config_models: Sequence[str] = (),
                now: float | None = None) -> dict[str, dict[str, Any]]:
    """The ledger of every model the counters or ``config_models`` name (paused as of ``now``)."""
    counters = store.counters(COUNTER_PREFIX)
    names = ledger_names(counters, config_models)
    states = {name: store.get_json(STATE_KEY.format(model=name)) for name in names}
    return model_ledger(counters, states, now)


def ledger_names(counters: Mapping[str, int | float], config_models: Sequence[str] = ()) -> set[str]:
    """The models a ledger covers: every model the counters name, and those the config lists."""
    return {key[len(COUNTER_PREFIX):].partition("/")[2] for key in counters
            if key.startswith(COUNTER_PREFIX)} | set(config_models)


def config_model_names(config_json: str | None) -> list[str]:
    """The model names a stored run config lists (none for a run without an LLM)."""
    try:
        llm = (json.loads(config_json or "{}") or {}).get("llm") or {}
    except ValueError:
        return []
    return [str(m.get("name")) for m in llm.get("models") or [] if isinstance(m, dict) and m.get("name")]


def describe_model(name: str, row: Mapping[str, Any]) -> str:
    """One line per model for ``qrsearch status``."""
    rejected = ", ".join(f"{k} {v}" for k, v in row["rejected"].items()) or "none"
    state = "PAUSED until " + time.strftime("%H:%M:%S", time.localtime(row["paused_until"])) if row["paused"] \
        else (f"{row['streak']} unusable in a row" if row["streak"] else "on")
    return (f"  {name}: {row['requests']} requests, {row['accepted']} accepted ({row['evaluated']} evaluated, "
            f"{row['restored_params']} with the parent's PARAMS restored), {row['rejected_total']} rejected "
            f"({rejected}), {row['errors']} errors, {row['prompt_tokens'] + row['completion_tokens']} tokens, "
            f"${row['cost_usd']:.2f}; {state}")
