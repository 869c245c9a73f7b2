"""The small sections of a run config: families, budget, LLM, Optuna, the population's
settings, Ray, simulated GPUs and a focus (each field documented where it is declared).
"""

from __future__ import annotations

import re
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator




class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# The release that stops reading the deprecated keys (evaluation's and mutation's).
DEPRECATED_REMOVED_IN = "0.2.0"



class FamilySpec(_Section):
    """One searched family: its name and its island model."""

    name: str = Field(description="a registered family (the table below)")
    islands: int = Field(2, ge=1, description="independent sub-populations of this family")
    island_size: int = Field(8, ge=1, description="members an island keeps (champion and maturing ones are extra)")



class BudgetConfig(_Section):
    """When the run stops, and when LLM mutation stops spending."""

    max_evals: Optional[int] = Field(200, ge=1, description="evaluations (of any outcome) before the run stops")
    max_minutes: Optional[float] = Field(30.0, gt=0, description="wall-clock minutes before the run stops")
    max_llm_tokens: Optional[int] = Field(2_000_000, ge=0, description="LLM prompt+completion tokens, then LLM off")
    max_llm_cost_usd: Optional[float] = Field(20.0, ge=0, description="LLM spend, then LLM off (counted from each "
                                              "model's usd_per_mtok_in/out: a model without prices costs nothing)")



class LLMModel(_Section):
    """One model the endpoint serves, its share of the calls and its prices."""

    name: str = Field(description="model name as the endpoint knows it")
    weight: float = Field(1.0, gt=0, description="relative share of calls")
    usd_per_mtok_in: float = Field(0.0, ge=0, description="price in USD per million prompt tokens (0: free, and "
                                   "budget.max_llm_cost_usd never counts it)")
    usd_per_mtok_out: float = Field(0.0, ge=0, description="price in USD per million completion tokens")


# A ``models:`` list with prices, as docs/config.md shows it (a test checks that it loads).
LLM_MODELS_EXAMPLE = """\
llm:
  base_url: http://localhost:8000/v1
  models:
    - {name: qwen3-coder, weight: 3, usd_per_mtok_in: 0.20, usd_per_mtok_out: 0.80}
    - {name: gpt-4.1-mini, weight: 1, usd_per_mtok_in: 0.40, usd_per_mtok_out: 1.60}
budget: {max_llm_cost_usd: 5}
"""


class LLMConfig(_Section):
    """LLM mutation: an OpenAI-compatible endpoint and its models (off without both)."""

    base_url: Optional[str] = Field(None, description="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1; none: LLM off")
    models: list[LLMModel] = Field(default_factory=list, description="models to sample from, by weight")
    api_key_env: str = Field("OPENAI_API_KEY", description="environment variable holding the API key")
    temperature: float = Field(0.7, ge=0, le=2, description="sampling temperature of every call (0: the most "
                               "likely answer; higher: more varied edits)")
    max_tokens: int = Field(8192, ge=256, description="completion tokens per call")
    timeout_s: float = Field(180.0, gt=0, description="per request")
    max_retries: int = Field(4, ge=0, description="retries with backoff on timeouts, 429 and 5xx")
    concurrency: int = Field(4, ge=1, description="LLM calls in flight at once")
    recent_attempts: int = Field(6, ge=0, description="recent attempts of the lineage shown in the prompt")
    inspirations: int = Field(2, ge=0, description="other families' champions shown in the prompt")
    queue_per_evaluator: int = Field(
        2, ge=0, description="LLM calls in flight plus accepted LLM children not yet evaluated stay at most this "
        "many per evaluator, plus the concurrency (an instant endpoint cannot outrun the evaluators)")
    backoff_initial_s: float = Field(1.0, ge=0, description="wait after a model's first unusable answer in a row "
                                     "(rejected, duplicate or failed call); doubles with each further one")
    backoff_max_s: float = Field(60.0, ge=0, description="longest wait between a model's requests while its "
                                 "answers keep being unusable")
    max_consecutive_rejections: int = Field(
        20, ge=1, description="unusable answers in a row after which LLM mutation pauses for that model "
        "(Optuna and crossover go on); an accepted answer resets the count")
    pause_cooldown_s: float = Field(600.0, gt=0, description="how long a paused model rests; then one request "
                                    "probes it again")

    @property
    def enabled(self) -> bool:
        return bool(self.base_url) and bool(self.models)

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
            raise ValueError(f"{value!r} is not an environment variable name")
        return value


class OptunaConfig(_Section):
    """Parameter tuning: one Optuna study per family and structure."""

    sampler: Literal["tpe", "random", "cmaes"] = Field("tpe", description="Optuna sampler per study")
    trials_per_structure: int = Field(60, ge=1, description="parameter evaluations per (family, structure) at most")
    parents_with_budget: bool = Field(
        True, description="the tuning operators (optuna_step, local_step) draw their parent only from structures with "
        "Optuna trials left (the maturing ones' best and the island's members); false: from all (a parent of a spent "
        "structure gives them no child: late in a 64-evaluator run most draws did, and the proposer drew again)")
    tpe_max_inflight: Optional[int] = Field(
        None, ge=1, description="Optuna's TPE asks (optuna_step) for a structure only while fewer than this many of "
        "its children are queued or running; beyond, the other immediate operators make the child (parameter "
        "crossover, then the local step): with dozens in flight, TPE's asks, none told the others' outcomes, were "
        "near-random (at 64 simulated evaluators 2 of 307 beat their parent in cuda_blocked, 4 of 118 at one); "
        "none: no limit")
    carry_gains: bool = Field(
        False, description="a child that beat its parent while another member of its island and structure was "
        "faster still (with many evaluators, a child proposed before its siblings' results came back) has its moved "
        "knobs (at most 3) applied to that faster member, and the freshest such point is its family's next child "
        "(a trial of the structure's study); false: the gain waits until a later step moves the same knobs")


