"""The simulated GPU in real time: :class:`~search.evaluate.worker.Worker`'s interface, what an
evaluator actor of a simulated run holds.

An evaluation goes as on a GPU, in time: it waits for its compile ahead (a compile nobody
announced runs inside it, as the JIT's would), then holds the device for the time its verdict
took on the recorded GPU (:mod:`.gpu`), one evaluation on the device at a time whatever the
lanes; lanes overlap only the compile waits.  Every recorded delay is divided by
``time_scale``; stage seconds are reported in simulated seconds, the outcome's ``busy_s`` in
real ones.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Mapping

from search.config import SimulationConfig
from search.engine.messages import EvalOutcome, EvalRequest
from search.evaluate.simulated.compiles import CompileSlots
from search.evaluate.simulated.gpu import GpuModel


class SimulatedWorker:
    def __init__(self, settings: SimulationConfig, seed: int, name: str = "sim", lanes: int = 1,
                 compile_ahead: bool = True, families: Mapping[str, Any] | None = None,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> None:
        self.gpu = GpuModel(settings, seed, dict(families or {}))
        self.name = name
        self.lanes = max(1, lanes)
        self.scale = settings.time_scale
        self.clock, self.sleep = clock, sleep
        self.compiles = CompileSlots(settings.compile_slots, clock) if compile_ahead else None
        self.device = threading.Lock()  # one evaluation holds the simulated GPU at a time
        self.evaluations = 0
        self.busy_s = 0.0
        self._lock = threading.Lock()

    # --- what the actor asks besides evaluations --------------------------------------------

    def prefetch(self, request: EvalRequest) -> bool:
        if self.compiles is None:
            return False
        return self.compiles.announce(request.candidate_id, self.gpu.compile_seconds(request) / self.scale,
                                      self.gpu.expected_compile_seconds(request) / self.scale)

    def withdraw(self, candidate_id: str) -> None:
        if self.compiles is not None:
            self.compiles.forget(candidate_id)

    def compiled(self, candidate_ids: list[str]) -> list[str]:
        if self.compiles is None:
            return list(candidate_ids)
        return [cid for cid in candidate_ids if self.compiles.is_ready(cid)]

    def ready_within(self, candidate_ids: list[str], timeout_s: float, poll_s: float = 0.25) -> list[str]:
        """As the worker's, but it sleeps until the next simulated compile ends (at most ``poll_s``,
        for a compile announced meanwhile) rather than polling: a hundred simulated GPUs holding at
        once polled at 50 Hz each, CPU a real evaluator would spend on its own host."""
        deadline = self.clock() + timeout_s
        while True:
            ready = self.compiled(candidate_ids)
            now = self.clock()
            if ready or now >= deadline:
                return ready
            ends = self.compiles.next_finish() if self.compiles is not None else None
            wake = min(deadline, now + poll_s, ends if ends is not None else deadline)
            self.sleep(max(wake - now, 0.001))

    def compile_room(self) -> int:
        return self.compiles.room() if self.compiles is not None else 0

    def close(self) -> None:
        pass

    # --- evaluations -------------------------------------------------------------------------

    def evaluate(self, request: EvalRequest) -> EvalOutcome:
        started, wall_started = self.clock(), time.time()
        stages: dict[str, float] = {}
        if request.dispatched_at is not None:
            stages["queued"] = max(0.0, wall_started - request.dispatched_at) * self.scale
        self._wait_compile(request, stages)
        verdict = self.gpu.verdict(request)
        stages["settle"] = self._hold_device(verdict.device_s / self.scale) * self.scale
        busy = self.clock() - started
        with self._lock:
            self.evaluations += 1
            self.busy_s += busy
        if self.compiles is not None:
            self.compiles.forget(request.candidate_id)
        return self.gpu.outcome(request, verdict, stages, wall_started, time.time(), self.name, busy)

    def _wait_compile(self, request: EvalRequest, stages: dict[str, float]) -> None:
        """Wait for the candidate's compile: ahead if it was announced, here if not."""
        seconds = self.gpu.compile_seconds(request)
        finish = self.compiles.claim(request.candidate_id) if self.compiles is not None else None
        if finish is None:
            finish = self.clock() + seconds / self.scale  # the JIT compiles inside the evaluation
        waited = max(0.0, finish - self.clock())
        if waited > 0:
            self.sleep(waited)
        stages["compile_wait"] = waited * self.scale
        stages["compile_ahead"] = seconds

    def _hold_device(self, seconds: float) -> float:
        """Hold the simulated GPU for ``seconds``; returns how long this waited for it."""
        asked = self.clock()
        with self.device:
            waited = self.clock() - asked
            self.sleep(seconds)
        return waited
