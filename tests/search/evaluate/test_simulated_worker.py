"""The simulated GPU without Ray: compile slots in time, the device held for the recorded share of
an evaluation, verdicts from the landscape through the real cascade rule."""

from __future__ import annotations

import threading
import time

import pytest

from kernels.families import FAMILIES
from kernels.params import render_params
from kernels.suites import get_suite
from population.models import State
from search.config import SimulationConfig
from search.engine.cascade import plan_screen
from search.engine.domains import domain_cases
from search.engine.messages import EvalRequest
from search.evaluate.simulated.compiles import CompileSlots
from search.evaluate.simulated.recorded import load
from search.evaluate.simulated.worker import SimulatedWorker


class FakeClock:
    """Time that passes only when someone sleeps."""

    def __init__(self) -> None:
        self.now = 100.0
        self.lock = threading.Lock()

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        with self.lock:
            self.now += max(0.0, seconds)


def test_a_free_compile_slot_goes_to_the_cheapest_expected_compile_and_a_waited_one_goes_first():
    clock = FakeClock()
    slots = CompileSlots(2, clock)
    for cid, seconds in (("a", 10.0), ("b", 4.0), ("c", 3.0), ("d", 1.0)):
        assert slots.announce(cid, seconds)
    assert not slots.announce("a", 1.0)  # known already
    assert slots.room() == 0  # a and b compiling (first come, slots free), c and d waiting
    clock.sleep(4.0)
    # b's slot went to d, the cheaper of the two waiting, though c was announced first (t=104..105).
    assert slots.is_ready("b") and not slots.is_ready("a") and not slots.is_ready("c")
    assert slots.claim("d") == pytest.approx(105.0)
    assert slots.claim("c") == pytest.approx(108.0)  # then c, at 105, for 3 s
    assert slots.claim("never-announced") is None and slots.is_ready("never-announced")
    clock.sleep(10.0)
    assert all(slots.is_ready(cid) for cid in "abcd") and slots.room() == 2


def test_the_scheduler_orders_by_the_expected_cost_and_a_claimed_compile_jumps_the_line():
    clock = FakeClock()
    slots = CompileSlots(1, clock)
    assert slots.announce("long", 20.0)  # t=100..120
    # Expected costs, not the drawn seconds, decide (the real scheduler knows only its family's last).
    assert slots.announce("x", 5.0, expected=1.0) and slots.announce("y", 1.0, expected=9.0)
    assert slots.announce("z", 2.0, expected=1.0)
    assert slots.claim("z") == pytest.approx(122.0)  # waited for: first once long ends, at 120
    clock.sleep(22.0)
    # Then x (expected 1 s) before y (expected 9 s, though it takes 1): 122..127, then y 127..128.
    assert not slots.is_ready("x") and not slots.is_ready("y")
    clock.sleep(5.0)
    assert slots.is_ready("x") and not slots.is_ready("y")
    clock.sleep(1.0)
    assert slots.is_ready("y")
    # A compile announced after a slot came free starts at its announcement, never before it.
    clock.sleep(50.0)
    assert slots.announce("late", 3.0, expected=0.0) and slots.claim("late") == pytest.approx(clock.now + 3.0)


def request(cid: str, family: str, params: dict | None = None, screen_from=None) -> EvalRequest:
    fam = FAMILIES[family]
    source = render_params(fam.source(), params) if params else fam.source()
    cases = domain_cases(list(get_suite("qrv2-bench")), fam)
    screen = None
    if screen_from is not None:
        best, fitness = screen_from
        screen = plan_screen(cases, 2, 1.2, best, fitness)
    return EvalRequest(candidate_id=cid, family=family, source=source, verify_suite="qrv2-quick",
                       verify_cases=list(get_suite("qrv2-quick"))[:2], bench_suite="qrv2-bench", bench_cases=cases,
                       device="simulated", screen=screen)


def worker(clock: FakeClock, **settings) -> SimulatedWorker:
    return SimulatedWorker(SimulationConfig(**settings), seed=7, name="gpu0", lanes=2, clock=clock, sleep=clock.sleep)


def test_an_evaluation_waits_for_its_compile_then_holds_the_device_for_its_recorded_share():
    clock = FakeClock()
    sim = worker(clock, time_scale=10.0)
    first = request("c1", "cuda_blocked")
    assert sim.prefetch(first) and sim.compile_room() == SimulationConfig().compile_slots - 1
    assert sim.compiled(["c1"]) == [] and sim.compiled(["unknown"]) == ["unknown"]
    started = clock.now
    out = sim.evaluate(first)
    assert out.state is State.VERIFIED and out.result.fitness_ms > 0
    stages = out.result.stage_seconds
    model = load()
    # Simulated seconds: the compile was one of cuda_blocked's recorded ones, all of it waited for
    # (announced just now), then the device for one recorded full bench times the wall share.
    assert stages["compile_ahead"] in model.families["cuda_blocked"].compile_s
    assert stages["compile_wait"] == pytest.approx(stages["compile_ahead"])
    occupancy = stages["verify"] + stages["bench"]
    assert any(occupancy == pytest.approx(s * model.wall_share) for s in model.families["cuda_blocked"].full_s)
    assert clock.now - started == pytest.approx((stages["compile_wait"] + occupancy) / 10.0)
    assert out.result.device.startswith("simulated") and [c.case for c in out.result.cases] == \
        [c.name for c in first.bench_cases]
    # The same candidate again (say after a lost evaluator) gets the same answer.
    again = worker(FakeClock(), time_scale=10.0).evaluate(first)
    assert again.result.cases == out.result.cases


