"""Inspection of a large store (tools/scale_store.py: a real simulated run, then copies of it),
at a few thousand candidates: the output is collapsed and sampled, and what the fast paths read
(SQLite extracting fields from the stored JSON, the fastest of a hidden subtree) is what reading
every result would give.  Not a timing test: docs/scale.md has the timings at 50,000."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from population.models import State
from search.cli.app import app
from search.inspect.report_plots import sampled
from search.inspect.view import RunView

ROOT = Path(__file__).parents[3]
sys.path.insert(0, str(ROOT / "tools"))

import scale_store  # noqa: E402

CANDIDATES = 3000


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("scale") / "run"
    run = scale_store.base_run(out, evaluators=4, evals=120, config=ROOT / "runs" / "multi-gpu.yaml", seed=2)
    assert scale_store.grow(run, CANDIDATES, seed=2) == CANDIDATES
    return run


def cli(*args: object) -> str:
    result = CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def test_the_grown_store_is_a_run_with_deep_lineages(run_dir):
    view = RunView(run_dir)
    assert len(view.candidates) == CANDIDATES
    assert all(p in view.by_id for c in view.candidates for p in c.parent_ids)
    deepest = max(len(view.ancestor_ids(c.id)) for c in view.candidates[-50:])
    assert deepest > 20, "copies hang under the previous copy: lineages run deep"


def test_lineage_with_a_depth_collapses_what_lies_below(run_dir):
    view = RunView(run_dir)
    out = cli("lineage", run_dir, "--depth", "2")
    assert len(out.splitlines()) < CANDIDATES / 5, "the tree is collapsed, not one line a candidate"
    assert "more below the depth limit" in out
    # A hidden subtree's best speedup is its fastest verified candidate's, which is the best of
    # all of them (reading every result would give the same number).
    hidden = [it for fam in view.families() for top in view.family_items(fam, depth=2)
              for it in walk(top) if it.kind == "hidden"]
    assert hidden
    for item in hidden:
        speeds = [s for s in (view.speedup(k) for k in item.ids) if s is not None]
        assert item.best_speedup == (max(speeds) if speeds else None)


def walk(item):
    yield item
    for child in item.children:
        yield from walk(child)


def test_best_per_case_and_finish_times_agree_with_every_result_parsed(run_dir):
    view = RunView(run_dir)
    rows = {r["case"]: r for r in view.best_per_case()}
    verified = [c for c in view.verified(view.families(include_baseline=False))]
    for name in view.case_names():
        times = [(o.median_ms, c.id) for c in verified for o in view.results[c.id].cases[:]
                 if o.case == name and o.status.value == "ok" and o.median_ms]
        best = min(times, default=None)
        assert rows[name]["candidate"] == (best[1] if best else None)
    for c in view.candidates[::97]:
        result = view.own_results.get(c.id)
        expected = result.finished_at if result is not None and result.finished_at else c.updated_at
        assert view.finished_at(c.id) == expected


def test_the_report_samples_its_scatter_plots(run_dir, tmp_path):
    out = tmp_path / "report.html"
    cli("report", run_dir, "-o", out)
    assert out.stat().st_size > 0
    view = RunView(run_dir)
    ok = [c for c in view.candidates if c.state is State.VERIFIED]
    shown = sampled(ok, 100)
    assert len(shown) == 100 and shown[0] is ok[0] and shown[-1] is ok[-1]
    assert [view.candidates.index(c) for c in shown] == sorted(view.candidates.index(c) for c in shown)
    assert sampled(ok[:50], 100) == ok[:50]
