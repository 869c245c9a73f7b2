"""The best candidates of a run across shapes: route groups, best per input shape, best overall
(``export`` routes a composite file by them; the report shows them)."""

from __future__ import annotations

from typing import Any

from kernels.suites import Case
from population.models import Candidate, id_sort_key
from population.outcomes import geomean
from population.records import BASELINE_FAMILY
from search.inspect.view import CASE_NAME, RunView


def case_shape(name: str, suite: dict[str, Case] | None = None) -> tuple[int, int] | None:
    """(batch, n) of a benchmark case, from its suite or else from its name (``dense-640x512-c2``)."""
    if suite and name in suite:
        return suite[name].batch, suite[name].n
    m = CASE_NAME.match(name)
    return (int(m["batch"]), int(m["n"])) if m else None


def route_groups(view: RunView) -> dict[tuple[int, int], list[str]]:
    """Benchmark cases grouped by input shape (batch, n), in suite order."""
    groups: dict[tuple[int, int], list[str]] = {}
    for name in view.case_names():
        shape = case_shape(name, view.bench_cases)
        if shape is not None:
            groups.setdefault(shape, []).append(name)
    return groups


def best_per_shape(view: RunView, families: list[str] | None = None,
                   only: set[str] | None = None) -> list[dict[str, Any]]:
    """Per input shape, the verified candidate with the smallest geomean over that shape's
    cases (every one of them passed and timed); ties go to the older candidate."""
    rows = []
    base = {o.case: o.median_ms for o in view.baseline.cases} if view.baseline else {}
    for shape, names in route_groups(view).items():
        best: tuple[float, tuple, str] | None = None
        for c in view.verified(families, only):
            times = {o.case: o.median_ms for o in view.results[c.id].cases
                     if o.status.value == "ok" and o.median_ms}
            gm = geomean([times.get(n) for n in names])  # type: ignore[misc]
            if gm is None:
                continue
            key = (gm, id_sort_key(c.id), c.id)
            if best is None or key < best:
                best = key
        base_gm = geomean([base.get(n) for n in names]) if base else None  # type: ignore[misc]
        rows.append({"batch": shape[0], "n": shape[1], "cases": names,
                     "candidate": best[2] if best else None,
                     "family": view.by_id[best[2]].family if best else None,
                     "geomean_ms": best[0] if best else None, "baseline_ms": base_gm,
                     "speedup": base_gm / best[0] if best and base_gm else None})
    return rows


def best_overall(view: RunView, families: list[str] | None = None, only: set[str] | None = None) -> Candidate | None:
    """The verified candidate with the best geomean over the whole benchmark suite.

    Only candidates timed on every case qualify (a family timed on its size domain does not);
    ``only``: just these ids (e.g. the promoted ones); without one among ``families``, the torch.geqrf reference, which is timed on every case."""
    names = set(view.case_names())

    def whole(c: Candidate) -> bool:
        return names <= {o.case for o in view.results[c.id].cases if o.status.value == "ok" and o.median_ms}

    cands = [c for c in view.verified(families, only) if whole(c)]
    if not cands and view.baseline_id is not None:
        cands = [c for c in view.verified([BASELINE_FAMILY]) if whole(c)]
    return min(cands, key=lambda c: (c.fitness_ms, id_sort_key(c.id))) if cands else None
