"""A simulated search on a loopback cluster of two Ray nodes (``ray start --num-gpus=4`` each, on
127.0.0.1) declaring 8 GPUs between them: the real driver, pool, store and Optuna, the GPU work
simulated.  Every simulated GPU gets work; a
node that leaves takes its evaluations with it, and they are queued again, nobody blamed; a
resume continues the run."""

from __future__ import annotations

import os
import time

import pytest

from population.consistency import check_consistency
from population.models import State
from population.store import RunStore
from search.config import BudgetConfig, EvaluationConfig, FamilySpec, RayConfig, RunConfig, SimulationConfig
from search.run.driver import RunSession, create_run, execute, resume

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow

FAMILIES = ["householder_unblocked", "cuda_onchip", "cuda_blocked"]


def simulated_config(runs_dir, evals: int) -> RunConfig:
    # Time runs 5x: an evaluation holds its simulated GPU for 0.2-1.6 s, the reference for 6 s.
    return RunConfig(name="sim-cluster", runs_dir=str(runs_dir), seed=3,
                     families=[FamilySpec(name=n, islands=1, island_size=4) for n in FAMILIES],
                     evaluation=EvaluationConfig(device="simulated", compile_ahead=1, compile_ahead_max=2),
                     budget=BudgetConfig(max_evals=evals, max_minutes=6), ray=RayConfig(no_evaluator_minutes=1),
                     simulation=SimulationConfig(time_scale=5.0))


def _console():
    from rich.console import Console

    return Console(file=open(os.devnull, "w"))


def _node_id(manager_port: int) -> str:
    return next(n["NodeID"] for n in ray.nodes() if n["NodeManagerPort"] == manager_port and n["Alive"])


def test_a_simulated_search_on_two_nodes_survives_losing_one_and_resumes(tmp_path, monkeypatch):
    import search.engine.loop as loop_module
    from search.evaluate.simulated.loopback import LoopbackCluster

    cluster = LoopbackCluster()
    seen: dict = {}
    original = loop_module.SearchLoop.step

    def step(self, timeout=0.2):
        original(self, timeout)
        slots = self.pool.slots
        if "removed" in seen or len(slots) != 8 or any(s.evaluations == 0 for s in slots):
            return
        gone = _node_id(leaving.manager_port)
        on_node = [f.request.candidate_id for f in self.pool._flights.values() if f.slot.node == gone]
        if not on_node:
            return
        seen.update(worked={s.name: s.evaluations for s in slots}, lost=on_node,
                    nodes={s.node for s in slots}, gone=gone, head=_node_id(head.manager_port),
                    gone_slots={s.name for s in slots if s.node == gone})
        cluster.kill_node(leaving)
        seen["removed"] = time.monotonic()

    try:
        head = cluster.add_node(num_gpus=4, num_cpus=1)  # `ray start --head --num-gpus=4`
        leaving = cluster.add_node(num_gpus=4, num_cpus=1)  # `ray start --address=... --num-gpus=4`
        config = simulated_config(tmp_path, 64)
        session = RunSession(config=config, run=create_run(config), run_dir=config.run_dir, max_evals=64,
                             max_minutes=6)
        monkeypatch.setattr(loop_module.SearchLoop, "step", step)
        assert execute(session, cluster.address, _console()) == 0
        monkeypatch.setattr(loop_module.SearchLoop, "step", original)
        # Every one of the 8 simulated GPUs, on both nodes, had finished work before the node left.
        assert "removed" in seen and len(seen["worked"]) == 8 and min(seen["worked"].values()) >= 1
        assert seen["nodes"] == {seen["gone"], seen["head"]}
        with RunStore.open(config.run_dir, readonly=True) as store:
            assert int(store.counter("gpu_evaluations")) == 64 and check_consistency(store, deep=True) == []
            cands = {c.id: c for c in store.list_candidates()}
            util = store.get_json("driver/utilization")
        # What ran on the node that left was queued again and finished elsewhere; nobody was blamed.
        # (A duel in flight there is no candidate: it goes back to the duels' queue.)
        assert all(cands[cid].state in (State.VERIFIED, State.SCREENED) for cid in seen["lost"] if cid in cands)
        assert not any(c.state.is_failure for c in cands.values())
        assert len(util["evaluator_busy"]) == 8
        # Evaluations were lost with the node, and only on its evaluators (also those started there
        # in the second or two before its death was seen); each was queued again.
        log = (config.run_dir / "driver.log").read_text()
        lost = [line.split(" lost: ")[1].split()[0].rstrip(":") for line in log.splitlines() if " lost: " in line]
        assert lost and set(lost) <= seen["gone_slots"] and len(seen["gone_slots"]) == 4

        cluster.add_node(num_gpus=4, num_cpus=1)  # the cluster heals; the run goes on where it stopped
        assert resume(config.run_dir, max_evals=12, address=cluster.address, console=_console()) == 0
        with RunStore.open(config.run_dir, readonly=True) as store:
            assert int(store.counter("gpu_evaluations")) == 76 and check_consistency(store, deep=True) == []
            assert len(store.get_json("driver/sessions")) == 2
            assert store.get_json("driver/status")["state"] == "finished"
    finally:
        ray.shutdown()
        cluster.shutdown()


def test_launch_simulate_makes_a_dry_run_of_the_config():
    from search.cli.run import _with_overrides, simulate_overrides
    from search.config import default_config

    local = _with_overrides(default_config(cuda=True), **simulate_overrides(64, None))
    assert local.evaluation.device == "simulated" and local.ray.fake_gpus == 64
    assert local.evaluation.bench_suite == "qrv2-bench"  # the GPU suites: their cases have recorded times
    cluster = _with_overrides(default_config(cuda=True), **simulate_overrides(8, "auto"))
    assert cluster.evaluation.device == "simulated" and cluster.ray.gpus == 8 and cluster.ray.fake_gpus == 0
    assert simulate_overrides(None, None) == {}


def test_loopback_nodes_authenticate_as_the_process_that_connects_to_them(monkeypatch):
    # A local ray.init() turns token authentication on for the rest of its process (it sets
    # RAY_AUTH_MODE=token): a driver in token mode refuses the calls of workers started without it,
    # and its actors on the loopback nodes were never created.
    import shutil

    from search.evaluate.simulated.loopback import LoopbackCluster

    cluster = LoopbackCluster()
    try:
        monkeypatch.setenv("RAY_AUTH_MODE", "token")
        monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")
        env = cluster._env()
        assert env["RAY_AUTH_MODE"] == "token" and "RAY_ADDRESS" not in env
        monkeypatch.delenv("RAY_AUTH_MODE")
        assert cluster._env()["RAY_AUTH_MODE"] == "disabled"  # a head would turn it on by itself
    finally:
        shutil.rmtree(cluster.temp, ignore_errors=True)
