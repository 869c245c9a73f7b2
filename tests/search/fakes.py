"""Fakes for the loop's interfaces: a family registry entry, an evaluator pool, an LLM pool."""

from __future__ import annotations

import math
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Annotated, Any, Callable

from kernels.params import Choice, IntRange, ParamSpace, read_params, render_params
from population.models import CaseOutcome, CaseStatus, EvalResult, State
from search.config import LLMConfig
from search.config.sections import LLMModel
from search.engine.llm import LLMError, LLMReply
from search.engine.pool import Completed, Lost, PoolStats
from search.engine.messages import EvalOutcome, EvalRequest

TOY_SOURCE = '''import torch

# qrsearch: params
PARAMS = {
    "block": 16,
    "warps": 4,
    "stages": 2,
}
# qrsearch: end params


def custom_kernel(A):
    return torch.geqrf(A)
'''


class ToySpace(ParamSpace):
    block: Annotated[int, Choice(8, 16, 32, 64, 128)] = 16
    warps: Annotated[int, Choice(1, 2, 4, 8, 16)] = 4
    stages: Annotated[int, IntRange(1, 6)] = 2


@dataclass(frozen=True)
class ToyFamily:
    name: str
    description: str = "a toy family for loop tests"
    baseline: bool = False
    space: type[ParamSpace] = ToySpace
    text: str = TOY_SOURCE
    needs_cuda: bool = False  # as kernels.families.RegisteredFamily: toy kernels run anywhere

    def source(self) -> str:
        return self.text

    def default_params(self) -> dict[str, Any]:
        return read_params(self.text)

    def render(self, params: Any) -> str:
        data = params.as_params() if isinstance(params, ParamSpace) else dict(params)
        return render_params(self.text, self.space(**data).as_params())


def toy_time(params: dict[str, Any], source: str) -> float:
    """A landscape Optuna can learn: best at block=32, warps=2, stages=3; an LLM edit marked FAST is 2x faster."""
    block, warps, stages = params.get("block", 16), params.get("warps", 4), params.get("stages", 2)
    t = 1.0 + abs(math.log2(block / 32)) + 0.5 * abs(math.log2(warps / 2)) + 0.25 * abs(stages - 3)
    return t / 2 if "FAST" in source else t


def verified(request: EvalRequest, ms: float) -> EvalOutcome:
    cases = tuple(CaseOutcome(case=c.name, status=CaseStatus.OK, median_ms=ms, min_ms=ms, max_ms=ms,
                              residuals={"factor": 0.1, "orth": 0.5}) for c in request.bench_cases)
    result = EvalResult(candidate_id=request.candidate_id, cases=cases, geomean_ms=ms, device="fake",
                        versions={"torch": "x"}, eval_seconds=0.01)
    return EvalOutcome(candidate_id=request.candidate_id, state=State.VERIFIED, result=result, busy_s=0.01)


def failed(request: EvalRequest, state: State, reason: str) -> EvalOutcome:
    result = EvalResult(candidate_id=request.candidate_id, error=reason, device="fake")
    return EvalOutcome(candidate_id=request.candidate_id, state=state, reason=reason, result=result, busy_s=0.01)


def default_judge(request: EvalRequest) -> EvalOutcome:
    from kernels.params import read_params as rp

    if "CRASH" in request.source:
        return failed(request, State.CRASHED, "verify x: evaluation process killed by SIGSEGV")
    if request.family == "torch_geqrf":
        return verified(request, 10.0)
    return verified(request, toy_time(rp(request.source), request.source))


