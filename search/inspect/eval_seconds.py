"""Where an evaluation's time goes: mean seconds per evaluation by stage (``status``, the driver's log)."""

from __future__ import annotations

from collections.abc import Iterable

from population.models import EvalResult
from population.snapshot import RunSnapshot
from population.store import RunStore

STAGES = ("verify", "bench", "rechecks", "profile", "compile_wait", "startup", "screen")


def evaluation_seconds(store: RunStore, last: int = 200) -> dict[str, float]:
    """Mean seconds per evaluation over the run's latest ``last`` results, in total and by
    stage (``rechecks`` and ``profile`` are parts of ``bench``); empty before any result."""
    return mean_seconds([store.get_result(c.id) for c in store.list_candidates(newest_first=True, limit=last)])


def snapshot_seconds(snapshot: RunSnapshot, last: int = 200) -> dict[str, float]:
    """The same from a read snapshot (``status``)."""
    newest = snapshot.candidates[::-1][:last]
    return mean_seconds([snapshot.stored_results.get(c.id) for c in newest])


def mean_seconds(results: Iterable[EvalResult | None]) -> dict[str, float]:
    """Mean seconds per evaluation over these results (those with stage times), in total and by stage."""
    totals = {key: 0.0 for key in ("total", *STAGES)}
    count = 0
    hits = compiled = 0.0
    for result in results:
        if result is None or not result.stage_seconds or result.eval_seconds is None:
            continue
        count += 1
        totals["total"] += result.eval_seconds
        for key in STAGES:
            totals[key] += result.stage_seconds.get(key, 0.0)
        hits += result.jit.get("cache_hits", 0.0)
        compiled += result.jit.get("compiled", 0.0)
    if not count:
        return {}
    means = {key: value / count for key, value in totals.items()}
    # The JIT cache hit rate of the evaluation children (precompiled kernels load from the cache).
    means["jit_cache_hit_rate"] = hits / (hits + compiled) if hits + compiled else None  # type: ignore[assignment]
    return means


def describe_evaluation_seconds(means: dict[str, float]) -> str:
    if not means:
        return "evaluation time: no evaluation recorded yet"
    return (f"evaluation time (mean): {means['total']:.1f} s = verify stage {means['verify']:.1f} s + bench stage "
            f"{means['bench']:.1f} s (re-checking outputs {means['rechecks']:.1f} s, profiling "
            f"{means['profile']:.1f} s); waiting for compile-ahead {means.get('compile_wait', 0.0):.1f} s, "
            f"for evaluation processes {means.get('startup', 0.0):.1f} s; JIT cache hit rate "
            + ("-" if means.get("jit_cache_hit_rate") is None else f"{100 * means['jit_cache_hit_rate']:.0f}%"))
