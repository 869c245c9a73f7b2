"""What ``qrsearch status`` shows of a run, as data: from one snapshot of its store, readable while
the run is going (the command prints it, ``qrsearch runs`` lists it per run, tests read it)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from population.records import BASELINE_FAMILY, DUELS_KEY, LLM_STATE_KEY
from population.snapshot import read_snapshot
from population.store import RunStore
from search.engine.llm_budget import config_model_names, ledger_names, model_ledger
from search.inspect.eval_seconds import snapshot_seconds


def run_status(run_dir: Path) -> dict[str, Any]:
    """Everything ``status`` shows, as data (readable while the run is going): the run's facts as
    ``RunView.metadata`` has them, from one snapshot of the store, and the driver's live figures."""
    from search.inspect.view import RunView

    with RunStore.open(run_dir, readonly=True) as store:
        snap = read_snapshot(store)
    view = RunView(run_dir, snap)
    meta = view.metadata()
    driver, counters, baseline = snap.status, snap.run_counters, snap.baseline
    state = meta["state"]
    if state == "running" and (driver.human or {}).get("paused"):
        state = "running, paused (qrsearch unpause to go on)"
    best = {}
    for family, cid in sorted(snap.current.items()):
        if family == BASELINE_FAMILY:
            continue
        result = snap.results.get(cid)  # the champion's own result, with the snapshot's speedups
        best[family] = {"candidate": cid, "geomean_ms": result.geomean_ms if result else None,
                        "speedup": result.speedup if result else None}
    failures = Counter(c.state.value for c in snap.candidates if c.state.is_failure)
    config_models = config_model_names(snap.config_json)
    llm_models = model_ledger(snap.counters, {n: snap.get(LLM_STATE_KEY.format(model=n))
                                              for n in ledger_names(snap.counters, config_models)})
    human = view.human
    return {
        "run_dir": str(run_dir), "state": state, "candidates": meta["candidates"], "states": meta["states"],
        "evaluations": meta["evaluations"], "failures": dict(failures),
        "pending": meta["states"].get("pending", 0) + meta["states"].get("running", 0),
        # Only sessions count here (metadata falls back to the first candidate for a run never launched).
        "started": min((s.started for s in snap.sessions if s.started is not None), default=None),
        "last_update": meta["last_update"], "elapsed_minutes": meta["elapsed_minutes"],
        "evals_per_minute": driver.evals_per_minute, "busy_fraction": driver.busy_fraction,
        "llm_calls": counters.llm_calls, "llm_errors": counters.llm_errors, "llm_tokens": counters.llm_tokens,
        "llm_cost_usd": float(counters.llm_cost_usd), "llm_models": llm_models,
        "baseline_geomean_ms": baseline.geomean_ms if baseline else None,
        "best": best, "sessions": meta["sessions"], "stop_reason": driver.stop_reason,
        "device": baseline.device if baseline else None,
        "seconds_per_evaluation": snapshot_seconds(snap), "human": human.summary(), "focus": human.focus,
        "duels": {"judged": counters.duels, "lost": counters.duels_lost,
                  "pending": len((snap.get(DUELS_KEY) or {}).get("pending", []))},
    }
