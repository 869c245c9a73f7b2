"""The evaluator actor: one Ray actor per GPU (or a few on CPU) around a Worker, or a simulated
one.  It never touches CUDA itself (its worker's children do), so it survives any candidate;
:class:`search.evaluate.ray_pool.RayPool` drives it."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ray
from pydantic import BaseModel, ConfigDict

from search.config import SimulationConfig

from search.evaluate.actor_output import redirect_output
from search.evaluate.compile_ahead import CompileAhead
from search.evaluate.placement import split_cpus
from search.evaluate.gpu_sampler import GpuSampler
from search.evaluate.held import ANNOUNCED_WITHIN_S, AnnouncedTexts, HeldRequests
from search.engine.messages import EvalRequest

if TYPE_CHECKING:
    from search.evaluate.simulated.worker import SimulatedWorker
    from search.evaluate.worker import Worker


class Simulation(BaseModel):
    """What a simulated evaluator is built from: the run's ``simulation:`` settings and its seed."""

    model_config = ConfigDict(frozen=True)

    settings: SimulationConfig
    seed: int


def _host_gpu_count() -> int:
    try:
        import pynvml

        pynvml.nvmlInit()
        return int(pynvml.nvmlDeviceGetCount())
    except Exception:
        return 1


def _make_worker(workdir: str, env_extra: dict[str, str], name: str, compile_ahead: bool, lanes: int = 1,
                 simulation: str | None = None) -> Worker | SimulatedWorker:
    """The evaluator's Worker: on a GPU, with compile-ahead on its slice of the host's CPUs; or with
    ``simulation`` (a :class:`Simulation` as JSON) a simulated GPU."""
    if simulation is not None:
        from search.evaluate.simulated.worker import SimulatedWorker

        sim = Simulation.model_validate_json(simulation)
        return SimulatedWorker(sim.settings, sim.seed, name=name, lanes=lanes, compile_ahead=compile_ahead)
    # Imported here, in the actor: the worker's harness imports torch, which neither the driver
    # (it only drives actors) nor a simulated evaluator needs.
    from search.evaluate.worker import Worker

    ahead = None
    timing_cpus = None
    if compile_ahead and env_extra.get("TRITON_INTERPRET") != "1" and "TRITON_CACHE_DIR" in env_extra:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]
        index = int(visible) if visible.isdigit() else 0
        timing_cpus, compile_cpus = split_cpus(sorted(os.sched_getaffinity(0)), index, _host_gpu_count())
        try:
            ahead = CompileAhead(Path(env_extra["TRITON_CACHE_DIR"]), Path(workdir) / name / "ahead",
                                 sorted(compile_cpus), env_extra=env_extra)
        except ImportError:  # no ahead-of-time compiler in this build: the JIT compiles in verify
            ahead = None
    return Worker(Path(workdir) / name, env_extra, name=name, ahead=ahead, timing_cpus=timing_cpus, lanes=lanes)


