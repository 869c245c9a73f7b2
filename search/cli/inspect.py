"""``qrsearch champions``, ``lineage``, ``show``, ``report`` and ``export``: read-only views of a run.

All of them read the run store through a read-only connection (:class:`RunView`), so
they work on a finished run and on one that is still writing.
"""

from __future__ import annotations

import json
import sys
import time
from enum import Enum
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console, Group
from rich.markup import escape
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table

from population.errors import RunStoreError
from population.models import State
from search.cli.runs import existing_run, reading_a_run
from search.cli.lineage_render import (CURRENT_MARK, FORMER_MARK, STATE_STYLE, ancestry_tree, lineage_dot,
                                       lineage_tree)
from search.inspect.view import InspectError, RunView
from search.numbers import CPU_CAVEAT, ms as fmt_ms, on_cpu, speedup as fmt_speedup

console = Console(width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, soft_wrap=True)



def _fail(message: str, code: int = 1) -> typer.Exit:
    err.print(f"[red]error:[/] {escape(message)}")
    return typer.Exit(code)


def _view(run_dir: Path) -> RunView:
    try:
        with reading_a_run():
            return RunView(run_dir)
    except RunStoreError as exc:
        raise _fail(str(exc))


RUN_ARG = typer.Argument(..., callback=existing_run, help="a run directory (runs/<name>, or runs/latest)")


class LineageFormat(str, Enum):
    tree = "tree"
    json = "json"
    dot = "dot"


def _fmt(x: float | None, spec: str | None = None, suffix: str = "") -> str:
    """Times (no spec) in the one shared format; residuals keep their own spec."""
    if x is None:
        return "-"
    return (fmt_ms(x) if spec is None else format(x, spec)) + suffix


_speed = fmt_speedup


def _when(stamp: float | None) -> str:
    return "-" if not stamp else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp))


def _dump(data: Any) -> None:
    print(json.dumps(data, indent=2, default=str))


# --- champions ---------------------------------------------------------------------------------


def champions_command(
    run_dir: Path = RUN_ARG,
    as_json: bool = typer.Option(False, "--json", help="print JSON instead of tables"),
) -> None:
    """Champion per family and the best candidate per benchmark case, with times, speedups and residuals."""
    view = _view(run_dir)
    data = {"run_dir": str(run_dir), "device": view.device(), "bench_suite": view.bench_suite_name,
            "baseline": {"candidate": view.baseline_id,
                         "geomean_ms": view.baseline.geomean_ms if view.baseline else None},
            "families": view.champions(), "cases": view.best_per_case()}
    if as_json:
        _dump(data)
        return
    console.print(champions_table(data))
    console.print(cases_table(data))
    device = data.get("device")
    if on_cpu(device if isinstance(device, str) else None):
        console.print(f"[yellow]{CPU_CAVEAT}[/]")


def champions_table(data: dict[str, Any]) -> Table:
    base = data["baseline"]["geomean_ms"]
    table = Table(title=f"champions ({data['bench_suite']} on {data['device'] or '?'}; torch.geqrf geomean "
                        f"{_fmt(base)} ms)", title_justify="left")
    for col in ("family", "champion", "origin", "geomean ms", "speedup", "cause", "changes", "candidates",
                "failed", "max factor", "max orth"):
        table.add_column(col, justify="left" if col in ("family", "champion", "origin", "cause") else "right")
    for row in data["families"]:
        res = row.get("max_residuals") or {}
        table.add_row(row["family"] + (" (baseline)" if row["baseline"] else ""),
                      f"{CURRENT_MARK} {row['champion']}" if row["champion"] else "-", row.get("origin") or "-",
                      _fmt(row.get("geomean_ms")), _speed(row.get("speedup")), row.get("cause") or "-",
                      str(row["champion_changes"]), str(row["candidates"]), str(row["failed"]),
                      _fmt(res.get("factor"), ".3g"), _fmt(res.get("orth"), ".3g"))
    return table