def test_one_evaluation_holds_the_device_at_a_time_whatever_the_lanes():
    sim = SimulatedWorker(SimulationConfig(time_scale=50.0), seed=7, name="gpu0", lanes=4, compile_ahead=False)
    outcomes = []
    lanes = [threading.Thread(target=lambda i=i: outcomes.append(sim.evaluate(request(f"c{i}", "householder_unblocked"))))
             for i in range(4)]
    started = time.monotonic()
    for t in lanes:
        t.start()
    for t in lanes:
        t.join()
    wall = time.monotonic() - started
    on_device = sum(o.result.stage_seconds["verify"] + o.result.stage_seconds["bench"] for o in outcomes) / 50.0
    assert len(outcomes) == 4 and wall >= on_device * 0.98  # the device time adds up: one at a time
    assert sum(o.result.stage_seconds["settle"] for o in outcomes) > 0  # and the lanes waited for it


def test_a_child_much_slower_than_its_structure_best_is_screened_by_the_cascades_rule():
    clock = FakeClock()
    sim = worker(clock)
    land = sim.gpu.landscape.family("blocked_wy")
    best = sim.evaluate(request("best", "blocked_wy", land.optimum))
    assert best.state is State.VERIFIED
    worst = {**land.optimum, "nb_le512": 64, "warps_le512": 16, "maxnreg_le512": 0, "bn": 16, "rb": 16}
    out = sim.evaluate(request("slow", "blocked_wy", worst, screen_from=(best.result, best.result.fitness_ms)))
    assert out.state is State.SCREENED and out.result.fidelity == "screen"
    assert out.result.screen["geomean_ms"] > 1.2 * out.result.screen["bar_ms"]
    plan = request("slow", "blocked_wy", worst, screen_from=(best.result, best.result.fitness_ms)).screen
    assert [c.case for c in out.result.cases] == plan.cases and out.result.geomean_ms is None
    near = sim.evaluate(request("near", "blocked_wy", land.optimum, screen_from=(best.result, best.result.fitness_ms)))
    assert near.state is State.VERIFIED and len(near.result.cases) == len(best.result.cases)


def test_failures_come_at_the_configured_rate_and_blame_the_verify_stage():
    sim = worker(FakeClock(), failure_rate=1.0)
    out = sim.evaluate(request("c1", "lookahead_split"))
    assert out.state is State.FAILED_VERIFY and "simulated failure" in out.reason and out.result.error
    reference = sim.evaluate(request("ref", "torch_geqrf"))
    assert reference.state is State.VERIFIED  # the reference never fails
    assert [c.median_ms for c in reference.result.cases] == pytest.approx(
        [load().reference_ms[c.case] for c in reference.result.cases], rel=0.5)


def test_a_duel_times_the_defender_as_the_reference_case_by_case():
    sim = worker(FakeClock())
    land = sim.gpu.landscape.family("cuda_onchip")
    duel = request("c9:duel:1", "cuda_onchip", land.optimum).model_copy(
        update={"reference_source": FAMILIES["cuda_onchip"].source()})
    out = sim.evaluate(duel)
    assert out.state is State.VERIFIED
    for case in out.result.cases:
        assert case.baseline_ms is not None and case.baseline_ms > 0.8 * case.median_ms


def test_a_hold_question_is_answered_when_the_compile_ends_without_polling_at_a_high_rate():
    clock = FakeClock()
    sim = worker(clock)
    sleeps: list[float] = []
    sim.sleep = lambda s: (sleeps.append(s), clock.sleep(s))  # type: ignore[assignment,func-returns-value]
    assert sim.prefetch(request("c1", "lookahead_split"))
    assert sim.compiles is not None
    ends = sim.compiles.next_finish()
    assert ends is not None and ends - clock.now > 0.2
    assert sim.ready_within(["c1"], timeout_s=0.1) == [] and clock.now == pytest.approx(100.1)  # timed out
    assert sim.ready_within(["c1"], timeout_s=3600.0) == ["c1"]
    assert clock.now == pytest.approx(ends)  # answered the moment the compile ended, not a poll later
    assert len(sleeps) <= (ends - 100.0) / 0.25 + 3  # a few wake-ups a second, not fifty
