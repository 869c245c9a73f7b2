"""``qrsearch inject``, ``note``, ``recheck``, ``promote``, ``retire``, ``pause``, ``unpause``.

Each command checks its input against the run store (read-only), then appends one
event (population/events.py).  A running driver applies it within seconds; a
stopped run applies it when resumed, and ``show``/``lineage``/``export``/the report
take notes, promotions and retirements into account at once.  ``inject`` says the
candidate's id: on a stopped run it adds the candidate itself, as the driver would.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any, Callable, Optional

import typer
from rich.console import Console
from rich.markup import escape

from population.errors import RunStoreError
from population.events import EventKind, EventWriter, HumanEvent, latest_active, new_event, structure_key
from population.models import Candidate, State, candidate_id
from population.store import RunStore
from population.records import BASELINE_FAMILY, STATUS_KEY, DriverStatus, parse
from search.cli.runs import existing_run
from search.config import RunConfig
from search.numbers import ms, significant

console = Console()
err = Console(stderr=True, soft_wrap=True)


class HumanInputError(ValueError):
    """Bad input for a human command; one line for people."""


def _fail(message: str, code: int = 1) -> typer.Exit:
    err.print(f"[red]error:[/] {escape(message)}")
    return typer.Exit(code)


def _resolve(store: RunStore, ref: str) -> Candidate:
    m = re.fullmatch(r"c?(\d+)", ref.strip())
    cand = store.find_candidate(candidate_id(int(m[1])) if m else ref.strip())
    if cand is None:
        raise HumanInputError(f"no candidate {ref!r} in {store.run_dir} ({store.count_candidates()} candidates)")
    return cand


def _running(store: RunStore) -> bool:
    import time

    return parse(DriverStatus, store.get_json(STATUS_KEY)).alive(time.time())


def _submit(run_dir: Path, event: HumanEvent, extra: dict[str, Any], as_json: bool) -> None:
    with RunStore.open(run_dir, readonly=True, integrity=False) as store:
        live = _running(store)
    with EventWriter(run_dir) as writer:
        stored = writer.append(event)
    applies = "within seconds (the run is running)" if live else "when the run resumes (it is stopped)"
    if as_json:
        print(json.dumps({"event": stored.model_dump(mode="json", exclude={"data"}), "running": live,
                          "applies": applies, **extra}, indent=2, default=str))
        return
    target = f" {stored.target}" if stored.target else ""
    undo = f" (undoing #{stored.undoes})" if stored.undoes is not None else ""
    console.print(f"event #{stored.seq}: {stored.kind.value}{undo}{target} by {stored.who}; applies {applies}")
    for key, value in extra.items():
        console.print(f"  {key}: {value}")


def _run(run_dir: Path, build: Any, as_json: bool) -> None:
    """Validate with ``build(store) -> (event, extra)``, then write; every error is one line."""
    try:
        with RunStore.open(run_dir, readonly=True, integrity=False) as store:
            event, extra = build(store)
        _submit(run_dir, event, extra, as_json)
    except (HumanInputError, RunStoreError) as exc:
        raise _fail(str(exc))


def _config(store: RunStore) -> RunConfig:
    try:
        return RunConfig.model_validate_json(store.config_json())
    except ValueError as exc:  # e.g. a family no longer registered
        first = str(exc).splitlines()
        raise HumanInputError(f"the run's stored config no longer validates: {' '.join(first[1:3]).strip()}") from None


RUN_ARG = typer.Argument(..., callback=existing_run, help="a run directory (runs/<name>, or runs/latest)")
JSON_OPT = typer.Option(False, "--json", help="print the stored event as JSON")


def inspect_source(source: str, family: str) -> tuple[dict[str, Any], str, str]:
    """(params, fingerprint, tuning note) of a hand-written candidate, or a one-line error."""
    from kernels.families import FAMILIES
    from kernels.harness.screen import screen_source
    from kernels.params import ParamsError, read_params, structure_fingerprint

    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise HumanInputError(f"not valid Python: line {exc.lineno}: {exc.msg}") from None
    if not any(isinstance(n, ast.FunctionDef) and n.name == "custom_kernel" for n in tree.body):
        raise HumanInputError("the file defines no custom_kernel(A) at module level")
    problems = screen_source(source)
    if problems:
        raise HumanInputError("rejected by the source screen: " + "; ".join(problems[:3]))
    try:
        params = read_params(source)
    except ParamsError as exc:
        return {}, structure_fingerprint(source), f"not tuned (no usable PARAMS block: {exc})"
    space = FAMILIES[family].space
    try:
        space(**params)
        note = f"tuned by Optuna in {family}'s space"
    except Exception as exc:  # noqa: BLE001 - pydantic's errors, shown in one line
        note = f"not tuned (its PARAMS do not fit {family}'s space: {str(exc).splitlines()[0]})"
    return params, structure_fingerprint(source), note


def inject_command(run_dir: Path = RUN_ARG,
                   file: Path = typer.Argument(..., help="a candidate file defining custom_kernel(A)"),
                   family: str = typer.Option(..., "--family", "-f", metavar="FAMILY",
                                              help="the family it joins (a new structure)"),
                   note: str = typer.Option("", "--note", metavar="TEXT", help="the hypothesis behind it"),
                   as_json: bool = JSON_OPT) -> None:
    """Add a hand-written candidate: screened and evaluated like any other (origin human), next in line.

    Its candidate id is printed: a stopped run gets the candidate at once (it runs first when
    resumed), a running one within seconds."""
    def build(store: RunStore) -> tuple[HumanEvent, dict[str, Any]]:
        names = [f.name for f in _config(store).families if f.name != BASELINE_FAMILY]
        if family not in names:
            raise HumanInputError(f"family {family!r} is not searched in this run (families: {', '.join(names)})")
        try:
            source = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise HumanInputError(f"cannot read {file}: {getattr(exc, 'strerror', None) or exc}") from None
        params, fingerprint, tuning = inspect_source(source, family)
        data = {"source": source, "params": params, "fingerprint": fingerprint, "file": str(file)}
        return (new_event(EventKind.INJECT, family, note, data=data),
                {"structure": structure_key(family, fingerprint), "tuning": tuning})

    try:
        with RunStore.open(run_dir, readonly=True, integrity=False) as store:
            event, extra = build(store)
            live = _running(store)
        stored, candidate = (None, None) if live else _inject_stopped(run_dir, event)
        if stored is None:  # a driver has the run: it applies the event within a second or so
            with EventWriter(run_dir) as writer:
                stored = writer.append(event)
            candidate = _wait_for_candidate(run_dir, stored.seq)
    except (HumanInputError, RunStoreError) as exc:
        raise _fail(str(exc))
    _say_injected(run_dir, stored, candidate, live or candidate is None, extra, as_json)


INJECT_WAIT_S = 10.0


def _inject_stopped(run_dir: Path, event: HumanEvent) -> tuple[HumanEvent | None, str | None]:
    """Add the candidate to a stopped run now, as its driver would (event, candidate, outcome); (None,
    None) if a driver took the run meanwhile (it applies the event itself)."""
    from population.errors import StoreLocked
    from population.events import inject_applied, injected_candidate, outcome_key
    from population.run import Run

    try:
        run = Run.open(run_dir)
    except StoreLocked:
        return None, None
    try:
        with EventWriter(run_dir) as writer:
            stored = writer.append(event)
        with run.transaction():  # the candidate and its outcome together: never applied twice
            cand = run.add_candidate(injected_candidate(stored))
            run.set_json(outcome_key(stored.seq), inject_applied(stored, cand.id).model_dump(mode="json"))
        return stored, cand.id
    finally:
        run.close()


def _wait_for_candidate(run_dir: Path, seq: int, wait_s: float = INJECT_WAIT_S) -> str | None:
    import time

    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        with RunStore.open(run_dir, readonly=True, integrity=False) as store:
            outcome = store.outcomes().get(seq)
        if outcome is not None:
            if outcome.candidate_id is None:
                raise HumanInputError(f"event #{seq}: the run {outcome.status.value} it: {outcome.detail}")
            return outcome.candidate_id
        time.sleep(0.25)
    return None


def _say_injected(run_dir: Path, event: HumanEvent, candidate: str | None, live: bool, extra: dict[str, Any],
                  as_json: bool) -> None:
    if candidate is not None:
        when = "next in line" if live else f"first when the run resumes (`qrsearch resume {run_dir}`)"
    else:
        when = (f"not yet applied: the driver gives it an id within seconds (`qrsearch status {run_dir}` "
                "counts events not yet applied)")
    if as_json:
        print(json.dumps({"event": event.model_dump(mode="json", exclude={"data"}), "running": live,
                          "candidate_id": candidate, "applies": when, **extra}, indent=2, default=str))
        return
    head = f"candidate {candidate}" if candidate else f"event #{event.seq}"
    console.print(f"{head}: injected into {event.target} by {event.who} (event #{event.seq}); {when}",
                  highlight=False)
    for key, value in extra.items():
        console.print(f"  {key}: {value}", highlight=False)


def note_command(run_dir: Path = RUN_ARG, ref: str = typer.Argument(..., metavar="ID", help="candidate id"),
                 text: str = typer.Argument(..., help="the hypothesis or observation"),
                 as_json: bool = JSON_OPT) -> None:
    """Attach a note to a candidate; show, the report and later LLM prompts of its family show it."""
    def build(store: RunStore) -> tuple[HumanEvent, dict[str, Any]]:
        if not text.strip():
            raise HumanInputError("the note is empty")
        cand = _resolve(store, ref)
        return new_event(EventKind.NOTE, cand.id, text.strip()), {}

    _run(run_dir, build, as_json)


def recheck_command(run_dir: Path = RUN_ARG, ref: str = typer.Argument(..., metavar="ID", help="candidate id"),
                    cases: Optional[str] = typer.Option(None, "--cases", metavar="CASE[,CASE...]",
                                                        help="bench cases (default: all)"),
                    note: str = typer.Option("", "--note", metavar="TEXT", help="why"),
                    as_json: bool = JSON_OPT) -> None:
    """Re-time a candidate and torch.geqrf in one child on fresh inputs; compare with the record."""
    def build(store: RunStore) -> tuple[HumanEvent, dict[str, Any]]:
        from kernels.suites import get_suite

        cand = _resolve(store, ref)
        if cand.state is not State.VERIFIED:
            raise HumanInputError(f"{cand.id} is {cand.state.value}: only verified results can be re-checked")
        suite = _config(store).evaluation.bench_suite
        names = [c.name for c in get_suite(suite)]
        wanted = [c.strip() for c in (cases or "").split(",") if c.strip()]
        unknown = [c for c in wanted if c not in names]
        if unknown:
            raise HumanInputError(f"cases {unknown} are not in bench suite {suite} ({', '.join(names)})")
        return new_event(EventKind.RECHECK, cand.id, note, data={"cases": wanted}), {"cases": wanted or "all"}

    _run(run_dir, build, as_json)


def _decision(kind: EventKind, run_dir: Path, target_of: Any, note: str, undo: bool, as_json: bool) -> None:
    def build(store: RunStore) -> tuple[HumanEvent, dict[str, Any]]:
        target = target_of(store)
        if undo:
            last = latest_active(store.events(), kind, target)
            if last is None:
                raise HumanInputError(f"{target} has no {kind.value} in force to undo")
            return new_event(kind, target, note, undoes=last.seq), {}
        return new_event(kind, target, note), {}

    _run(run_dir, build, as_json)


def promote_command(run_dir: Path = RUN_ARG, ref: str = typer.Argument(..., metavar="ID", help="candidate id"),
                    note: str = typer.Option("", "--note", metavar="TEXT", help="why"),
                    undo: bool = typer.Option(False, "--undo", help="reverse the latest promotion of ID"),
                    as_json: bool = JSON_OPT) -> None:
    """Record that a result deserves promotion (export prefers promoted candidates)."""
    def target(store: RunStore) -> str:
        cand = _resolve(store, ref)
        if cand.state is not State.VERIFIED and not undo:
            raise HumanInputError(f"{cand.id} is {cand.state.value}: only verified candidates can be promoted")
        return cand.id

    _decision(EventKind.PROMOTE, run_dir, target, note, undo, as_json)


def structure_of(store: RunStore, ref: str) -> str:
    """``family/fingerprint`` of a candidate id, a ``family/fingerprint`` or a unique fingerprint prefix."""
    m = re.fullmatch(r"c?(\d+)", ref.strip())
    if m:
        cand = _resolve(store, ref)
        return structure_key(cand.family, cand.fingerprint)
    family, _, prefix = ref.rpartition("/")
    hits = sorted({structure_key(s.family, s.fingerprint) for s in store.structures(family or None)
                   if s.fingerprint.startswith(prefix)})
    if len(hits) != 1:
        raise HumanInputError(f"{ref!r} matches {len(hits)} structures" + (f": {', '.join(hits[:5])}" if hits else
                                                                           " (give a candidate id or family/fingerprint)"))
    return hits[0]


def retire_command(run_dir: Path = RUN_ARG,
                   ref: str = typer.Argument(..., metavar="ID|STRUCTURE",
                                             help="a candidate id (its structure) or family/fingerprint"),
                   note: str = typer.Option("", "--note", metavar="TEXT", help="why it is a dead end"),
                   undo: bool = typer.Option(False, "--undo", help="reverse the latest retirement"),
                   as_json: bool = JSON_OPT) -> None:
    """Mark a structure as a dead end: no longer tuned or chosen as a parent."""
    _decision(EventKind.RETIRE, run_dir, lambda store: structure_of(store, ref), note, undo, as_json)


def pause_command(run_dir: Path = RUN_ARG, as_json: bool = JSON_OPT) -> None:
    """Finish the work in flight, then wait (holding the evaluators) until unpause; Ctrl-C still stops."""
    _run(run_dir, lambda store: (new_event(EventKind.PAUSE), {}), as_json)


def unpause_command(run_dir: Path = RUN_ARG, as_json: bool = JSON_OPT) -> None:
    """Let a paused run start new work again."""
    _run(run_dir, lambda store: (new_event(EventKind.UNPAUSE), {}), as_json)


def human_panel(human: dict[str, Any]) -> Any:
    """``show``'s panel of the engineer's events about one candidate, recheck comparisons included."""
    from rich.console import Group
    from rich.panel import Panel
    from rich.table import Table

    flags = [name for name in ("promoted", "disputed", "retired") if human[name]]
    lines = [escape(f"{r['line']} -> {r['status']}" + (f" ({r['detail']})" if r["detail"] else ""))
             for r in human["events"]]
    parts: list[Any] = [("[bold]" + ", ".join(flags) + "[/]\n" if flags else "") + "\n".join(lines)]
    for rc in human["rechecks"]:
        if not rc["comparison"]:
            continue
        table = Table(title=f"recheck #{rc['seq']}: {rc['summary']}", title_justify="left")
        for col in ("case", "recorded ms (min/max, n)", "recheck ms (min/max, n)", "geqrf then/now", "median ratio",
                    "best call / drift", "band", "holds"):
            table.add_column(col)
        for row in rc["comparison"]:
            if "recorded_ms" not in row:
                table.add_row(row["case"], "-", "-", "-", "-", "-", "-", "no")
                continue
            table.add_row(row["case"], f"{ms(row['recorded_ms'])} ({ms(row['recorded_min_ms'])}/"
                          f"{ms(row['recorded_max_ms'])}, {row['recorded_count'] or '-'})",
                          f"{ms(row['recheck_ms'])} ({ms(row['recheck_min_ms'])}/{ms(row['recheck_max_ms'])}, "
                          f"{row['recheck_count'] or '-'})",
                          f"{ms(row['geqrf_recorded_ms'])}/{ms(row['geqrf_recheck_ms'])}",
                          significant(row["ratio"]), significant(row["adjusted_ratio"]), f"{row['band']:.0%}",
                          "[green]yes[/]" if row["holds"] else "[red]no[/]")
        parts.append(table)
    return Panel(Group(*parts), title="the engineer's events", title_align="left", border_style="magenta")


def print_human_and_focus(data: dict[str, Any], console: Console) -> None:
    """``status``'s lines on the engineer's events and the focus."""
    human, focus = data["human"], data["focus"]
    if human["events"]:
        console.print(f"human: {human['events']} events ({human['unapplied']} not yet applied)"
                      + ("; [bold yellow]paused[/]" if human["paused"] else "")
                      + (f"; promoted {', '.join(human['promoted'])}" if human["promoted"] else "")
                      + (f"; retired {len(human['retired'])} structure(s)" if human["retired"] else "")
                      + (f"; disputed {', '.join(human['disputed'])}" if human["disputed"] else "")
                      + f"; {human['notes']} notes, {human['rechecks']} rechecks")
    if focus:
        target = "no target" if focus["target_pct"] is None else f"target {focus['target_pct']:g}% faster"
        console.print(f"focus: {', '.join(focus['cases'])} ({target}; other cases may regress at most "
                      f"{focus['max_regression_pct']:g}%)")
        for family, row in focus["families"].items():
            pct = "-" if row["faster_pct"] is None else f"{row['faster_pct']:.1f}%"
            console.print(f"  {family}: {pct} faster than {row['reference']} "
                          f"({ms(row['reference_focus_ms'])} -> {ms(row['champion_focus_ms'])} ms, "
                          f"champion {row['champion']})")


COMMANDS: dict[str, Callable[..., Any]] = {"inject": inject_command, "note": note_command, "recheck": recheck_command,
            "promote": promote_command, "retire": retire_command, "pause": pause_command,
            "unpause": unpause_command}
