"""From a candidate to the :class:`EvalRequest` an evaluator runs: the cases of its family's
domain, its timing screen, the cases timed with compiles stopped, all as the run config says.

The loop, the duels and the human channel's re-checks build their requests here (the latter two
then change the cases they time)."""

from __future__ import annotations

from typing import Mapping

from kernels.harness.settings import host_bound
from kernels.suites import Case, get_suite
from population.models import Candidate, EvalResult, Origin
from population.records import BASELINE_FAMILY
from population.run import Run
from search.config import RunConfig
from search.engine.cascade import plan_screen, structure_best
from search.engine.domains import domain_cases
from search.engine.messages import EvalRequest
from search.mutation.operators.base import KernelFamily


class RequestFactory:
    """Builds evaluation requests for one run.  ``profiles``: whether candidates are profiled (the
    profiles feed LLM prompts only, so only while an LLM is configured)."""

    def __init__(self, config: RunConfig, run: Run, families: Mapping[str, KernelFamily], profiles: bool) -> None:
        self.config = config
        self.run = run
        self.families = families
        self.profiles = profiles
        self.bench_cases = list(get_suite(config.evaluation.bench_suite))
        self.verify_cases = list(get_suite(config.evaluation.verify_suite))

    def __call__(self, cand: Candidate, source: str) -> EvalRequest:
        cid = cand.id
        ev = self.config.evaluation
        family = self.families.get(cand.family) if ev.family_domains else None
        verify_cases = domain_cases(self.verify_cases, family) if family is not None else self.verify_cases
        bench_cases = domain_cases(self.bench_cases, family) if family is not None else self.bench_cases
        screen = None
        best, fitness = structure_best(self.run, cand) if cand.family != BASELINE_FAMILY else (None, None)
        if ev.screen_cases and cand.origin is not Origin.SEED and cand.family != BASELINE_FAMILY:
            screen = plan_screen(bench_cases, ev.screen_cases, ev.screen_margin, best, fitness)
        return EvalRequest(
            candidate_id=cid, family=cand.family, source=source,
            verify_suite=ev.verify_suite, verify_cases=verify_cases, bench_suite=ev.bench_suite,
            bench_cases=bench_cases, device=ev.device, timing=ev.timing, limits=ev.limits,
            # Profiles feed LLM prompts only: none for the reference, none while no LLM is configured.
            profile=ev.profile and self.profiles and cand.family != BASELINE_FAMILY,
            verify_processes=ev.verify_processes, fast_gates=ev.fast_gates, screen=screen,
            pause_compiles=ev.pause_compiles_while_timing, reuse_processes=ev.reuse_processes,
            timing_hold=ev.timing_hold,
            pause_cases=self._pause_cases(cand, best, bench_cases) if ev.pause_compiles_while_timing else None)

    def _pause_cases(self, cand: Candidate, best: EvalResult | None, bench_cases: list[Case]) -> list[str] | None:
        """The bench cases to time with compiles stopped: those expected under
        ``evaluation.pause_compiles_below_ms`` by the structure best's medians, else the family
        champion's, and those that record shows host-bound (``pause_compiles_host_share``); a case
        with neither is paused too.  None (all) when nothing is known."""
        if best is None:
            champion = self.run.champion(cand.family)
            best = self.run.store.evaluated_result(champion.id) if champion is not None else None
        if best is None:
            return None
        expected = {o.case: o.median_ms for o in best.cases if o.median_ms}
        share = self.config.evaluation.pause_compiles_host_share
        exposed = {o.case for o in best.cases if host_bound(o.host_ms, o.median_ms, share)}
        below = self.config.evaluation.pause_compiles_below_ms
        return [c.name for c in bench_cases if expected.get(c.name, 0.0) < below or c.name in exposed]
