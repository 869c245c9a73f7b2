"""Gate calls named in a job's fast_gate_cases are checked with the fast float64 Q; every
other gate call keeps the reference householder_product construction."""

from __future__ import annotations

from pathlib import Path

import torch

import kernels.harness.child as child
from kernels.harness.job import Job
from kernels.harness.timing import DeviceClock
from kernels.suites import get_suite
from kernels.verify import VerifyResult


def test_only_the_named_cases_gate_with_the_fast_q(monkeypatch):
    seen: dict[str, bool] = {}

    def recording(kernel, case, seed, device, clock=None, exact_q=True):
        seen[case.name] = exact_q
        return VerifyResult(ok=True, message="recorded"), None, 0.0

    monkeypatch.setattr(child, "call_verified", recording)
    fast, reference = list(get_suite("smoke-bench"))[:2]
    job = Job(candidate="x.py", cases=[fast, reference], mode="verify", fast_gate_cases=frozenset({fast.name}))
    again = Job.model_validate_json(job.model_dump_json())  # the job travels to the child as JSON
    assert again.fast_gate_cases == {fast.name}
    device = torch.device("cpu")
    for case in (fast, reference):
        result, must_exit = child.run_case(torch.geqrf, case, again, device, DeviceClock(device), Path("x.py"),
                                           child._trusted())
        assert result.status == "ok" and not must_exit
    assert seen == {fast.name: False, reference.name: True}


def test_the_fast_gate_still_fails_a_wrong_factorisation():
    case = list(get_suite("smoke-bench"))[0]

    def wrong(a):
        h, tau = torch.geqrf(a)
        return h, tau * 0.5  # wrong reflector scales: Q is no longer orthogonal

    verdict, _, _ = child.call_verified(wrong, case, case.seed, torch.device("cpu"), exact_q=False)
    assert not verdict.ok
