"""Finding runs: ``qrsearch runs DIR`` and ``qrsearch status DIR`` of a folder list the runs with
state, age, evaluations and best; ``latest`` points at the run launched last."""

from __future__ import annotations

import json
import time

from population.models import Origin
from population.records import STATUS_KEY
from search.run_dirs import point_latest, runs_in
from tests.search.cli.test_cli_tools import run_cli
from tests.search.inspect.test_inspect_units import Builder


def _runs(tmp_path):
    folder = tmp_path / "runs"
    first = Builder(folder / "first")  # torch.geqrf 1 ms per case
    first.add("f", None, Origin.SEED, times=[0.5, 0.5, 0.5, 0.5])
    first.run.set_json(STATUS_KEY, {"state": "stopped", "stop_reason": "SIGINT received", "updated": time.time() - 600})
    first.run.close()
    time.sleep(0.01)  # the second run's store is younger
    second = Builder(folder / "second")
    second.add("f", None, Origin.SEED, times=[0.25, 0.25, 0.25, 0.25])
    second.run.set_json(STATUS_KEY, {"state": "finished", "stop_reason": "evaluation budget reached (4)",
                                     "updated": time.time() - 30})
    second.run.close()
    (folder / "notes").mkdir()  # not a run: left out
    return folder


def test_runs_lists_state_age_evaluations_and_best(capsys, tmp_path):
    folder = _runs(tmp_path)
    point_latest(folder / "second")
    code, out, err = run_cli(capsys, "runs", folder, "--json")
    assert code == 0, err
    rows = json.loads(out)["runs"]
    assert [r["run"] for r in rows] == ["first", "second"]
    assert [r["state"] for r in rows] == ["stopped", "finished"]
    assert rows[0]["age"] == "10 min ago" and rows[1]["age"] == "30 s ago"
    assert [r["best"]["speedup"] for r in rows] == [2.0, 4.0] and rows[1]["best"]["family"] == "f"
    assert [r["latest"] for r in rows] == [False, True]
    code, table, _ = run_cli(capsys, "runs", folder)
    assert code == 0 and "second (latest)" in table and "4.00x" in table and "10 min ago" in table


def test_status_of_a_folder_of_runs_lists_them_instead_of_failing(capsys, tmp_path):
    folder = _runs(tmp_path)
    code, out, err = run_cli(capsys, "status", folder)
    assert code == 0, err
    assert "first" in out and "second" in out and "stopped" in out and "no run store" not in out + err


def test_other_commands_on_a_folder_of_runs_name_them(capsys, tmp_path):
    folder = _runs(tmp_path)
    code, _, err = run_cli(capsys, "champions", folder)
    assert code == 2 and f"it holds 2 runs (first, second); name one, or list them with `qrsearch runs {folder}`" in err


def test_latest_points_at_the_newest_launch_and_status_follows_it(capsys, tmp_path):
    folder = _runs(tmp_path)
    assert point_latest(folder / "first") == folder / "latest"
    assert point_latest(folder / "second") == folder / "latest"  # replaced, not stacked
    assert (folder / "latest").resolve() == (folder / "second").resolve()
    assert [p.name for p in runs_in(folder)] == ["first", "second"]  # the link is no run of its own
    code, out, _ = run_cli(capsys, "status", folder / "latest", "--json")
    assert code == 0 and json.loads(out)["state"] == "finished"


def test_runs_of_an_empty_folder_says_how_to_make_one(capsys, tmp_path):
    code, out, _ = run_cli(capsys, "runs", tmp_path)
    assert code == 0 and "no runs in" in out and "qrsearch launch" in out
    code, _, err = run_cli(capsys, "runs", tmp_path / "nope")
    assert code == 2 and "no such directory" in err