def cases_table(data: dict[str, Any]) -> Table:
    table = Table(title="best candidate per benchmark case", title_justify="left")
    for col in ("case", "candidate", "family", "median ms", "geqrf ms", "speedup", "fp32 floor", "factor", "orth"):
        table.add_column(col, justify="left" if col in ("case", "candidate", "family") else "right")
    for row in data["cases"]:
        res = row.get("residuals") or {}
        floor = row.get("fp32_floor_frac")
        table.add_row(row["case"], row.get("candidate") or "-", row.get("family") or "-",
                      _fmt(row.get("median_ms")), _fmt(row.get("baseline_ms")), _speed(row.get("speedup")),
                      "-" if floor is None else f"{100 * floor:.1f}%", _fmt(res.get("factor"), ".3g"),
                      _fmt(res.get("orth"), ".3g"))
    return table


def lineage_command(
    run_dir: Path = RUN_ARG,
    family: Optional[str] = typer.Option(None, "--family", "-f", metavar="FAMILY", help="only this family"),
    candidate: Optional[str] = typer.Option(None, "--candidate", "-c", metavar="ID",
                                            help="the ancestry of this candidate"),
    depth: Optional[int] = typer.Option(None, "--depth", "-d", metavar="N", min=0,
                                        help="show this many levels (then a summary)"),
    fmt: LineageFormat = typer.Option(LineageFormat.tree, "--format", help="a tree, JSON or Graphviz DOT"),
    collapse: int = typer.Option(2, "--collapse", metavar="K", help="fold runs of this many failed leaves into one line "
                                 "(0: never)", min=0),
) -> None:
    """The family trees (origin/operator, state, speedup, champions marked ★), or the ancestry of one candidate."""
    view = _view(run_dir)
    try:
        if fmt is LineageFormat.json:
            _dump(view.lineage_json(family=family, candidate=candidate, depth=depth))
        elif fmt is LineageFormat.dot:
            sys.stdout.write(lineage_dot(view, family, candidate, depth, collapse))
        elif candidate is not None:
            console.print(ancestry_tree(view, view.resolve(candidate).id, depth))
        else:
            console.print(lineage_tree(view, family, depth, collapse))
    except InspectError as exc:
        raise _fail(str(exc))


# --- show ----------------------------------------------------------------------------------------


def show_data(view: RunView, ref: str) -> dict[str, Any]:
    cand = view.resolve(ref)
    result = view.result(cand.id)
    parent = view.by_id.get(cand.parent_ids[0]) if cand.parent_ids else None
    diff = None
    if parent is not None:
        diff = candidate_diff(view, cand.id, parent.id)
    return {
        "candidate": cand.model_dump(mode="json"), "node": view.node(cand.id).to_json(),
        "source": view.source(cand.id), "diff": diff, "note": view.notes.get(cand.id),
        "trial": view.trials.get(cand.id),
        "parent_params": parent.params if parent else None,
        "result": result.model_dump(mode="json") if result is not None else None,
        "measured_as": view.original(cand.id).id,
        "human": {"events": view.human.about(cand.id, cand.family, cand.fingerprint),
                  "promoted": cand.id in view.human.promoted_ids(), "disputed": cand.id in view.human.disputed,
                  "retired": f"{cand.family}/{cand.fingerprint}" in view.human.retired_structures(),
                  "rechecks": view.human.rechecks(cand.id)},
    }


def candidate_diff(view: RunView, child_id: str, parent_id: str, context: int = 3) -> str:
    """Unified diff parent → child, with the parameters as a second diff."""
    from population.lineage import diff_sources

    return diff_sources(view.by_id[parent_id], view.source(parent_id), view.by_id[child_id], view.source(child_id),
                        context)


