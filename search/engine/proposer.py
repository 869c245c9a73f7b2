"""Making children: Optuna parameter steps, parameter crossover, and LLM edits/merges.

Every proposal is a :class:`population.models.NewCandidate`; the loop stores it
and queues it for evaluation.  LLM calls are asynchronous (futures on the LLM
pool) so that GPUs never wait on them; Optuna and crossover proposals are
immediate and fill any evaluator that would otherwise idle.
"""

from __future__ import annotations

import random
import time
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol

from kernels.params import ParamSpace, render_params, structure_fingerprint
from kernels.suites import get_suite
from population.models import Candidate, NewCandidate, Origin, canonical_params, source_hash
from population.records import NOTE_KEY, TRIAL_KEY  # noqa: F401  (re-exported: readers used to import them here)
from population.run import Run
from search.config import LLMModel, RunConfig
from search.engine.edits import SEARCH_MISMATCH, EditError
from search.engine.llm import LLMPool, LLMReply
from search.engine.llm_child import RESTORED, child_file
from search.engine.prompt import Inspiration, ParentView, PromptAttempt, PromptContext, build_messages
from search.speedup import BASELINE_FAMILY, with_speedups
from search.engine.tuning import Proposal, Tuner, TunerExhausted

class KernelFamily(Protocol):
    """What the search needs of a registered family (kernels.families.RegisteredFamily)."""

    name: str
    description: str
    baseline: bool
    space: type[ParamSpace]

    def source(self) -> str: ...

    def render(self, params: Any) -> str: ...

    def default_params(self) -> Any: ...




@dataclass
class LLMJob:
    future: Future[LLMReply]
    family: str
    island: int
    parents: tuple[Candidate, ...]
    model: str
    submitted: float


@dataclass(frozen=True)
class Child:
    new: NewCandidate
    proposal: Proposal | None = None  # the Optuna trial this child answers
    note: str = ""  # the LLM's rationale, shown to later prompts
    params_origin: str = ""  # an LLM child's PARAMS: kept, marked, restored (the parent's) or none


@dataclass(frozen=True)
class RejectedEdit:
    new: NewCandidate
    reason: str
    kind: str  # the reason's name in the per-model counters (search.engine.edits, search.engine.llm_child)


