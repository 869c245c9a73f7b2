"""A large run store for inspection at scale (not a test): a real simulated run, then copies of it.

    .venv/bin/python tools/scale_store.py --out /tmp/store50k [--candidates 50000] [--base-evals 400]
        [--evaluators 8] [--config runs/multi-gpu.yaml]

First a real search runs on simulated GPUs in virtual time (tools/scale_quality.py's loop: the
proposer, Optuna, population, store, cascade, on search/evaluate/simulated/virtual_pool.py) until
``--base-evals`` evaluations.  Its store is then grown to ``--candidates`` candidates by copying its
candidates (and their results) in creation order, each copy a new generation: a copy's candidates
keep their parents within the copy, and a copy's seeds hang under the previous copy's candidate of the
same family, so lineages run deep (about ``candidates / base`` levels beyond the base run's own).
Copies are a little slower than their originals (their fitness and geomean times 1-5% more), so the
base run's champions and champion history stay true.  The result is a run directory that every
``qrsearch`` inspection command opens: ``status``, ``champions``, ``lineage``, ``show``, ``report``.

It writes straight into SQLite (one transaction per copy); a 50,000-candidate store takes about a minute.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from population.models import candidate_id  # noqa: E402
from population.store_schema import DB_NAME  # noqa: E402


def base_run(out: Path, evaluators: int, evals: int, config: Path, seed: int) -> Path:
    """A real simulated search of ``evals`` evaluations; returns its run directory."""
    import kernels.families as registry
    from scale_quality import quality_config
    from search.engine.loop import SearchLoop
    from search.mutation.tuning import Tuner
    from search.run.driver import OPTUNA_FILE, create_run
    from search.evaluate.simulated.virtual_pool import VirtualPool

    cfg = quality_config(config, seed, out.parent, out.name, trials=100_000, max_evals=evals)
    pool = VirtualPool.for_run(evaluators, cfg)
    run = create_run(cfg)
    tuner = Tuner(cfg.run_dir / OPTUNA_FILE, cfg.optuna.sampler, cfg.seed, cfg.optuna.trials_per_structure)
    loop = SearchLoop(cfg, run, pool, tuner, registry.FAMILIES, log=lambda _m: None, max_evals=evals)
    try:
        loop.run_until_done()
    finally:
        tuner.flush()
        run.close()
    return cfg.run_dir


def grow(run_dir: Path, candidates: int, seed: int) -> int:
    """Copy the store's candidates (with results) until it holds ``candidates``; returns the count."""
    rng = random.Random(seed)
    db = sqlite3.connect(run_dir / DB_NAME)
    cols = [r[1] for r in db.execute("PRAGMA table_info(candidates)")]
    base = [dict(zip(cols, row)) for row in db.execute(f"SELECT {', '.join(cols)} FROM candidates ORDER BY seq")]
    results = {row[0]: row for row in db.execute(
        "SELECT candidate_id, geomean_ms, speedup, device, error, body FROM results")}
    if not base:
        raise SystemExit("the base run made no candidates")
    seq = max(c["seq"] for c in base)
    told = db.execute("SELECT coalesce(max(told_seq), 0) FROM candidates").fetchone()[0]
    count = len(base)
    last_of_family: dict[str, str] = {}  # the previous copy's latest candidate per family
    for c in base:
        last_of_family[c["family"]] = c["id"]
    insert = f"INSERT INTO candidates({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
    depth = 1 + max(c["generation"] for c in base)
    copy = 0
    while count < candidates:
        copy += 1
        mapping: dict[str, str] = {}
        with db:
            for c in base:
                if count >= candidates:
                    break
                seq += 1
                count += 1
                new = dict(c)
                new["seq"], new["id"] = seq, candidate_id(seq)
                mapping[c["id"]] = new["id"]
                slower = 1 + rng.uniform(0.01, 0.05)
                if new["parent1"] is None:  # a seed of the base run: under the previous copy
                    new["parent1"] = last_of_family.get(c["family"])
                    if new["parent1"] is not None and new["origin"] == "seed":
                        new["origin"] = "migration"
                else:
                    new["parent1"] = mapping.get(c["parent1"], c["parent1"])
                    if new["parent2"] is not None:
                        new["parent2"] = mapping.get(c["parent2"], c["parent2"])
                new["generation"] = c["generation"] + copy * depth
                if new["fitness_ms"] is not None:
                    new["fitness_ms"] = c["fitness_ms"] * slower
                new["member"] = 0
                if c["told_seq"] is not None:
                    told += 1
                    new["told_seq"] = told
                db.execute(insert, tuple(new[k] for k in cols))
                r = results.get(c["id"])
                if r is not None:
                    body = json.loads(r[5])
                    body["candidate_id"] = new["id"]
                    for key in ("geomean_ms", "focus_ms"):
                        if body.get(key) is not None:
                            body[key] = body[key] * slower
                    for case in body.get("cases") or ():
                        for key in ("median_ms", "min_ms", "max_ms"):
                            if case.get(key) is not None:
                                case[key] = case[key] * slower
                    db.execute("INSERT INTO results(candidate_id, geomean_ms, speedup, device, error, body) "
                               "VALUES (?, ?, ?, ?, ?, ?)",
                               (new["id"], None if r[1] is None else r[1] * slower, r[2], r[3], r[4],
                                json.dumps(body, separators=(",", ":"))))
            for c in base:
                if c["id"] in mapping:
                    last_of_family[c["family"]] = mapping[c["id"]]
    db.close()
    return count


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True, help="the run directory to make (must not exist)")
    ap.add_argument("--candidates", type=int, default=50_000)
    ap.add_argument("--base-evals", type=int, default=400)
    ap.add_argument("--evaluators", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--config", type=Path, default=ROOT / "runs" / "multi-gpu.yaml")
    args = ap.parse_args()
    if args.out.exists():
        raise SystemExit(f"{args.out} exists")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory():
        run_dir = base_run(args.out, args.evaluators, args.base_evals, args.config, args.seed)
    count = grow(run_dir, args.candidates, args.seed)
    print(json.dumps({"run_dir": str(run_dir), "candidates": count}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