# "ahead" runs prefetch (announcing the next candidates) while evaluate runs in the default group,
# which the pool creates with ``max_concurrency=lanes``: one thread per lane.  With more than one
# lane Ray executes the actor's calls out of order (it refuses in-order execution for threaded
# actors); the "ahead" group still has one thread, and the worker ignores a prefetch that comes
# after its evaluation began.
# "waits" holds the pool's "tell me when one of these is compiled" question, which blocks for up
# to its timeout: in "ahead" it would hold back the prefetches behind it.
@ray.remote(max_restarts=-1, max_task_retries=0, concurrency_groups={"ahead": 1, "waits": 1})  # type: ignore[call-overload]
class EvaluatorActor:
    def __init__(self, workdir: str, env_extra: dict[str, str], name: str, compile_ahead: bool = False,
                 lanes: int = 1, simulation: str | None = None, output_file: str | None = None,
                 announced_within_s: float = ANNOUNCED_WITHIN_S) -> None:
        if output_file is not None:  # before the worker starts: its start may print, or fail
            redirect_output(Path(output_file))
        self.name = name
        # Announced and neither begun nor withdrawn: what an evaluation's answer says is compiled.
        self._queued: dict[str, None] = {}
        self._queued_lock = threading.Lock()  # the lanes' threads and the "ahead" one
        self._held = HeldRequests(announced_within_s)  # announced requests, started by ticket
        self._texts = AnnouncedTexts()  # their sources, which later announcements may differ from
        self.worker = _make_worker(workdir, env_extra, name, compile_ahead, lanes, simulation)
        # The run's GPU-utilisation series, beside its store (run_dir/gpu-util/, for run_timeline.py).
        series = Path(workdir).parent / "gpu-util" / f"{name}.tsv"
        measured = env_extra.get("TRITON_INTERPRET") != "1" and simulation is None
        self.sampler = GpuSampler(series=series) if measured else None

    def ping(self) -> dict[str, Any]:
        return {"name": self.name, "pid": os.getpid(), "host": socket.gethostname(),
                "gpus": os.environ.get("CUDA_VISIBLE_DEVICES", ""), "node": ray.get_runtime_context().get_node_id()}

    def evaluate(self, request_json: str | None, ticket: int | None = None) -> tuple[str | None, list[str]]:
        """The outcome (as JSON), and which of the requests announced to it are compiled as it ends:
        the lane that frees starts one of them without a question (an actor call and a round trip
        that most starts took).

        ``request_json`` None: the request announced under ``ticket`` (its text crossed once, in
        :meth:`prefetch`); where this evaluator does not hold it (restarted since, or the
        announcement lost), the answer is (None, []) and nothing ran: the pool sends the text."""
        if request_json is None:
            assert ticket is not None
            held = self._held.claim(ticket)
            if held is None:
                return None, []
            request = held
        else:
            request = EvalRequest.model_validate_json(request_json)
            self._held.started(request.candidate_id, ticket)
        with self._queued_lock:
            self._queued.pop(request.candidate_id, None)
        outcome = self.worker.evaluate(request).model_dump_json()
        with self._queued_lock:
            queued = list(self._queued)
        return outcome, self.worker.compiled(queued) if queued else []

    @ray.method(concurrency_group="ahead")
    def prefetch(self, request_json: str, ticket: int | None = None,
                 delta: tuple[int, int, int, str] | None = None) -> bool:
        """Announce a request, to compile it ahead and start it by ``ticket``.  ``delta``: its JSON
        lacks the source, which is ``(base ticket, head, tail, middle)`` of a text of its family
        announced before (:class:`AnnouncedTexts`); where that is not here, nothing is held (False)."""
        request = self._texts.received(request_json, ticket, delta)
        if request is None:
            return False
        if ticket is not None and not self._held.announced(ticket, request):
            return False  # it started (or was withdrawn) before this announcement ran
        announced = self.worker.prefetch(request)
        if announced:  # not one already running (a late announcement), nor a worker without compile-ahead
            with self._queued_lock:
                self._queued[request.candidate_id] = None
        return announced

    @ray.method(concurrency_group="ahead")  # after the prefetches sent before it, in order
    def compiled(self, candidate_ids: list[str]) -> list[str]:
        return self.worker.compiled(candidate_ids)

    @ray.method(concurrency_group="ahead")  # after the prefetch that announced it, in order
    def withdraw(self, candidate_id: str, ticket: int | None = None) -> None:
        self._held.withdrawn(candidate_id, ticket)
        with self._queued_lock:
            self._queued.pop(candidate_id, None)
        self.worker.withdraw(candidate_id)

    @ray.method(concurrency_group="ahead")  # after the prefetches sent before it, in order
    def compile_state(self, candidate_ids: list[str]) -> tuple[int, list[str]]:
        """Its compile room and which of ``candidate_ids`` (the pool's queue for it) are compiled:
        one question (every half second, where the answer could matter) tells the pool both how
        many more it may hold and which queued request a free lane can start without asking."""
        return self.worker.compile_room(), self.worker.compiled(candidate_ids)

    @ray.method(concurrency_group="waits")
    def ready_within(self, candidate_ids: list[str], timeout_s: float) -> list[str]:
        return self.worker.ready_within(candidate_ids, timeout_s)

    def utilization(self) -> float | None:
        return self.sampler.mean() if self.sampler else None

    def shutdown(self) -> None:
        self.worker.close()