class Proposer:
    def __init__(self, config: RunConfig, run: Run, tuner: Tuner, families: Mapping[str, KernelFamily],
                 rng: random.Random, llm: LLMPool | None = None) -> None:
        self.config = config
        self.run = run
        self.tuner = tuner
        self.families = families
        self.rng = rng
        self.llm = llm
        self.seen: set[tuple[str, str]] = {c.content_key for c in run.store.list_candidates()}
        # Set by search.engine.human: structures an engineer retired, and their notes for prompts.
        self.retired: frozenset[str] = frozenset()
        self.human_notes: Callable[[str], list[str]] | None = None
        self.bench_cases = list(get_suite(config.evaluation.bench_suite))

    # --- parents -------------------------------------------------------------------------

    def searchable_families(self) -> list[str]:
        return [f.name for f in self.config.families if not self.families[f.name].baseline]

    def _find(self, family: str, cid: str) -> Candidate | None:
        return self.run.population.family(family).find(cid) or self.run.store.find_candidate(cid)

    def tuning_parent(self, family: str, island: int, inflight: Mapping[str, int]) -> Candidate | None:
        """Prefer a maturing structure that still has tuning budget: that is how a structural
        change gets tuned before it has to beat the tuned champion."""
        budget = self.config.maturation.tuning_budget
        open_ = [s for s in self.run.population.maturing(family) if s.best_id and s.fingerprint not in self.retired
                 and s.tuning_evals + inflight.get(s.fingerprint, 0) < budget]
        if open_ and self.rng.random() < 0.75:
            rec = self.rng.choice(sorted(open_, key=lambda s: s.fingerprint))
            parent = self._find(family, rec.best_id)  # type: ignore[arg-type]
            if parent is not None:
                return parent
        return self.run.select_parent(family, island, self.retired)

    # --- synchronous proposals -----------------------------------------------------------

    def optuna_child(self, parent: Candidate) -> Child | None:
        fam = self.families[parent.family]
        if parent.fingerprint in self.retired or not parent.params:
            return None  # retired by an engineer, or nothing to tune (a file without PARAMS)
        try:
            proposal = self.tuner.ask(parent.family, parent.fingerprint, fam.space, parent.params,
                                      parent_id=parent.id, parent_value=parent.fitness_ms)
        except TunerExhausted:
            return None
        source = render_params(self.run.source(parent), proposal.params)
        if structure_fingerprint(source) != parent.fingerprint:
            self.tuner.skip(proposal, "the parameters change the code's structure")
            return None
        new = NewCandidate(family=parent.family, island=parent.island, parent_ids=(parent.id,), origin=Origin.OPTUNA,
                           source=source, params=proposal.params, fingerprint=parent.fingerprint,
                           generation=parent.generation + 1)
        if not self._fresh(new):
            self.tuner.skip(proposal, "the same code and parameters as an existing candidate")
            return None
        return Child(new=new, proposal=proposal)

    def param_crossover(self, family: str, island: int) -> Child | None:
        """Uniform crossover of two parents' parameters within one structure."""
        a = self.run.select_parent(family, island, self.retired)
        if a is None:
            return None
        mates = [m for m in self.run.population.members(family, island)
                 if m.id != a.id and m.fingerprint == a.fingerprint and m.params != a.params]
        if not mates:
            return None
        b = self.rng.choice(mates)
        space = self.families[family].space
        for _ in range(8):
            params = {k: (a.params if self.rng.random() < 0.5 else b.params)[k] for k in a.params}
            try:
                space(**params)
            except Exception:
                continue
            new = NewCandidate(family=family, island=island, parent_ids=(a.id, b.id), origin=Origin.CROSSOVER,
                               source=render_params(self.run.source(a), params), params=params,
                               fingerprint=a.fingerprint, generation=max(a.generation, b.generation) + 1)
            if self._fresh(new):
                return Child(new=new)
        return None

    def synchronous(self, family: str, island: int, inflight: Mapping[str, int]) -> Child | None:
        """An Optuna step or a parameter crossover, by the configured weights."""
        mix = self.config.mutation
        kinds = ["optuna", "crossover"]
        weights = [mix.optuna, mix.crossover]
        if sum(weights) <= 0:
            weights = [1.0, 0.0]
        first = self.rng.choices(kinds, weights=weights, k=1)[0]
        for kind in (first, *(k for k in kinds if k != first)):
            if kind == "optuna":
                parent = self.tuning_parent(family, island, inflight)
                child = self.optuna_child(parent) if parent is not None else None
            else:
                child = self.param_crossover(family, island)
            if child is not None:
                return child
        return None

    def _fresh(self, new: NewCandidate) -> bool:
        key = (source_hash(new.source), canonical_params(new.params))
        if key in self.seen:
            return False
        self.seen.add(key)
        return True

    # --- LLM proposals -------------------------------------------------------------------

    def baseline_result(self):  # noqa: ANN201 - EvalResult | None
        champion = self.run.champion(BASELINE_FAMILY) if BASELINE_FAMILY in self.run.population.families else None
        return self.run.store.get_result(champion.id) if champion else None

    def _view(self, candidate: Candidate) -> ParentView:
        result = self.run.store.evaluated_result(candidate.id)  # a migrant shows its original's result
        if result is not None:
            result = with_speedups(result, self.baseline_result())
        return ParentView(candidate_id=candidate.id, source=self.run.source(candidate), params=candidate.params,
                          cases=[c.model_dump(mode="json") for c in result.cases] if result else [],
                          geomean_ms=result.geomean_ms if result else None,
                          speedup=result.speedup if result else None,
                          profile=result.profile if result else None)

    def _attempts(self, family: str) -> list[PromptAttempt]:
        out = []
        baseline = self.baseline_result()
        for a in self.run.store.recent_attempts(family, limit=self.config.llm.recent_attempts):
            c = a.candidate
            speed = with_speedups(a.result, baseline).speedup if a.result is not None else None
            note = self.run.store.get_json(NOTE_KEY.format(cid=c.id), "") or ""
            out.append(PromptAttempt(candidate_id=c.id, origin=c.origin.value, state=c.state.value,
                                     reason=c.reason, speedup=speed, note=str(note)[:300]))
        return out

    def _inspirations(self, family: str) -> list[Inspiration]:
        out = []
        baseline = self.baseline_result()
        for champ in self.run.inspiration(family):
            if champ.family == BASELINE_FAMILY:
                continue
            result = self.run.store.evaluated_result(champ.id)
            speed = with_speedups(result, baseline).speedup if result else None
            out.append(Inspiration(family=champ.family, candidate_id=champ.id, speedup=speed,
                                   source=self.run.source(champ)))
        out.sort(key=lambda i: -(i.speedup or 0))
        return out[: self.config.llm.inspirations]

    def start_llm(self, family: str, island: int, model: LLMModel) -> LLMJob | None:
        assert self.llm is not None
        parent = self.run.select_parent(family, island, self.retired)
        if parent is None:
            return None
        parents: tuple[Candidate, ...] = (parent,)
        second = None
        if self.rng.random() < self._merge_share():
            others = [m for m in self.run.population.members(family, island)
                      if m.fingerprint != parent.fingerprint and m.fingerprint not in self.retired]
            if others:
                mate = self.rng.choice(others)
                parents, second = (parent, mate), self._view(mate)
        fam = self.families[family]
        ctx = PromptContext(
            family=family, description=fam.description,
            space={k: str(v) for k, v in fam.space.dimensions().items()},
            parent=self._view(parent), suite=self.bench_cases, attempts=self._attempts(family),
            inspirations=self._inspirations(family), second_parent=second,
            human_notes=self.human_notes(family) if self.human_notes else ())
        future = self.llm.submit(build_messages(ctx), model)
        return LLMJob(future=future, family=family, island=island, parents=parents, model=model.name,
                      submitted=time.monotonic())

    def _merge_share(self) -> float:
        mix = self.config.mutation
        return mix.crossover / (mix.crossover + mix.llm) if mix.crossover + mix.llm > 0 else 0.0

    def finish_llm(self, job: LLMJob, reply: LLMReply) -> Child | RejectedEdit | None:
        parent = job.parents[0]
        origin = Origin.CROSSOVER if len(job.parents) == 2 else Origin.LLM
        parent_ids = tuple(p.id for p in job.parents)
        generation = max(p.generation for p in job.parents) + 1

        def rejected(reason: str, kind: str) -> RejectedEdit:
            # The response is kept as the "source" so the record shows what the model said.
            return RejectedEdit(new=NewCandidate(
                family=job.family, island=job.island, parent_ids=parent_ids, origin=origin, source=reply.text,
                params={}, fingerprint="unapplied-edit", generation=generation), reason=reason, kind=kind)

        try:
            made = child_file(self.run.source(parent), reply.text)
        except EditError as exc:
            return rejected(f"edit did not apply: {exc}" if exc.kind == SEARCH_MISMATCH else str(exc), exc.kind)
        new = NewCandidate(family=job.family, island=job.island, parent_ids=parent_ids, origin=origin,
                           source=made.source, params=made.params, fingerprint=structure_fingerprint(made.source),
                           generation=generation)
        if not self._fresh(new):
            return None
        note = reply.text.split("<<<<<<<")[0].split("```")[0].strip()[:600]
        if made.params_origin == RESTORED:
            note = (note + "\n" if note else "") + f"(its PARAMS block was missing; {parent.id}'s was restored)"
        return Child(new=new, note=note, params_origin=made.params_origin)
