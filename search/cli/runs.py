"""Finding runs: ``qrsearch runs [DIR]`` lists the runs in a folder (state, age, evaluations,
best), ``status`` of such a folder does the same, and every command that takes a run says
one thing when there is none.

Nothing here imports torch, optuna, openai or ray (``status`` must stay light).
"""

from __future__ import annotations

import gc
import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer

from search.run_dirs import LATEST, is_run, runs_in


@contextmanager
def reading_a_run() -> Iterator[None]:
    """Around a command's read of a whole run (a snapshot and the views over it).  The cyclic
    garbage collector stays off while it is read, and afterwards never walks what was read: each
    of its collections walks every object alive, and building the 50,000 candidates of a large
    run, then drawing its report, took a second and a half more with it on."""
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


def no_run(path: Path) -> str:
    """The one wording for a path that is not a run (a usage error, exit 2)."""
    if not path.exists():
        return f"no run at {path} (no such directory; `qrsearch runs` lists the runs under runs/)"
    inside = runs_in(path) if path.is_dir() else []
    if inside:
        count = f"{len(inside)} run" + ("s" if len(inside) > 1 else "")
        return (f"no run at {path}: it holds {count} ({', '.join(p.name for p in inside[-3:])}"
                f"{', ...' if len(inside) > 3 else ''}); name one, or list them with `qrsearch runs {path}`")
    return f"no run at {path} (a run directory holds the run.sqlite that `qrsearch launch` writes)"


def existing_run(path: Path) -> Path:
    """Typer callback of every RUN_DIR argument: the path, or a usage error that says why it is no run."""
    if not is_run(path):
        raise typer.BadParameter(no_run(path))
    return path


def run_or_runs(path: Path) -> Path:
    """``status`` takes a run or a folder of runs."""
    if not is_run(path) and not runs_in(path):
        raise typer.BadParameter(no_run(path))
    return path


def _age(stamp: float | None, now: float) -> str:
    if not stamp:
        return "-"
    seconds = max(now - stamp, 0.0)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f} {unit} ago"
    return f"{seconds:.0f} s ago"


def describe_runs(folder: Path) -> list[dict[str, Any]]:
    """One row per run in ``folder``: name, state, age, evaluations, best family and speedup."""
    from population.errors import RunStoreError
    from search.inspect.status import run_status

    latest = (folder / LATEST).resolve() if (folder / LATEST).is_symlink() else None
    now = time.time()
    rows = []
    for run in runs_in(folder):
        row: dict[str, Any] = {"run": run.name, "path": str(run), "latest": run.resolve() == latest}
        try:
            data = run_status(run)
        except RunStoreError as exc:
            rows.append({**row, "state": "unreadable", "error": str(exc)})
            continue
        ranked = [(v["speedup"], family, v["candidate"]) for family, v in data["best"].items()
                  if v.get("speedup") is not None]
        best = max(ranked) if ranked else None
        rows.append({**row, "state": data["state"], "stop_reason": data["stop_reason"],
                     "updated": data["last_update"], "age": _age(data["last_update"], now),
                     "evaluations": data["evaluations"], "device": data["device"],
                     "best": None if best is None else {"family": best[1], "candidate": best[2], "speedup": best[0]}})
    return rows


def print_runs(folder: Path, as_json: bool) -> None:
    from rich.console import Console
    from rich.table import Table

    from search.numbers import CPU_CAVEAT, on_cpu, speedup as fmt_speedup

    rows = describe_runs(folder)
    if as_json:
        print(json.dumps({"runs_dir": str(folder), "runs": rows}, indent=2))
        return
    console = Console(width=None if sys.stdout.isatty() else 160)  # piped: one row per line
    if not rows:
        console.print(f"no runs in {folder} (`qrsearch launch` starts one there)")
        return
    table = Table(title=f"runs in {folder} (oldest first)", title_justify="left")
    for column in ("run", "state", "updated", "evals", "best family", "speedup"):
        table.add_column(column, justify="right" if column in ("evals", "speedup") else "left",
                         no_wrap=column == "run")
    for row in rows:
        best = row.get("best")
        table.add_row(row["run"] + (f" ({LATEST})" if row["latest"] else ""), row["state"], row.get("age", "-"),
                      str(row.get("evaluations", "-")), best["family"] if best else "-",
                      fmt_speedup(best["speedup"]) if best else "-")
    console.print(table)
    if any(on_cpu(r.get("device")) for r in rows):
        console.print(f"[yellow]{CPU_CAVEAT}[/]")
    console.print(f"details: qrsearch status {folder / rows[-1]['run']}")


def runs_command(
    folder: Path = typer.Argument(Path("runs"), metavar="DIR", help="a folder of runs (default: runs/)"),
    as_json: bool = typer.Option(False, "--json", help="print JSON instead of a table"),
) -> None:
    """The runs in a folder: state, time since the last update, evaluations, best family (newest last)."""
    if not folder.is_dir():
        raise typer.BadParameter(f"no such directory: {folder}", param_hint="DIR")
    print_runs(folder, as_json)
