"""A synthetic landscape over each family's real parameter space, with a known optimum.

For a family, the landscape picks an optimum x*: the family's defaults with a quarter of the
knobs (at least two) moved to another value, valid in the family's space.  A candidate's time
on case c is

    t_c(x) = t*_c · (1 + s · P_c(x)),   P_c(x) = Σ_k w_k·j_ck·g_k(x) + Σ_(a,b) w_ab·g_a(x)·g_b(x)

where g_k is knob k's distance from the optimum (for a numeric choice or range, its rank
distance over the dimension's width; for any other choice 0 or 1), the sums run over the knobs
that act on c (a knob named ``*_le512`` acts on n ≤ 512 and not on sizes a smaller threshold
of its group covers, ``*_gt1024`` on n > 1024, ``warps_64`` on the sizes whose smallest
``warps_*`` class is 64; any other knob on every size), the weights w are lognormal (a few
knobs matter much, most little), j jitters them per case, and a few pairs interact.  Above
its ``max_n`` a file calls torch.geqrf: the case takes the reference's recorded time.  So
every term is zero at x* and nowhere negative, and x* is the fastest point on every case.

Calibration to the recorded run: t_c(defaults) is the seed's recorded median of c, and s is
set so that the defaults' geomean is ``gap`` times the optimum's, where ``gap`` is 5% beyond
the best child the recorded run found (the run was still improving when it stopped; at least
5% when it found none).  A structure other than the family's registered file (an LLM edit, a
hand-written file) is slower by a factor drawn from its fingerprint, never faster: the
landscape models parameter tuning, not what an edit might find.

Measured medians carry the recorded noise (:class:`~.recorded.Noise`): lognormal with the
recorded spread, and now and then a process in a slower mode, as often and as much slower
as the recorded run saw.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from functools import cached_property
from typing import Any, Callable, Mapping, Sequence

from kernels.params import Choice, Dimension, FloatRange, IntRange, ParamSpace
from search.mutation.operators.local_step import neighbours
from kernels.suites import Case, get_suite
from population.models import CaseOutcome
from population.outcomes import CaseStatus, geomean
from search.evaluate.simulated.recorded import RecordedRun

MOVED_SHARE = 0.2  # of the knobs acting on the family's cases, each moved one step from the defaults
CURVATURE = 1.5  # a knob's penalty grows as its distance to this power: flat near the optimum
PAIRS_SHARE = 0.25  # interacting pairs per knob
GAP_BEYOND_BEST = 1.05
STRUCTURE_SIGMA = 0.1  # log-spread of the slowdown of a structure other than the registered file
_CLASS = re.compile(r"^(?P<group>.+)_(?P<op>le|lt|gt)(?P<size>\d+)$")
_WIDTH = re.compile(r"^(?P<group>.+)_(?P<size>\d+)$")


def stable_seed(*parts: object) -> int:
    """A seed from text, the same in every process (Python's hash() is salted per process)."""
    return int.from_bytes(hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()[:8], "big")


def acts_on(names: Sequence[str]) -> dict[str, tuple[str, int] | None]:
    """Each knob's size class: ("le"|"lt"|"gt"|"width", size), or None for a knob of every size."""
    out: dict[str, tuple[str, int] | None] = {}
    for name in names:
        m = _CLASS.match(name)
        w = _WIDTH.match(name)
        out[name] = (m["op"], int(m["size"])) if m else ("width", int(w["size"])) if w else None
    return out


def _group(name: str) -> str:
    m = _CLASS.match(name) or _WIDTH.match(name)
    return m["group"] if m else name


def applies(name: str, n: int, classes: Mapping[str, tuple[str, int] | None]) -> bool:
    """Whether knob ``name`` acts on size ``n`` (see the module docstring)."""
    mine = classes[name]
    if mine is None:
        return True
    op, size = mine
    siblings = [c for other, c in classes.items() if c is not None and _group(other) == _group(name)]
    if op == "gt":
        return n > size
    if op == "width":
        widths = sorted(s for o, s in siblings if o == "width" and s >= n)
        return bool(widths) and widths[0] == size
    covering = sorted(s if o == "le" else s - 1 for o, s in siblings if o in ("le", "lt") and n <= (s if o == "le" else s - 1))
    return bool(covering) and covering[0] == (size if op == "le" else size - 1)


class _Knob:
    """One parameter's distance from the optimum's value, scaled by its weight."""

    def __init__(self, dim: Dimension, best: Any, weight: float) -> None:
        self.dim, self.best, self.weight = dim, best, weight
        self.rank: dict[Any, int] | None = None
        if isinstance(dim, Choice) and len(dim.values) > 1 and all(_numeric(v) for v in dim.values):
            ordered = sorted(set(dim.values))
            self.rank = {v: i for i, v in enumerate(ordered)}

    def distance(self, value: Any) -> float:
        """0 at the optimum's value, up to 1 across the dimension."""
        dim = self.dim
        if self.rank is not None:
            if not _numeric(value) or value not in self.rank:
                return 1.0
            return (abs(self.rank[value] - self.rank[self.best]) / (len(self.rank) - 1)) ** CURVATURE
        if isinstance(dim, Choice):
            return 0.0 if value == self.best and type(value) is type(self.best) else 1.0
        if isinstance(dim, (IntRange, FloatRange)):
            span = (math.log(dim.high) - math.log(dim.low)) if dim.log else (dim.high - dim.low)
            if span <= 0 or not _numeric(value):
                return 0.0
            a, b = (math.log(value), math.log(self.best)) if dim.log else (value, self.best)
            return min(1.0, abs(a - b) / span) ** CURVATURE
        return 0.0


def _numeric(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class FamilyLandscape:
    def __init__(self, name: str, space: type[ParamSpace], defaults: Mapping[str, Any], seed_ms: Mapping[str, float],
                 reference_ms: Mapping[str, float], best_ratio: float, upper_ratio: float, seed: int) -> None:
        self.name = name
        self.space = space
        self.defaults = dict(defaults)
        self.reference_ms = dict(reference_ms)
        self.cases = {c.name: c for c in get_suite("qrv2-bench") if c.name in seed_ms}
        rng = random.Random(stable_seed(seed, "landscape", name))
        dims = space.dimensions()
        self.classes = acts_on(list(dims))
        self._acting_at: dict[int, list[str]] = {}
        self.optimum = self._pick_optimum(dims, rng)
        self.knobs = {k: _Knob(d, self.optimum[k], rng.lognormvariate(0.0, 1.0)) for k, d in dims.items() if k != "max_n"}
        self.moved = frozenset(k for k in self.knobs if self.optimum[k] != self.defaults[k])
        still = sorted(set(self.knobs) - self.moved)
        # Pairs of knobs the defaults have at the optimum, so that they add nothing at the defaults.
        self.pairs = [(a, b, 0.5 * rng.lognormvariate(0.0, 1.0)) for a, b in
                      (tuple(rng.sample(still, 2)) for _ in range(round(PAIRS_SHARE * len(still))))] if len(still) > 1 else []
        self.jitter = {(c, k): rng.lognormvariate(0.0, 0.3) for c in self.cases for k in self.knobs}
        self.gap = max(1.0, 1.0 / best_ratio) * GAP_BEYOND_BEST
        self.upper = max(upper_ratio, 1.0)
        # t_c = t*_c (1 + s_moved P_moved + s_rest P_rest): the moved knobs carry the defaults' gap,
        # the others make a random point as much slower than the defaults as the record says.
        self.scale_moved = self._calibrate_moved()
        self.best_ms = {c: seed_ms[c] / (1.0 + self.scale_moved * self._penalties(c, case.n, self.defaults)[0])
                        for c, case in self.cases.items()}
        self.scale_rest = 0.0
        self.scale_rest = self._calibrate_rest(random.Random(stable_seed(seed, "calibration", name)))

    def _pick_optimum(self, dims: Mapping[str, Dimension], rng: random.Random) -> dict[str, Any]:
        movable = [k for k in sorted(dims) if k != "max_n" and neighbours(dims[k], self.defaults[k])
                   and any(applies(k, c.n, self.classes) for c in self.cases.values())]
        count = min(len(movable), max(1, round(MOVED_SHARE * len(movable))))
        top = max((c.n for c in self.cases.values()), default=0)
        for _ in range(1000):
            point = dict(self.defaults)
            for k in rng.sample(movable, count):
                point[k] = rng.choice(neighbours(dims[k], point[k]))
            if "max_n" in point and point["max_n"] < top:  # the optimum never falls back to torch.geqrf
                bigger = [v for v in _values(dims["max_n"]) if v >= top]
                point["max_n"] = min(bigger) if bigger else point["max_n"]
            try:
                return self.space(**point).as_params()
            except ValueError:
                continue
        raise ValueError(f"{self.name}: no valid optimum near the defaults in 1000 tries")

    def _penalties(self, case: str, n: int, params: Mapping[str, Any]) -> tuple[float, float]:
        """(moved knobs' penalty, the other knobs' and pairs' penalty) of ``params`` on a case of size n."""
        acting = {k: self.knobs[k].distance(params.get(k, self.defaults.get(k))) for k in self._acting(n)}
        moved = rest = 0.0
        for k, g in acting.items():
            term = self.knobs[k].weight * self.jitter.get((case, k), 1.0) * g
            if k in self.moved:
                moved += term
            else:
                rest += term
        rest += sum(w * acting[a] * acting[b] for a, b, w in self.pairs if a in acting and b in acting)
        return moved, rest

    def _acting(self, n: int) -> list[str]:
        if n not in self._acting_at:
            self._acting_at[n] = [k for k in self.knobs if applies(k, n, self.classes)]
        return self._acting_at[n]

    def _calibrate_moved(self) -> float:
        """The moved knobs' scale: the defaults' geomean over the recorded cases is ``gap`` times the optimum's."""
        penalties = [self._penalties(c, case.n, self.defaults)[0] for c, case in self.cases.items()]
        if not penalties or max(penalties) <= 0:
            raise ValueError(f"{self.name}: the optimum does not differ from the defaults on its cases")
        return _bisect(lambda s: math.exp(sum(math.log1p(s * p) for p in penalties) / len(penalties)), self.gap)

    def _calibrate_rest(self, rng: random.Random, points: int = 64) -> float:
        """The other knobs' scale: the median random valid point is ``upper`` times slower than the defaults
        (the moved knobs' scale when that holds already: the fallbacks to torch.geqrf above a low
        ``max_n`` are what made cuda_onchip's children 7x slower)."""
        sample = [self.space.sample(rng).as_params() for _ in range(points)]
        defaults = math.log(self.geomean_ms(self.defaults))
        # Per point and case: (fixed time, or base, moved and rest penalties), worked out once;
        # the bisection then only does arithmetic (every simulated GPU builds its landscapes).
        terms = []
        for params in sample:
            row = []
            for name, case in self.cases.items():
                max_n = params.get("max_n", self.defaults.get("max_n"))
                if max_n is not None and case.n > max_n and name in self.reference_ms:
                    row.append((self.reference_ms[name], 0.0, 0.0))
                    continue
                moved, rest = self._penalties(name, case.n, params)
                row.append((self.best_ms[name] * (1.0 + self.scale_moved * moved), self.best_ms[name] * rest, 1.0))
            terms.append(row)

        def median_ratio(s: float) -> float:
            logs = sorted(sum(math.log(fixed + s * per) for fixed, per, _ in row) / len(row) - defaults
                          for row in terms)
            return math.exp(logs[points // 2])

        if median_ratio(self.scale_moved) >= self.upper:
            return self.scale_moved
        return _bisect(median_ratio, self.upper)

    def true_ms(self, params: Mapping[str, Any], case: Case) -> float:
        """The noise-free time of the registered structure with ``params`` on ``case``."""
        max_n = params.get("max_n", self.defaults.get("max_n"))
        if max_n is not None and case.n > max_n and case.name in self.reference_ms:
            return self.reference_ms[case.name]
        base = self.best_ms[case.name] if case.name in self.best_ms else self._unrecorded_ms(case)
        moved, rest = self._penalties(case.name, case.n, params)
        return base * (1.0 + self.scale_moved * moved + self.scale_rest * rest)

    def _unrecorded_ms(self, case: Case) -> float:
        """A case the seed was not timed on: the reference's time, times the family's geomean
        ratio to the reference on the cases it was timed on."""
        if case.name not in self.reference_ms:
            raise KeyError(f"{case.name}: the simulation has no recorded time for this case (known: "
                           f"{', '.join(sorted(self.reference_ms))})")
        ratio = geomean([self.best_ms[c] / self.reference_ms[c] for c in self.best_ms if c in self.reference_ms])
        return self.reference_ms[case.name] * (ratio or 1.0)

    def geomean_ms(self, params: Mapping[str, Any]) -> float:
        """The noise-free fitness over the recorded cases (the family's domain in the recorded run)."""
        value = geomean([self.true_ms(params, c) for c in self.cases.values()])
        assert value is not None
        return value

    @cached_property
    def optimum_ms(self) -> float:
        return self.geomean_ms(self.optimum)


def _bisect(increasing: Callable[[float], float], target: float) -> float:
    """x >= 0 with increasing(x) = target (increasing(0) <= target)."""
    low, high = 0.0, 1.0
    while increasing(high) < target and high < 1e9:
        high *= 2
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if increasing(mid) < target else (low, mid)
    return (low + high) / 2


def _values(dim: Dimension) -> list[Any]:
    if isinstance(dim, Choice):
        return list(dim.values)
    if isinstance(dim, IntRange):
        return list(range(dim.low, dim.high + 1, dim.step))
    return [dim.low, (dim.low + dim.high) / 2, dim.high]


class Landscape:
    """Every family's landscape (built on first use), the reference's recorded times, the noise."""

    def __init__(self, model: RecordedRun, families: Mapping[str, Any], seed: int) -> None:
        self.model = model
        self.families = families
        self.seed = seed
        self._built: dict[str, FamilyLandscape] = {}
        self._registered: dict[str, str] = {}

    def family(self, name: str) -> FamilyLandscape:
        if name not in self._built:
            rec = self.model.families.get(name)
            if rec is None:
                raise KeyError(f"the recorded model {self.model.name} has no times for family {name} "
                               f"(it has {', '.join(sorted(self.model.families))}); leave it out of a simulated run")
            fam = self.families[name]
            defaults = fam.default_params()
            defaults = defaults.as_params() if hasattr(defaults, "as_params") else dict(defaults)
            self._built[name] = FamilyLandscape(name, fam.space, defaults, rec.seed_ms, self.model.reference_ms,
                                                rec.best_ratio, rec.upper_ratio, self.seed)
        return self._built[name]

    def structure_factor(self, family: str, fingerprint: str) -> float:
        """1 for the family's registered file; otherwise a slowdown drawn from the fingerprint."""
        if family not in self._registered:
            from kernels.params import structure_fingerprint

            self._registered[family] = structure_fingerprint(self.families[family].source())
        if fingerprint == self._registered[family]:
            return 1.0
        z = random.Random(stable_seed(self.seed, "structure", family, fingerprint)).gauss(0.0, 1.0)
        return math.exp(abs(z) * STRUCTURE_SIGMA)

    def noisy(self, true_ms: float, rng: random.Random) -> float:
        """One measured median of a case whose noise-free time is ``true_ms``."""
        noise = self.model.noise
        if noise.outlier_log_factors and rng.random() < noise.outlier_rate:
            return true_ms * math.exp(rng.choice(noise.outlier_log_factors))
        sigma = noise.sigma_short if true_ms < noise.short_below_ms else noise.sigma_long
        return true_ms * math.exp(rng.gauss(0.0, sigma))

    def reference_case(self, case: Case) -> float:
        if case.name not in self.model.reference_ms:
            raise KeyError(f"{case.name}: the simulation has no recorded time for this case")
        return self.model.reference_ms[case.name]

    def measure(self, true_ms: Mapping[str, float], rng: random.Random) -> list[CaseOutcome]:
        """Case outcomes as the harness reports them, for noise-free times by case name."""
        out = []
        for case, ms in true_ms.items():
            median = self.noisy(ms, rng)
            spread = self.model.spread["short" if median < self.model.noise.short_below_ms else "long"]
            residuals = {k: round(rng.uniform(0.02, 0.6), 4) for k in ("factor", "orth", "leak", "recon")}
            out.append(CaseOutcome(case=case, status=CaseStatus.OK, median_ms=median, min_ms=median * spread.min_ratio,
                                   max_ms=median * spread.max_ratio, count=spread.count, residuals=residuals))
        return out
