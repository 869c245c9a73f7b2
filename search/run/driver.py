"""The driver: Ray, evaluator actors, the run store, Optuna, the LLM, and the loop.

``launch`` starts a run from a RunConfig; ``resume`` continues one from its
directory.  SIGINT/SIGTERM stop cleanly: no new work is started, in-flight
evaluations get a grace period to finish (what does not finish stays queued
for ``resume``), the store is closed.  A second signal stops at once; the
store is still consistent because every change is its own transaction.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from rich.console import Console
from rich.live import Live

import kernels.families as registry
from kernels.suites import get_suite
from population.errors import RunStoreError
from population.models import State
from population.records import SESSIONS_KEY, UTILIZATION_KEY, C, Session, Utilization, dump
from population.rng import derived_rng
from population.run import Run
from search.evaluate.placement import evaluator_env
from search.config import ConfigError, RunConfig
from search.engine.domains import describe_domains
from search.engine.llm import LLMClient, LLMPool
from search.engine.loop import SearchLoop
from search.engine.proposer import seed_children
from search.run.budget import budget_progress, describe_budget
from search.numbers import CPU_CAVEAT, busy as describe_busy, ms as fmt_ms, speedup as fmt_speedup
from search.pipes import pipe_safe
from search.run.progress import best_per_family, describe_search, render
from search.inspect.eval_seconds import describe_evaluation_seconds, evaluation_seconds
from search.run_dirs import LATEST, point_latest
from search.mutation.tuning import KnownOutcome, Tuner

CONFIG_FILE = "config.yaml"
LOG_FILE = "driver.log"
OPTUNA_FILE = "optuna.journal"
SIMULATED_CAVEAT = ("simulated GPUs: every time above comes from a synthetic landscape and a recorded run's delays, "
                    "not from a measurement")


class DriverError(RuntimeError):
    """A run cannot start or continue; the message says what to do."""


@dataclass
class RunSession:
    config: RunConfig
    run: Run
    run_dir: Path
    max_evals: int | None
    max_minutes: float | None


def _logger(run_dir: Path, console: Console) -> Callable[[str], None]:
    path = run_dir / LOG_FILE

    def log(message: str) -> None:
        # The file first: a closed stdout (a pipe whose reader died) must not cost the record.
        with path.open("a", encoding="utf-8") as handle:
            handle.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {message}\n")
        console.print(f"[dim]{time.strftime('%H:%M:%S')}[/] {message}")

    return log


def _init_ray(config: RunConfig, address: str | None) -> None:
    import ray

    address = address or config.ray.address or os.environ.get("RAY_ADDRESS")
    kwargs: dict = {"include_dashboard": False, "logging_level": "WARNING", "log_to_driver": config.ray.log_to_driver}
    try:
        if address:
            ray.init(address=address, **kwargs)
        else:
            if config.ray.fake_gpus:
                kwargs["num_gpus"] = config.ray.fake_gpus
            # "local": start a Ray of our own.  A plain ray.init() first looks for a running cluster
            # through /tmp/ray/ray_current_cluster, and hangs on one that file names but is gone.
            ray.init(address="local", **kwargs)
    except Exception as exc:  # noqa: BLE001 - Ray raises a bare Exception when its node times out
        where = f"the Ray cluster at {address}" if address else "a local Ray instance"
        raise DriverError(f"could not start or reach {where}: {' '.join(str(exc).split())}; the run is "
                          "unchanged, try again (or `qrsearch resume`)") from None


def _evaluators(config: RunConfig) -> tuple[int, bool]:
    """(GPU evaluators, interpret Triton on CPU)."""
    import ray

    seen = int(ray.cluster_resources().get("GPU", 0))
    gpus = seen if config.ray.gpus is None else min(config.ray.gpus, seen)
    if config.evaluation.device == "simulated":
        return gpus, False
    if config.evaluation.device == "cpu" and not config.ray.fake_gpus:
        gpus = 0
    return gpus, gpus == 0 or config.ray.fake_gpus > 0


def _check_device(config: RunConfig, gpus: int, interpret: bool) -> None:
    if config.evaluation.device == "simulated":
        _check_simulation(config, gpus)
        return
    on_cpu = gpus == 0 or interpret
    if on_cpu and (config.evaluation.bench_suite.startswith("qrv2") or config.evaluation.verify_suite.startswith("qrv2")):
        raise DriverError(
            f"no GPU is available, but this config times the GPU suites ({config.evaluation.verify_suite}, "
            f"{config.evaluation.bench_suite}); use runs/smoke.yaml or set evaluation.verify_suite/bench_suite "
            "to smoke/smoke-bench")


def _check_simulation(config: RunConfig, gpus: int) -> None:
    """A simulated run needs declared GPUs, and recorded times for its families and bench cases."""
    from search.evaluate.simulated.recorded import load

    if gpus == 0:
        raise DriverError("evaluation.device is simulated, but Ray sees no GPU: declare some (`qrsearch launch "
                          "--simulate N` locally, `ray start --num-gpus=N` on a cluster's nodes)")
    try:
        model = load(config.simulation.model)
    except ValueError as exc:
        raise DriverError(f"simulation.model: {exc}") from None
    missing = [f.name for f in config.families if f.name not in model.families]
    unknown = [c.name for c in get_suite(config.evaluation.bench_suite) if c.name not in model.reference_ms]
    if missing or unknown:
        raise DriverError(f"the simulation model {model.name} has no recorded times for "
                          + "; ".join(part for part in (f"families {missing}" if missing else "",
                                                        f"bench cases {unknown}" if unknown else "") if part)
                          + f" (it knows families {sorted(model.families)} on suite qrv2-bench)")


def create_run(config: RunConfig, families: Mapping[str, Any] | None = None) -> Run:
    """A new run directory with its store, the config, and the seed candidates queued."""
    families = registry.FAMILIES if families is None else families
    run_dir = config.run_dir
    if run_dir.exists() and any(run_dir.iterdir()):
        raise DriverError(f"{run_dir} already exists; continue it with `qrsearch resume {run_dir}` "
                          "or choose another --name")
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / CONFIG_FILE).write_text(config.to_yaml(), encoding="utf-8")
    run = Run.create(run_dir, config.to_population_config(), config.model_dump_json())
    seeds = seed_children(config, families, derived_rng(config.seed, "seeds"))
    run.add_candidates(seeds)
    return run


def open_run(run_dir: Path) -> tuple[RunConfig, Run]:
    try:
        run = Run.open(run_dir)
    except RunStoreError as exc:
        raise DriverError(str(exc)) from None
    try:
        config = RunConfig.model_validate_json(run.store.config_json())
    except Exception as exc:
        run.close()
        raise DriverError(f"{run_dir}: the stored run config no longer validates: {exc}") from None
    return config, run


def execute(session: RunSession, address: str | None, console: Console, grace_s: float = 60.0) -> int:
    """Run the loop until a budget, a signal or exhaustion stops it.  Returns an exit code."""
    import ray

    from search.engine.pool import queue_depths
    from search.evaluate.ray_pool import RayPool, Simulation

    config, run, run_dir = session.config, session.run, session.run_dir
    pipe_safe(console)
    log = _logger(run_dir, console)
    _init_ray(config, address)
    signals = {"count": 0, "first": 0}
    loop: SearchLoop | None = None
    pool = None
    llm = None
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}

    def on_signal(signum: int, _frame: object) -> None:
        signals["count"] += 1
        signals["first"] = signals["first"] or signum
        name = signal.Signals(signum).name
        if signals["count"] >= 2 or loop is None:
            raise KeyboardInterrupt(f"second {name}: stopping now")
        # The reason stays true once the run has stopped (status shows it); the advice is for now.
        loop.request_stop(f"{name} received")
        log(f"finishing the evaluations in flight; send {name} again to stop at once")

    for sig in previous:
        signal.signal(sig, on_signal)
    try:
        gpus, interpret = _evaluators(config)
        _check_device(config, gpus, interpret)
        simulated = config.evaluation.device == "simulated"
        evaluators = gpus if gpus > 0 else config.ray.cpu_evaluators
        lookahead, room_lookahead = queue_depths(evaluators, config.evaluation.compile_ahead,
                                                 config.evaluation.compile_ahead_max,
                                                 config.evaluation.compile_ahead_total)
        simulation = Simulation(settings=config.simulation, seed=config.seed) if simulated else None
        pool = RayPool(workdir=run_dir / "work", gpus=gpus, cpu_evaluators=config.ray.cpu_evaluators,
                       # A simulated GPU uses no CPU to speak of: it must not keep others from being placed.
                       cpus_per_evaluator=0.0 if simulated else config.ray.cpus_per_evaluator,
                       simulation=simulation, output_to_files=not config.ray.log_to_driver,
                       env_extra=evaluator_env(run_dir, interpret), lanes=config.evaluation.lanes,
                       lookahead=lookahead, room_lookahead=room_lookahead,
                       max_lookahead=config.evaluation.compile_ahead_max,
                       hold_for_ready=config.evaluation.hold_for_ready and config.evaluation.compile_ahead > 0,
                       anticipate=config.evaluation.compile_before_need)
        kind = f"{gpus} GPU evaluator(s)" if gpus else f"{pool.size} CPU evaluator(s) (Triton interpreter)"
        if simulated:
            kind = (f"{gpus} simulated GPU evaluator(s) (delays from {config.simulation.model}, times from its "
                    f"synthetic landscape, time scale {config.simulation.time_scale:g})")
        kind += f", {config.evaluation.lanes} lane(s) each, {lookahead} queued (up to {room_lookahead} with compile room)"
        log(f"run {run_dir}: {kind}; families {', '.join(f.name for f in config.families)}")
        if config.evaluation.family_domains:
            searched = {f.name: registry.FAMILIES[f.name] for f in config.families}
            log("timed on its domain: " + "; ".join(describe_domains(searched, list(get_suite(config.evaluation.bench_suite)))))
        log(describe_budget(session.max_evals, session.max_minutes))
        if config.llm.enabled:
            llm = LLMPool(LLMClient(config.llm))
            log(f"LLM mutation on: {config.llm.base_url} ({', '.join(m.name for m in config.llm.models)})")
        else:
            from search.mutation import operators

            immediate = [name for name, op in operators.registry().items()
                         if not op.needs_llm and name in config.mutation.weights]
            log(f"LLM mutation is off (no llm.base_url/models configured): {', '.join(immediate)} only")
        tuner = Tuner(run_dir / OPTUNA_FILE, config.optuna.sampler, config.seed, config.optuna.trials_per_structure)
        settled = tuner.reconcile(lambda cid: _known_outcome(run, cid))
        if settled:
            log(f"optuna: settled {settled} trial(s) left running by the previous session")
        loop = SearchLoop(config, run, pool, tuner, registry.FAMILIES, llm=llm, log=log, max_evals=session.max_evals,
                          max_minutes=session.max_minutes)
        _record_session(run, address)
        stop_at: list[float] = []

        with Live(render(loop, run_dir.name), console=console, refresh_per_second=2, transient=False) as live:
            rendered = [time.monotonic()]

            def tick() -> None:
                # The panel refreshes twice a second: rendering it after every step (each finished
                # evaluation, at 64 GPUs dozens a second) cost more than the refreshes use.
                if time.monotonic() - rendered[0] >= 0.5:
                    live.update(render(loop, run_dir.name))
                    rendered[0] = time.monotonic()
                loop.write_status()
                if loop.stop_requested and not stop_at:
                    stop_at.append(time.monotonic() + grace_s)
                if stop_at and time.monotonic() > stop_at[0] and loop.pool.inflight_count():
                    log(f"grace period over: {loop.pool.inflight_count()} evaluations stay queued for resume")
                    raise _Abandon()

            try:
                loop.run_until_done(on_tick=tick)
            except _Abandon:
                loop.write_status("stopped")
            live.update(render(loop, run_dir.name))  # the last frame shows the end
        if not console.is_terminal:
            console.line()  # the last frame of a non-terminal Live ends without a newline
        if signals["first"]:
            # A signal ended the session: the run is stopped (resumable), not finished.
            loop.write_status("stopped")
            log(f"stopped by {signal.Signals(signals['first']).name}; resume with `qrsearch resume {run_dir}`")
        _record_utilization(loop, pool, log)
        _summary(loop, console, run_dir)
        if interpret:
            console.print(f"[yellow]{CPU_CAVEAT}[/]")
        if simulated:
            console.print(f"[yellow]{SIMULATED_CAVEAT}[/]")
        if signals["first"]:
            return 128 + signals["first"]
        return 1 if loop.end_state == "stopped" else 0  # stopped without a signal: the evaluators are gone
    except KeyboardInterrupt as exc:
        console.print(f"[yellow]{exc or 'interrupted'}[/]; the store is consistent, resume with "
                      f"`qrsearch resume {run_dir}`")
        if loop is not None:
            try:
                loop.write_status("interrupted")
                log(f"interrupted: {exc or 'KeyboardInterrupt'}")
            except Exception:
                pass
        return 128 + (signals["first"] or signal.SIGINT)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if llm is not None:
            llm.shutdown()
        if pool is not None:
            try:
                pool.shutdown()
            except Exception:
                pass
        if loop is not None:
            loop.tuner.flush()
        _end_session(run)
        run.close()
        ray.shutdown()


def _known_outcome(run: Run, cid: str) -> KnownOutcome | None:
    cand = run.store.find_candidate(cid)
    if cand is None:
        return None
    return KnownOutcome(finished=cand.state.is_terminal,
                        value=cand.fitness_ms if cand.state is State.VERIFIED else None)


class _Abandon(Exception):
    pass


def _record_utilization(loop: SearchLoop, pool: Any, log: Callable[[str], None]) -> None:
    """Evaluator busy fraction (time with a candidate in flight) and, where NVML exists, the
    GPU's own utilisation over the actor's life; both go to the store and the log."""
    stats = pool.stats()
    util = pool.utilization()
    per_eval = loop.stats.driver_s / loop.stats.evaluations if loop.stats.evaluations else None
    record = Utilization(evaluator_busy=stats.busy_fraction, gpu_utilization=util,
                         driver_seconds_per_evaluation=per_eval, evals_per_minute=loop.stats.evals_per_minute(),
                         evaluations=loop.stats.evaluations)
    loop.run.set_json(UTILIZATION_KEY, dump(record))
    busy = describe_busy(stats.busy_fraction)
    gpu = ", ".join(f"{k} {100 * v:.0f}%" for k, v in util.items() if v is not None) or "n/a (no NVML)"
    log(f"evaluator busy: {busy}; GPU utilisation (NVML): {gpu}; driver overhead "
        f"{'-' if per_eval is None else f'{1000 * per_eval:.1f} ms'}/evaluation")
    log(describe_evaluation_seconds(evaluation_seconds(loop.run.store)))


def _record_session(run: Run, address: str | None) -> None:
    sessions = run.store.get_json(SESSIONS_KEY, []) or []
    sessions.append(dump(Session(pid=os.getpid(), host=socket.gethostname(), started=time.time(),
                                 address=address or "local")))
    run.set_json(SESSIONS_KEY, sessions)


def _end_session(run: Run) -> None:
    """Stamp the session's end, so that ``status`` counts session time, not the gaps between."""
    try:
        sessions = run.store.get_json(SESSIONS_KEY, []) or []
        if sessions and sessions[-1].get("pid") == os.getpid() and "ended" not in sessions[-1]:
            sessions[-1]["ended"] = time.time()
            run.set_json(SESSIONS_KEY, sessions)
    except Exception:  # a second signal mid-write: the session simply has no end stamp
        pass


