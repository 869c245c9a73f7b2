"""Scale benchmark of one driver on simulated GPUs (not a test).

    .venv/bin/python tools/scale_bench.py --gpus 1,8,64 [--sim-minutes 10] [--time-scale 1] [--nodes 4]
        [--config runs/multi-gpu.yaml] [--max-evals N] [--profile DIR] [--out DIR]

For each GPU count, a loopback Ray cluster (search/evaluate/simulated/loopback.py: a head for the
driver with no GPU, and ``--nodes`` nodes declaring the GPUs between them) runs the config as a
simulated search in this process: the real driver, RayPool with one actor per GPU, the store,
the proposer and Optuna; only the GPU work is simulated (search/evaluate/simulated/).  It
reports, per run and per window of ``--window`` evaluations:

- evaluator busy fraction (RayPool's: time with an evaluation running over time up);
- the driver's CPU per evaluation (this process's user+system time, Ray's driver threads
  included) and the loop's own figure (time in SearchLoop.step outside the pool's wait);
- Optuna ask (Tuner.ask, ask_at) and tell, store commits, the proposer (Proposer.synchronous),
  the pool (poll, free_slots, submit), in ms per call;
- the driver's resident memory, the candidates in the store, the Optuna trials;
- evaluations per second and the machine's load average.

Simulated time runs ``--time-scale`` times real time; ``--sim-minutes`` is simulated minutes.
New structures arrive as an LLM's would: every ``--inject-every`` evaluations one per family is
injected (``qrsearch inject``'s event: the family's file with one module-level line added, a
new structure that the landscape makes slower, never faster), so that Optuna's studies stay at
the config's ``trials_per_structure`` as they do in a run with an LLM (without one, the five
structures use their budgets within a few hundred evaluations and the search stops).  ``--profile DIR`` runs the driver under cProfile
and writes each run's stats there (profiled runs are slower: use them for where, not how much).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import resource
import subprocess
import sys
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from search.config import RunConfig  # noqa: E402

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE / 2**20


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Probe:
    """Timers around the driver's parts, totals and per window of evaluations."""

    def __init__(self, window: int, inject_every: int) -> None:
        self.window = window
        self.inject_every = inject_every
        self.total: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
        self.since: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
        self.windows: list[dict[str, Any]] = []
        self.loop: Any = None
        self._undo: list[Callable[[], None]] = []
        self._mark = (0, time.monotonic(), cpu_s(), 0.0)
        self.injected = 0
        self.injector: subprocess.Popen | None = None
        self.threads: dict[str, float] = {}  # threads_cpu_s() at the last window's end (Ray's end with ray.shutdown)
        self.sent_bytes: dict[str, int] = defaultdict(int)  # string arguments of actor calls, by method

    def timed(self, owner: Any, name: str, label: str) -> None:
        original = getattr(owner, name)
        total, since = self.total, self.since

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                dt = time.perf_counter() - t0
                for book in (total[label], since[label]):
                    book[0] += 1
                    book[1] += dt

        setattr(owner, name, wrapper)
        self._undo.append(lambda: setattr(owner, name, original))

    def commits(self, store_file_cls: Any) -> None:
        original = store_file_cls._execute
        total, since = self.total, self.since

        def execute(self_: Any, sql: str, params: Any = ()) -> Any:
            if sql != "COMMIT":
                return original(self_, sql, params)
            t0 = time.perf_counter()
            try:
                return original(self_, sql, params)
            finally:
                dt = time.perf_counter() - t0
                for book in (total["store commit"], since["store commit"]):
                    book[0] += 1
                    book[1] += dt

        store_file_cls._execute = execute
        self._undo.append(lambda: setattr(store_file_cls, "_execute", original))

    def actor_calls(self) -> None:
        """Count the driver's actor method calls by method ("actor <name>", calls only: a call's
        own time is its submission, not its work), and the text they carry (``sent_bytes``: the
        length of their string arguments, a request's JSON being most of it)."""
        from ray.actor import ActorMethod

        original = ActorMethod._remote
        total, since, sent = self.total, self.since, self.sent_bytes

        def _remote(self_: Any, *args: Any, **kwargs: Any) -> Any:
            label = f"actor {self_._method_name}"
            total[label][0] += 1
            since[label][0] += 1
            positional = args[0] if args else kwargs.get("args")
            # A string argument, or one in a tuple (an announcement's source as a difference).
            sent[self_._method_name] += sum(len(a) for arg in positional or ()
                                            for a in (arg if isinstance(arg, tuple) else (arg,)) if isinstance(a, str))
            return original(self_, *args, **kwargs)

        ActorMethod._remote = _remote  # type: ignore[method-assign]
        self._undo.append(lambda: setattr(ActorMethod, "_remote", original))

    def install(self) -> None:
        from population.run import Run
        from population.store_file import StoreFile
        from search.engine.loop import SearchLoop
        from search.engine.proposer import Proposer
        from search.mutation.tuning import Tuner
        from search.evaluate.ray_pool import RayPool

        for owner, name, label in ((Tuner, "ask", "optuna ask"), (Tuner, "ask_at", "optuna ask_at"),
                                   (Tuner, "tell", "optuna tell"), (Proposer, "synchronous", "proposer"),
                                   (Run, "tell", "population tell"), (RayPool, "poll", "pool poll"),
                                   (RayPool, "free_slots", "pool free_slots"), (RayPool, "submit", "pool submit"),
                                   (SearchLoop, "_told", "loop told"), (SearchLoop, "_dispatch", "loop dispatch")):
            self.timed(owner, name, label)
        self.commits(StoreFile)
        self.actor_calls()
        probe = self
        original_init, original_told = SearchLoop.__init__, SearchLoop._told

        def init(self_: Any, *args: Any, **kwargs: Any) -> None:
            original_init(self_, *args, **kwargs)
            probe.loop = self_
            probe._mark = (0, time.monotonic(), cpu_s(), 0.0)

        def told(self_: Any, outcome: Any) -> None:
            original_told(self_, outcome)
            evals = self_.stats.evaluations
            if evals % probe.window == 0 and evals > probe._mark[0]:
                probe.close_window()
            if probe.inject_every and evals % probe.inject_every == 0 and evals > probe.injected:
                probe.injected = evals
                probe.inject(evals // probe.inject_every)

        SearchLoop.__init__, SearchLoop._told = init, told  # type: ignore[method-assign]
        self._undo += [lambda: setattr(SearchLoop, "__init__", original_init),
                       lambda: setattr(SearchLoop, "_told", original_told)]

    def inject(self, serial: int) -> None:
        """One new structure per searched family, written by a process of its own as
        ``qrsearch inject`` would (its parsing and screening are not the driver's work)."""
        if self.injector is None:
            self.injector = subprocess.Popen([sys.executable, __file__, "--injector", str(self.loop.run.store.run_dir)],
                                             stdin=subprocess.PIPE, text=True, cwd=ROOT)
        assert self.injector.stdin is not None
        self.injector.stdin.write(f"{serial}\n")
        self.injector.stdin.flush()

    def close_window(self) -> None:
        loop = self.loop
        evals, started, cpu0, driver0 = self._mark
        now, cpu = time.monotonic(), cpu_s()
        n = loop.stats.evaluations - evals
        if n <= 0:
            return
        row: dict[str, Any] = {
            "evaluations": loop.stats.evaluations, "wall_s": round(now - started, 2),
            "evals_per_s": round(n / (now - started), 2), "cpu_ms_per_eval": round(1000 * (cpu - cpu0) / n, 2),
            "loop_ms_per_eval": round(1000 * (loop.stats.driver_s - driver0) / n, 2),
            "rss_mib": round(rss_mib(), 1), "candidates": loop.run.store.count_candidates(),
            "busy": round(loop.pool.stats().mean_busy, 4), "inflight": len(loop.pool.inflight()),
            # Starts by ticket the evaluator could not serve, sent again with their text (so far).
            "resent": sum(slot.resent for slot in getattr(loop.pool, "slots", ())),
            "load1": os.getloadavg()[0]}
        for label, (count, seconds) in self.since.items():
            row[f"{label} ms"] = round(1000 * seconds / count, 3) if count else None
            row[f"{label} calls/eval"] = round(count / n, 2)
        self.windows.append(row)
        self.threads = threads_cpu_s()
        self.since.clear()
        self._mark = (loop.stats.evaluations, now, cpu, loop.stats.driver_s)

    def uninstall(self) -> None:
        for undo in reversed(self._undo):
            undo()
        if self.injector is not None and self.injector.stdin is not None:
            self.injector.stdin.close()
            self.injector.wait(timeout=60)


def injector(run_dir: Path) -> int:
    """The injecting process: for each serial read from stdin, one new structure per searched family."""
    from kernels.families import FAMILIES
    from population.events import EventKind, EventWriter, new_event
    from population.store import RunStore
    from search.cli.human import inspect_source

    with RunStore.open(run_dir, readonly=True) as store:
        config = RunConfig.model_validate_json(store.config_json())
    names = [f.name for f in config.families if not FAMILIES[f.name].baseline]
    for line in sys.stdin:
        serial = int(line)
        with EventWriter(run_dir) as writer:
            for name in names:
                source = FAMILIES[name].source() + f"\n_VARIANT = {serial}  # an edit standing in for an LLM's\n"
                params, fingerprint, _ = inspect_source(source, name)
                writer.append(new_event(EventKind.INJECT, name, "scale benchmark: a new structure",
                                        data={"source": source, "params": params, "fingerprint": fingerprint}))
    return 0


def bench_config(args: argparse.Namespace, gpus: int, runs_dir: Path) -> RunConfig:
    config = RunConfig.from_yaml(args.config)
    data = config.model_dump(mode="json")
    data.update(name=f"scale-{gpus}gpu", runs_dir=str(runs_dir))
    data["evaluation"]["device"] = "simulated"
    data["ray"].update(address=None, gpus=gpus, fake_gpus=0)
    data["simulation"].update(time_scale=args.time_scale)
    if args.trials:
        data["optuna"]["trials_per_structure"] = args.trials
    real_minutes = args.sim_minutes / args.time_scale
    data["budget"].update(max_evals=args.max_evals, max_minutes=real_minutes)
    return RunConfig.model_validate(data)


def processes_cpu_s(pids: list[int]) -> float:
    """User+system seconds of these processes so far (those that ended are not counted)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


def threads_cpu_s() -> dict[str, float]:
    """CPU seconds of this process's threads so far, by name: Python threads by their own (Ray's
    log printer, error listener...), the others by the kernel's (Ray's C++ threads), summed."""
    import threading

    names = {t.native_id: t.name for t in threading.enumerate() if t.native_id is not None}
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = defaultdict(float)
    for task in Path("/proc/self/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        name = names.get(int(task.name)) or "native " + stat[stat.index("(") + 1:stat.rindex(")")]
        out[name] += (int(fields[11]) + int(fields[12])) / tick
    return {name: round(seconds, 2) for name, seconds in sorted(out.items(), key=lambda kv: -kv[1])}


def cluster_cpu_s(cluster: Any) -> float:
    """CPU seconds of the cluster's processes: raylets, GCS, the simulated GPUs' actors."""
    from search.evaluate.simulated.loopback import _pids_matching, _with_descendants

    return processes_cpu_s(_with_descendants(_pids_matching(str(cluster.temp))))


@contextmanager
def cluster_of(gpus: int, nodes: int) -> Iterator[Any]:
    from search.evaluate.simulated.loopback import LoopbackCluster

    cluster = LoopbackCluster()
    try:
        cluster.add_node(num_gpus=0, num_cpus=1)  # the head: the driver's node, no evaluator
        per_node = [gpus // nodes + (1 if i < gpus % nodes else 0) for i in range(min(nodes, gpus))]
        for count in per_node:
            cluster.add_node(num_gpus=count, num_cpus=0)
        yield cluster
    finally:
        cluster.shutdown()


def run_one(args: argparse.Namespace, gpus: int) -> dict[str, Any]:
    import ray
    from rich.console import Console

    from search.run.driver import launch

    runs_dir = args.out / "runs"
    config = bench_config(args, gpus, runs_dir)
    probe = Probe(args.window, args.inject_every)
    probe.install()
    load_before = os.getloadavg()
    with cluster_of(gpus, args.nodes) as cluster:
        console = Console(file=open(os.devnull, "w"))
        started, cpu0 = time.monotonic(), cpu_s()
        profiler = cProfile.Profile() if args.profile else None
        cluster_cpu0 = cluster_cpu_s(cluster)
        try:
            if profiler is not None:
                profiler.enable()
            code = launch(config, address=cluster.address, console=console)
        finally:
            if profiler is not None:
                profiler.disable()
            probe.uninstall()
            cluster_cpu = cluster_cpu_s(cluster) - cluster_cpu0
            ray.shutdown()
        wall, cpu = time.monotonic() - started, cpu_s() - cpu0
    if profiler is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
        profiler.dump_stats(args.profile / f"driver-{gpus}gpu.prof")
    loop = probe.loop
    from population.store import RunStore

    with RunStore.open(config.run_dir, readonly=True) as store:
        util = store.get_json("driver/utilization")
        candidates = store.count_candidates()
    evals = loop.stats.evaluations
    totals = {label: {"calls": int(c), "ms": round(1000 * s / c, 3) if c else None, "calls_per_eval": round(c / evals, 2)}
              for label, (c, s) in probe.total.items()} if evals else {}
    trials = sum(len(s.get_trials(deepcopy=False)) for s in loop.tuner._studies.values())
    return {"gpus": gpus, "exit": code, "evaluations": evals, "wall_s": round(wall, 1),
            "evals_per_s": round(evals / wall, 2), "busy": round(sum(util["evaluator_busy"].values())
                                                                  / max(1, len(util["evaluator_busy"])), 4),
            "busy_min": round(min(util["evaluator_busy"].values(), default=0.0), 4),
            "cpu_ms_per_eval": round(1000 * cpu / max(1, evals), 2),
            "cluster_cpu_s": round(cluster_cpu, 1), "driver_cpu_s": round(cpu, 1),
            "loop_ms_per_eval": round(1000 * loop.stats.driver_s / max(1, evals), 2),
            "rss_mib": round(rss_mib(), 1), "candidates": candidates, "optuna_trials": trials,
            "studies": len(loop.tuner._studies), "structures_injected": probe.injected // max(1, args.inject_every),
            "actor_calls_per_eval": round(sum(row["calls"] for label, row in totals.items()
                                              if label.startswith("actor ")) / max(1, evals), 2),
            "actor_kb_per_eval": {method: round(sent / 1024 / max(1, evals), 1)
                                  for method, sent in sorted(probe.sent_bytes.items()) if sent},
            "time_scale": args.time_scale, "sim_minutes": args.sim_minutes, "nodes": min(args.nodes, gpus),
            "load_before": load_before, "load_after": os.getloadavg(), "stop": loop.stop_requested,
            "threads_cpu_s": probe.threads, "totals": totals, "windows": probe.windows}


def print_profile(path: Path, top: int = 30) -> None:
    stats = pstats.Stats(str(path))
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", default="1,8,64", help="comma-separated GPU counts")
    ap.add_argument("--config", type=Path, default=ROOT / "runs" / "multi-gpu.yaml")
    ap.add_argument("--sim-minutes", type=float, default=10.0)
    ap.add_argument("--time-scale", type=float, default=1.0)
    ap.add_argument("--nodes", type=int, default=4, help="nodes that declare the GPUs (besides the head)")
    ap.add_argument("--max-evals", type=int, default=None)
    ap.add_argument("--trials", type=int, default=None, help="optuna.trials_per_structure (default: the config's)")
    ap.add_argument("--inject-every", type=int, default=300, help="evaluations between injected structures (0: none)")
    ap.add_argument("--window", type=int, default=1000, help="evaluations per growth window")
    ap.add_argument("--profile", type=Path, default=None, help="run the driver under cProfile; stats here")
    ap.add_argument("--out", type=Path, default=Path("/tmp/qrsearch-scale"))
    ap.add_argument("--injector", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.injector is not None:
        return injector(args.injector)
    args.out.mkdir(parents=True, exist_ok=True)
    results = []
    for gpus in [int(g) for g in args.gpus.split(",")]:
        result = run_one(args, gpus)
        results.append(result)
        (args.out / f"scale-{gpus}gpu.json").write_text(json.dumps(result, indent=1))
        summary = {k: v for k, v in result.items() if k not in ("totals", "windows", "threads_cpu_s")}
        print(json.dumps(summary))
        for label, row in sorted(result["totals"].items()):
            print(f"  {label:18s} {row['calls']:>9d} calls  {row['calls_per_eval']:>6.2f}/eval  {row['ms']} ms")
        print("  driver threads, CPU s:", json.dumps(dict(list(result["threads_cpu_s"].items())[:12])))
        if args.profile:
            print_profile(args.profile / f"driver-{gpus}gpu.prof")
    return 0


if __name__ == "__main__":
    sys.exit(main())
