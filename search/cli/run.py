"""``qrsearch launch``, ``resume`` and ``status``."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Optional

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from population.errors import RunStoreError
from population.store import RunStore
from search.cli.checks import non_negative, positive
from search.cli.human import print_human_and_focus
from search.cli.runs import existing_run, print_runs, reading_a_run, run_or_runs
from search.inspect.status import run_status
from search.config import ConfigError, RunConfig, default_config, problems
from search.run_dirs import is_run
from search.engine.llm_budget import describe_model
from search.inspect.eval_seconds import describe_evaluation_seconds
from search.numbers import CPU_CAVEAT, busy as describe_busy, ms as fmt_ms, on_cpu, speedup as fmt_speedup

# Piped output is not squeezed into 80 columns (the tables and log lines stay one per line).
console = Console(width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, soft_wrap=True)


def _fail(message: str, code: int = 1) -> typer.Exit:
    err.print(f"[red]error:[/] {escape(message)}", highlight=False)
    return typer.Exit(code)


RUN_ARG = typer.Argument(..., callback=existing_run, help="a run directory (runs/<name>, or runs/latest)")
# Set by Ray for the driver of a job that `ray job submit` started.
RAY_JOB_ENV = "RAY_JOB_CONFIG_JSON_ENV_VAR"


def _with_overrides(config: RunConfig, **changes: Any) -> RunConfig:
    data = config.model_dump(mode="json")
    for dotted, value in changes.items():
        if value is None:
            continue
        node = data
        *path, last = dotted.split(".")
        for key in path:
            node = node[key]
        node[last] = value
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:  # one line that names the option, never pydantic's own text
        raise ConfigError("; ".join(f"{OPTION_OF.get(where, where)}: {message}"
                                    for where, message in problems(exc))) from None


# Config fields that command-line options set, so an error names the option the user typed.
OPTION_OF = {"name": "--name", "runs_dir": "--runs-dir", "llm.base_url": "--llm-base-url",
             "llm.models": "--llm-model", "budget.max_evals": "--max-evals", "budget.max_minutes": "--max-minutes",
             "ray.gpus": "--gpus", "focus.cases": "--focus",
             "focus.target_pct": "--target", "focus.max_regression_pct": "--max-regression",
             "ray.fake_gpus": "--simulate"}


def launch_command(
    config_path: Optional[Path] = typer.Option(None, "--config", metavar="YAML",
                                               help="run config (default: the embedded one; see docs/config.md)"),
    name: Optional[str] = typer.Option(None, "--name", metavar="NAME", help="run name; the run writes <runs-dir>/<name>/ "
                                       "(default: the config's, or default-cpu/default-gpu and the time)"),
    runs_dir: Optional[Path] = typer.Option(None, "--runs-dir", metavar="DIR", help="where run directories go "
                                            "(default: the config's runs_dir, runs/ under the current directory)"),
    address: Optional[str] = typer.Option(None, "--address", metavar="ADDRESS", help="Ray address of a cluster (default: "
                                          "local Ray)"),
    llm_base_url: Optional[str] = typer.Option(None, "--llm-base-url", metavar="URL", help="OpenAI-compatible endpoint, e.g. "
                                               "http://localhost:8000/v1 (with --llm-model)"),
    llm_model: Optional[list[str]] = typer.Option(None, "--llm-model", metavar="NAME", help="LLM model name (repeat for several; "
                                                  "with --llm-base-url)"),
    max_evals: Optional[int] = typer.Option(None, "--max-evals", metavar="N", callback=positive,
                                            help="stop after this many evaluations"),
    max_minutes: Optional[float] = typer.Option(None, "--max-minutes", metavar="MINUTES", callback=positive,
                                                help="stop after this many minutes"),
    gpus: Optional[int] = typer.Option(None, "--gpus", metavar="N", callback=non_negative,
                                       help="use at most this many GPUs (default: all Ray sees)"),
    focus: Optional[str] = typer.Option(None, "--focus", metavar="CASE[,CASE...]",
                                        help="the fitness is these bench cases' geomean"),
    target: Optional[float] = typer.Option(None, "--target", metavar="PCT", callback=positive,
                                           help="with --focus: stop once the focus is PCT% faster"),
    max_regression: Optional[float] = typer.Option(None, "--max-regression", metavar="PCT", callback=non_negative,
                                                   help="with --focus: other cases may get at most PCT% "
                                                   "slower than the family champion at the start (default 2)"),
    simulate: Optional[int] = typer.Option(None, "--simulate", callback=positive, metavar="GPUS",
                                           help="a dry run on GPUS simulated GPUs (declared to local Ray; with "
                                           "--address, at most GPUS of those the cluster declares): the real driver, "
                                           "the GPU work simulated (simulation: in the config)"),
) -> None:
    """Start a search.  With no options: local Ray, every GPU present and the real search; on a
    machine without a GPU, a short demonstration on the CPU (seeds, children, champion changes in
    a few minutes); LLM mutation only if configured."""
    from search.run.driver import DriverError, launch

    try:
        if config_path is not None:
            if not config_path.is_file():
                raise ConfigError(f"--config: no such file: {config_path}")
            config = RunConfig.from_yaml(config_path)
        else:
            config = default_config(cuda=simulate is not None or address is not None or _cuda_here())
            if name is None:
                name = f"{config.name}-{time.strftime('%Y%m%d-%H%M%S')}"
        models = [{"name": m} for m in llm_model] if llm_model else None
        config = _with_overrides(config, name=name, runs_dir=None if runs_dir is None else str(runs_dir),
                                 **{"llm.base_url": llm_base_url, "llm.models": models, "budget.max_evals": max_evals,
                                    "budget.max_minutes": max_minutes, "ray.gpus": gpus,
                                    **focus_overrides(focus, target, max_regression),
                                    **simulate_overrides(simulate, address)})
        check_llm_pair(config, llm_base_url is not None, bool(llm_model))
        check_durable_runs_dir(config)
    except ConfigError as exc:
        raise _fail(str(exc), 2)
    warn_if_unreachable(config)
    try:
        code = launch(config, address=address, console=console)
    except DriverError as exc:
        raise _fail(str(exc))
    raise typer.Exit(code)


def check_llm_pair(config: RunConfig, url_given: bool, model_given: bool) -> None:
    """An endpoint without a model, or a model without an endpoint, would leave the LLM quietly off."""
    llm = config.llm
    if llm.base_url and not llm.models:
        where = "--llm-base-url" if url_given else "llm.base_url"
        raise ConfigError(f"{where} needs a model: add --llm-model NAME (or llm.models in the config)")
    if llm.models and not llm.base_url:
        where = "--llm-model" if model_given else "llm.models"
        raise ConfigError(f"{where} needs an endpoint: add --llm-base-url URL (or llm.base_url in the config)")


def check_durable_runs_dir(config: RunConfig) -> None:
    """Under ``ray job submit`` the driver runs in Ray's temporary copy of the job's working directory,
    deleted after the job: a run directory relative to it would vanish with it."""
    if RAY_JOB_ENV in os.environ and not Path(config.runs_dir).is_absolute():
        raise ConfigError(f"--runs-dir: this is a Ray job, whose working directory is a temporary copy that Ray "
                          f"deletes; give --runs-dir an absolute path on the head node (e.g. --runs-dir "
                          f"/home/ray/runs), not {config.runs_dir!r}")


def warn_if_unreachable(config: RunConfig) -> None:
    """One line now, rather than one failed LLM call after another later."""
    if not config.llm.enabled:
        return
    from search.engine.llm_probe import unreachable

    why = unreachable(str(config.llm.base_url))
    if why is not None:
        err.print(f"[yellow]warning:[/] the LLM endpoint {escape(str(config.llm.base_url))} cannot be reached "
                  f"({escape(why)}); the search goes on, and each LLM call that fails counts as an LLM error",
                  highlight=False)


def focus_overrides(focus: Optional[str], target: Optional[float], max_regression: Optional[float]) -> dict:
    if focus is None and (target is not None or max_regression is not None):
        raise ConfigError("--target and --max-regression need --focus CASE[,CASE...]")
    cases = [c.strip() for c in focus.split(",") if c.strip()] if focus is not None else None
    return {"focus.cases": cases, "focus.target_pct": target, "focus.max_regression_pct": max_regression}


def simulate_overrides(gpus: Optional[int], address: Optional[str]) -> dict:
    if gpus is None:
        return {}
    return {"evaluation.device": "simulated", "ray.gpus" if address else "ray.fake_gpus": gpus}


def _cuda_here() -> bool:
    import torch

    return torch.cuda.is_available()


def resume_command(
    run_dir: Path = RUN_ARG,
    max_evals: Optional[int] = typer.Option(None, "--max-evals", metavar="N", callback=positive, help="this many more evaluations"),
    max_minutes: Optional[float] = typer.Option(None, "--max-minutes", metavar="MINUTES", callback=positive,
                                                help="stop after this many minutes"),
    address: Optional[str] = typer.Option(None, "--address", metavar="ADDRESS", help="Ray address of a cluster (default: "
                                          "local Ray)"),
) -> None:
    """Continue a stopped or killed run where it stopped (in-flight work is queued again)."""
    from search.run.driver import DriverError, resume

    try:
        with RunStore.open(run_dir, readonly=True) as store:
            stored = RunConfig.model_validate_json(store.config_json())
        warn_if_unreachable(stored)
    except (RunStoreError, ValidationError):
        pass  # the driver's own open says what is wrong with the store
    try:
        code = resume(run_dir, max_evals=max_evals, max_minutes=max_minutes, address=address, console=console)
    except DriverError as exc:
        raise _fail(str(exc))
    raise typer.Exit(code)


def status_command(
    run_dir: Path = typer.Argument(..., callback=run_or_runs, help="a run directory (runs/<name>), or a folder "
                                   "of runs (then the list of them, as `qrsearch runs` prints it)"),
    as_json: bool = typer.Option(False, "--json", help="print JSON instead of tables"),
) -> None:
    """State, evaluations and failures, time, LLM tokens and money, best per family (works while running)."""
    if not is_run(run_dir):
        print_runs(run_dir, as_json)
        return
    try:
        with reading_a_run():
            data = run_status(run_dir)
    except RunStoreError as exc:
        raise _fail(str(exc))
    if as_json:
        print(json.dumps(data, indent=2))
        return
    fmt = lambda x, spec: "-" if x is None else format(x, spec)  # noqa: E731
    console.print(f"[bold]{data['run_dir']}[/]: {data['state']}"
                  + (f" ({data['stop_reason']})" if data.get("stop_reason") else ""))
    console.print(f"evaluations {data['evaluations']} ({fmt(data['evals_per_minute'], '.1f')}/min last session), "
                  f"pending {data['pending']}, elapsed {fmt(data['elapsed_minutes'], '.1f')} min, "
                  f"sessions {data['sessions']}")
    failures = ", ".join(f"{k} {v}" for k, v in sorted(data["failures"].items())) or "none"
    console.print(f"failures: {failures}")
    busy = data.get("busy_fraction") or {}
    if busy:
        console.print("evaluator busy: " + describe_busy(busy), highlight=False)
    console.print(describe_evaluation_seconds(data["seconds_per_evaluation"]))
    console.print(f"LLM: {data['llm_calls']} calls, {data['llm_errors']} errors, {data['llm_tokens']} tokens, "
                  f"${data['llm_cost_usd']:.2f}")
    for model, row in data["llm_models"].items():
        console.print(describe_model(model, row), highlight=False)
    duels = data["duels"]
    if duels["judged"] or duels["pending"]:
        console.print(f"duels: {duels['judged']} judged, {duels['lost']} lost (those challengers were disputed), "
                      f"{duels['pending']} pending")
    print_human_and_focus(data, console)
    table = Table(title=f"best per family (torch.geqrf geomean {fmt_ms(data['baseline_geomean_ms'])} ms)",
                  title_justify="left")
    for column in ("family", "champion", "geomean ms", "speedup"):
        table.add_column(column)
    for family, row in data["best"].items():
        table.add_row(family, row["candidate"], fmt_ms(row["geomean_ms"]), fmt_speedup(row["speedup"]))
    console.print(table)
    if on_cpu(data.get("device")):
        console.print(f"[yellow]{CPU_CAVEAT}[/]")
