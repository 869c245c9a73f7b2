"""`qrsearch bench`/`verify` and the search time and limit a candidate the same way by default
(kernels/harness/settings.py is the one home of those defaults)."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from kernels.families import BASELINE_PATH
from kernels.harness.job import CandidateJob
from kernels.harness.results import SuiteReport
from kernels.harness.settings import RunLimits, TimingPolicy
from search.cli.app import app
from search.config import RunConfig, default_config


def _captured(monkeypatch: pytest.MonkeyPatch, args: list[str]) -> list[dict[str, Any]]:
    """Run a command with the harness replaced by a recorder of what it was asked to do."""
    calls: list[dict[str, Any]] = []

    def fake_run(job: CandidateJob, hooks: Any) -> SuiteReport:
        kwargs = {"suite": job.suite, "mode": job.mode, "policy": job.policy, "limits": job.limits}
        calls.append(kwargs)
        return SuiteReport(candidate=str(job.candidate), suite=kwargs["suite"], mode=kwargs["mode"], device="cpu",
                           device_name="cpu", versions={}, cases=[])

    # The commands import the harness when they run (so `qrsearch status` never loads torch).
    import kernels.harness.runner as runner

    monkeypatch.setattr(runner, "run_candidate", fake_run)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    CliRunner().invoke(app, args)
    assert calls, "the command never reached the harness"
    return calls


@pytest.mark.parametrize("command", [["bench", "--no-baseline", "--suite", "smoke-bench"],
                                     ["verify", "--suite", "smoke"]])
def test_cli_and_search_use_the_same_timing_and_limits(monkeypatch, command):
    (call,) = _captured(monkeypatch, [command[0], str(BASELINE_PATH), *command[1:], "--device", "cpu"])
    evaluation = RunConfig().evaluation
    assert call["policy"] == evaluation.timing == TimingPolicy()
    assert call["limits"] == evaluation.limits == RunLimits()
    # The GPU default of `qrsearch launch` changes neither.
    assert default_config(cuda=True).evaluation.timing == call["policy"]


def test_timeout_overrides_the_case_limit_only(monkeypatch):
    (call,) = _captured(monkeypatch, ["bench", str(BASELINE_PATH), "--no-baseline", "--suite", "smoke-bench",
                                      "--device", "cpu", "--timeout", "7"])
    assert call["limits"] == RunLimits(case_timeout_s=7)
    assert call["policy"] == TimingPolicy()


def test_timing_region_changes_the_region_only(monkeypatch):
    (call,) = _captured(monkeypatch, ["bench", str(BASELINE_PATH), "--no-baseline", "--suite", "smoke-bench",
                                      "--device", "cpu", "--timing-region", "gpumode"])
    assert call["policy"] == TimingPolicy(region="gpumode")
