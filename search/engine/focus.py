"""A focused run (``launch --focus CASE[,CASE...] [--target PCT] [--max-regression PCT]``).

The fitness is the geomean of the focused cases only (``EvalResult.focus_ms``).  Every
other case is held to the family champion *at the start of the focus*: a child that
makes one of them slower by more than ``max_regression_pct`` is rejected with the case
and the numbers in its reason.  The reference is taken once per family, from its
champion when the focused run starts or, in a new run, from its first champion (the
seeds set the bar), and is kept in the store (``focus/reference``) so a resumed run
judges against the same numbers.  The run stops when a family's champion is
``target_pct`` percent faster on the focused cases than its reference
(reference focused geomean / champion focused geomean >= 1 + target/100).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping

from population.models import EvalResult, State
from population.outcomes import geomean
from population.records import FOCUS_REFERENCE_KEY
from population.run import Run
from population.store import RunStore
from search.config import FocusConfig
from search.numbers import ms as fmt_ms
from population.records import BASELINE_FAMILY

if TYPE_CHECKING:
    from population.snapshot import RunSnapshot

REFERENCE_KEY = FOCUS_REFERENCE_KEY


def _times(result: EvalResult) -> dict[str, float]:
    return {c.case: c.median_ms for c in result.cases if c.median_ms}


def focused_geomean(result: EvalResult, cases: list[str]) -> float | None:
    times = _times(result)
    if not cases or any(c not in times for c in cases):
        return None
    return geomean(times[c] for c in cases)


def progress_from_store(store: RunStore, focus: FocusConfig) -> dict[str, Any] | None:
    """Focus, target and progress per family, from a store (a writer's or a read-only one)."""
    if not focus.cases:
        return None
    champions = store.current_champion_ids()
    fitness = {cid: c.fitness_ms for cid in champions.values() if (c := store.find_candidate(cid)) is not None}
    return focus_progress(focus, store.get_json(REFERENCE_KEY, {}) or {}, champions, fitness)


def progress_from_snapshot(snapshot: RunSnapshot, focus: FocusConfig) -> dict[str, Any] | None:
    """The same, from a read snapshot (``status``, the inspection commands)."""
    if not focus.cases:
        return None
    fitness = {cid: snapshot.by_id[cid].fitness_ms for cid in snapshot.current.values() if cid in snapshot.by_id}
    return focus_progress(focus, snapshot.get(REFERENCE_KEY, {}), snapshot.current, fitness)


def focus_progress(focus: FocusConfig, references: Mapping[str, Any], champions: Mapping[str, str],
                   fitness: Mapping[str, float | None]) -> dict[str, Any]:
    """Per family with a reference: how much faster its champion (``fitness`` by id) is on the focus."""
    families = {}
    for family, ref in sorted(references.items()):
        cid = champions.get(family)
        best = fitness.get(cid) if cid else None
        faster = 100.0 * (ref["focus_ms"] / best - 1.0) if best else None
        families[family] = {"reference": ref["candidate"], "reference_focus_ms": ref["focus_ms"],
                            "champion": cid, "champion_focus_ms": best,
                            "faster_pct": None if faster is None else round(faster, 3)}
    reached = [f for f, row in families.items() if focus.target_pct is not None and row["faster_pct"] is not None
               and row["faster_pct"] >= focus.target_pct]
    return {"cases": list(focus.cases), "target_pct": focus.target_pct,
            "max_regression_pct": focus.max_regression_pct, "families": families, "reached": reached}


class Focus:
    def __init__(self, config: FocusConfig, run: Run, log: Callable[[str], None] = print) -> None:
        self.config = config
        self.run = run
        self.log = log
        self.references: dict[str, Any] = (run.store.get_json(REFERENCE_KEY, {}) or {}) if config.cases else {}

    @property
    def active(self) -> bool:
        return bool(self.config.cases)

    def _ensure_reference(self, family: str) -> dict[str, Any] | None:
        """The family champion's per-case times, taken the first time the family has one."""
        if family in self.references:
            return self.references[family]
        champion = self.run.champion(family)
        if champion is None:
            return None
        result = self.run.store.evaluated_result(champion.id)
        focus_ms = focused_geomean(result, self.config.cases) if result is not None else None
        if result is None or focus_ms is None:
            return None
        self.references[family] = {"candidate": champion.id, "cases": _times(result), "focus_ms": focus_ms}
        self.run.set_json(REFERENCE_KEY, self.references)
        self.log(f"focus reference of {family}: {champion.id}, focused geomean {fmt_ms(focus_ms)} ms")
        return self.references[family]

    def start(self) -> None:
        for family in self.run.population.families:
            if family != BASELINE_FAMILY:
                self._ensure_reference(family)

    def judge(self, family: str, state: State, reason: str, result: EvalResult) -> tuple[State, str, EvalResult]:
        """The outcome as the focused objective sees it: the focused fitness, or a rejection."""
        if not self.active or state is not State.VERIFIED:
            return state, reason, result
        focus_ms = focused_geomean(result, self.config.cases)
        if focus_ms is None:
            return State.CRASHED, "focus: a focused case has no time", result
        result = result.model_copy(update={"focus_ms": focus_ms})
        if family == BASELINE_FAMILY:
            return state, reason, result
        ref = self._ensure_reference(family)
        if ref is None:
            return state, reason, result
        limit = 1.0 + self.config.max_regression_pct / 100.0
        for case, ms in sorted(_times(result).items()):
            before = ref["cases"].get(case)
            if case in self.config.cases or before is None:
                continue
            if ms > before * limit:
                return (State.REJECTED, f"focus: {case} {100 * (ms / before - 1):.1f}% slower than "
                        f"{ref['candidate']} ({fmt_ms(ms)} vs {fmt_ms(before)} ms; limit "
                        f"{self.config.max_regression_pct:g}%)", result)
        return state, reason, result

    def after_tell(self, family: str) -> None:
        if self.active and family != BASELINE_FAMILY:
            self._ensure_reference(family)

    def reached(self) -> str | None:
        """A stop reason once a family's champion reaches the target on the focused cases."""
        if not self.active or self.config.target_pct is None:
            return None
        data = progress_from_store(self.run.store, self.config)
        if data and data["reached"]:
            family = data["reached"][0]
            row = data["families"][family]
            return (f"focus target reached: {family} champion {row['champion']} is {row['faster_pct']:.1f}% faster "
                    f"on {', '.join(self.config.cases)} than {row['reference']} (target {self.config.target_pct:g}%)")
        return None

    def status(self) -> dict[str, Any] | None:
        return progress_from_store(self.run.store, self.config)
