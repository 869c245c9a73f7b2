"""A simulated search on a loopback cluster of two Ray nodes declaring 8 GPUs between them: the
real driver, pool, store and Optuna, the GPU work simulated.  Every simulated GPU gets work; a
node that leaves takes its evaluations with it, and they are queued again, nobody blamed; a
resume continues the run."""

from __future__ import annotations

import os
import time

import pytest

from population.models import State
from population.store import RunStore
from search.config import BudgetConfig, EvaluationConfig, FamilySpec, RayConfig, RunConfig, SimulationConfig
from search.evaluate.driver import RunSession, create_run, execute, resume

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow

FAMILIES = ["householder_unblocked", "cuda_onchip", "cuda_blocked"]


def simulated_config(runs_dir, evals: int) -> RunConfig:
    # Time runs 10x: an evaluation holds its simulated GPU for 0.1-0.8 s, the reference for 3 s.
    return RunConfig(name="sim-cluster", runs_dir=str(runs_dir), seed=3,
                     families=[FamilySpec(name=n, islands=1, island_size=4) for n in FAMILIES],
                     evaluation=EvaluationConfig(device="simulated", compile_ahead=1, compile_ahead_max=2),
                     budget=BudgetConfig(max_evals=evals, max_minutes=6), ray=RayConfig(no_evaluator_minutes=1),
                     simulation=SimulationConfig(time_scale=10.0))


def _console():
    from rich.console import Console

    return Console(file=open(os.devnull, "w"))


def test_a_simulated_search_on_two_nodes_survives_losing_one_and_resumes(tmp_path, monkeypatch):
    from ray.cluster_utils import Cluster

    import search.engine.loop as loop_module

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "num_gpus": 4})
    leaving = cluster.add_node(num_cpus=1, num_gpus=4)
    cluster.wait_for_nodes()
    config = simulated_config(tmp_path, 48)
    run = create_run(config)
    seen: dict = {}
    original = loop_module.SearchLoop.step

    def step(self, timeout=0.2):
        original(self, timeout)
        slots = self.pool.slots
        if "removed" in seen or len(slots) != 8 or any(s.evaluations == 0 for s in slots):
            return
        on_node = [f.request.candidate_id for f in self.pool._flights.values() if f.slot.node == leaving.node_id]
        if not on_node:
            return
        seen.update(worked={s.name: s.evaluations for s in slots}, lost=on_node,
                    nodes={s.node for s in slots}, lost_before=self.stats.lost)
        cluster.remove_node(leaving)
        seen["removed"] = time.monotonic()

    monkeypatch.setattr(loop_module.SearchLoop, "step", step)
    try:
        session = RunSession(config=config, run=run, run_dir=config.run_dir, max_evals=48, max_minutes=6)
        assert execute(session, cluster.address, _console()) == 0
        monkeypatch.setattr(loop_module.SearchLoop, "step", original)
        # Every one of the 8 simulated GPUs, on both nodes, had finished work before the node left.
        assert "removed" in seen and len(seen["worked"]) == 8 and min(seen["worked"].values()) >= 1
        assert seen["nodes"] == {leaving.node_id, cluster.head_node.node_id}
        with RunStore.open(config.run_dir, readonly=True) as store:
            assert int(store.counter("gpu_evaluations")) == 48 and store.check_consistency(deep=True) == []
            cands = {c.id: c for c in store.list_candidates()}
            util = store.get_json("driver/utilization")
        # What ran on the node that left was queued again and finished elsewhere; nobody was blamed.
        assert all(cands[cid].state in (State.VERIFIED, State.SCREENED) for cid in seen["lost"])
        assert not any(c.state.is_failure for c in cands.values())
        assert len(util["evaluator_busy"]) == 8
        # Those still running when the node left were reported lost (one may have answered first).
        log = (config.run_dir / "driver.log").read_text()
        lost = {line.split("evaluation of ")[1].split()[0] for line in log.splitlines() if " lost: " in line}
        assert lost and lost <= set(seen["lost"])

        cluster.add_node(num_cpus=1, num_gpus=4)  # the cluster heals; the run goes on where it stopped
        cluster.wait_for_nodes()
        assert resume(config.run_dir, max_evals=12, address=cluster.address, console=_console()) == 0
        with RunStore.open(config.run_dir, readonly=True) as store:
            assert int(store.counter("gpu_evaluations")) == 60 and store.check_consistency(deep=True) == []
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
