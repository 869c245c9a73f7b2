"""A Ray cluster of several nodes on one machine, every server on 127.0.0.1, GPUs declared.

Each node is a ``ray start`` of its own (the head first, then the others joining it), with
ports picked free and a short temp dir of the cluster's own under /tmp, so it never meets
another Ray on a shared machine (nor the default port 6379).  A node declares GPUs with
``--num-gpus``: Ray schedules ``num_gpus=1`` actors on them as on real ones, which is what a
simulated run needs (``qrsearch launch --simulate`` or ``evaluation.device: simulated`` with
``--address``).  :meth:`LoopbackCluster.kill_node` takes a node away as a failed machine
would (its raylet killed), :meth:`LoopbackCluster.shutdown` ends only this cluster's processes.

    with LoopbackCluster() as cluster:
        cluster.add_node(num_gpus=4, head=True)
        cluster.add_node(num_gpus=4)
        launch(config, address=cluster.address)
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

WORKER_PORTS = 300  # per node: one per worker process it may start (an actor is one)
START_ATTEMPTS = 3
# What `ray start` says when its raylet did not register with the GCS within Ray's fixed 30 s: a
# loaded machine (two cores, a test suite beside it), not a wrong command, so it is worth a retry.
STARTUP_TIMED_OUT = "timed out during startup"


def free_ports(count: int) -> list[int]:
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _pids_matching(*needles: str) -> list[int]:
    """Processes whose command line holds every one of ``needles``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if all(n in cmdline for n in needles):
            pids.append(int(entry.name))
    return pids


def _with_descendants(pids: list[int]) -> list[int]:
    """``pids`` and every process started under them (a raylet's workers rename themselves
    ``ray::...``, so only their parentage says whose they are)."""
    parent: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parent[int(entry.name)] = int(stat[stat.rindex(")") + 2:].split()[1])
    found, frontier = set(pids), list(pids)
    while frontier:
        pid = frontier.pop()
        for child, ppid in parent.items():
            if ppid == pid and child not in found:
                found.add(child)
                frontier.append(child)
    return sorted(found)


