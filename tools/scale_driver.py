"""The driver's own CPU and memory as the store grows, without Ray (not a test).

    .venv/bin/python tools/scale_driver.py [--evaluators 64] [--max-evals 10000] [--window 1000]
        [--config runs/multi-gpu.yaml] [--profile FILE] [--out FILE]

The real loop (proposer, Optuna, population, store, cascade) on simulated GPUs in virtual time
(search/evaluate/simulated/virtual_pool.py, as tools/scale_quality.py runs it), so that 10,000
evaluations take minutes, not a simulated hour of a Ray cluster.  Per window of ``--window``
evaluations it prints the process CPU per evaluation, split into the driver's and the
simulator's (the virtual pool's own bookkeeping and the landscape's arithmetic, which a real
driver does not pay; what Ray's pool costs instead is tools/scale_bench.py's), the time in the
proposer, Optuna ask/tell and store commits per evaluation, the resident memory, the store's size on disk, the candidates in
the store and the Optuna trials.  New structures arrive every ``--inject-every`` evaluations
as in tools/scale_bench.py (``qrsearch inject``'s event from a side process), so the studies stay
at the config's ``trials_per_structure`` as in a run with an LLM.  What Ray costs the driver (submit, poll) is tools/scale_bench.py's.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def simulator_clock(pool_cls: Any) -> list[float]:
    """CPU seconds spent inside the virtual pool's poll and submit (its event schedule and the
    landscape's arithmetic, which a real driver does not pay), as a one-item list the wrappers add
    to.  Its cheap questions (free slots, in flight, stats) stay the driver's: RayPool's cost the
    same; and each wrapped call costs two clock reads (about 1 us each here, several under load)."""
    spent = [0.0]
    depth = [0]
    for name in ("poll", "submit"):
        original = getattr(pool_cls, name)

        def wrapper(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
            depth[0] += 1
            t0 = time.process_time()
            try:
                return _original(*args, **kwargs)
            finally:
                depth[0] -= 1
                if depth[0] == 0:  # a method that calls another is counted once
                    spent[0] += time.process_time() - t0

        setattr(pool_cls, name, wrapper)
    return spent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--evaluators", type=int, default=64)
    ap.add_argument("--max-evals", type=int, default=10_000)
    ap.add_argument("--window", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--config", type=Path, default=ROOT / "runs" / "multi-gpu.yaml")
    ap.add_argument("--trials", type=int, default=None, help="optuna.trials_per_structure (default: the config's)")
    ap.add_argument("--inject-every", type=int, default=300,
                    help="evaluations between injected structures, as tools/scale_bench.py (0: none)")
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                    help="any config key, as tools/scale_quality.py takes it (repeatable)")
    ap.add_argument("--profile", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()

    import kernels.families as registry
    from scale_bench import Probe
    from scale_quality import quality_config
    from search.config import RunConfig
    from search.engine.loop import SearchLoop
    from search.mutation.tuning import Tuner
    from search.run.driver import OPTUNA_FILE, create_run
    from search.evaluate.simulated.virtual_pool import VirtualPool
    from population.store_file import StoreFile
    from search.engine.proposer import Proposer

    probe = Probe(args.window, args.inject_every)  # its timers, and its injector: new structures as an LLM's
    for owner, name, label in ((Proposer, "synchronous", "proposer"), (Tuner, "ask", "optuna ask"),
                               (Tuner, "ask_at", "optuna ask_at"), (Tuner, "tell", "optuna tell")):
        probe.timed(owner, name, label)
    probe.commits(StoreFile)
    simulator = simulator_clock(VirtualPool)

    with tempfile.TemporaryDirectory(prefix="scale-driver-") as tmp:
        trials = args.trials or RunConfig.from_yaml(args.config).optuna.trials_per_structure
        cfg = quality_config(args.config, args.seed, Path(tmp), "driver", trials=trials, max_evals=args.max_evals,
                             settings=args.set)
        pool = VirtualPool.for_run(args.evaluators, cfg)
        run = create_run(cfg)
        tuner = Tuner(cfg.run_dir / OPTUNA_FILE, cfg.optuna.sampler, cfg.seed, cfg.optuna.trials_per_structure)
        loop = SearchLoop(cfg, run, pool, tuner, registry.FAMILIES, log=lambda _m: None, max_evals=args.max_evals)
        rows: list[dict[str, Any]] = []
        mark = {"evals": 0, "cpu": cpu_s(), "wall": time.monotonic(), "sim": simulator[0]}
        load_before = os.getloadavg()
        probe.loop = loop

        def tick() -> None:
            n = loop.stats.evaluations
            if probe.inject_every and n % probe.inject_every == 0 and n > probe.injected:
                probe.injected = n
                probe.inject(n // probe.inject_every)
            if n - mark["evals"] < args.window:
                return
            now_cpu, now_wall = cpu_s(), time.monotonic()
            d = n - mark["evals"]
            sim = simulator[0] - mark["sim"]
            row = {"evaluations": n, "cpu_ms_per_eval": round(1000 * (now_cpu - mark["cpu"]) / d, 2),
                   "driver_cpu_ms_per_eval": round(1000 * (now_cpu - mark["cpu"] - sim) / d, 2),
                   "simulator_cpu_ms_per_eval": round(1000 * sim / d, 2),
                   "wall_ms_per_eval": round(1000 * (now_wall - mark["wall"]) / d, 2),
                   "load1": round(os.getloadavg()[0], 2),
                   "rss_mib": round(rss_mib(), 1), "candidates": run.store.count_candidates(),
                   "store_mib": round(sum(f.stat().st_size for f in cfg.run_dir.glob("run.sqlite*")) / 2**20, 1),
                   "trials": sum(len(s.get_trials(deepcopy=False)) for s in tuner._studies.values())}
            for label, (calls, secs) in probe.since.items():  # this window's
                row[f"{label} ms/eval"] = round(1000 * secs / d, 3)
                row[f"{label} ms/call"] = round(1000 * secs / max(1, calls), 3)
            probe.since.clear()
            mark.update(evals=n, cpu=now_cpu, wall=now_wall, sim=simulator[0])
            rows.append(row)
            print(json.dumps(row), flush=True)

        profiler = cProfile.Profile() if args.profile else None
        try:
            if profiler is not None:
                profiler.enable()
            loop.run_until_done(on_tick=tick)
        finally:
            if profiler is not None:
                profiler.disable()
                profiler.dump_stats(str(args.profile))
            tuner.flush()
            probe.uninstall()  # ends its injector
            run.close()
    if args.out is not None:
        args.out.write_text(json.dumps({"evaluators": args.evaluators, "windows": rows, "load_before": load_before,
                                        "load_after": os.getloadavg(), "stop": loop.stop_requested,
                                        "evaluations": loop.stats.evaluations}, indent=1))
    print(json.dumps({"stop": loop.stop_requested, "evaluations": loop.stats.evaluations}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
