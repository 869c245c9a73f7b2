"""The live screen of a search: throughput, failures, best per family, GPU use, LLM spend."""

from __future__ import annotations

import time
from collections import Counter

from rich.console import Group
from rich.table import Table
from rich.text import Text

from population.models import Origin, State
from population.records import OPERATOR_KEY, RunCounters
from population.store import RunStore
from search.run.budget import budget_progress
from search.engine.loop import SearchLoop
from search.numbers import ms as fmt_ms, speedup as fmt_speedup
from population.records import BASELINE_FAMILY
from population.speedup import with_speedups


def best_per_family(loop: SearchLoop) -> list[tuple[str, str, float | None, float | None, int]]:
    """(family, champion id, fitness ms, speedup, evaluations) per searched family."""
    baseline = loop.proposer.baseline_result()
    rows = []
    for name, fam in loop.run.population.families.items():
        if name == BASELINE_FAMILY:
            continue
        champ = fam.champion
        speed = None
        if champ is not None:
            result = loop.run.store.get_result(champ.id)
            speed = with_speedups(result, baseline).speedup if result else None
        rows.append((name, champ.id if champ else "-", champ.fitness_ms if champ else None, speed, fam.evals))
    return rows


def render(loop: SearchLoop, title: str) -> Group:
    """The live panel: short lines that fit 80 columns (a cell grid wrapped each cell on its own)."""
    s = loop.stats
    elapsed = time.monotonic() - s.started
    counters = RunCounters.of(loop.run.store.counters())
    pool = loop.pool.stats()
    failures = {k: v for k, v in s.by_state.items() if State(k).is_failure}
    calls = loop.llm_calls
    llm = calls.off_reason or f"{len(calls.jobs)} calls in flight"
    if calls.budget is not None and not calls.off_reason:
        paused = [name for name in calls.budget.state if calls.budget.paused(name)]
        llm += f", paused: {', '.join(paused)}" if paused else ""
    lines = [
        Text.assemble((title, "bold"), f"  {elapsed / 60:.1f} min  evals {s.evaluations} "
                      f"({s.evals_per_minute():.1f}/min)  queue {len(loop.queue)}  running {loop.pool.inflight_count()}"),
        Text(f"evaluators {pool.ready}/{pool.evaluators} up, busy {100 * pool.mean_busy:.0f}%  "
             f"verified {s.by_state.get(State.VERIFIED.value, 0)}  screened {s.by_state.get(State.SCREENED.value, 0)}"
             f"  lost {s.lost}"),
        Text("failed " + (", ".join(f"{k} {v}" for k, v in sorted(failures.items())) or "0")),
        Text(f"LLM: {llm}; tokens {counters.llm_tokens}, ${counters.llm_cost_usd:.2f}"),
        Text(budget_progress(loop)),
    ]
    table = Table(title=None, expand=False)
    for column in ("family", "champion", "geomean ms", "speedup", "evals"):
        table.add_column(column, justify="right" if column in ("geomean ms", "speedup", "evals") else "left")
    for name, cid, ms, speed, evals in best_per_family(loop):
        table.add_row(name, cid, fmt_ms(ms), fmt_speedup(speed), str(evals))
    parts: list = [*lines, table]
    parts += [Text(line, style="green", overflow="ellipsis", no_wrap=True) for line in s.champions[-4:]]
    if loop.stop_requested:
        waiting = _count(loop.pool.inflight_count(), "evaluation", "evaluations")
        parts.append(Text(f"stopping ({loop.stop_requested}): waiting for {waiting}", style="yellow"))
    for part in parts:
        if isinstance(part, Text):
            part.no_wrap, part.overflow = True, "ellipsis"
    return Group(*parts)


def describe_search(store: RunStore) -> str:
    """What the search did, for the end of a session: children by operator, champion changes."""
    children = [c for c in store.list_candidates() if c.origin is not Origin.SEED and c.state.is_terminal]
    operators = Counter(str(store.get_json(OPERATOR_KEY.format(cid=c.id)) or c.origin.value) for c in children)
    changes = [e.change for e in store.champion_history() if e.change.previous_id is not None]
    text = (f"search: {_count(len(children), 'child', 'children')} evaluated"
            + (f" ({', '.join(f'{op} {n}' for op, n in operators.most_common())})" if operators else "")
            + f", {_count(len(changes), 'champion change', 'champion changes')}")
    if changes:
        text += " (" + ", ".join(f"{c.family} {c.previous_id} -> {c.candidate_id}" for c in changes[-3:]) \
            + (", ..." if len(changes) > 3 else "") + ")"
    return text


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"
