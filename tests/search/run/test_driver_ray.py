"""The Ray driver end to end on local Ray (CPU evaluators, declared fake GPUs, a
multi-node test cluster), with real actors, child processes and the run store."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import ray

from population.consistency import check_consistency
from population.models import State
from population.store import RunStore
from search.config import BudgetConfig, RayConfig
from search.run.driver import RunSession, create_run, execute, launch
from search.mutation.tuning import Tuner
from tests.search.toy_driver import install, toy_config

ROOT = Path(__file__).parents[3]
pytestmark = pytest.mark.slow


def counts(run_dir):
    with RunStore.open(run_dir, readonly=True) as store:
        return int(store.counter("gpu_evaluations")), store.list_candidates(), check_consistency(store, deep=True)


def test_cpu_evaluators_end_to_end(tmp_path):
    install()
    config = toy_config(tmp_path, budget=BudgetConfig(max_evals=6, max_minutes=5))
    assert launch(config) == 0
    evals, cands, problems = counts(config.run_dir)
    assert evals == 6 and problems == []
    # The toy's knobs do not change its work, so the screen may stop a child on CPU timing
    # noise (state screened): a finished evaluation too, never a failure.
    assert sum(c.state in (State.VERIFIED, State.SCREENED) for c in cands) == 6
    assert all(c.state in (State.VERIFIED, State.SCREENED, State.PENDING) for c in cands)
    assert all(c.state is State.VERIFIED for c in cands if not c.parent_ids)
    assert (config.run_dir / "optuna.journal").exists() and (config.run_dir / "config.yaml").exists()

    from search.cli.run import run_status

    status = run_status(config.run_dir)
    assert status["evaluations"] == 6 and status["state"] == "finished"
    assert status["best"]["toy"]["speedup"] > 0 and status["baseline_geomean_ms"] > 0
    assert set(status["busy_fraction"]) == {"cpu0"}
    seconds = status["seconds_per_evaluation"]
    assert seconds["total"] >= seconds["verify"] + seconds["bench"] > 0
    assert seconds["bench"] >= seconds["rechecks"] > 0
    with RunStore.open(config.run_dir, readonly=True) as store:
        assert status["best"]["toy"]["candidate"] == store.current_champion_ids()["toy"]
        util = store.get_json("driver/utilization")
    assert util["evaluations"] == 6 and util["driver_seconds_per_evaluation"] > 0
    # A run directory is never overwritten.
    from search.run.driver import DriverError

    with pytest.raises(DriverError, match="already exists"):
        launch(config)


def test_one_actor_per_declared_gpu(tmp_path):
    install()
    config = toy_config(tmp_path, budget=BudgetConfig(max_evals=8, max_minutes=5),
                        ray=RayConfig(fake_gpus=2, cpus_per_evaluator=0.5))
    assert launch(config) == 0
    with RunStore.open(config.run_dir, readonly=True) as store:
        status = store.get_json("driver/status")
        results = [store.get_result(c.id) for c in store.list_candidates()]
    assert set(status["busy_fraction"]) == {"gpu0", "gpu1"}
    assert all(r is not None for r in results)


def _after_each_step(monkeypatch, hook):
    """Run ``hook(loop)`` after every step of the real loop (to break things mid-run)."""
    import search.engine.loop as loop_module

    original = loop_module.SearchLoop.step

    def step(self, timeout=0.2):
        original(self, timeout)
        hook(self)

    monkeypatch.setattr(loop_module.SearchLoop, "step", step)


def _session(config, max_evals):
    run = create_run(config)
    return RunSession(config=config, run=run, run_dir=config.run_dir, max_evals=max_evals, max_minutes=5)


def test_killed_evaluator_requeues_its_work_and_blames_nobody(tmp_path, monkeypatch):
    install(slow=True)
    config = toy_config(tmp_path, budget=BudgetConfig(max_evals=5, max_minutes=5),
                        ray=RayConfig(cpu_evaluators=1, cpus_per_evaluator=1.0))
    session = _session(config, 5)
    killed = []

    def kill(loop):
        if not killed and loop.pool.inflight() and loop.stats.evaluations >= 1:
            time.sleep(1.0)  # mid-evaluation
            os.kill(loop.pool.actor_pids()["cpu0"], signal.SIGKILL)
            killed.append(loop.pool.inflight()[0])

    _after_each_step(monkeypatch, kill)
    assert execute(session, None, _console()) == 0
    evals, cands, problems = counts(config.run_dir)
    assert killed and problems == []
    victim = next(c for c in cands if c.id == killed[0])
    assert victim.state is State.VERIFIED  # re-queued on the restarted actor, not blamed
    assert evals == 5


def test_removed_node_requeues_work(tmp_path, monkeypatch):
    from ray.cluster_utils import Cluster

    install(slow=True)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    worker = cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    config = toy_config(tmp_path, budget=BudgetConfig(max_evals=4, max_minutes=5),
                        ray=RayConfig(cpu_evaluators=2, cpus_per_evaluator=1.0))
    session = _session(config, 4)
    removed = []

    def remove(loop):
        if not removed and len(loop.pool.inflight()) == 2:
            time.sleep(1.0)
            cluster.remove_node(worker)
            removed.append(True)

    _after_each_step(monkeypatch, remove)
    try:
        assert execute(session, cluster.address, _console()) == 0
    finally:
        ray.shutdown()
        cluster.shutdown()
    evals, cands, problems = counts(config.run_dir)
    assert removed and problems == [] and evals == 4
    assert not any(c.state is State.CRASHED for c in cands)


def test_a_run_whose_only_node_leaves_stops_resumable_with_exit_code_1(tmp_path, monkeypatch):
    from ray.cluster_utils import Cluster

    install(slow=True)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})  # the driver's node: no evaluator
    worker = cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    config = toy_config(tmp_path, budget=BudgetConfig(max_evals=20, max_minutes=5),
                        ray=RayConfig(cpu_evaluators=1, cpus_per_evaluator=1.0, no_evaluator_minutes=0.05))
    session = _session(config, 20)
    removed = []

    def remove(loop):
        if not removed and loop.stats.evaluations >= 1 and loop.pool.inflight():
            time.sleep(1.0)
            cluster.remove_node(worker)
            removed.append(time.monotonic())

    _after_each_step(monkeypatch, remove)
    try:
        assert execute(session, cluster.address, _console()) == 1
        ended = time.monotonic()
    finally:
        ray.shutdown()
        cluster.shutdown()
    assert removed and ended - removed[0] < 120  # 3 s without an evaluator, then the stop (not 5 min)
    evals, cands, problems = counts(config.run_dir)
    assert problems == [] and 1 <= evals < 20
    assert any(c.state is State.PENDING for c in cands) and not any(c.state is State.CRASHED for c in cands)
    from search.cli.run import run_status

    assert run_status(config.run_dir)["state"] == "stopped"


def test_sigkill_driver_then_resume_continues(tmp_path, own_ray):
    run_dir = tmp_path / "killed"
    env = own_ray.env(dict(os.environ, PYTHONPATH=str(ROOT)))
    proc = subprocess.Popen([sys.executable, "-m", "tests.search.toy_driver", str(run_dir), "launch", "40"],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + 240
    done = 0
    while time.monotonic() < deadline:
        time.sleep(1)
        if (run_dir / "run.sqlite").exists():
            try:
                done = counts(run_dir)[0]
            except Exception:
                continue
            if done >= 3:
                break
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    own_ray.reap()  # the killed driver's local Ray (raylet, GCS) outlives it
    assert done >= 3
    before, cands_before, problems = counts(run_dir)
    assert problems == []
    studies_before = Tuner(run_dir / "optuna.journal").trials_used("toy", cands_before[1].fingerprint)
    result = subprocess.run([sys.executable, "-m", "tests.search.toy_driver", str(run_dir), "resume", "3"],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    after, cands, problems = counts(run_dir)
    assert problems == []
    assert after == before + 3
    assert len({c.id for c in cands}) == len(cands)
    assert all(c.state.is_terminal or c.state is State.PENDING for c in cands)
    assert Tuner(run_dir / "optuna.journal").trials_used("toy", cands[1].fingerprint) >= studies_before
    assert journal_problems(run_dir) == []


def journal_problems(run_dir):
    """Where the Optuna journal disagrees with the run store (empty: a faithful record)."""
    import optuna
    from optuna.trial import TrialState

    from search.engine.proposer import TRIAL_KEY
    from search.mutation.tuning import TRIAL_ATTR_CANDIDATE, TRIAL_ATTR_DUPLICATE, TRIAL_ATTR_LOST, TRIAL_ATTR_SEED

    storage = Tuner(run_dir / "optuna.journal").storage
    problems = []
    with RunStore.open(run_dir, readonly=True) as store:
        by_id = {c.id: c for c in store.list_candidates()}
        trial_of = {cid: store.get_json(TRIAL_KEY.format(cid=cid)) for cid in by_id}
    trials = {}
    for summary in storage.get_all_studies():
        for t in optuna.load_study(study_name=summary.study_name, storage=storage).get_trials():
            trials[(summary.study_name, t.number)] = t
            cid = t.user_attrs.get(TRIAL_ATTR_CANDIDATE)
            cand = by_id.get(cid) if cid else None
            where = f"{summary.study_name}#{t.number}"
            if t.state == TrialState.FAIL:
                if not (t.user_attrs.get(TRIAL_ATTR_LOST) or (cand is not None and cand.state.is_failure)):
                    problems.append(f"{where}: FAIL without a failed candidate or a lost mark")
            elif t.state == TrialState.COMPLETE:
                if cand is None or cand.state is not State.VERIFIED or cand.fitness_ms != t.value:
                    problems.append(f"{where}: COMPLETE {t.value} but candidate {cid} is "
                                    f"{cand and cand.state.value} {cand and cand.fitness_ms}")
            elif t.state == TrialState.RUNNING:
                if cand is None or cand.state.is_terminal:
                    problems.append(f"{where}: RUNNING for {cid} ({cand and cand.state.value})")
            elif t.state != TrialState.PRUNED:
                problems.append(f"{where}: left {t.state.name}")
            if cid and cand is None:
                problems.append(f"{where}: names {cid}, which the store does not hold")
            if t.number == 0 and not t.user_attrs.get(TRIAL_ATTR_SEED):
                problems.append(f"{where}: the first trial is not the told seed point")
            if t.user_attrs.get(TRIAL_ATTR_DUPLICATE) is not None and t.state == TrialState.FAIL \
                    and not (cand is not None and cand.state.is_failure):
                problems.append(f"{where}: a repeated point told FAIL")
    # Every Optuna child in the store has its trial, in the state its candidate ended.
    for cid, key in trial_of.items():
        if key and (key["study"], key["number"]) not in trials:
            problems.append(f"{cid}: its trial {key} is missing from the journal")
        elif key and trials[(key["study"], key["number"])].user_attrs.get(TRIAL_ATTR_CANDIDATE) != cid:
            problems.append(f"{cid}: its trial {key} names another candidate")
    return problems


def _console():
    from rich.console import Console

    return Console(file=open(os.devnull, "w"))