class SelectionSettings(_Section):
    """How a parent is chosen from an island."""

    kind: Literal["tournament", "rank_softmax"] = Field(
        "tournament", description="tournament: the fastest of tournament_size members drawn at random; "
        "rank_softmax: drawn with probability falling with rank")
    tournament_size: int = Field(3, ge=1, description="members drawn per tournament")
    temperature: float = Field(0.5, gt=0, description="rank-softmax temperature (small: greedy)")
    inflight_penalty: float = Field(
        0.0, ge=0, description="ranks a member competes below its own per child of it queued or running: with many "
        "evaluators, a parent whose neighbourhood is being measured is drawn less, so the children in flight spread "
        "over more of the island; 0: children in flight do not count")


class MigrationSettings(_Section):
    """Islands of one family share their best members now and then."""

    topology: Literal["ring", "best_to_worst"] = Field(
        "ring", description="ring: each island sends its best to the next; best_to_worst: the island whose best is "
        "fastest sends it to the island whose best is slowest")
    every_evals: int = Field(20, ge=0, description="migrate within a family every K of its evaluations; 0: never")


class MaturationSettings(_Section):
    """A new structure is tuned before it must beat the champion."""

    tuning_budget: int = Field(8, ge=0, description="parameter evaluations a new structure gets before it must win")
    timeout_evals: Optional[int] = Field(60, ge=1, description="family evaluations after which a maturing structure is judged anyway")
    min_improvement: float = Field(
        0.01, ge=0, lt=1, description="a challenger must be this fraction faster than the champion to take the title "
        "(two H200 runs measured the same torch.geqrf geomean 0.7% apart)")


class RayConfig(_Section):
    """Where the evaluators run."""

    address: Optional[str] = Field(None, description="Ray cluster address ('auto', ray://...); none: local Ray")
    gpus: Optional[int] = Field(None, ge=0, description="GPU evaluators (default: every GPU Ray sees)")
    cpu_evaluators: int = Field(1, ge=1, description="CPU evaluators when there is no GPU")
    cpus_per_evaluator: float = Field(1.0, ge=0, description="CPUs an evaluator actor reserves")
    fake_gpus: int = Field(0, ge=0, description="declare this many GPUs to local Ray (tests of the GPU path)")
    log_to_driver: bool = Field(
        False, description="stream the evaluator actors' stdout and stderr to the driver's terminal (Ray's "
        "log_to_driver), where they are not kept; off, each evaluator appends them to "
        "run_dir/work/<evaluator>/actor.log on its node, and a lost evaluator's reason names that file and quotes "
        "its last error")
    no_evaluator_minutes: float = Field(
        10.0, gt=0, description="minutes with no evaluator up, after one was (every actor dead or restarting: its "
        "node left the cluster, say), before the run stops, resumable, with exit code 1; the work it held is "
        "queued again for the resume")


class SimulationConfig(_Section):
    """Simulated GPUs (``evaluation.device: simulated``): only the GPU work is replaced; the driver, the Ray
    actors, the store, Optuna and the proposer are the real ones (search/evaluate/simulated/)."""

    model: str = Field("h200-run-m", description="the recorded run whose stage times, screen and failure counts and "
                       "timing noise the simulated GPUs draw from (search/evaluate/simulated/<model>.json)")
    time_scale: float = Field(1.0, gt=0, description="simulated seconds per real second: every recorded delay is "
                              "divided by it (10: ten simulated minutes in one real minute; the driver's own work is "
                              "not scaled, so a large scale tests the driver harder than a real cluster would)")
    landscape_seed: int = Field(0, description="picks each family's optimum and knob weights in the synthetic "
                                "landscape of per-case times")
    compile_slots: int = Field(5, ge=1, description="candidates a simulated GPU compiles ahead at once: the recorded "
                               "H200 host had 14 compile processes, about 3 a compile weighted by its seconds; 5 "
                               "reproduces the recorded run at one GPU (250 evaluations in 10 minutes, busy 1.00: "
                               "simulated 235-262, busy 0.95-0.97; with 4, 213-233 and 0.88-0.91)")
    failure_rate: Optional[float] = Field(None, ge=0, le=1, description="the chance that an evaluation fails its "
                                          "verify stage; none: its family's recorded rate (recorded: none of 250 failed)")


class FocusConfig(_Section):
    """The objective of a focused run (``launch --focus``): some benchmark cases, a target, a regression limit."""

    cases: list[str] = Field(default_factory=list, description="benchmark cases whose geomean is the fitness; "
                             "empty: the whole suite's geomean (no focus)")
    target_pct: Optional[float] = Field(None, gt=0, description="stop once the focused geomean is this many percent "
                                        "faster than the family champion's at the start; none: no target")
    max_regression_pct: float = Field(2.0, ge=0, description="reject a child that makes any other case slower than "
                                      "the family champion at the start by more than this")
