"""A run store written by the previous version (commit 484b148, before search/ was split into
rooms and the driver's records got one home) still reads: ``status``, ``champions`` and
``lineage`` give the same answers on it as on a store written now."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from search.cli.app import app
from search.cli.run import run_status
from tests.population.data.make_store import T0, build
from tests.population.test_snapshot import old_run


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("old")
    build(tmp / "new")
    return old_run(tmp), tmp / "new"


def cli(*args: object) -> str:
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def test_status_reads_an_old_store(runs: tuple[Path, Path]) -> None:
    old, new = runs
    data = run_status(old)
    assert data["state"] == "stopped" and data["stop_reason"] == "budget: 6 evaluations"
    assert (data["candidates"], data["evaluations"], data["sessions"]) == (6, 6, 2)
    assert data["failures"] == {"failed_verify": 1} and data["pending"] == 0
    assert data["started"] == T0
    assert data["elapsed_minutes"] == pytest.approx(160 / 60)  # killed session to the next start, then 60 s
    assert (data["llm_calls"], data["llm_tokens"], data["llm_cost_usd"]) == (1, 150, pytest.approx(0.25))
    assert data["llm_models"]["toy-llm"]["accepted"] == 1
    assert data["best"]["f"] == {"candidate": "c0000006", "geomean_ms": pytest.approx(2 ** 0.5),
                                 "speedup": pytest.approx(1.0)}
    assert data["seconds_per_evaluation"]["total"] == pytest.approx(2.0)
    assert data["human"]["notes"] == 1
    fresh = run_status(new)
    for key in ("state", "candidates", "states", "evaluations", "failures", "best", "llm_models", "sessions",
                "elapsed_minutes", "baseline_geomean_ms", "seconds_per_evaluation"):
        assert data[key] == fresh[key], key
    assert "stopped" in cli("status", old)


def test_champions_and_lineage_read_an_old_store(runs: tuple[Path, Path]) -> None:
    old, new = runs
    champions = json.loads(cli("champions", old, "--json"))
    fresh_champions = json.loads(cli("champions", new, "--json"))
    for row in (*champions["families"], *fresh_champions["families"]):
        row.pop("since", None)  # when the champion took over: wall clock of the writer
    assert {**champions, "run_dir": None} == {**fresh_champions, "run_dir": None}
    f = next(r for r in champions["families"] if r["family"] == "f")
    assert f["champion"] == "c0000006" and f["speedup"] == pytest.approx(1.0) and f["evaluations"] == 5
    assert f["chain"][-1] == "c0000006" and champions["baseline"]["candidate"] == "c0000001"
    lineage = json.loads(cli("lineage", old, "--format", "json"))
    fresh = json.loads(cli("lineage", new, "--format", "json"))
    assert lineage["families"] == fresh["families"]
    assert lineage["families"]["f"]["roots"] == ["c0000002"]
    ancestry = json.loads(cli("lineage", old, "--candidate", "c6", "--format", "json"))
    assert ancestry["ancestors"] == ["c0000004", "c0000003", "c0000002"]
    assert "c0000006" in cli("lineage", old)
