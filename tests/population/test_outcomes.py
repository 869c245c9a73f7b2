"""One case-status vocabulary and one geomean (population/outcomes.py), and stores written before
the harness and the store shared them."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from population.models import CaseOutcome, State
from population.outcomes import CaseStatus, geomean
from population.run import Run
from population.store import RunStore

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).parents[2]


def test_a_store_written_before_the_merge_opens_with_the_same_statuses(tmp_path: Path) -> None:
    run_dir = tmp_path / "old"
    shutil.copytree(DATA / "store_before_one_vocabulary", run_dir)
    with RunStore.open(run_dir, readonly=True) as store:
        failed = next(c for c in store.list_candidates() if c.state is State.FAILED_VERIFY)
        result = store.get_result(failed.id)
    assert result is not None
    # The five spellings the store used then, in the order they were written.
    assert [c.status for c in result.cases] == [CaseStatus.OK, CaseStatus.FAILED_VERIFY, CaseStatus.ERROR,
                                                 CaseStatus.TIMEOUT, CaseStatus.SKIPPED]
    assert [c.status.value for c in result.cases] == ["ok", "failed_verify", "error", "timeout", "skipped"]
    run = Run.open(run_dir)  # the writer side resumes it too
    try:
        assert run.population.family("a").champion is not None
    finally:
        run.close()


def test_the_harness_spellings_of_before_load_as_aliases() -> None:
    assert CaseStatus("passed") is CaseStatus.OK and CaseStatus("not_run") is CaseStatus.SKIPPED
    assert CaseOutcome.model_validate_json('{"case": "x", "status": "passed"}').status is CaseStatus.OK
    assert CaseOutcome.model_validate({"case": "x", "status": "not_run"}).status is CaseStatus.SKIPPED
    with pytest.raises(ValueError):
        CaseStatus("fine")


def test_a_bench_json_written_before_the_merge_still_loads() -> None:
    from kernels.harness.results import SuiteReport

    raw = json.loads((ROOT / "docs" / "device-runs" / "baseline-qrv2-bench.json").read_text())
    assert {c["status"] for c in raw["cases"]} == {"passed"}
    report = SuiteReport.model_validate(raw)
    assert report.ok and all(c.status is CaseStatus.OK for c in report.cases)
    assert report.geomean_ms == pytest.approx(raw["geomean_ms"])


def test_every_harness_status_is_stored_as_it_is() -> None:
    """No bridge: what the harness reports is what the store keeps (a crash is no longer an 'error')."""
    for status in CaseStatus:
        outcome = CaseOutcome(case="c", status=status)
        assert CaseOutcome.model_validate_json(outcome.model_dump_json()).status is status


def test_one_geomean() -> None:
    assert geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert geomean(x for x in (1.0, 1.0, 8.0)) == pytest.approx(2.0)
    for bad in ([], [1.0, None], [1.0, 0.0], [1.0, -2.0], [1.0, math.inf], [1.0, math.nan]):
        assert geomean(bad) is None