def show_command(
    run_dir: Path = RUN_ARG,
    ref: str = typer.Argument(..., metavar="ID", help="candidate id (c0000012, c12, 12) or a family (its champion)"),
    show_diff: bool = typer.Option(False, "--diff", help="the diff against its parent instead of the whole source"),
    as_json: bool = typer.Option(False, "--json", help="print JSON"),
) -> None:
    """A candidate: lineage facts, parameters, per-case results, error text, and its source (or diff)."""
    view = _view(run_dir)
    try:
        data = show_data(view, ref)
    except InspectError as exc:
        raise _fail(str(exc))
    if as_json:
        _dump(data)
        return
    cand, node, result = data["candidate"], data["node"], data["result"]
    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="bold")
    facts.add_column()
    style = STATE_STYLE.get(cand["state"], "white")
    mark = (f"  [bold yellow]{CURRENT_MARK} champion of {cand['family']}[/]" if node["current_champion"] else
            f"  [yellow]{FORMER_MARK} was champion[/]" if node["champion"] else "")
    facts.add_row("candidate", f"{cand['id']}{mark}")
    facts.add_row("family / island", f"{cand['family']} / {cand['island']}")
    facts.add_row("origin", f"{cand['origin']}" + (f" of {', '.join(cand['parent_ids'])}" if cand["parent_ids"] else ""))
    facts.add_row("state", f"[{style}]{cand['state']}[/]" + (f" — {escape(cand['reason'])}" if cand["reason"] else ""))
    if cand["fitness_ms"] is not None:
        facts.add_row("fitness", f"{_fmt(cand['fitness_ms'])} ms geomean, {_speed(node['speedup'])} torch.geqrf")
    facts.add_row("generation", str(cand["generation"]))
    facts.add_row("structure", escape(cand["fingerprint"]))
    if State(cand["state"]).is_terminal:
        facts.add_row("created / finished", f"{_when(cand['created_at'])} / {_when(cand['updated_at'])}"
                      + (f" (evaluation #{node['told_seq']})" if node["told_seq"] else ""))
    else:  # its time stamp moves with every change of state: no finish to show yet
        facts.add_row("created", f"{_when(cand['created_at'])} (not finished: {cand['state']} since "
                      f"{_when(cand['updated_at'])})")
    if data["measured_as"] != cand["id"]:
        facts.add_row("measured as", f"{data['measured_as']} (a migrant copy of it)")
    if result:
        facts.add_row("device", f"{result['device']}; " + ", ".join(f"{k} {v}" for k, v in result["versions"].items()))
    if data["trial"]:
        facts.add_row("optuna", f"study {data['trial'].get('study')}, trial {data['trial'].get('number')}")
    parts: list[Any] = [Panel(facts, title=f"{cand['id']}", title_align="left")]
    if data["note"]:
        parts.append(Panel(escape(str(data["note"])), title="LLM note", title_align="left", border_style="blue"))
    if data["human"]["events"]:
        from search.cli.human import human_panel

        parts.append(human_panel(data["human"]))
    if cand["params"]:
        params = Table(title="parameters", title_justify="left")
        params.add_column("name")
        params.add_column("value")
        params.add_column("parent")
        parent_params = data["parent_params"] or {}
        for k, v in cand["params"].items():
            old = parent_params.get(k, "-") if data["parent_params"] is not None else "-"
            changed = data["parent_params"] is not None and old != v
            params.add_row(k, f"[bold yellow]{v}[/]" if changed else str(v), str(old))
        parts.append(params)
    if result and result["cases"]:
        parts.append(result_table(result))
    if result and result.get("error"):
        parts.append(Panel(escape(result["error"]), title="error", title_align="left", border_style="red"))
    elif State(cand["state"]).is_failure and cand["reason"]:
        parts.append(Panel(escape(cand["reason"]), title="reason", title_align="left", border_style="red"))
    console.print(Group(*parts))
    if show_diff:
        if data["diff"] is None:
            console.print("[dim](no parent: a seed; its source follows)[/]")
            console.print(Syntax(data["source"], "python", line_numbers=True, word_wrap=True))
        elif not data["diff"]:
            console.print("[dim](same source and parameters as its parent)[/]")
        else:
            console.print(Syntax(data["diff"], "diff", word_wrap=True))
    else:
        lexer = "python" if cand["fingerprint"] != "unapplied-edit" else "markdown"
        console.print(Syntax(data["source"], lexer, line_numbers=True, word_wrap=True))


