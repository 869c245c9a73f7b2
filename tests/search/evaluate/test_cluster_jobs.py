"""The documented multi-machine path, on one machine: a two-node Ray cluster on loopback
(``ray start --head`` then ``ray start --address``, token authentication on), a smoke search
submitted with ``ray job submit --working-dir .``, and its run store read by ``qrsearch status``.

Every address is 127.0.0.1 and every port is picked free; the nodes live in this test's own
temp dir, and cleanup ends only the processes whose command line names that dir (never
``ray stop``, which would stop other people's Ray on a shared machine).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from search.evaluate.simulated.loopback import (START_ATTEMPTS, STARTUP_TIMED_OUT, end_processes_matching,
                                               free_ports)

REPO = Path(__file__).resolve().parents[3]
RAY = Path(sys.executable).with_name("ray")


WORKER_PORTS = 41  # per node: --min-worker-port .. --max-worker-port


def _worker_port_base(taken: set[int], span: int) -> int:
    """The first port of ``span`` consecutive ones that hold none of ``taken`` (Ray refuses a
    worker range that overlaps a node's other ports)."""
    for _ in range(100):
        base = free_ports(1)[0]
        if base + span < 65536 and not any(base <= p < base + span for p in taken):
            return base
    raise RuntimeError("no free port range for the Ray workers")


def _node_ports(ports: list[int]) -> list[str]:
    manager, objects, agent, agent_grpc, metrics, runtime_env, worker_lo = ports
    return [f"--node-manager-port={manager}", f"--object-manager-port={objects}",
            f"--dashboard-agent-listen-port={agent}", f"--dashboard-agent-grpc-port={agent_grpc}",
            f"--metrics-export-port={metrics}", f"--runtime-env-agent-port={runtime_env}",
            f"--min-worker-port={worker_lo}", f"--max-worker-port={worker_lo + WORKER_PORTS - 1}"]


def _start_nodes(env: dict[str, str], temp: Path) -> dict[str, int]:
    """``ray start --head`` then ``ray start --address`` on ports picked free; returns the head's
    GCS and dashboard ports."""
    singles = free_ports(3 + 12)
    gcs, dashboard, client, *rest = singles
    # The two nodes' worker port ranges follow each other, clear of every other port.
    base = _worker_port_base(set(singles), 2 * WORKER_PORTS)
    head_ports, worker_ports = [*rest[:6], base], [*rest[6:], base + WORKER_PORTS]
    common = ["--node-ip-address=127.0.0.1", f"--temp-dir={temp}", "--disable-usage-stats"]
    subprocess.run([str(RAY), "start", "--head", f"--port={gcs}", "--include-dashboard=true",
                    "--dashboard-host=127.0.0.1", f"--dashboard-port={dashboard}",
                    f"--ray-client-server-port={client}", "--num-cpus=1", *common, *_node_ports(head_ports)],
                   env=env, check=True, capture_output=True, text=True, timeout=180)
    subprocess.run([str(RAY), "start", f"--address=127.0.0.1:{gcs}", "--num-cpus=1",
                    '--resources={"qrsearch_worker_node": 1}', *common, *_node_ports(worker_ports)],
                   env=env, check=True, capture_output=True, text=True, timeout=180)
    return {"gcs": gcs, "dashboard": dashboard}


@pytest.fixture
def cluster(tmp_path):
    if not RAY.exists():
        pytest.fail(f"{RAY} is missing: install qrsearch with its cluster extra (pip install -e '.[cluster]')")
    # Unix socket paths must stay short: a temp dir of our own directly under /tmp.
    temp = Path(tempfile.mkdtemp(prefix="qrj", dir="/tmp"))
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16),
           "RAY_USAGE_STATS_ENABLED": "0", "RAY_ADDRESS": ""}
    env.pop("RAY_ADDRESS")
    try:
        # A raylet that did not register within Ray's fixed 30 s is a loaded machine, not this
        # test's subject: the nodes are ended and started again, as LoopbackCluster does.
        for attempt in range(1, START_ATTEMPTS + 1):
            try:
                ports = _start_nodes(env, temp)
                break
            except subprocess.CalledProcessError as exc:
                if STARTUP_TIMED_OUT not in exc.stderr or attempt == START_ATTEMPTS:
                    pytest.fail(f"ray start failed (attempt {attempt}): {exc.stderr[-2000:]}")
                end_processes_matching(str(temp))
        yield {"env": env, "dashboard": f"http://127.0.0.1:{ports['dashboard']}",
               "gcs": f"127.0.0.1:{ports['gcs']}", "temp": temp}
    finally:
        end_processes_matching(str(temp))
        shutil.rmtree(temp, ignore_errors=True)


@pytest.mark.slow
def test_ray_job_submit_runs_a_search_on_a_two_node_cluster(cluster, tmp_path):
    env = cluster["env"]
    nodes = subprocess.run([sys.executable, "-c", (
        "import ray, json; ray.init(address='" + cluster["gcs"] + "', logging_level='ERROR');"
        "print(json.dumps([n['Resources'] for n in ray.nodes() if n['Alive']]))")],
        env=env, capture_output=True, text=True, timeout=120, check=True)
    resources = json.loads(nodes.stdout.strip().splitlines()[-1])
    assert len(resources) == 2 and sum("qrsearch_worker_node" in r for r in resources) == 1

    # Without the token the dashboard refuses the job: authentication is really on.
    no_token = {k: v for k, v in env.items() if k != "RAY_AUTH_TOKEN"}
    no_token["RAY_AUTH_MODE"] = "disabled"
    refused = subprocess.run([str(RAY), "job", "list", "--address", cluster["dashboard"]], env=no_token,
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0

    runs = tmp_path / "runs"
    submit = subprocess.run(
        [str(RAY), "job", "submit", "--address", cluster["dashboard"], "--working-dir", str(REPO), "--",
         "python", "-m", "search", "launch", "--config", "runs/smoke.yaml", "--name", "cluster-smoke",
         "--runs-dir", str(runs), "--max-evals", "2", "--max-minutes", "3", "--address", "auto"],
        env=env, capture_output=True, text=True, timeout=540, cwd=REPO)
    assert submit.returncode == 0, submit.stdout[-3000:] + submit.stderr[-3000:]
    assert "succeeded" in submit.stdout.lower()

    status = subprocess.run([sys.executable, "-m", "search", "status", str(runs / "cluster-smoke"), "--json"],
                            capture_output=True, text=True, timeout=120, cwd=REPO)
    assert status.returncode == 0, status.stderr
    data = json.loads(status.stdout)
    assert data["state"] == "finished" or data["state"].startswith("stopped"), data["state"]
    assert data["evaluations"] >= 2
    assert data["sessions"] == 1
