"""RunConfig: everything a search run needs, loaded from YAML, one source of defaults.

Every field is documented where it is declared; ``qrsearch launch --help`` and
``docs/config.md`` point here.  Unknown keys are errors (``extra="forbid"``),
and a bad file is reported with the field's path and the file's name.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from pydantic import Field, ValidationError, field_validator, model_validator

from kernels.harness.settings import RunLimits, TimingPolicy
from population.config import FamilyConfig as PopulationFamilyConfig
from population.config import MigrationConfig as PopulationMigration
from population.config import PopulationConfig, SelectionConfig, SelectionKind, Topology
from population.records import BASELINE_FAMILY

from search.config.evaluation import EvaluationConfig
from search.config.mutation import MutationMix
from search.config.sections import (BudgetConfig, FamilySpec, FocusConfig, LLMConfig, MaturationSettings,
                                    MigrationSettings, OptunaConfig, RayConfig, SelectionSettings, SimulationConfig,
                                    _Section)


class ConfigError(ValueError):
    """A run configuration that cannot be used; the message names the file and the field."""


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
        evaluation=EvaluationConfig(verify_suite="smoke-quick", bench_suite="demo-bench", device="cpu", profile=False,
                                    timing=TimingPolicy(warmup_calls=1, min_reps=2, max_seconds=0.2),
                                    limits=RunLimits(case_timeout_s=120), duel_below_ms=0.0),
        budget=BudgetConfig(max_evals=16, max_minutes=6),
        maturation=MaturationSettings(tuning_budget=3),
        migration=MigrationSettings(every_evals=4),
    )


# The CPU demonstration's families: the two whose interpreted kernels are quick at the CPU suites' sizes
# (lookahead_split is built for n of 352 and more, and only slows a CPU run down).
CPU_DEMO_FAMILIES = ("householder_unblocked", "blocked_wy")
