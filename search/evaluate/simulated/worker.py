"""The simulated GPU: :class:`~search.evaluate.worker.Worker`'s interface, with the GPU work replaced.

An evaluation here goes as on a GPU, in time: it waits for its compile ahead (a compile
nobody announced runs inside it, as the JIT's would), then holds the device for its share of
a recorded evaluation of its family and outcome (a full bench, a screened child or a failed
verify stage, seconds drawn from the record times its ``wall_share``), one evaluation on the
device at a time whatever the lanes; lanes overlap only the compile waits.  Its verdict comes
from the landscape: the per-case times of its parameters with the recorded noise, the
cascade's screen decided by the real rule on those times, a failure at the recorded rate of
its family.  Every recorded delay is divided by ``time_scale``; stage seconds are reported in
simulated seconds, the outcome's ``busy_s`` in real ones.  Draws are seeded by the run's seed
and the request's id, so a candidate evaluated again (after a lost evaluator) gets the same
answer wherever it runs.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any, Callable, Mapping

from kernels.params import ParamsError, read_params, structure_fingerprint
from kernels.suites import Case
from population.models import CaseOutcome, EvalResult, State
from population.outcomes import geomean
from search.config import SimulationConfig
from search.engine.cascade import is_screened_out, screened_estimate
from search.evaluate.messages import EvalOutcome, EvalRequest
from search.evaluate.simulated import recorded
from search.evaluate.simulated.compiles import CompileSlots
from search.evaluate.simulated.landscape import Landscape, stable_seed

REFERENCE_FAMILY = "torch_geqrf"


class SimulatedWorker:
    def __init__(self, settings: SimulationConfig, seed: int, name: str = "sim", lanes: int = 1,
                 compile_ahead: bool = True, families: Mapping[str, Any] | None = None,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> None:
        if families is None:
            import kernels.families

            families = kernels.families.FAMILIES
        self.settings = settings
        self.seed = seed
        self.name = name
        self.lanes = max(1, lanes)
        self.model = recorded.load(settings.model)
        self.landscape = Landscape(self.model, families, settings.landscape_seed)
        self.families = families
        self.scale = settings.time_scale
        self.clock, self.sleep = clock, sleep
        self.compiles = CompileSlots(settings.compile_slots, clock) if compile_ahead else None
        self.device = threading.Lock()  # one evaluation holds the simulated GPU at a time
        self.evaluations = 0
        self.busy_s = 0.0
        self._lock = threading.Lock()
        self._reference_fingerprint = structure_fingerprint(families[REFERENCE_FAMILY].source()) \
            if REFERENCE_FAMILY in families else None

    # --- what the actor asks besides evaluations --------------------------------------------

    def _rng(self, request_id: str, purpose: str) -> random.Random:
        return random.Random(stable_seed(self.seed, self.settings.landscape_seed, request_id, purpose))

    def _compile_seconds(self, request: EvalRequest) -> float:
        """Simulated seconds of the candidate's compile: one of its family's recorded compiles."""
        rec = self.model.families.get(request.family)
        if rec is None or not rec.compile_s:
            return 0.0
        return self._rng(request.candidate_id, "compile").choice(rec.compile_s)

    def prefetch(self, request: EvalRequest) -> bool:
        if self.compiles is None:
            return False
        return self.compiles.announce(request.candidate_id, self._compile_seconds(request) / self.scale)

    def compiled(self, candidate_ids: list[str]) -> list[str]:
        if self.compiles is None:
            return list(candidate_ids)
        return [cid for cid in candidate_ids if self.compiles.is_ready(cid)]

    def ready_within(self, candidate_ids: list[str], timeout_s: float, poll_s: float = 0.02) -> list[str]:
        deadline = self.clock() + timeout_s
        while True:
            ready = self.compiled(candidate_ids)
            if ready or self.clock() >= deadline:
                return ready
            self.sleep(poll_s)

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
        state, reason, result_cases, screen, occupancy_s = self._verdict(request)
        waited = self._hold_device(occupancy_s / self.scale)
        stages["settle"] = waited * self.scale
        verify_share = min(occupancy_s, self._draw(request, "verify_s") * self.model.wall_share)
        stages["verify"] = verify_share
        if state is not State.FAILED_VERIFY:
            stages["bench"] = occupancy_s - verify_share
        if screen:
            stages["screen"] = stages["bench"]
        finished = time.time()
        simulated_s = sum(v for k, v in stages.items() if k in ("compile_wait", "settle", "verify", "bench"))
        fitness = geomean([c.median_ms for c in result_cases]) if state is State.VERIFIED else None
        result = EvalResult(
            candidate_id=request.candidate_id, cases=tuple(result_cases), geomean_ms=fitness,
            device=f"simulated GPU ({self.model.name})",
            versions={"simulation": self.model.name, "landscape_seed": str(self.settings.landscape_seed)},
            error=reason if state.is_failure else "", eval_seconds=simulated_s, started_at=wall_started,
            finished_at=finished, stage_seconds=stages, jit={"ahead_done": 1.0},
            fidelity="screen" if screen else "full", screen=screen)
        busy = self.clock() - started
        with self._lock:
            self.evaluations += 1
            self.busy_s += busy
        if self.compiles is not None:
            self.compiles.forget(request.candidate_id)
        return EvalOutcome(candidate_id=request.candidate_id, state=state, reason=reason, result=result,
                           worker=self.name, busy_s=busy)

    def _wait_compile(self, request: EvalRequest, stages: dict[str, float]) -> None:
        """Wait for the candidate's compile: ahead if it was announced, here if not."""
        seconds = self._compile_seconds(request)
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

    def _draw(self, request: EvalRequest, what: str) -> float:
        """Simulated seconds: one recorded evaluation's ``what`` of the request's family."""
        rec = self.model.families.get(request.family)
        if rec is None:
            return self.model.reference_s if what == "full_s" else 0.0
        values = getattr(rec, what) or rec.full_s
        return self._rng(request.candidate_id, what).choice(values)

    def _failure_rate(self, family: str) -> float:
        configured = self.settings.failure_rate
        return self.model.failure_rate(family) if configured is None else configured

    def _verdict(self, request: EvalRequest) -> tuple[State, str, list[CaseOutcome], dict[str, float], float]:
        """(state, reason, case outcomes, screen record, simulated seconds on the device)."""
        rng = self._rng(request.candidate_id, "verdict")
        family = request.family
        if family != REFERENCE_FAMILY and rng.random() < self._failure_rate(family):
            first = request.verify_cases[0].name if request.verify_cases else "its first case"
            reason = (f"verify {first}: simulated failure (drawn at {self._failure_rate(family):.3g}, the "
                      f"{'configured' if self.settings.failure_rate is not None else 'recorded'} rate of {family})")
            return State.FAILED_VERIFY, reason, [], {}, self._draw(request, "verify_s") * self.model.wall_share
        true = self._true_times(request.source, family, request.bench_cases)
        plan = request.screen
        if plan is not None:
            measured = self._measured({c: true[c] for c in plan.cases if c in true}, request, rng)
            gm = geomean([c.median_ms for c in measured])
            if gm is not None and is_screened_out(gm, plan):
                screen = {"geomean_ms": gm, "bar_ms": plan.bar_ms, "margin": plan.margin,
                          "estimate_ms": screened_estimate(gm, plan)}
                reason = (f"screened: {gm:.4g} ms on {', '.join(plan.cases)} is {gm / plan.bar_ms:.2f}x its "
                          f"structure best's {plan.bar_ms:.4g} ms (limit {plan.margin:g}x)")
                return State.SCREENED, reason, measured, screen, self._draw(request, "screened_s") * self.model.wall_share
            rest = self._measured({c: t for c, t in true.items() if c not in plan.cases}, request, rng)
            by_name = {c.case: c for c in [*measured, *rest]}
            cases = [by_name[c.name] for c in request.bench_cases]
        else:
            cases = self._measured(true, request, rng)
        seconds = self.model.reference_s if family == REFERENCE_FAMILY else self._draw(request, "full_s")
        return State.VERIFIED, "", cases, {}, seconds * self.model.wall_share

    def _true_times(self, source: str, family: str, cases: list[Case]) -> dict[str, float]:
        """Noise-free times of ``source`` (a file of ``family``) on ``cases``, by case name."""
        fingerprint = structure_fingerprint(source)
        if family == REFERENCE_FAMILY or fingerprint == self._reference_fingerprint:
            return {c.name: self.landscape.reference_case(c) for c in cases}
        try:
            params = read_params(source)
        except ParamsError:
            params = {}  # a file without a PARAMS block runs its defaults
        land = self.landscape.family(family)
        factor = self.landscape.structure_factor(family, fingerprint)
        return {c.name: land.true_ms(params, c) * factor for c in cases}

    def _measured(self, true: Mapping[str, float], request: EvalRequest, rng: random.Random) -> list[CaseOutcome]:
        cases = self.landscape.measure(true, rng)
        if request.reference_source is None:
            return cases
        # A duel or a re-check: the reference timed in the same process, case by case.
        family = request.family
        reference = self._true_times(request.reference_source, family, [c for c in request.bench_cases
                                                                        if c.name in true])
        baseline = {c.case: c.median_ms for c in self.landscape.measure(reference, rng)}
        return [c.model_copy(update={"baseline_ms": baseline.get(c.case)}) for c in cases]