def result_table(result: dict[str, Any]) -> Table:
    table = Table(title="per-case results", title_justify="left")
    for col in ("case", "status", "median ms", "min/max ms", "geqrf ms", "speedup", "factor", "orth", "leak",
                "recon", "message"):
        table.add_column(col, justify="left" if col in ("case", "status", "message") else "right",
                         overflow="fold")
    for c in result["cases"]:
        r = c.get("residuals") or {}
        ok = c["status"] == "ok"
        table.add_row(c["case"], f"[{'green' if ok else 'red'}]{c['status']}[/]", _fmt(c.get("median_ms")),
                      f"{_fmt(c.get('min_ms'))}/{_fmt(c.get('max_ms'))}" if c.get("min_ms") is not None else "-",
                      _fmt(c.get("baseline_ms")), _speed(c.get("speedup")), _fmt(r.get("factor"), ".3g"),
                      _fmt(r.get("orth"), ".3g"), _fmt(r.get("leak"), ".3g"), _fmt(r.get("recon"), ".3g"),
                      escape((c.get("message") or "")[:200]))
    return table


# --- report and export --------------------------------------------------------------------------------


def report_command(
    run_dir: Path = RUN_ARG,
    output: Path = typer.Option(..., "--output", "-o", metavar="HTML", help="the HTML file to write (PNG plots "
                                "go beside it)"),
    pngs: bool = typer.Option(True, "--png/--no-png", help="also write the plots as PNG files beside the report"),
) -> None:
    """One self-contained offline HTML report (plots, champion chains, per-case table, failures, metadata)."""
    from search.inspect.report import write_report

    view = _view(run_dir)
    written = write_report(view, output, pngs=pngs)
    console.print(f"wrote {output}" + (f" and {len(written) - 1} PNG file(s) beside it" if len(written) > 1 else ""))


def export_command(
    run_dir: Path = RUN_ARG,
    output: Path = typer.Option(..., "--output", "-o", metavar="FILE.py", help="the candidate file to write"),
    family: Optional[str] = typer.Option(None, "--family", "-f", metavar="FAMILY",
                                         help="export this family's champion as it is"),
    candidate: Optional[str] = typer.Option(None, "--candidate", "-c", metavar="ID",
                                            help="export this candidate as it is"),
    composite: bool = typer.Option(False, "--composite", help="route each benchmark shape to its best verified "
                                                              "candidate, the best overall for other shapes"),
    from_family: Optional[list[str]] = typer.Option(None, "--from-family", metavar="FAMILY",
                                                    help="--composite: only candidates of these families "
                                                         "(repeat; default: every family, torch_geqrf included)"),
) -> None:
    """A standalone candidate file (custom_kernel(data), torch and triton only) that runs outside qrsearch."""
    from search.inspect.export import ExportError, export_candidate, export_composite, family_choice

    if sum([family is not None, candidate is not None, composite]) != 1:
        raise typer.BadParameter("give exactly one of --family, --candidate, --composite")
    view = _view(run_dir)
    try:
        if composite:
            text, plan = export_composite(view, families=from_family or None)
            summary = (f"composite of {len(plan.kernels)} candidate(s), {len(plan.routes)} routed shape(s), "
                       f"fallback {plan.fallback}" + (f"; promoted candidates only: {', '.join(plan.promoted)}"
                                                      if plan.promoted else ""))
        else:
            ref = candidate if candidate is not None else view.check_family(family)  # type: ignore[arg-type]
            text, cid = export_candidate(view, ref)
            summary = f"candidate {cid}" + (f", {family_choice(view, family)[1]}"  # type: ignore[arg-type]
                                            if candidate is None else "")
    except (ExportError, InspectError) as exc:
        raise _fail(str(exc))
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text, encoding="utf-8")
    console.print(f"wrote {output}: {summary}", highlight=False)
    use = (f"from {output.stem} import custom_kernel" if output.stem.isidentifier() and output.suffix == ".py"
           else "import it by its path (importlib)")
    console.print(f"use it: {use}; check it here first: qrsearch verify {output} (README: Use the winner)",
                  highlight=False)
