"""The inspection commands on a run made by a real CPU smoke search (Ray driver, toy
families, scripted LLM): every command runs, JSON agrees with the store, DOT parses,
exported files pass ``qrsearch verify --suite smoke``, and the HTML report renders
in headless Chromium."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kernels.harness.screen import screen_source
from population.lineage import ancestor_ids, family_tree
from population.models import NewCandidate, Origin, State
from population.store import RunStore
from search.cli.app import app
from population.speedup import with_speedups
from tests.search.inspect_run import build
from tests.search.inspect.test_inspect_units import parse_dot

ROOT = Path(__file__).parents[3]
CHROMIUM = "/usr/bin/chromium"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return build(tmp_path_factory.mktemp("inspect"))


def cli(*args: object) -> str:
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def store_facts(run_dir):
    with RunStore.open(run_dir, readonly=True) as store:
        cands = store.list_candidates()
        current = store.current_champion_ids()
        history = store.champion_history()
        results = {c.id: store.get_result(c.id) for c in cands}
        sources = {c.id: store.source(c.source_sha256) for c in cands}
        trees = {f: family_tree(store, f) for f in current}
        ancestors = {c.id: ancestor_ids(store, c.id) for c in cands}
    return dict(cands={c.id: c for c in cands}, current=current, history=history, results=results, sources=sources,
                trees=trees, ancestors=ancestors, baseline=results[current["torch_geqrf"]])


@pytest.fixture(scope="module")
def facts(run_dir):
    return store_facts(run_dir)


def test_the_smoke_run_has_what_the_views_need(facts):
    cands = facts["cands"].values()
    assert {c.origin for c in cands} >= {Origin.SEED, Origin.OPTUNA, Origin.CROSSOVER, Origin.LLM}
    assert {c.state for c in cands} >= {State.VERIFIED, State.REJECTED, State.CRASHED, State.FAILED_VERIFY}
    assert any(e.change.previous_id for e in facts["history"])  # a champion changed


def test_champions_json_agrees_with_the_store(run_dir, facts):
    data = json.loads(cli("champions", run_dir, "--json"))
    assert {f["family"]: f["champion"] for f in data["families"]} == facts["current"]
    for row in data["families"]:
        result = facts["results"][row["champion"]]
        assert row["geomean_ms"] == result.geomean_ms
        assert row["speedup"] == pytest.approx(with_speedups(result, facts["baseline"]).speedup)
        assert row["chain"] == [e.change.candidate_id for e in facts["history"] if e.change.family == row["family"]]
        assert row["max_residuals"]["orth"] == max(c.residuals["orth"] for c in result.cases)
    base = {c.case: c.median_ms for c in facts["baseline"].cases}
    verified = [c for c in facts["cands"].values() if c.state is State.VERIFIED and c.family != "torch_geqrf"
                and facts["results"][c.id] is not None]
    for row in data["cases"]:
        times = {c.id: next(o.median_ms for o in facts["results"][c.id].cases if o.case == row["case"])
                 for c in verified}
        best = min(times, key=lambda k: (times[k], k))
        assert (row["candidate"], row["median_ms"]) == (best, times[best])
        assert row["speedup"] == pytest.approx(base[row["case"]] / times[best])
        assert row["fp32_floor_frac"] is None  # measured on a CPU: no H200 floor
    text = cli("champions", run_dir)
    for cid in facts["current"].values():
        assert f"★ {cid}" in text
    assert all(row["case"] in text for row in data["cases"])


def test_lineage_tree_accounts_for_every_candidate(run_dir, facts):
    text = cli("lineage", run_dir)
    shown = set(re.findall(r"^[│├└─ ]*(c\d{7}) ", text, re.M))
    folded = sum(int(n) for n in re.findall(r"… (\d+) failed children", text))
    assert len(shown) + folded == len(facts["cands"])
    for family, cid in facts["current"].items():
        assert re.search(rf"{cid} .*★ champion", text)
    former = {e.change.candidate_id for e in facts["history"]} - set(facts["current"].values())
    for cid in former:
        assert re.search(rf"{cid} .*☆ was champion", text)
    # --family and --depth 0: only the roots, with a summary of what is below
    text = cli("lineage", run_dir, "--family", "toy", "--depth", "0")
    assert "more below the depth limit" in text and "toy2" not in text


def test_lineage_json_matches_the_store(run_dir, facts):
    data = json.loads(cli("lineage", run_dir, "--format", "json"))
    ever = {e.change.candidate_id for e in facts["history"]}
    assert set(data["families"]) == set(facts["current"])
    for family, fam in data["families"].items():
        (tree,) = facts["trees"][family]
        nodes = {n["id"]: n for n in fam["nodes"]}
        assert set(nodes) == set(tree.nodes)
        for cid, node in nodes.items():
            c = facts["cands"][cid]
            assert node["children"] == list(tree.children.get(cid, ()))
            assert (node["state"], node["origin"], node["fitness_ms"]) == (c.state.value, c.origin.value, c.fitness_ms)
            assert node["champion"] == (cid in ever)
            assert node["current_champion"] == (facts["current"][family] == cid)


def test_ancestry_lists_exactly_the_ancestors(run_dir, facts):
    for cid in facts["cands"]:
        data = json.loads(cli("lineage", run_dir, "--candidate", cid, "--format", "json"))
        assert data["ancestors"] == facts["ancestors"][cid]
    cross = next(c for c in facts["cands"].values() if c.origin is Origin.CROSSOVER)
    text = cli("lineage", run_dir, "--candidate", cross.id)
    assert cross.parent_ids[0] in text and f"(second parent) {cross.parent_ids[1]}" in text


def test_lineage_names_the_operator_that_made_each_child(run_dir, facts):
    """Origin is the lineage kind; the operator tells the two crossovers (and any plugin) apart."""
    with RunStore.open(run_dir, readonly=True) as store:
        made_by = {c.id: store.get_json(f"operator/{c.id}") for c in facts["cands"].values()}
    expected = {Origin.OPTUNA: {"optuna_step"}, Origin.CROSSOVER: {"param_crossover", "llm_merge"},
                Origin.LLM: {"llm_edit"}, Origin.SEED: {None}}
    data = json.loads(cli("lineage", run_dir, "--format", "json"))
    nodes = {n["id"]: n for fam in data["families"].values() for n in fam["nodes"]}
    for cid, cand in facts["cands"].items():
        assert nodes[cid]["operator"] == made_by[cid] and made_by[cid] in expected[cand.origin], cid
    cross = next(c for c in facts["cands"].values() if c.origin is Origin.CROSSOVER)
    text = cli("lineage", run_dir, "--candidate", cross.id)
    assert f"{cross.id} crossover/{made_by[cross.id]} (+{cross.parent_ids[1]})" in text


def test_dot_output_is_valid_graphviz(run_dir, facts):
    nodes, edges = parse_dot(cli("lineage", run_dir, "--format", "dot"))
    assert all(a in nodes and b in nodes for a, b, _ in edges)
    champions = set(facts["current"].values())
    assert {n for n, a in nodes.items() if a.get("fillcolor") == "gold"} == champions
    cross = next(c for c in facts["cands"].values() if c.origin is Origin.CROSSOVER)
    assert any(a == cross.parent_ids[1] and b == cross.id and e.get("style") == "dashed" for a, b, e in edges)
    nodes, edges = parse_dot(cli("lineage", run_dir, "--candidate", cross.id, "--format", "dot"))
    assert set(nodes) == {cross.id, *facts["ancestors"][cross.id]}


def test_show_source_diff_params_results_and_errors(run_dir, facts):
    child = next(c for c in facts["cands"].values() if c.origin is Origin.OPTUNA
                 and facts["cands"][c.parent_ids[0]].params["block"] != c.params["block"])
    parent = facts["cands"][child.parent_ids[0]]
    text = cli("show", run_dir, child.id, "--diff")
    assert f'-    "block": {parent.params["block"]},' in text and f'+    "block": {child.params["block"]},' in text
    for case in facts["results"][child.id].cases:
        assert case.case in text
    text = cli("show", run_dir, child.id)
    assert "def custom_kernel(A):" in text and "parameters" in text
    crashed = next(c for c in facts["cands"].values() if c.state is State.CRASHED)
    text = cli("show", run_dir, crashed.id)
    assert "SIGABRT" in text and "error" in text
    data = json.loads(cli("show", run_dir, crashed.id[1:].lstrip("0"), "--json"))  # "6" finds c0000006
    assert data["candidate"]["id"] == crashed.id and data["source"] == facts["sources"][crashed.id]
    assert data["result"]["error"] == facts["results"][crashed.id].error
    data = json.loads(cli("show", run_dir, "toy", "--json"))  # a family: its champion
    assert data["candidate"]["id"] == facts["current"]["toy"]
    bad = CliRunner().invoke(app, ["show", str(run_dir), "c9999999"])
    assert bad.exit_code == 1 and "no candidate or family" in bad.output


def qrsearch(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "search", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def test_exported_files_pass_verify_and_route_as_measured(run_dir, facts, tmp_path):
    champion = facts["current"]["toy"]
    single = tmp_path / "toy.py"
    cli("export", run_dir, "--family", "toy", "-o", single)
    assert single.read_text() == facts["sources"][champion]
    composite = tmp_path / "composite.py"
    out = cli("export", run_dir, "--composite", "--from-family", "toy", "--from-family", "toy2", "-o", composite)
    assert "composite of" in out
    text = composite.read_text()
    assert screen_source(text) == [] and "import qrsearch" not in text and "kernels" not in text.split('"""')[2]
    for path in (single, composite):
        proc = qrsearch("verify", path, "--suite", "smoke")
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert "45/45 cases passed" in proc.stdout
    # The router, against the store: per shape the best geomean over its cases; else the best overall.
    from kernels.candidate import load_candidate

    import torch

    kernel = load_candidate(composite)
    module = kernel.__globals__
    verified = [c for c in facts["cands"].values() if c.state is State.VERIFIED and c.family in ("toy", "toy2")]
    shapes: dict[tuple[int, int], list[str]] = {}
    for case in facts["baseline"].cases:
        m = re.match(r"[a-z]+-(\d+)x(\d+)-c", case.case)
        shapes.setdefault((int(m[1]), int(m[2])), []).append(case.case)

    def shape_time(cid, names):
        times = {o.case: o.median_ms for o in facts["results"][cid].cases}
        return math.exp(sum(math.log(times[n]) for n in names) / len(names))

    for (batch, n), names in shapes.items():
        best = min(verified, key=lambda c: (shape_time(c.id, names), c.id))
        assert module["route"](torch.empty(batch, n, n)) == best.id
    fallback = min(verified, key=lambda c: (c.fitness_ms, c.id))
    assert module["route"](torch.empty(3, 5, 5)) == fallback.id == module["FALLBACK"]
    bad = CliRunner().invoke(app, ["export", str(run_dir), "--family", "nope", "-o", str(tmp_path / "x.py")])
    assert bad.exit_code == 1 and "no family 'nope'" in bad.output


