"""RunConfig: everything a search run needs, loaded from YAML, one source of defaults.

Every field is documented where it is declared; ``qrsearch launch --help`` and
``docs/config.md`` point here.  Unknown keys are errors (``extra="forbid"``),
and a bad file is reported with the field's path and the file's name.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any, Literal, Optional

import yaml
from pydantic import BaseModel, ConfigDict, Field, RootModel, ValidationError, field_validator, model_validator

from kernels.harness.settings import RunLimits, TimingPolicy
from population.config import FamilyConfig as PopulationFamilyConfig
from population.config import MigrationConfig as PopulationMigration
from population.config import PopulationConfig, SelectionConfig, SelectionKind, Topology
from population.records import BASELINE_FAMILY


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ConfigError(ValueError):
    """A run configuration that cannot be used; the message names the file and the field."""


class FamilySpec(_Section):
    """One searched family: its name and its island model."""

    name: str = Field(description="a registered family (the table below)")
    islands: int = Field(2, ge=1, description="independent sub-populations of this family")
    island_size: int = Field(8, ge=1, description="members an island keeps (champion and maturing ones are extra)")


# Keys of ``evaluation:`` before the timing settings moved into the harness's models: old key ->
# (section, field).  They still load (a FutureWarning says where they went; docs/config.md lists them).
# The release that stops reading the deprecated keys below (LEGACY_MUTATION_KEYS too).
DEPRECATED_REMOVED_IN = "0.2.0"

DEPRECATED_EVALUATION_KEYS: dict[str, tuple[str, str]] = {
    "case_timeout_s": ("limits", "case_timeout_s"),
    "startup_timeout_s": ("limits", "startup_timeout_s"),
    "min_reps": ("timing", "min_reps"),
    "max_reps": ("timing", "max_reps"),
    "max_seconds_per_case": ("timing", "max_seconds"),
    "target_rel_stderr": ("timing", "target_rel_stderr"),
}


class EvaluationConfig(_Section):
    """The cascade: a cheap verification gate, then timing on the benchmark suite."""

    verify_suite: str = Field("qrv2-quick", description="suite every candidate must pass before it is timed")
    bench_suite: str = Field("qrv2-bench", description="suite whose geometric-mean time is the fitness")
    device: Literal["auto", "cuda", "cpu", "simulated"] = Field(
        "auto", description="where candidates run; 'simulated': a dry run on the GPUs Ray sees (declared ones "
        "count: `ray start --num-gpus=N`), each a real evaluator actor whose GPU work is simulated (see `simulation:`)")
    timing: TimingPolicy = Field(TimingPolicy(), description="how each bench case is timed (the harness's "
                                 "defaults: `qrsearch bench` times the same way)")
    limits: RunLimits = Field(RunLimits(), description="how long a child may take; a hang is killed")
    profile: bool = Field(True, description="profile verified candidates (kernels, syncs) for the LLM prompt "
                          "(only while an LLM endpoint is configured: nothing else reads them)")
    verify_processes: int = Field(
        4, ge=1, description="child processes that verify a candidate at once, its cases grouped by n, so its "
        "kernels compile in parallel (capped at the CPU count); timing always has the device alone")
    family_domains: bool = Field(
        True, description="verify and time each family only on the suites' cases inside its declared range of n "
        "(its domain; fitness is the geomean there); the composite export takes each case's best over all families")
    fast_gates: bool = Field(
        True, description="check the bench cases' gate calls with the fast float64 Q; the verify suite keeps the "
        "reference householder_product construction")
    screen_cases: int = Field(
        2, ge=0, description="the cascade: a child of a structure with a verified best is first gated and timed on "
        "one case of each of this many sizes n of its domain, and stops there (state screened) if it is more than "
        "screen_margin times slower than that best on them; 0: every child gets the full bench")
    screen_margin: float = Field(1.2, gt=1, description="how much slower than its structure best a child may be on "
                                 "the screen and still get the full bench")
    pause_compiles_while_timing: bool = Field(
        True, description="stop the compile-ahead processes (SIGSTOP) while a candidate is timed: a busy host "
        "slowed launch-bound cases 7-22% in an H200 search; off: compiles never pause (more throughput)")
    duel_below_ms: float = Field(
        2.0, ge=0, description="a new champion whose domain has cases under this (its medians) is timed again "
        "against the champion it replaced, both in one process on fresh inputs, on those cases, and keeps the "
        "title only if the pair confirms the margin (maturation.min_improvement); launch-bound medians move "
        "15-40% between processes on an H200, the device time under 1%. 0: no duels")
    pause_compiles_below_ms: float = Field(
        5.0, ge=0, description="with pause_compiles_while_timing, compiles stop only while cases expected to "
        "take less than this are timed (expected: the median of the candidate's structure best, else of its "
        "family champion; a case with neither pauses); 14 compiling CPUs moved cases of 6.8-26 ms by under 1% "
        "on an H200, and cases of 0.1-0.9 ms by 7-19%")
    reuse_processes: bool = Field(
        True, description="run a candidate in the evaluation processes that ran the last candidate of its "
        "structure (children differing only in PARAMS), so start-up is paid once and no process starts before "
        "timing; a case that fails in a reused process is re-run in a fresh one before it is blamed")
    timing_hold: Literal["region", "job"] = Field(
        "region", description="what a bench job has the device alone for: 'region', each timed region (its L2 "
        "flush, the clock's calibration and a profiled call too), sharing the device between them with the other "
        "lanes' untimed work (inputs, warm-ups, re-checks of timed outputs), so two lanes' host-bound re-checks "
        "run at once; 'job', the whole bench job (re-checks included)")
    lanes: int = Field(
        1, ge=1, description="evaluations each evaluator runs at once, so one's compile wait, process starts and "
        "gate calls may overlap another's GPU work; timed calls still have the device alone (a bench job waits for "
        "the others' gate calls and process starts, and they for it). On an H200 two lanes "
        "measured 64% GPU and 22.9 evaluations/min against one lane's 53% and 19.5 "
        "(docs/search-performance.md; runs/h200.yaml uses 2); 1 here, for hosts with few CPUs")
    compile_ahead: int = Field(
        2, ge=0, description="candidates queued per evaluator beyond the ones it runs; their Triton kernels are "
        "compiled ahead (CUDA hidden, on CPUs the timing child does not use) into the run's cache; 0: off")
    compile_ahead_max: int = Field(
        8, ge=0, description="candidates queued per evaluator at most: beyond compile_ahead, an evaluator takes "
        "more while its compile processes would otherwise idle (cheap compiles keep the CPUs busy and the "
        "evaluator finds one ready); at or below compile_ahead: exactly compile_ahead")
    compile_ahead_total: Optional[int] = Field(
        64, ge=1, description="candidates queued beyond the running ones over all evaluators together, about: "
        "with many evaluators each queues fewer (at least one, its next compile; compile_ahead and the room-driven "
        "compile_ahead_max shrink to this total's share), so that the search does not hold hundreds of children "
        "proposed before their siblings' results came back; a lane that holds for a compiled candidate still takes "
        "more, up to compile_ahead_max; none: every evaluator queues compile_ahead, up to compile_ahead_max")
    hold_for_ready: bool = Field(
        True, description="with compile_ahead, a free evaluator starts no candidate whose kernels are still "
        "compiling: it waits for the first queued one that is compiled and takes one more candidate every "
        "0.5 s meanwhile (up to compile_ahead_max), so a cheap child runs while a long compile goes on; "
        "false: it starts the head and waits inside it")

    @model_validator(mode="before")
    @classmethod
    def _flat_timing_keys(cls, data: object) -> object:
        """Deprecated: the flat keys of earlier configs (``case_timeout_s``, ``max_seconds_per_case``, ...),
        moved onto ``timing`` and ``limits``.  A key given both ways is an error, not a silent choice."""
        if not isinstance(data, dict) or not any(k in data for k in DEPRECATED_EVALUATION_KEYS):
            return data
        data = dict(data)
        moved = []
        for old, (section, field) in DEPRECATED_EVALUATION_KEYS.items():
            if old not in data:
                continue
            sub = data.get(section, {})
            if isinstance(sub, BaseModel):
                sub = sub.model_dump(exclude_unset=True)  # only what was set explicitly can clash
            if not isinstance(sub, dict):
                return data  # the section's own validation reports it (and the old key as unknown)
            if field in sub:
                raise ValueError(f"{old} (deprecated) and {section}.{field} both given; keep {section}.{field}")
            data[section] = {**sub, field: data.pop(old)}
            moved.append(f"{old} -> {section}.{field}")
        # FutureWarning, not DeprecationWarning: the reader is whoever wrote the YAML, and Python
        # shows FutureWarning to end users by default.
        warnings.warn(f"deprecated evaluation keys (they still work; removed in {DEPRECATED_REMOVED_IN}; see "
                      "docs/config.md): " + ", ".join(moved),
                      FutureWarning, stacklevel=2)
        return data

    @field_validator("verify_suite", "bench_suite")
    @classmethod
    def _known_suite(cls, value: str) -> str:
        from kernels.suites import suite_names

        if value not in suite_names():
            raise ValueError(f"unknown suite {value!r}; known: {', '.join(suite_names())}")
        return value


class BudgetConfig(_Section):
    """When the run stops, and when LLM mutation stops spending."""

    max_evals: Optional[int] = Field(200, ge=1, description="evaluations (of any outcome) before the run stops")
    max_minutes: Optional[float] = Field(30.0, gt=0, description="wall-clock minutes before the run stops")
    max_llm_tokens: Optional[int] = Field(2_000_000, ge=0, description="LLM prompt+completion tokens, then LLM off")
    max_llm_cost_usd: Optional[float] = Field(20.0, ge=0, description="LLM spend, then LLM off (counted from each "
                                              "model's usd_per_mtok_in/out: a model without prices costs nothing)")


# The keys ``mutation:`` had before the operator registry, and the operators each one meant.
# "crossover" weighed both two-parent operators: the parameter crossover among the immediate
# proposals and the LLM merge among the LLM calls, so it maps onto both with its weight.
LEGACY_MUTATION_KEYS: dict[str, tuple[str, ...]] = {
    "llm": ("llm_edit",), "optuna": ("optuna_step",), "crossover": ("param_crossover", "llm_merge")}
_LEGACY_DEFAULTS = {"llm": 0.4, "optuna": 0.5, "crossover": 0.1}  # what an omitted old key weighed


def _default_mutation() -> dict[str, float]:
    from search.mutation.operators import registry

    return {name: op.default_weight for name, op in registry().items() if op.default_weight > 0}


class MutationMix(RootModel[dict[str, float]]):
    """Relative weights of the mutation operators, `{operator: weight}` (renormalised over the ones available).

    An operator left out is off.  An immediate operator with weight 0 is never drawn first but still
    makes a child when the drawn one has nothing to offer, so that no evaluator idles.
    """

    model_config = ConfigDict(frozen=True)
    root: dict[str, float] = Field(default_factory=_default_mutation)

    @model_validator(mode="before")
    @classmethod
    def _legacy_keys(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not any(k in LEGACY_MUTATION_KEYS for k in data):
            return data
        new_style = sorted(k for k in data if k not in LEGACY_MUTATION_KEYS)
        if new_style:
            raise ValueError(f"the old keys (llm, optuna, crossover) cannot be mixed with operator names "
                             f"({', '.join(new_style)}): use operator names only")
        old = {**_LEGACY_DEFAULTS, **data}
        weights = {new: old[key] for key, names in LEGACY_MUTATION_KEYS.items() for new in names}
        # FutureWarning is shown to users by default, once per process since it is raised from
        # this one line (old files and stores keep working; they only hear about it).
        warnings.warn(f"mutation: the keys llm/optuna/crossover are deprecated (removed in {DEPRECATED_REMOVED_IN}); "
                      "they now read as "
                      + ", ".join(f"{k}: {v:g}" for k, v in weights.items()) + " (see docs/config.md)",
                      FutureWarning, stacklevel=1)
        return weights

    @model_validator(mode="after")
    def _known_operators(self) -> "MutationMix":
        from search.mutation.operators import registry

        known = registry()
        unknown = [name for name in self.root if name not in known]
        if unknown:
            raise ValueError(f"unknown mutation operator {unknown[0]!r}; registered: {', '.join(known)}")
        negative = [name for name, w in self.root.items() if not w >= 0]
        if negative:
            raise ValueError(f"mutation weight of {negative[0]} must be >= 0")
        if sum(self.root.values()) <= 0:
            raise ValueError("at least one mutation weight must be positive")
        return self

    @property
    def weights(self) -> dict[str, float]:
        return dict(self.root)

    @classmethod
    def reference(cls) -> list[tuple[str, str, float, str]]:
        """Rows for docs/config.md: one per registered operator (name, type, default, meaning)."""
        from search.mutation.operators import registry

        return [(name, "float", op.default_weight, op.description) for name, op in registry().items()]


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


class SelectionSettings(_Section):
    """How a parent is chosen from an island."""

    kind: Literal["tournament", "rank_softmax"] = Field(
        "tournament", description="tournament: the fastest of tournament_size members drawn at random; "
        "rank_softmax: drawn with probability falling with rank")
    tournament_size: int = Field(3, ge=1, description="members drawn per tournament")
    temperature: float = Field(0.5, gt=0, description="rank-softmax temperature (small: greedy)")


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
    compile_slots: int = Field(4, ge=1, description="candidates a simulated GPU compiles ahead at once (the recorded "
                               "H200 host had 14 compile processes, up to 4 a candidate)")
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


class RunConfig(_Section):
    """A whole search run: what to search, how to evaluate, how long, and with which proposers."""

    name: str = Field("qrsearch", description="run name; the run writes runs/<name>/")
    seed: int = Field(0, description="seeds every random choice of the run")
    runs_dir: str = Field("runs", description="directory holding run directories")
    families: list[FamilySpec] = Field(
        default_factory=lambda: [FamilySpec(name=n) for n in _default_families()],
        description="families to search")
    evaluation: EvaluationConfig = EvaluationConfig()
    budget: BudgetConfig = BudgetConfig()
    mutation: MutationMix = MutationMix()
    llm: LLMConfig = LLMConfig()
    optuna: OptunaConfig = OptunaConfig()
    selection: SelectionSettings = SelectionSettings()
    migration: MigrationSettings = MigrationSettings()
    maturation: MaturationSettings = MaturationSettings()
    ray: RayConfig = RayConfig()
    focus: FocusConfig = FocusConfig()
    simulation: SimulationConfig = SimulationConfig()

    @field_validator("name")
    @classmethod
    def _safe_name(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", value):
            raise ValueError(f"{value!r}: use letters, digits, '_', '.', '-' (it names a directory)")
        return value

    @field_validator("families")
    @classmethod
    def _known_families(cls, value: list[FamilySpec]) -> list[FamilySpec]:
        from kernels.families import FAMILIES

        names = [f.name for f in value]
        unknown = [n for n in names if n not in FAMILIES]
        if unknown:
            raise ValueError(f"unknown families {unknown}; registered: {', '.join(FAMILIES)}")
        if len(set(names)) != len(names):
            raise ValueError(f"families listed twice: {names}")
        if not value:
            raise ValueError("at least one family")
        return value

    @model_validator(mode="after")
    def _cuda_families_need_a_gpu(self) -> "RunConfig":
        """A CUDA C++ family on CPU evaluators would time torch.geqrf under its name."""
        from kernels.families import FAMILIES

        cuda = [f.name for f in self.families if FAMILIES[f.name].needs_cuda]
        if cuda and self.evaluation.device == "cpu":
            raise ValueError(f"families: {cuda} are CUDA C++ and need a GPU, but evaluation.device is cpu; "
                             "leave them out of a CPU run")
        return self

    @model_validator(mode="after")
    def _focus_in_suite(self) -> "RunConfig":
        if self.focus.cases:
            from kernels.suites import get_suite

            names = [c.name for c in get_suite(self.evaluation.bench_suite)]
            unknown = [c for c in self.focus.cases if c not in names]
            if unknown:
                raise ValueError(f"focus.cases: {', '.join(unknown)} not in bench suite "
                                 f"{self.evaluation.bench_suite} (its cases: {', '.join(names)})")
        return self

    @property
    def run_dir(self) -> Path:
        return Path(self.runs_dir) / self.name

    def to_population_config(self) -> PopulationConfig:
        selection = SelectionConfig(kind=SelectionKind(self.selection.kind),
                                    tournament_size=self.selection.tournament_size,
                                    temperature=self.selection.temperature)
        migration = PopulationMigration(topology=Topology(self.migration.topology),
                                        interval=self.migration.every_evals)
        searched = tuple(
            PopulationFamilyConfig(name=f.name, islands=f.islands, capacity=f.island_size,
                                   tuning_budget=self.maturation.tuning_budget,
                                   maturation_timeout=self.maturation.timeout_evals,
                                   min_improvement=self.maturation.min_improvement,
                                   selection=selection, migration=migration)
            for f in self.families if f.name != BASELINE_FAMILY)
        # The torch.geqrf reference is evaluated once per run, never mutated.
        reference = PopulationFamilyConfig(name=BASELINE_FAMILY, islands=1, capacity=1, tuning_budget=0)
        return PopulationConfig(seed=self.seed, families=(reference, *searched))

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False)

    @classmethod
    def from_yaml_text(cls, text: str, source: str = "<string>") -> "RunConfig":
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigError(f"{source}: not valid YAML: {_yaml_problem(exc)}") from None
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ConfigError(f"{source}: a run config is a mapping of fields, got {type(data).__name__}")
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(_explain(exc, source)) from None

    @classmethod
    def from_yaml(cls, path: str | Path) -> "RunConfig":
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
        return cls.from_yaml_text(text, str(path))


def _default_families(cuda: bool = True) -> list[str]:
    """Every searched family; without a GPU, those whose kernels run on CPU (Triton's interpreter)."""
    from kernels.families import FAMILIES

    return [name for name, fam in FAMILIES.items() if not fam.baseline and (cuda or not fam.needs_cuda)]


def problems(exc: ValidationError) -> list[tuple[str, str]]:
    """``(field path, message)`` per error, in words: no "Value error, " prefix, and a check of the
    whole config (which pydantic places nowhere) placed at the field its message names first."""
    out = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"])
        message = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            message = "unknown field (check the spelling; see docs/config.md)"
        if not where:
            named, sep, rest = message.partition(": ")
            if sep and re.fullmatch(r"[a-z_]+(\.[a-z_]+)*", named):
                where, message = named, rest
        out.append((where or "(top level)", message))
    return out


def _explain(exc: ValidationError, source: str) -> str:
    lines = [f"{source}: invalid run config"]
    lines += [f"  {where}: {message}" for where, message in problems(exc)]
    return "\n".join(lines)


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """PyYAML's complaint in one line, placed by line and column (its own text names the stream
    ``<unicode string>``, not the file)."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or type(exc).__name__
    context, context_mark = getattr(exc, "context", None), getattr(exc, "context_mark", None)
    text = f"line {mark.line + 1}, column {mark.column + 1}: {problem}" if mark is not None else str(problem)
    if context:
        text += f" ({context}" + (f" from line {context_mark.line + 1}, column {context_mark.column + 1}"
                                  if context_mark is not None else "") + ")"
    return text


def default_config(cuda: bool) -> RunConfig:
    """The embedded default of ``qrsearch launch`` with no arguments: with a GPU, the real search; without
    one, a demonstration of the loop that shows children, champion changes and a lineage within minutes
    (two Triton families, one island each, the CPU suites, short timing: in the interpreter a case is
    a Python loop, and its times rank nothing)."""
    if cuda:
        return RunConfig(name="default-gpu", budget=BudgetConfig(max_evals=200, max_minutes=20))
    return RunConfig(
        name="default-cpu",
        families=[FamilySpec(name=name, islands=1, island_size=4) for name in CPU_DEMO_FAMILIES],
        evaluation=EvaluationConfig(verify_suite="smoke-quick", bench_suite="smoke-bench", device="cpu", profile=False,
                                    timing=TimingPolicy(warmup_calls=1, min_reps=2, max_seconds=0.2),
                                    limits=RunLimits(case_timeout_s=120), duel_below_ms=0.0),
        budget=BudgetConfig(max_evals=16, max_minutes=6),
        maturation=MaturationSettings(tuning_budget=3),
        migration=MigrationSettings(every_evals=4),
    )


# The CPU demonstration's families: the two whose interpreted kernels are quick at the CPU suites' sizes
# (lookahead_split is built for n of 352 and more, and only slows a CPU run down).
CPU_DEMO_FAMILIES = ("householder_unblocked", "blocked_wy")
