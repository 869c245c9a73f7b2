"""What a simulated GPU answers, and how long it is busy doing so (no clock here: the threaded
worker sleeps these durations, the virtual-time pool adds them up).

A request's verdict comes from the landscape: the per-case times of its parameters with the
recorded noise, the cascade's screen decided by the real rule on those times, a failure at the
recorded rate of its family.  Its device time is one recorded evaluation of its family and
outcome (a full bench, a screened child, a failed verify stage) times the record's
``wall_share``; its compile one recorded compile of its family.  Draws are seeded by the run's
seed and the request's id, so a candidate evaluated again (after a lost evaluator) gets the same
answer wherever it runs.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Mapping

from kernels.params import ParamsError, read_params, structure_fingerprint
from kernels.suites import Case
from population.models import CaseOutcome, EvalResult, State
from population.outcomes import geomean
from search.config import SimulationConfig
from search.engine.cascade import is_screened_out, screened_estimate
from search.engine.messages import EvalOutcome, EvalRequest
from search.evaluate.simulated import recorded
from search.evaluate.simulated.landscape import Landscape, stable_seed

REFERENCE_FAMILY = "torch_geqrf"
TIMED_STAGES = ("compile_wait", "settle", "verify", "bench")  # what an evaluation's seconds add up


@dataclass(frozen=True)
class Verdict:
    state: State
    reason: str
    cases: list[CaseOutcome]
    screen: dict[str, float]
    device_s: float  # simulated seconds it holds the GPU
    verify_s: float  # of which its verify stage


@dataclass
class GpuModel:
    settings: SimulationConfig
    seed: int
    families: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.families:
            import kernels.families

            self.families = kernels.families.FAMILIES
        self.model = recorded.load(self.settings.model)
        self.landscape = Landscape(self.model, self.families, self.settings.landscape_seed)
        self._reference_fingerprint = structure_fingerprint(self.families[REFERENCE_FAMILY].source()) \
            if REFERENCE_FAMILY in self.families else None

    def rng(self, request_id: str, purpose: str) -> random.Random:
        return random.Random(stable_seed(self.seed, self.settings.landscape_seed, request_id, purpose))

    def compile_seconds(self, request: EvalRequest) -> float:
        """Simulated seconds of the candidate's compile: one of its family's recorded compiles."""
        rec = self.model.families.get(request.family)
        if rec is None or not rec.compile_s:
            return 0.0
        return self.rng(request.candidate_id, "compile").choice(rec.compile_s)

    def expected_compile_seconds(self, request: EvalRequest) -> float:
        """What a compile scheduler expects the candidate's compile to take: its family's mean
        recorded compile (the real one orders by its family's last compile)."""
        rec = self.model.families.get(request.family)
        if rec is None or not rec.compile_s:
            return 0.0
        return sum(rec.compile_s) / len(rec.compile_s)

    def _draw(self, request: EvalRequest, what: str) -> float:
        """Simulated seconds: one recorded evaluation's ``what`` of the request's family."""
        rec = self.model.families.get(request.family)
        if rec is None:
            return self.model.reference_s if what == "full_s" else 0.0
        values = getattr(rec, what) or rec.full_s
        return self.rng(request.candidate_id, what).choice(values)

    def failure_rate(self, family: str) -> float:
        configured = self.settings.failure_rate
        return self.model.failure_rate(family) if configured is None else configured

    def verdict(self, request: EvalRequest) -> Verdict:
        rng = self.rng(request.candidate_id, "verdict")
        family = request.family
        share = self.model.wall_share
        verify_s = self._draw(request, "verify_s") * share
        if family != REFERENCE_FAMILY and rng.random() < self.failure_rate(family):
            first = request.verify_cases[0].name if request.verify_cases else "its first case"
            reason = (f"verify {first}: simulated failure (drawn at {self.failure_rate(family):.3g}, the "
                      f"{'configured' if self.settings.failure_rate is not None else 'recorded'} rate of {family})")
            return Verdict(State.FAILED_VERIFY, reason, [], {}, verify_s, verify_s)
        true = self.true_times(request.source, family, request.bench_cases)
        plan = request.screen
        if plan is not None:
            measured = self._measured({c: true[c] for c in plan.cases if c in true}, request, rng)
            gm = geomean([c.median_ms for c in measured])
            if gm is not None and is_screened_out(gm, plan):
                screen = {"geomean_ms": gm, "bar_ms": plan.bar_ms, "margin": plan.margin,
                          "estimate_ms": screened_estimate(gm, plan)}
                reason = (f"screened: {gm:.4g} ms on {', '.join(plan.cases)} is {gm / plan.bar_ms:.2f}x its "
                          f"structure best's {plan.bar_ms:.4g} ms (limit {plan.margin:g}x)")
                device_s = self._draw(request, "screened_s") * share
                return Verdict(State.SCREENED, reason, measured, screen, device_s, min(verify_s, device_s))
            rest = self._measured({c: t for c, t in true.items() if c not in plan.cases}, request, rng)
            by_name = {c.case: c for c in [*measured, *rest]}
            cases = [by_name[c.name] for c in request.bench_cases]
        else:
            cases = self._measured(true, request, rng)
        device_s = (self.model.reference_s if family == REFERENCE_FAMILY else self._draw(request, "full_s")) * share
        return Verdict(State.VERIFIED, "", cases, {}, device_s, min(verify_s, device_s))

    def true_times(self, source: str, family: str, cases: list[Case]) -> dict[str, float]:
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
        reference = self.true_times(request.reference_source, request.family,
                                    [c for c in request.bench_cases if c.name in true])
        baseline = {c.case: c.median_ms for c in self.landscape.measure(reference, rng)}
        return [c.model_copy(update={"baseline_ms": baseline.get(c.case)}) for c in cases]

    def outcome(self, request: EvalRequest, verdict: Verdict, stages: dict[str, float], started_at: float,
                finished_at: float, worker: str, busy_s: float) -> EvalOutcome:
        """The outcome a worker reports; ``stages`` in simulated seconds."""
        stages = {**stages, "verify": verdict.verify_s}
        if verdict.state is not State.FAILED_VERIFY:
            stages["bench"] = verdict.device_s - verdict.verify_s
        if verdict.screen:
            stages["screen"] = stages["bench"]
        fitness = geomean([c.median_ms for c in verdict.cases]) if verdict.state is State.VERIFIED else None
        result = EvalResult(
            candidate_id=request.candidate_id, cases=tuple(verdict.cases), geomean_ms=fitness,
            device=f"simulated GPU ({self.model.name})",
            versions={"simulation": self.model.name, "landscape_seed": str(self.settings.landscape_seed)},
            error=verdict.reason if verdict.state.is_failure else "",
            eval_seconds=sum(v for k, v in stages.items() if k in TIMED_STAGES), started_at=started_at,
            finished_at=finished_at, stage_seconds=stages, jit={"ahead_done": 1.0},
            fidelity="screen" if verdict.screen else "full", screen=verdict.screen)
        return EvalOutcome(candidate_id=request.candidate_id, state=verdict.state, reason=verdict.reason,
                           result=result, worker=worker, busy_s=busy_s)
