"""The simulated GPU's model: derived from the recorded run it names, a landscape whose optimum is
where it says, and timing noise with the recorded spread."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from kernels.families import FAMILIES
from kernels.suites import get_suite
from search.mutation.operators.local_step import moves
from search.evaluate.simulated.landscape import Landscape, applies, acts_on
from search.evaluate.simulated.recorded import DEFAULT_MODEL, MODELS_DIR, derive, load, model_json

ROOT = Path(__file__).resolve().parents[3]
RUN_M = ROOT / "docs" / "device-runs" / "search-1gpu-10min-m"
SEARCHED = [name for name in load().families]


def test_the_shipped_model_is_what_its_recorded_run_gives():
    shipped = (MODELS_DIR / f"{DEFAULT_MODEL}.json").read_text(encoding="utf-8")
    assert model_json(derive(RUN_M, DEFAULT_MODEL)) == shipped
    model = load()
    # Run m's own figures (docs/search-performance.md): 250 evaluations in 605 s of evaluation,
    # none failed, 64 screened; its torch.geqrf reference took 63 s.
    assert model.evaluations == 250 and 600 < model.wall_s < 610
    assert sum(f.failures for f in model.families.values()) == 0
    assert sum(f.screened for f in model.families.values()) == 64
    assert 60 < model.reference_s < 66 and len(model.reference_ms) == 14
    assert 0.45 < model.wall_share < 0.55  # two lanes: about half of each evaluation's seconds were the device's


@pytest.fixture(scope="module")
def landscape():
    return Landscape(load(), FAMILIES, seed=3)


@pytest.mark.parametrize("family", SEARCHED)
def test_the_optimum_is_where_the_landscape_says(landscape, family):
    land = landscape.family(family)
    best = land.geomean_ms(land.optimum)
    assert best == pytest.approx(land.optimum_ms)
    land.space(**land.optimum)  # a valid point of the family's real space
    cases = list(land.cases.values())
    per_case = {c.name: land.true_ms(land.optimum, c) for c in cases}
    # No single or double move from the optimum, and no random valid point, is faster on any case.
    rng = random.Random(0)
    neighbours = [{**land.optimum, k: v} for k, v in moves(land.space, land.optimum)]
    doubles = [{**p, k: v} for p in neighbours[:12] for k, v in moves(land.space, p)]
    randoms = [land.space.sample(rng).as_params() for _ in range(150)]
    for point in [*neighbours, *doubles, *randoms]:
        for c in cases:
            assert land.true_ms(point, c) >= per_case[c.name] * (1 - 1e-12)
    # A knob that acts on none of the family's cases (a size class it is not timed on) leaves
    # the time as it is, as does a higher max_n; a move of any other knob costs time.
    acting = {k for k in land.knobs if any(applies(k, c.n, land.classes) for c in cases)}
    for (k, _), point in zip(moves(land.space, land.optimum), neighbours):
        assert land.geomean_ms(point) > best if k in acting else land.geomean_ms(point) >= best
    # The defaults keep the recorded seed's medians, and sit the calibrated gap above the optimum.
    recorded = load().families[family].seed_ms
    for c in cases:
        assert land.true_ms(land.defaults, c) == pytest.approx(recorded[c.name], rel=1e-9)
    assert land.geomean_ms(land.defaults) / best == pytest.approx(land.gap, rel=1e-6)
    assert land.gap >= 1.05


def test_another_structure_is_never_faster_than_the_registered_one(landscape):
    factors = [landscape.structure_factor("cuda_blocked", f"edited{i}") for i in range(200)]
    assert min(factors) >= 1.0 and max(factors) > 1.05
    assert landscape.structure_factor("cuda_blocked", "edited7") == factors[7]  # the same fingerprint, the same factor


def test_size_class_knobs_act_on_their_sizes_only():
    names = ["nb_le384", "nb_le512", "nb_le1024", "block_gt1024", "update_lt512", "update_le1024", "warps_32",
             "warps_64", "graph", "panel_min_blocks_le256"]
    classes = acts_on(names)
    assert [k for k in names if applies(k, 352, classes)] == ["nb_le384", "update_lt512", "graph"]
    assert [k for k in names if applies(k, 512, classes)] == ["nb_le512", "update_le1024", "graph"]
    assert [k for k in names if applies(k, 2048, classes)] == ["block_gt1024", "graph"]
    assert [k for k in names if applies(k, 20, classes)] == ["nb_le384", "update_lt512", "warps_32", "graph",
                                                             "panel_min_blocks_le256"]
    assert [k for k in names if applies(k, 40, classes)] == ["nb_le384", "update_lt512", "warps_64", "graph",
                                                             "panel_min_blocks_le256"]


def test_measured_medians_have_the_recorded_spread(landscape):
    noise = load().noise
    rng = random.Random(11)
    for true_ms, sigma in ((0.03, noise.sigma_short), (6.0, noise.sigma_long)):
        logs = [math.log(landscape.noisy(true_ms, rng) / true_ms) for _ in range(20000)]
        slow = [x for x in logs if x > 0.1]  # the slower mode: every recorded one was 15% or more
        usual = [x for x in logs if x <= 0.1]
        rate = len(slow) / len(logs)
        spread = math.sqrt(sum(x * x for x in usual) / len(usual))
        assert spread == pytest.approx(sigma, rel=0.05)
        assert abs(rate - noise.outlier_rate) < 4 * math.sqrt(noise.outlier_rate / len(logs))
        assert {round(x, 6) for x in slow} <= set(noise.outlier_log_factors)
    # What was recorded: within the honesty bar the search and a standalone bench agreed to under 1%.
    assert noise.sigma_short < 0.01 and noise.sigma_long < 0.01 and noise.pairs == 47


def test_above_max_n_a_case_takes_the_references_time(landscape):
    land = landscape.family("cuda_blocked")
    case = next(c for c in get_suite("qrv2-bench") if c.n == 1024 and c.name in land.cases)
    assert land.true_ms({**land.optimum, "max_n": 512}, case) == load().reference_ms[case.name]

