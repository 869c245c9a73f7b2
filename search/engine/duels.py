"""Duels: a new champion is timed again against the champion it replaced, in one process.

Launch-bound medians move 15-40% from one process to the next (the host's part of a call does;
the device's stays within 1%: kernels/BENCHMARKS.md), so a child timed in its own process can
take a title on luck, and every later child of the family is measured against that luck.  A
duel times the challenger and the defender one after the other on each case, in the same
evaluation child and on fresh inputs (the defender as the request's reference), on the
challenger's cases under ``evaluation.duel_below_ms``; longer cases agree between processes
within 2% and keep their recorded ratio.  The crowning rule judges the pair: the challenger
keeps the title only if its geomean over the domain, with the paired ratios in place of the
short cases' recorded ones, beats the defender's by more than ``maturation.min_improvement``.

A challenger that does not confirm is disputed (never crowned again; the title goes to the
fastest undisputed member), and whoever holds the title then faces the same defender in turn
if its record claims to beat it.
Duels go to the next free evaluator before new candidates (after an engineer's); they are not evaluations (neither
counted nor told to Optuna); and they stay in the store until judged, so a resumed run
finishes them.
"""

from __future__ import annotations

import collections
import math
from typing import TYPE_CHECKING, Any, Callable

from pydantic import BaseModel, ConfigDict

from population.family import ChampionChange
from population.models import EvalResult, State
from population.records import DUEL_KEY, DUELS_KEY, C
from search.engine.messages import EvalOutcome, EvalRequest
from search.engine.pool import Lost, PoolEvent, event_id
from search.engine.recheck import fresh_cases
from search.numbers import ms as fmt_ms, significant
from population.records import BASELINE_FAMILY

if TYPE_CHECKING:
    from population.run import Run
    from search.config import RunConfig
    from search.engine.pool import EvaluatorPool
    from search.engine.requests import RequestFactory

_MARK = ":duel:"
SEED_BASE = 1 << 20  # duel inputs: fresh seeds, apart from those of the rechecks (recheck.SEED_STRIDE)
MAX_LOSSES = 3  # an evaluator lost under the same duel this often: judged undecided


class Duel(BaseModel):
    model_config = ConfigDict(frozen=True)

    challenger: str
    defender: str
    family: str
    cases: list[str]
    seq: int


def duel_id(duel: Duel) -> str:
    """The evaluation id of a duel (never a candidate id: the loop does not tell it)."""
    return f"{duel.challenger}{_MARK}{duel.seq}"


def is_duel_id(rid: str) -> bool:
    return _MARK in rid


def short_cases(recorded: EvalResult, below_ms: float) -> list[str]:
    """The challenger's cases whose recorded median is under ``below_ms``: where luck moves it."""
    return [c.case for c in recorded.cases if c.median_ms and c.median_ms < below_ms]


def judge(challenger: EvalResult, defender: EvalResult | None, state: State, paired: EvalResult,
          margin: float, reason: str = "") -> dict[str, Any]:
    """The duel's verdict: per case the ratio challenger/defender (paired where the duel timed
    both, else as recorded), their geomean, and ``holds``: True (the title stands), False (the
    challenger did not confirm) or None (undecided: the defender gave no time to pair with)."""
    if state is not State.VERIFIED:
        return {"holds": False, "ratio": None, "cases": [],
                "summary": f"the challenger did not verify in the duel: {reason or paired.error}"[:500]}
    timed = {c.case: c for c in paired.cases}
    recorded: dict[str, float] = {c.case: c.median_ms for c in defender.cases if c.median_ms} \
        if defender is not None else {}
    rows: list[dict[str, Any]] = []
    for own in challenger.cases:
        duel = timed.get(own.case)
        before = recorded.get(own.case)
        if duel is not None and duel.median_ms and duel.baseline_ms:
            rows.append({"case": own.case, "paired": True, "challenger_ms": duel.median_ms,
                         "defender_ms": duel.baseline_ms, "ratio": duel.median_ms / duel.baseline_ms,
                         "recorded_ratio": own.median_ms / before if own.median_ms and before else None})
        elif own.median_ms and before:
            rows.append({"case": own.case, "paired": False, "challenger_ms": own.median_ms,
                         "defender_ms": before, "ratio": own.median_ms / before})
    if not any(r["paired"] for r in rows):
        return {"holds": None, "ratio": None, "cases": rows,
                "summary": "undecided: the defender gave no time in the duel (its result stands as recorded)"}
    ratio = math.exp(sum(math.log(r["ratio"]) for r in rows) / len(rows))
    holds = ratio < 1.0 - margin
    paired_cases = ", ".join(f"{r['case']} {fmt_ms(r['challenger_ms'])}/{fmt_ms(r['defender_ms'])} ms"
                             for r in rows if r["paired"])
    summary = (f"{significant(ratio)}x the defender over the domain ({paired_cases} in one process): "
               + ("holds" if holds else f"not past the {margin:.0%} margin"))
    return {"holds": holds, "ratio": round(ratio, 4), "cases": rows, "summary": summary}