def _summary(loop: SearchLoop, console: Console, run_dir: Path) -> None:
    console.print(f"[bold]done[/]: {loop.stats.evaluations} evaluations this session "
                  f"({loop.stats.evals_per_minute():.1f}/min); stop: {loop.stop_requested}")
    console.print(budget_progress(loop))
    console.print(describe_search(loop.run.store), highlight=False)
    for name, cid, ms, speed, evals in best_per_family(loop):
        console.print(f"  {name:24s} {cid:10s} {fmt_ms(ms, unit=True):>12s} {fmt_speedup(speed):>10s}  {evals} evals")
    latest = run_dir.parent / LATEST
    also = f" (also {latest})" if latest.is_symlink() and latest.resolve() == run_dir.resolve() else ""
    console.print(f"run: {run_dir}{also}", highlight=False)
    console.print(f"inspect: qrsearch status {run_dir} | qrsearch lineage {run_dir} | qrsearch champions {run_dir} | "
                  f"qrsearch resume {run_dir} --max-evals N", highlight=False)


def launch(config: RunConfig, address: str | None = None, console: Console | None = None) -> int:
    console = console or Console()
    run = create_run(config)
    point_latest(config.run_dir)
    session = RunSession(config=config, run=run, run_dir=config.run_dir, max_evals=config.budget.max_evals,
                      max_minutes=config.budget.max_minutes)
    return execute(session, address, console)


def resume(run_dir: Path, max_evals: int | None = None, max_minutes: float | None = None,
           address: str | None = None, console: Console | None = None) -> int:
    console = console or Console()
    config, run = open_run(run_dir)
    done = int(run.store.counter(C.GPU_EVALUATIONS))
    budget = done + max_evals if max_evals is not None else config.budget.max_evals
    session = RunSession(config=config, run=run, run_dir=Path(run_dir), max_evals=budget,
                      max_minutes=max_minutes if max_minutes is not None else config.budget.max_minutes)
    console.print(f"resuming {run_dir}: {done} evaluations so far" +
                  (f", up to {budget}" if budget is not None else ""))
    return execute(session, address, console)


__all__ = ["ConfigError", "DriverError", "launch", "resume", "create_run", "open_run"]
