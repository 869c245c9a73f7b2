"""The child protocol: every message survives its trip over the result pipe, a line that is no
message is told apart from one whose payload is wrong, and the runner hears a job through it."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from kernels.harness.protocol import (CaseFinished, CaseStarted, Done, Fatal, JitCounts, Loaded, Ready, TurnAsked,
                                      TurnGivenBack, Unreadable, Warm, decode, encode)
from kernels.harness.results import CaseResult, TimingStats
from kernels.suites import Case
from kernels.verify import VerifyResult
from population.outcomes import CaseStatus

CASE = Case(batch=2, n=8, cond=1, seed=3, case="dense")
TIMING = TimingStats(median_ms=1.5, min_ms=1.0, max_ms=2.0, mean_ms=1.5, stderr_ms=0.01, count=5, timer="host")
MESSAGES = [
    Loaded(), Warm(), Ready(device="cpu", device_name="x86_64", versions={"torch": "2.13.0"}, pid=42),
    Fatal(status=CaseStatus.FAILED_COMPILE, error="SyntaxError: bad"), CaseStarted(index=3),
    CaseFinished(index=1, result=CaseResult(case=CASE, status=CaseStatus.OK, timing=TIMING, wall_s=0.25)),
    JitCounts(compiled=2, cache_hits=7), TurnAsked(), TurnGivenBack(), Done(reusable=True),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: m.type)
def test_every_message_round_trips_as_one_line(message):
    line = encode(message)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert decode(line.rstrip(b"\n")) == message


def test_the_wire_form_is_the_one_the_child_always_wrote():
    """Plain JSON objects tagged by ``type``, as the runner read them before the messages were types."""
    assert encode(CaseStarted(index=3)) == b'{"type": "case_start", "index": 3}\n'
    assert encode(Done(reusable=False)) == b'{"type": "done", "reusable": false}\n'
    assert encode(Fatal(status=CaseStatus.ERROR, error="e")) == b'{"type": "fatal", "status": "error", "error": "e"}\n'


def test_a_nan_residual_survives_the_pipe():
    verdict = VerifyResult(ok=False, message="non-finite output", factor_scaled=math.nan)
    sent = CaseFinished(index=0, result=CaseResult(case=CASE, status=CaseStatus.FAILED_VERIFY, verify=verdict))
    received = decode(encode(sent))
    assert isinstance(received, CaseFinished) and received.result.verify is not None
    assert math.isnan(received.result.verify.factor_scaled)


def test_defaults_of_fields_a_message_may_leave_out():
    assert decode(b'{"type": "fatal", "error": "e"}') == Fatal(status=CaseStatus.ERROR, error="e")
    assert decode(b'{"type": "jit"}') == JitCounts(compiled=0, cache_hits=0)
    assert decode(b'{"type": "done"}') == Done(reusable=False)


@pytest.mark.parametrize("line", [b"not json", b'{"type": "no_such_message"}', b"[1, 2]", b'"text"'])
def test_a_line_that_is_no_message_is_unreadable(line):
    message = decode(line)
    assert isinstance(message, Unreadable) and message.line == line.decode()


def test_a_known_message_with_a_broken_payload_is_an_error():
    with pytest.raises(ValidationError):
        decode(b'{"type": "case_start"}')