def _external_refs(html: str) -> list[str]:
    refs = re.findall(r"""(?:src|href|srcset|action|poster|data)\s*=\s*["']?([^"'\s>]+)""", html, re.I)
    refs += re.findall(r"url\(\s*['\"]?([^)'\"]+)", html, re.I)
    refs += re.findall(r"@import\s+['\"]?([^'\";\s]+)", html, re.I)
    return [r for r in refs if not r.startswith(("data:", "#"))]


def test_report_is_self_contained_and_renders_in_chromium(run_dir, facts, tmp_path):
    out = tmp_path / "report" / "report.html"
    cli("report", run_dir, "-o", out)
    html = out.read_text()
    assert _external_refs(html) == [] and "<script" not in html.lower()
    assert not re.search(r"https?://", html)
    for cid in facts["current"].values():
        assert cid in html
    for case in facts["baseline"].cases:
        assert case.case in html
    assert "SIGABRT" in html and "Champion chains" in html and "torch.geqrf" in html
    pngs = sorted(p.name for p in out.parent.glob("*.png"))
    assert pngs == ["report-champions.png", "report-progress-evals.png", "report-progress-time.png"]
    assert html.count("data:image/png;base64,") == 3
    shot = screenshot(out, tmp_path)
    assert_not_blank(shot)
    for png in out.parent.glob("*.png"):
        assert_not_blank(png)


