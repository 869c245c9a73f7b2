"""Where a search run's time went, from its store: the per-stage table of one evaluation,
throughput, the JIT cache hit rate, and the best geomean per family over time.

    python tools/run_timeline.py runs/gpu1 [--at 0,5,10] [--json out.json]

Stages come from each result's ``stage_seconds`` (see search.evaluate.worker): ``compile_wait`` (the
evaluation waiting for its compile-ahead), ``startup`` (waiting for evaluation processes to be
ready), ``verify`` (the gate calls, and any JIT compile the cache missed), ``rechecks`` and
the rest of ``bench`` (timing), ``idle`` (the evaluator waiting for work between candidates),
``queued`` (waiting behind the evaluator's current candidate: pipelining, not lost time).

Where the run kept a GPU-utilisation series (``RUN/gpu-util/*.tsv``, search.evaluate.gpu_sampler),
it also says how busy the GPU was during each family's evaluations, during their compile waits
and between evaluations, each with the seconds it covers.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from population.models import State  # noqa: E402
from population.records import BASELINE_FAMILY  # noqa: E402
from population.store import RunStore  # noqa: E402
from search.evaluate.gpu_sampler import read_series  # noqa: E402

STAGES = ("compile_wait", "startup", "verify", "settle", "rechecks", "timing", "idle", "queued", "compile_ahead")


def load(run_dir: Path) -> list[dict]:
    rows = []
    with RunStore.open(run_dir, readonly=True, integrity=False) as store:
        for cand in store.list_candidates():
            result = store.get_result(cand.id)
            if result is None or result.started_at is None or not cand.state.is_terminal:
                continue
            stages = dict(result.stage_seconds)
            if "bench" in stages:
                stages["timing"] = stages["bench"] - stages.get("rechecks", 0.0) - stages.get("profile", 0.0)
            rows.append({"id": cand.id, "family": cand.family, "origin": cand.origin.value,
                         "state": cand.state.value, "started": result.started_at, "finished": result.finished_at,
                         "seconds": result.eval_seconds, "geomean_ms": result.geomean_ms,
                         "full_bench": cand.state is State.VERIFIED and result.fidelity == "full",
                         "stages": stages, "jit": dict(result.jit),
                         "fitness_ms": cand.fitness_ms})
    rows.sort(key=lambda r: r["started"])
    return rows


def summary(rows: list[dict], at_minutes: list[float]) -> dict:
    if not rows:
        return {"evaluations": 0}
    t0 = rows[0]["started"]
    end = max(r["finished"] for r in rows)
    minutes = (end - t0) / 60
    means = {s: statistics.fmean(r["stages"].get(s, 0.0) for r in rows) for s in STAGES}
    means["total"] = statistics.fmean(r["seconds"] for r in rows)
    by_family: dict[str, dict] = {}
    for fam in sorted({r["family"] for r in rows}):
        mine = [r for r in rows if r["family"] == fam]
        by_family[fam] = {"evaluations": len(mine), "seconds": statistics.fmean(r["seconds"] for r in mine),
                          **{s: statistics.fmean(r["stages"].get(s, 0.0) for r in mine) for s in STAGES}}
    compiled = sum(r["jit"].get("compiled", 0) for r in rows)
    hits = sum(r["jit"].get("cache_hits", 0) for r in rows)
    ahead_done = sum(r["jit"].get("ahead_done", 0) for r in rows)
    best: dict[str, dict[str, float | None]] = defaultdict(dict)
    for minute in at_minutes:
        for fam in sorted({r["family"] for r in rows}):
            done = [r for r in rows if r["family"] == fam and r["state"] == State.VERIFIED.value
                    and r["geomean_ms"] and (minute == 0 or r["finished"] - t0 <= minute * 60)]
            if minute == 0:  # the first verified result of the family: its seed's
                done = done[:1]
            best[fam][f"{minute:g}"] = min((r["geomean_ms"] for r in done), default=None)
    return {
        "evaluations": len(rows), "minutes": minutes, "evals_per_minute": len(rows) / minutes if minutes else None,
        "full_benches_per_minute": sum(r["full_bench"] for r in rows) / minutes if minutes else None,
        "mean_seconds": means, "by_family": by_family,
        "jit": {"compiled": compiled, "cache_hits": hits,
                "hit_rate": hits / (compiled + hits) if compiled + hits else None,
                "compiled_ahead_fraction": ahead_done / len(rows)},
        "best_geomean_ms": dict(best),
    }


def _busy_by_window(windows: list[tuple[float, float, str]], series: list[tuple[float, float]],
                    outside: str | None) -> dict[str, dict[str, float]]:
    """GPU utilisation per window label: each sample counts for the window its timestamp falls in
    (of overlapping windows, the one that started first), else for ``outside`` (None: not
    counted), and for ``all`` when ``outside`` is given.  Each sample stands for the time to the
    next one, so the shares are time-weighted; a gap over 5 s (the sampler stopped) counts nowhere."""
    windows = sorted(windows)
    busy: dict[str, float] = defaultdict(float)
    seconds: dict[str, float] = defaultdict(float)
    j = 0
    for (stamp, util), (following, _) in zip(series, series[1:]):
        dt = following - stamp
        if dt <= 0 or dt > 5.0:
            continue
        while j < len(windows) and windows[j][1] <= stamp:
            j += 1
        label = windows[j][2] if j < len(windows) and windows[j][0] <= stamp else outside
        for key in (label, "all" if outside is not None else None):
            if key is not None:
                busy[key] += util * dt
                seconds[key] += dt
    return {key: {"seconds": seconds[key], "utilization": busy[key] / seconds[key]}
            for key in sorted(seconds, key=lambda k: (k == "all", -seconds[k])) if seconds[key] > 0}


def gpu_attribution(rows: list[dict], series: list[tuple[float, float]]) -> dict[str, dict[str, float]]:
    """GPU utilisation per part of the run: ``compile wait`` (the first ``compile_wait`` seconds
    of an evaluation, where it waited), each family's evaluations (the rest of them), ``between
    evaluations`` and ``all``; an evaluation that overlaps another (lanes) counts the earlier one."""
    windows: list[tuple[float, float, str]] = []
    for r in rows:
        if r["finished"]:
            waited = r["started"] + r["stages"].get("compile_wait", 0.0)
            windows += [(r["started"], waited, "compile wait"), (waited, r["finished"], r["family"])]
    return _busy_by_window(windows, series, outside="between evaluations")


def gpu_by_stage(rows: list[dict], series: list[tuple[float, float]]) -> dict[str, dict[str, float]]:
    """GPU utilisation per stage of the candidates' full benches: ``verify stage`` (gate calls),
    ``settle`` (waiting for the exclusive gate) and ``bench job`` (timing and re-checks, to the
    evaluation's end), each window placed from the stage seconds the evaluation recorded, in the
    order the worker runs them after its compile wait.  Left out: the reference, and every
    evaluation that went through the screen (two rounds of stages, each stage one sum)."""
    windows: list[tuple[float, float, str]] = []
    for r in rows:
        if not r["finished"] or not r["full_bench"] or "screen" in r["stages"] or r["family"] == BASELINE_FAMILY:
            continue
        at = r["started"] + r["stages"].get("compile_wait", 0.0)
        for stage, label in (("verify", "verify stage"), ("settle", "settle")):
            windows.append((at, at + r["stages"].get(stage, 0.0), label))
            at += r["stages"].get(stage, 0.0)
        windows.append((at, r["finished"], "bench job"))
    return _busy_by_window(windows, series, outside=None)


def load_series(run_dir: Path) -> dict[str, list[tuple[float, float]]]:
    return {path.stem: read_series(path) for path in sorted((run_dir / "gpu-util").glob("*.tsv"))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--at", default="0,5,10", help="minutes at which to report the best geomean per family")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    rows = load(args.run_dir)
    data = summary(rows, [float(x) for x in args.at.split(",")])
    series_by_gpu = load_series(args.run_dir)
    data["gpu_by_part"] = {name: gpu_attribution(rows, series) for name, series in series_by_gpu.items()}
    data["gpu_by_stage"] = {name: gpu_by_stage(rows, series) for name, series in series_by_gpu.items()}
    if args.json:
        args.json.write_text(json.dumps({"summary": data, "evaluations": rows}, indent=1))
    if not rows:
        print("no evaluations")
        return 1
    print(f"{data['evaluations']} evaluations in {data['minutes']:.2f} min: {data['evals_per_minute']:.2f}/min, "
          f"full benches {data['full_benches_per_minute']:.2f}/min")
    print("mean seconds per evaluation: " + ", ".join(f"{k} {v:.2f}" for k, v in data["mean_seconds"].items()))
    for fam, f in data["by_family"].items():
        print(f"  {fam:22s} n={f['evaluations']:3d} {f['seconds']:6.2f} s: " +
              ", ".join(f"{s} {f[s]:.2f}" for s in STAGES if f[s]))
    print(f"JIT in evaluation children: {data['jit']}")
    for name, parts in data["gpu_by_part"].items():
        print(f"GPU utilisation ({name}, NVML driver samples) by part of the run: " + "; ".join(
            f"{part} {100 * p['utilization']:.0f}% of {p['seconds']:.0f} s" for part, p in parts.items()))
    for name, stages in data["gpu_by_stage"].items():
        print(f"GPU utilisation ({name}) by stage of the full benches: " + "; ".join(
            f"{stage} {100 * p['utilization']:.0f}% of {p['seconds']:.0f} s" for stage, p in stages.items()))
    print(f"best geomean ms per family at minutes {args.at}: {data['best_geomean_ms']}")
    for r in rows:
        st = r["stages"]
        print(f"  {r['id']} {r['family'][:12]:12s} {r['origin']:9s} {r['state']:14s} t={r['started'] - rows[0]['started']:6.1f}"
              f" {r['seconds']:6.2f}s gm={r['geomean_ms'] or 0:9.4g} " +
              " ".join(f"{k[:5]}={v:.2f}" for k, v in st.items()) + f" jit={r['jit']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
