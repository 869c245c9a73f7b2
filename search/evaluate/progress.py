"""The live screen of a search: throughput, failures, best per family, GPU use, LLM spend."""

from __future__ import annotations

import time

from rich.console import Group
from rich.table import Table
from rich.text import Text

from population.models import State
from population.records import RunCounters
from search.evaluate.budget import budget_progress
from search.engine.loop import SearchLoop
from search.inspect.eval_seconds import STAGES, describe_evaluation_seconds, evaluation_seconds  # noqa: F401  (re-exported)
from search.numbers import ms as fmt_ms, speedup as fmt_speedup
from search.speedup import BASELINE_FAMILY, with_speedups


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
    s = loop.stats
    elapsed = time.monotonic() - s.started
    counters = RunCounters.of(loop.run.store.counters())
    pool = loop.pool.stats()
    head = Table.grid(padding=(0, 2))
    head.add_row(
        Text(title, style="bold"), f"{elapsed / 60:5.1f} min",
        f"evals {s.evaluations} ({s.evals_per_minute():.1f}/min)",
        f"queue {len(loop.queue)}", f"running {len(loop.pool.inflight())}",
        f"evaluators {pool.ready}/{pool.evaluators} busy {100 * pool.mean_busy:.0f}%",
    )
    failures = {k: v for k, v in s.by_state.items() if State(k).is_failure}
    llm = loop.llm_off_reason or f"{len(loop.llm_jobs)} in flight"
    if loop.llm_budget is not None and not loop.llm_off_reason:
        paused = [name for name in loop.llm_budget.state if loop.llm_budget.paused(name)]
        llm += f", paused: {', '.join(paused)}" if paused else ""
    head.add_row(
        "", f"verified {s.by_state.get(State.VERIFIED.value, 0)} screened {s.by_state.get(State.SCREENED.value, 0)}",
        "failed " + (", ".join(f"{k} {v}" for k, v in sorted(failures.items())) or "0"),
        f"lost {s.lost}", f"LLM: {llm}",
        f"tokens {counters.llm_tokens} ${counters.llm_cost_usd:.2f}",
    )
    table = Table(title=None, expand=False)
    for column in ("family", "champion", "geomean ms", "speedup", "evals"):
        table.add_column(column, justify="right" if column in ("geomean ms", "speedup", "evals") else "left")
    for name, cid, ms, speed, evals in best_per_family(loop):
        table.add_row(name, cid, fmt_ms(ms), fmt_speedup(speed),
                      str(evals))
    parts: list = [head, Text(budget_progress(loop)), table]
    if s.champions:
        parts.append(Text("\n".join(s.champions[-4:]), style="green"))
    if loop.stop_requested:
        parts.append(Text(f"stopping: {loop.stop_requested} (waiting for {len(loop.pool.inflight())} evaluations)",
                          style="yellow"))
    return Group(*parts)