def screenshot(page: Path, tmp_path: Path) -> Path:
    """Render a page in headless Chromium (Debian's, installed by .ci/system-deps) and screenshot it;
    fails (never skips) without Chromium, and on any uncaught script error."""
    binary = shutil.which("chromium") or CHROMIUM
    if not os.path.exists(binary):
        pytest.fail("Chromium is missing: run .ci/system-deps (apt-get install chromium)")
    shot = tmp_path / "screenshot.png"
    proc = subprocess.run(
        [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
         f"--user-data-dir={tmp_path / 'chromium-profile'}", "--enable-logging=stderr", "--v=0",
         f"--screenshot={shot}", "--window-size=1280,2000", page.resolve().as_uri()],
        capture_output=True, text=True, timeout=180)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-3000:]
    assert "Uncaught" not in log and ":CONSOLE(" not in log, log[-3000:]
    assert shot.exists() and shot.stat().st_size > 10_000, log[-3000:]
    return shot


def assert_not_blank(path: Path) -> None:
    from PIL import Image

    with Image.open(path) as img:
        rgb = img.convert("RGB")
        width, height = rgb.size
        assert width >= 300 and height >= 200
        small = rgb.resize((max(1, width // 4), max(1, height // 4)))
        colours = small.getcolors(maxcolors=1 << 20) or []
        assert len(colours) > 50, f"{path.name}: only {len(colours)} colours"
        share = max(count for count, _ in colours) / (small.size[0] * small.size[1])
        assert share < 0.97, f"{path.name}: {100 * share:.1f}% of it is one colour"


def test_commands_work_while_a_writer_holds_the_run(run_dir, tmp_path):
    """A copy of the run, opened for writing (the lock held, work in flight), as during a search."""
    copy = tmp_path / "live"
    shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns("run.lock"))
    with RunStore.open(copy) as store:
        parent = store.current_champion_ids()["toy"]
        pending = store.add_candidate(NewCandidate(family="toy", origin=Origin.LLM, parent_ids=(parent,),
                                                   source="def custom_kernel(A):\n    return A\n", params={},
                                                   fingerprint="live"))
        running = store.mark_running(pending.id)
        data = json.loads(cli("champions", copy, "--json"))
        assert next(f for f in data["families"] if f["family"] == "toy")["in_flight"] == 1
        assert f"{running.id} llm running" in cli("lineage", copy, "--family", "toy")
        assert json.loads(cli("show", copy, running.id, "--json"))["result"] is None
        cli("report", copy, "-o", tmp_path / "live.html", "--no-png")
        assert (tmp_path / "live.html").exists() and not list(tmp_path.glob("live-*.png"))
