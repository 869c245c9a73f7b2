"""Making children with the registered mutation operators (:mod:`search.mutation.operators`).

Every proposal is a :class:`population.models.NewCandidate`; the loop stores it
and queues it for evaluation.  The proposer draws an operator by the configured
weights (``mutation:``).  Immediate operators (Optuna step, parameter crossover)
fill any evaluator that would otherwise idle; LLM operators (edit, merge) only
choose parents, and the proposer turns their LLM calls (futures on the LLM pool,
so that GPUs never wait on them) into children when the answers arrive.
"""

from __future__ import annotations

import random
import time
from concurrent.futures import Future
from dataclasses import dataclass, replace
from typing import Callable, Mapping, Sequence, TypeVar, cast

from kernels.params import structure_fingerprint
from kernels.suites import get_suite
from population.models import Candidate, EvalResult, NewCandidate, Origin, JsonScalar, canonical_params
from population.records import NOTE_KEY, OPERATOR_KEY, TRIAL_KEY
from population.run import Run
from search.config import RunConfig
from search.config.sections import LLMModel
from search.mutation import operators
from search.engine.edits import SEARCH_MISMATCH, EditError
from search.engine.llm import LLMPool, LLMReply
from search.engine.llm_child import RESTORED, child_file
from search.mutation.operators import Child, ImmediateOperator, KernelFamily, LLMOperator, Operator
from search.engine.prompt import Inspiration, ParentView, PromptAttempt, PromptContext, build_messages
from population.records import BASELINE_FAMILY
from population.speedup import with_speedups
from search.mutation.carry import OPERATOR as CARRIED, Leads
from search.mutation.tuning import Tuner

__all__ = ["Child", "KernelFamily", "LLMJob", "NOTE_KEY", "OPERATOR_KEY", "Proposer", "RejectedEdit", "TRIAL_KEY", "seed_children"]

Op = TypeVar("Op", bound=Operator)
S = TypeVar("S")


@dataclass
class LLMJob:
    future: Future[LLMReply]
    family: str
    island: int
    parents: tuple[Candidate, ...]
    model: str
    submitted: float
    operator: str  # the LLM operator that chose the parents; its origin is the child's