@dataclass
class FakePool:
    size: int = 2
    judge: Callable[[EvalRequest], EvalOutcome] = default_judge
    lose: dict[str, int] = field(default_factory=dict)  # candidate id -> times to lose it
    submitted: list[str] = field(default_factory=list)
    lanes: int = 1  # requests in flight per evaluator, as RayPool's lanes
    hold: bool = False  # what holding() answers: an evaluator waits for a compiled request
    up: bool = True  # False: every evaluator is dead or restarting (RayPool: no slot ready)
    _flight: list[EvalRequest] = field(default_factory=list)

    def free_slots(self) -> int:
        if not self.up:
            return 0
        return self.size * self.lanes - len(self._flight)

    def submit(self, request: EvalRequest) -> None:
        if self.free_slots() <= 0:  # as RayPool does: the loop must not oversubscribe evaluators
            raise RuntimeError("submit() without a free slot")
        self.submitted.append(request.candidate_id)
        self._flight.append(request)

    def poll(self, timeout: float) -> list:
        events = []
        for request in self._flight:
            if not self.up:
                events.append(Lost(candidate_id=request.candidate_id, reason="gpu0 died with its node"))
            elif self.lose.get(request.candidate_id, 0) > 0:
                self.lose[request.candidate_id] -= 1
                events.append(Lost(candidate_id=request.candidate_id, reason="gpu0 died during the evaluation"))
            else:
                events.append(Completed(outcome=self.judge(request)))
        self._flight = []
        return events

    def inflight(self) -> list[str]:
        return [r.candidate_id for r in self._flight]

    def inflight_count(self) -> int:
        return len(self._flight)

    def withdraw_queued(self) -> list[str]:
        return []  # every request it takes is running: none is queued behind another

    def withdraw(self, candidate_ids) -> list[str]:
        return []  # nothing queued: every one it holds runs on

    def holding(self) -> bool:
        return self.hold

    def stats(self) -> PoolStats:
        return PoolStats(evaluators=self.size, ready=self.size if self.up else 0, busy_fraction={"fake0": 1.0})

    def shutdown(self) -> None:
        pass


class FakeLLMClient:
    def __init__(self, config: LLMConfig) -> None:
        self.config = config


class FakeLLMPool:
    """Answers immediately with ``respond(messages)``: text, or an LLMError to raise."""

    def __init__(self, respond: Callable[[list[dict[str, str]]], str | LLMError], concurrency: int = 1,
                 **llm: Any) -> None:
        # No back-off by default: these loops run without real time passing; tests of the
        # back-off itself pass backoff_initial_s and friends.
        settings = dict(base_url="http://fake/v1", concurrency=concurrency, backoff_initial_s=0.0,
                        models=[LLMModel(name="fake", usd_per_mtok_in=1, usd_per_mtok_out=2)])
        settings.update(llm)
        self.client = FakeLLMClient(LLMConfig(**settings))
        self.respond = respond
        self.prompts: list[list[dict[str, str]]] = []

    @property
    def free_slots(self) -> int:
        return self.client.config.concurrency

    @property
    def inflight(self) -> int:
        return 0

    def submit(self, messages: list[dict[str, str]], model: LLMModel) -> Future:
        self.prompts.append(messages)
        future: Future = Future()
        answer = self.respond(messages)
        if isinstance(answer, LLMError):
            future.set_exception(answer)
        else:
            future.set_result(LLMReply(text=answer, model=model.name, prompt_tokens=1000, completion_tokens=200,
                                       cost_usd=0.0014, latency_s=0.01))
        return future

    def shutdown(self, wait: bool = False) -> None:
        pass


class NoSpace(ParamSpace):
    """The baseline's space: torch.geqrf has no knobs."""


def toy_baseline() -> ToyFamily:
    """The torch.geqrf reference as a registry entry (the real baseline file, no knobs)."""
    from kernels.families import BASELINE_PATH

    return ToyFamily("torch_geqrf", baseline=True, space=NoSpace, text=BASELINE_PATH.read_text())


def toy_registry(text: str = TOY_SOURCE) -> dict[str, ToyFamily]:
    """A registry of the torch.geqrf baseline and one toy family (install with monkeypatch)."""
    return {"torch_geqrf": toy_baseline(), "toy": ToyFamily("toy", text=text)}