def _kill(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def end_processes_matching(*needles: str) -> None:
    """End the processes whose command line holds every one of ``needles``, and those under
    them: asked first, then killed, waiting up to 10 s for each."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = _with_descendants(_pids_matching(*needles))
        _kill(pids, sig)
        deadline = time.monotonic() + 10
        while pids and _pids_matching(*needles) and time.monotonic() < deadline:
            time.sleep(0.2)


@dataclass
class LoopbackNode:
    num_gpus: int
    num_cpus: int
    manager_port: int
    head: bool


@dataclass
class LoopbackCluster:
    ray_exe: Path = field(default_factory=lambda: Path(sys.executable).with_name("ray"))
    temp: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="qrl", dir="/tmp")))
    nodes: list[LoopbackNode] = field(default_factory=list)
    gcs_port: int | None = None
    _taken: set[int] = field(default_factory=set)

    @property
    def address(self) -> str:
        if self.gcs_port is None:
            raise RuntimeError("no head node yet")
        return f"127.0.0.1:{self.gcs_port}"

    def _env(self) -> dict[str, str]:
        # Ray's token authentication as this process has it, which is how a driver started here
        # connects: a driver in token mode refuses the calls of workers started without it (its
        # actors are never created), and one without it is refused by nodes in token mode.  A
        # local ray.init() turns token mode on for the rest of its process (RAY_AUTH_MODE=token
        # in os.environ, which Ray reads again), so a driver that launched a local run and then
        # connects here connects with it.  Unset, it is off, said explicitly: a head that finds a
        # token in ~/.ray (anyone's `ray get-auth-token --generate`) turns it on by itself, and a
        # node joining without it fails.
        env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0",
               "RAY_AUTH_MODE": os.environ.get("RAY_AUTH_MODE") or "disabled"}
        env.pop("RAY_ADDRESS", None)
        return env

    def _ports(self, count: int) -> list[int]:
        for _ in range(100):
            ports = free_ports(count)
            if not self._taken.intersection(ports):
                self._taken.update(ports)
                return ports
        raise RuntimeError("no free ports")

    def _worker_range(self) -> int:
        """The first port of WORKER_PORTS consecutive ones clear of every port taken (Ray refuses a
        worker range that overlaps a node's other ports)."""
        for _ in range(200):
            base = free_ports(1)[0]
            span = range(base, base + WORKER_PORTS)
            if base + WORKER_PORTS < 65536 and not self._taken.intersection(span):
                self._taken.update(span)
                return base
        raise RuntimeError("no free port range for the Ray workers")

    def add_node(self, num_gpus: int, num_cpus: int = 1, head: bool | None = None) -> LoopbackNode:
        """Start a node (the first one is the head) declaring ``num_gpus`` GPUs.  A start that
        timed out waiting for its raylet to register is undone and tried again on fresh ports,
        up to START_ATTEMPTS times; any other failure is raised at once."""
        head = not self.nodes if head is None else head
        for attempt in range(1, START_ATTEMPTS + 1):
            manager, objects, agent, agent_grpc, metrics, runtime_env, *extra = self._ports(8 if head else 6)
            worker_lo = self._worker_range()
            args = [str(self.ray_exe), "start", "--node-ip-address=127.0.0.1", f"--temp-dir={self.temp}",
                    "--disable-usage-stats", f"--num-cpus={num_cpus}", f"--num-gpus={num_gpus}",
                    f"--node-manager-port={manager}", f"--object-manager-port={objects}",
                    f"--dashboard-agent-listen-port={agent}", f"--dashboard-agent-grpc-port={agent_grpc}",
                    f"--metrics-export-port={metrics}", f"--runtime-env-agent-port={runtime_env}",
                    f"--min-worker-port={worker_lo}", f"--max-worker-port={worker_lo + WORKER_PORTS - 1}",
                    "--object-store-memory=100000000"]
            if head:
                gcs, client = extra
                args += ["--head", f"--port={gcs}", "--include-dashboard=false",
                         f"--ray-client-server-port={client}"]
            else:
                args += [f"--address={self.address}"]
            done = subprocess.run(args, env=self._env(), capture_output=True, text=True, timeout=300)
            if done.returncode == 0:
                break
            if STARTUP_TIMED_OUT not in done.stderr or attempt == START_ATTEMPTS:
                raise RuntimeError(f"ray start failed (attempt {attempt}): {done.stderr[-2000:]}")
            self._undo_start(head, manager)
        if head:
            self.gcs_port = gcs
        node = LoopbackNode(num_gpus=num_gpus, num_cpus=num_cpus, manager_port=manager, head=head)
        self.nodes.append(node)
        return node

    def _undo_start(self, head: bool, manager_port: int) -> None:
        """End what a failed start left running: a head's whole cluster (nothing else has joined
        it), or a joining node's raylet and the processes under it."""
        if head:
            end_processes_matching(str(self.temp))
        else:
            end_processes_matching(str(self.temp), f"--node_manager_port={manager_port}")

    def kill_node(self, node: LoopbackNode) -> None:
        """Take a node away as a failed machine would: its raylet and its workers killed."""
        if node.head:
            raise ValueError("the head holds the cluster's state: kill another node")
        raylet = _pids_matching(str(self.temp), f"--node_manager_port={node.manager_port}")
        _kill(_with_descendants(raylet), signal.SIGKILL)
        self.nodes.remove(node)

    def shutdown(self) -> None:
        """End every process of this cluster (those whose command line names its temp dir) and
        remove the temp dir; nobody else's Ray is touched."""
        end_processes_matching(str(self.temp))
        shutil.rmtree(self.temp, ignore_errors=True)
        self.nodes.clear()

    def __enter__(self) -> LoopbackCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