class Duels:
    """The loop's duels: queued on champion changes, dispatched before new candidates, judged when they return."""

    def __init__(self, config: RunConfig, run: Run, pool: EvaluatorPool, requests: RequestFactory,
                 log: Callable[[str], None]) -> None:
        self.run, self.pool, self.requests, self.log = run, pool, requests, log
        self.store = run.store
        saved = self.store.get_json(DUELS_KEY, {}) or {}
        self.waiting: collections.deque[Duel] = collections.deque(
            Duel.model_validate(d) for d in saved.get("pending", []))
        self.seq = int(saved.get("seq", 0))
        self.running: dict[str, Duel] = {}
        self.losses: collections.Counter[str] = collections.Counter()
        self.below = config.evaluation.duel_below_ms
        self.margin = config.maturation.min_improvement

    # --- queueing --------------------------------------------------------------------------

    def consider(self, change: ChampionChange) -> None:
        """A champion change from a tell: the new champion faces the one it replaced."""
        if change.cause in ("first", "disputed") or change.previous_id is None:
            return  # nobody to face; a title handed on by a dispute is queued by whoever disputed
        self._queue(change.family, change.candidate_id, change.previous_id)

    def _queue(self, family: str, challenger: str, defender: str) -> None:
        if self.below <= 0 or family == BASELINE_FAMILY or challenger == defender:
            return
        if any(d.challenger == challenger for d in [*self.waiting, *self.running.values()]):
            return
        recorded = self.store.evaluated_result(challenger)
        cases = short_cases(recorded, self.below) if recorded is not None else []
        if not cases:
            return
        self.seq += 1
        self.waiting.append(Duel(challenger=challenger, defender=defender, family=family, cases=cases, seq=self.seq))
        self._save()
        self.log(f"duel: {challenger} against {defender} on {', '.join(cases)}")

    def _save(self) -> None:
        pending = [d.model_dump() for d in [*self.running.values(), *self.waiting]]
        self.store.set_json(DUELS_KEY, {"pending": pending, "seq": self.seq})

    # --- running ---------------------------------------------------------------------------

    def dispatch_one(self) -> bool:
        """Hand the next waiting duel to a free evaluator (the loop has one); False if none waits."""
        while self.waiting:
            duel = self.waiting.popleft()
            request = self._request(duel)
            if request is None:
                self._save()
                continue
            self.pool.submit(request)
            self.running[request.candidate_id] = duel
            return True
        return False

    def _request(self, duel: Duel) -> EvalRequest | None:
        run = self.run
        challenger, defender = self.store.find_candidate(duel.challenger), self.store.find_candidate(duel.defender)
        if challenger is None or defender is None:
            self.log(f"duel of {duel.challenger}: {duel.defender if challenger else duel.challenger} is gone")
            return None
        cases = fresh_cases(self.requests.bench_cases, duel.cases, SEED_BASE + duel.seq)
        if not cases:
            return None
        return self.requests(challenger, run.source(challenger)).model_copy(update={
            "candidate_id": duel_id(duel), "verify_cases": [], "profile": False, "screen": None,
            "pause_cases": None, "bench_cases": cases, "reference_source": run.source(defender)})

    def intercept(self, events: list[PoolEvent]) -> list[PoolEvent]:
        """Take the duels' results out of the pool's events; the rest go to the loop."""
        rest: list[PoolEvent] = []
        for ev in events:
            rid = event_id(ev)
            duel = self.running.pop(rid, None)
            if duel is None:
                rest.append(ev)
            elif isinstance(ev, Lost):
                self.losses[rid] += 1
                if self.losses[rid] < MAX_LOSSES:
                    self.waiting.appendleft(duel)
                else:
                    self._record(duel, {"holds": None, "ratio": None, "cases": [],
                                        "summary": f"undecided: lost {MAX_LOSSES} times ({ev.reason})"})
            else:
                self._finish(duel, ev.outcome)
        return rest

    def withdrawn(self, rid: str) -> bool:
        """A duel the pool handed back unstarted (the run stops): waiting again, kept for a resume."""
        duel = self.running.pop(rid, None)
        if duel is None:
            return False
        self.waiting.appendleft(duel)
        self._save()
        return True

    def _finish(self, duel: Duel, out: EvalOutcome) -> None:
        challenger = self.store.evaluated_result(duel.challenger)
        assert challenger is not None  # queued only with a result; results are never deleted
        verdict = judge(challenger, self.store.evaluated_result(duel.defender), out.state, out.result,
                        self.margin, out.reason)
        changes = self._record(duel, verdict)
        for change in changes:
            self.log(f"champion of {change.family}: {change.candidate_id} ({duel.challenger} lost a duel)")
        # Whoever holds the title now faces the same defender, if its record claims to beat it (a
        # title handed on to a slower member claims nothing).
        holder, defender = self.run.champion(duel.family), self.store.find_candidate(duel.defender)
        if verdict["holds"] is False and holder is not None and defender is not None \
                and holder.fitness_ms is not None and defender.fitness_ms is not None \
                and holder.fitness_ms < defender.fitness_ms * (1.0 - self.margin):
            self._queue(duel.family, holder.id, duel.defender)

    def _record(self, duel: Duel, verdict: dict[str, Any]) -> list[ChampionChange]:
        run = self.run
        with run.transaction():
            run.add_counters({C.DUELS: 1, C.DUELS_LOST: int(verdict["holds"] is False)})
            self.store.set_json(DUEL_KEY.format(cid=duel.challenger), {"defender": duel.defender, **verdict})
            changes = run.dispute(duel.challenger) if verdict["holds"] is False else []
            self._save()
        self.log(f"duel of {duel.challenger} against {duel.defender}: {verdict['summary']}")
        return changes

    # --- what the loop and status read ---------------------------------------------------

    def busy(self) -> bool:
        return bool(self.waiting or self.running)
