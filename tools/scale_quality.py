"""Search quality against parallelism on the synthetic landscape (not a test).

    .venv/bin/python tools/scale_quality.py [--evaluators 1,8,64,256] [--seeds 5] [--first-seed 1] [--max-evals 4000]
        [--config runs/multi-gpu.yaml] [--set SECTION.KEY=VALUE] [--out DIR]

For each evaluator count and run seed, the real loop (proposer, Optuna, population, store,
cascade, duels) searches the config's families on simulated GPUs in virtual time
(search/evaluate/simulated/virtual_pool.py: the driver taken as infinitely fast, so what is
measured is what each proposal could know, not this machine's speed).  It reports the
evaluations (of the whole run, and of the family itself) after which each family's champion is
within 1% of the landscape's optimum for that family (by its noise-free time), and after which
every family's is; the median over seeds, and how many seeds got there within ``--max-evals``.
The family's own count measures the search within a family; the run's count also depends on how
the evaluations were shared out between families (while an evaluator holds for a compiled
candidate, families that compile fast are proposed first).

The landscape is the same for every run (``simulation.landscape_seed``); the run seed varies.
``optuna.trials_per_structure`` is lifted to ``--trials``: without an LLM a family has one
structure, and its study's budget must not end the search before it can get there.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from population.records import C  # noqa: E402
from search.config import RunConfig  # noqa: E402

print = functools.partial(print, flush=True)  # progress shows in a log as it comes

WITHIN = 0.01


def quality_config(config: Path, seed: int, runs_dir: Path, name: str, *, trials: int, max_evals: int,
                   queue_total: int | None = None, settings: Sequence[str] = ()) -> RunConfig:
    """The config at ``config`` made a simulated run: no Ray, no LLM, the budget in evaluations.
    queue_total: evaluation.compile_ahead_total (0: none; None: the config's); settings:
    SECTION.KEY=VALUE, the value read as YAML (true, 3, 0.5, null)."""
    data = RunConfig.from_yaml(config).model_dump(mode="json")
    data.update(name=name, runs_dir=str(runs_dir), seed=seed)
    data["evaluation"]["device"] = "simulated"
    data["ray"].update(address=None, gpus=None, fake_gpus=0)
    data["optuna"]["trials_per_structure"] = trials
    data["budget"].update(max_evals=max_evals, max_minutes=None)
    data["llm"].update(base_url=None, models=[])
    if queue_total is not None:
        data["evaluation"]["compile_ahead_total"] = queue_total or None
    for setting in settings:
        path, _, value = setting.partition("=")
        section, _, key = path.partition(".")
        data[section][key] = yaml.safe_load(value)
    return RunConfig.model_validate(data)


def run_one(args: argparse.Namespace, evaluators: int, seed: int, runs_dir: Path) -> dict[str, Any]:
    import kernels.families as registry
    from search.engine.loop import SearchLoop
    from search.mutation.tuning import Tuner
    from search.run.driver import OPTUNA_FILE, create_run
    from search.evaluate.simulated.virtual_pool import VirtualPool

    config = quality_config(args.config, seed, runs_dir, f"q{evaluators}-s{seed}", trials=args.trials,
                            max_evals=args.max_evals, queue_total=args.queue_total, settings=args.set)
    pool = VirtualPool.for_run(evaluators, config)
    run = create_run(config)
    tuner = Tuner(config.run_dir / OPTUNA_FILE, config.optuna.sampler, config.seed, config.optuna.trials_per_structure)
    loop = SearchLoop(config, run, pool, tuner, registry.FAMILIES, log=lambda _m: None, max_evals=args.max_evals)
    searched = loop.proposer.searchable_families()
    lands = {f: pool.gpu.landscape.family(f) for f in searched}
    reached: dict[str, int] = {}
    own: dict[str, int] = {}  # the family's own evaluations by then
    started = time.monotonic()

    def tick() -> None:
        for family in searched:
            if family in reached:
                continue
            champion = loop.run.champion(family)
            if champion is None:
                continue
            land = lands[family]
            true = land.geomean_ms(champion.params) * pool.gpu.landscape.structure_factor(family, champion.fingerprint)
            if true <= (1 + WITHIN) * land.optimum_ms:
                reached[family] = loop.stats.evaluations
                # Withdrawn children are told (rejected) but never ran: no evaluation of the family's.
                own[family] = loop.run.population.family(family).evals - loop.stats.withdrawn[family]
        if len(reached) == len(searched):
            loop.request_stop("every family within 1% of its optimum")

    try:
        loop.run_until_done(on_tick=tick)
        duels = {"run": int(run.store.counter(C.DUELS)), "lost": int(run.store.counter(C.DUELS_LOST))}
    finally:
        tuner.flush()
        run.close()
    stats = pool.stats()
    return {"evaluators": evaluators, "seed": seed, "evaluations": loop.stats.evaluations, "reached": reached,
            "own": own, "families": searched,
            "all": max(reached.values()) if len(reached) == len(searched) else None,
            "family_evals": {f: loop.run.population.family(f).evals for f in searched},
            "gap_pct": {f: round(100 * (lands[f].geomean_ms(c.params) * pool.gpu.landscape.structure_factor(
                f, c.fingerprint) / lands[f].optimum_ms - 1), 2)
                for f in searched if (c := loop.run.champion(f)) is not None},
            "load": [round(x, 2) for x in os.getloadavg()],
            "leads": {"noted": loop.proposer.leads.noted, "carried": loop.proposer.leads.carried},
            "withdrawn": dict(loop.stats.withdrawn), "duels": duels,
            "virtual_minutes": round(pool.now / 60, 1), "busy": round(stats.mean_busy, 4),
            "wall_s": round(time.monotonic() - started, 1), "stop": loop.stop_requested}


def median_or_none(values: list[int | None]) -> float | None:
    got = [v for v in values if v is not None]
    return statistics.median(got) if len(got) == len(values) else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--evaluators", default="1,8,64,256")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--first-seed", type=int, default=1, help="run seeds first-seed .. first-seed + seeds - 1")
    ap.add_argument("--max-evals", type=int, default=4000)
    ap.add_argument("--trials", type=int, default=100_000)
    ap.add_argument("--config", type=Path, default=ROOT / "runs" / "multi-gpu.yaml")
    ap.add_argument("--queue-total", type=int, default=None,
                    help="evaluation.compile_ahead_total (0: none; default: the config's)")
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                    help="a config key for every run, e.g. optuna.carry_gains=true (repeatable)")
    ap.add_argument("--out", type=Path, default=Path("/tmp/qrsearch-quality"))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="quality-runs-") as tmp:
        for evaluators in [int(e) for e in args.evaluators.split(",")]:
            results = [run_one(args, evaluators, seed, Path(tmp)) for seed in range(args.first_seed, args.first_seed + args.seeds)]
            for r in results:
                print(json.dumps(r))
            families = results[0]["families"]
            row = {"evaluators": evaluators, "seeds": len(results),
                   "all_median": median_or_none([r["all"] for r in results]),
                   "all_reached": sum(r["all"] is not None for r in results),
                   "busy_median": statistics.median(r["busy"] for r in results),
                   "per_family": {f: median_or_none([r["reached"].get(f) for r in results]) for f in families},
                   "per_family_own": {f: median_or_none([r["own"].get(f) for r in results]) for f in families}}
            rows.append(row)
            print(json.dumps(row))
            (args.out / f"quality-{evaluators}.json").write_text(json.dumps({"row": row, "runs": results}, indent=1))
    print("evaluators | evaluations until every family is within 1% (median) | seeds that got there | "
          "ratio to 1 evaluator")
    base = rows[0]["all_median"] if rows and rows[0]["evaluators"] == 1 else None
    for row in rows:
        ratio = f"{row['all_median'] / base:.2f}" if base and row["all_median"] else "-"
        print(f"{row['evaluators']:>10} | {row['all_median']} | {row['all_reached']}/{row['seeds']} | {ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