@dataclass(frozen=True)
class RejectedEdit:
    new: NewCandidate
    reason: str
    kind: str  # the reason's name in the per-model counters (search.engine.edits, search.engine.llm_child)
    operator: str = ""


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
        # (parent source, params) already rendered by a parameter operator: rendering and hashing a
        # 100 KB family file again to find the same child was 1/4 of the driver at 6,000 evaluations.
        self.tried: set[tuple[str, str]] = set()
        # Set by search.engine.human: structures an engineer retired, and their notes for prompts.
        self.retired: frozenset[str] = frozenset()
        self.tpe_max_inflight = config.optuna.tpe_max_inflight
        self.human_notes: Callable[[str], list[str]] | None = None
        self.bench_cases = list(get_suite(config.evaluation.bench_suite))
        # The configured operators in registry order (the order of every weighted draw).
        weights = config.mutation.weights
        chosen = [(op, weights[name]) for name, op in operators.registry().items() if name in weights]
        self.immediate: list[tuple[ImmediateOperator, float]] = [
            (op, w) for op, w in chosen if isinstance(op, ImmediateOperator) and not op.needs_llm]
        self.llm_operators: list[tuple[LLMOperator, float]] = [
            (op, w) for op, w in chosen if isinstance(op, LLMOperator) and op.needs_llm]
        self._baseline: tuple[str, EvalResult] | None = None  # (champion id, its result), parsed once
        self._operator_state: dict[str, object] = {}
        self.leads = Leads()  # stale children's gains, carried forward (optuna.carry_gains)
        # Children queued or running per parent id (the loop's WorkQueue.by_parent, a live view).
        self.busy_parents: Mapping[str, int] = {}

    # --- parents -------------------------------------------------------------------------

    def searchable_families(self) -> list[str]:
        return [f.name for f in self.config.families if not self.families[f.name].baseline]

    def _find(self, family: str, cid: str) -> Candidate | None:
        return self.run.population.family(family).find(cid) or self.run.store.find_candidate(cid)

    def tuning_parent(self, family: str, island: int, inflight: Mapping[str, int]) -> Candidate | None:
        """Prefer a maturing structure that still has tuning budget: that is how a structural
        change gets tuned before it has to beat the tuned champion.  Never a retired structure's,
        nor (``optuna.parents_with_budget``) one whose Optuna trial budget is used."""
        budget = self.config.maturation.tuning_budget
        skip = self._spent_or_retired(family, island)
        open_ = [s for s in self.run.population.maturing(family) if s.best_id and s.fingerprint not in skip
                 and s.tuning_evals + inflight.get(s.fingerprint, 0) < budget
                 and not (self.config.optuna.parents_with_budget and self.tuner.known_spent(family, s.fingerprint))]
        if open_ and self.rng.random() < 0.75:
            rec = self.rng.choice(sorted(open_, key=lambda s: s.fingerprint))
            parent = self._find(family, rec.best_id)  # type: ignore[arg-type]
            if parent is not None:
                return parent
        return self.select_parent(family, island, skip)

    def _spent_or_retired(self, family: str, island: int) -> frozenset[str]:
        """The structures a tuning parent is not drawn from: the retired ones, and with
        ``optuna.parents_with_budget`` those of the island that used their trial budget (a parent of
        one gives the tuning operators no child: late in a 64-evaluator run most draws did, and the
        few children came from retrying the draw, dozens of proposer calls per evaluation)."""
        if not self.config.optuna.parents_with_budget:
            return self.retired
        spent = {m.fingerprint for m in self.run.population.members(family, island)
                 if self.tuner.known_spent(family, m.fingerprint)}
        return self.retired | spent if spent else self.retired

    def select_parent(self, family: str, island: int, skip: frozenset[str] | None = None) -> Candidate | None:
        """A parent by the selection rule, not of the structures in ``skip`` (default: the retired
        ones), a member with children in flight handicapped by ``selection.inflight_penalty`` ranks per child."""
        skip = self.retired if skip is None else skip
        penalty, busy = self.config.selection.inflight_penalty, self.busy_parents
        if penalty <= 0 or not busy:
            return self.run.select_parent(family, island, skip)
        return self.run.select_parent(family, island, skip, lambda m: penalty * busy.get(m.id, 0))

    # --- immediate proposals ------------------------------------------------------------

    def synchronous(self, family: str, island: int, inflight: Mapping[str, int]) -> Child | None:
        """A child of an immediate operator drawn by weight; when it has nothing to offer, the
        others in registry order (weight 0 included: an idle evaluator is worse than any child)."""
        if not self.immediate:
            return None
        if self.config.optuna.carry_gains and (carried := self.leads.propose(self, family)) is not None:
            return replace(carried, operator=CARRIED)
        ops = [op for op, _ in self.immediate]
        weights = [w for _, w in self.immediate]
        if sum(weights) <= 0:
            # An LLM-only mix: the first immediate operator (Optuna) still fills idle evaluators.
            weights = [1.0] + [0.0] * (len(ops) - 1)
        first = self.rng.choices(ops, weights=weights, k=1)[0]
        for op in _first_then_rest(first, ops):
            child = op.propose(self, family, island, inflight)
            if child is not None:
                return replace(child, operator=op.name)
        return None

    def told(self, candidate: Candidate) -> None:
        """A finished child: with ``optuna.carry_gains``, its gain over a parent overtaken meanwhile is kept."""
        if self.config.optuna.carry_gains and candidate.parent_ids:
            self.leads.note(self, candidate, self._find(candidate.family, candidate.parent_ids[0]))

    def untried(self, parent_source_sha256: str, params: Mapping[str, JsonScalar]) -> bool:
        key = (parent_source_sha256, canonical_params(params))
        if key in self.tried:
            return False
        self.tried.add(key)
        return True

    def operator_state(self, operator: str, make: Callable[[], S]) -> S:
        if operator not in self._operator_state:
            self._operator_state[operator] = make()
        return cast(S, self._operator_state[operator])  # what this operator's make() made

    def fresh(self, new: NewCandidate) -> bool:
        key = (new.source_sha256, canonical_params(new.params))
        if key in self.seen:
            return False
        self.seen.add(key)
        return True

    # --- LLM proposals -------------------------------------------------------------------

    def baseline_result(self) -> EvalResult | None:
        """The reference's result, read and parsed once per champion (every tell asks for it)."""
        champion = self.run.champion(BASELINE_FAMILY) if BASELINE_FAMILY in self.run.population.families else None
        if champion is None:
            return None
        if self._baseline is None or self._baseline[0] != champion.id:  # a dispute may replace it
            result = self.run.store.get_result(champion.id)
            if result is None:
                return None
            self._baseline = (champion.id, result)  # results are written once, never changed
        return self._baseline[1]

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

    @property
    def llm_weight(self) -> float:
        """The LLM operators' share of the mix; 0: no LLM calls at all."""
        return sum(w for _, w in self.llm_operators)

    def start_llm(self, family: str, island: int, model: LLMModel) -> LLMJob | None:
        assert self.llm is not None
        parent = self.select_parent(family, island)
        if parent is None:
            return None
        picked = self._llm_parents(parent, island)
        if picked is None:
            return None
        op, parents = picked
        second = self._view(parents[1]) if len(parents) == 2 else None
        fam = self.families[family]
        ctx = PromptContext(
            family=family, description=fam.description,
            space={k: str(v) for k, v in fam.space.dimensions().items()},
            parent=self._view(parent), suite=self.bench_cases, attempts=self._attempts(family),
            inspirations=self._inspirations(family), second_parent=second,
            human_notes=self.human_notes(family) if self.human_notes else ())
        future = self.llm.submit(build_messages(ctx), model)
        return LLMJob(future=future, family=family, island=island, parents=parents, model=model.name,
                      submitted=time.monotonic(), operator=op.name)

    def _llm_parents(self, parent: Candidate, island: int) -> tuple[LLMOperator, tuple[Candidate, ...]] | None:
        """An LLM operator drawn by weight and the parents it shows; when it declines (a merge
        without a mate of another structure), the others in registry order."""
        ops = [op for op, _ in self.llm_operators]
        weights = [w for _, w in self.llm_operators]
        if not ops or sum(weights) <= 0:
            return None
        first = self.rng.choices(ops, weights=weights, k=1)[0]
        for op in _first_then_rest(first, ops):
            parents = op.parents(self, parent, island)
            if parents:
                return op, parents
        return None

    def finish_llm(self, job: LLMJob, reply: LLMReply) -> Child | RejectedEdit | None:
        parent = job.parents[0]
        origin = operators.get(job.operator).origin
        parent_ids = tuple(p.id for p in job.parents)
        generation = max(p.generation for p in job.parents) + 1

        def rejected(reason: str, kind: str) -> RejectedEdit:
            # The response is kept as the "source" so the record shows what the model said.
            return RejectedEdit(new=NewCandidate(
                family=job.family, island=job.island, parent_ids=parent_ids, origin=origin, source=reply.text,
                params={}, fingerprint="unapplied-edit", generation=generation), reason=reason, kind=kind,
                operator=job.operator)

        try:
            made = child_file(self.run.source(parent), reply.text)
        except EditError as exc:
            return rejected(f"edit did not apply: {exc}" if exc.kind == SEARCH_MISMATCH else str(exc), exc.kind)
        new = NewCandidate(family=job.family, island=job.island, parent_ids=parent_ids, origin=origin,
                           source=made.source, params=made.params, fingerprint=structure_fingerprint(made.source),
                           generation=generation)
        if not self.fresh(new):
            return None
        note = reply.text.split("<<<<<<<")[0].split("```")[0].strip()[:600]
        if made.params_origin == RESTORED:
            note = (note + "\n" if note else "") + f"(its PARAMS block was missing; {parent.id}'s was restored)"
        return Child(new=new, note=note, params_origin=made.params_origin, operator=job.operator)


def _first_then_rest(first: Op, ops: Sequence[Op]) -> list[Op]:
    return [first, *(o for o in ops if o is not first)]


def seed_children(config: RunConfig, families: Mapping[str, KernelFamily], rng: random.Random) -> list[NewCandidate]:
    """The first candidates: the baseline once, and per island of each family its file with
    the defaults on island 0 and a random valid assignment on the others (diversity for free)."""
    seeds = []
    baseline = families[BASELINE_FAMILY]
    seeds.append(NewCandidate(family=BASELINE_FAMILY, island=0, origin=Origin.SEED, source=baseline.source(),
                              params={}, fingerprint=structure_fingerprint(baseline.source())))
    for spec in config.families:
        fam = families[spec.name]
        if fam.baseline:
            continue
        for island in range(spec.islands):
            defaults = fam.default_params()
            defaults = defaults.as_params() if hasattr(defaults, "as_params") else dict(defaults)
            params = defaults if island == 0 else fam.space.sample(rng).as_params()
            source = fam.render(params)
            seeds.append(NewCandidate(family=spec.name, island=island, origin=Origin.SEED, source=source,
                                      params=params, fingerprint=structure_fingerprint(source)))
    return seeds
