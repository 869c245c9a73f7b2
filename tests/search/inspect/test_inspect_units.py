"""Inspection on small hand-made runs (no search): lineage collapsing and depth, DOT
validity, the renaming behind ``export --composite``, routing and the fallback."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from kernels.harness.screen import screen_source
from kernels.suites import get_suite
from population.config import FamilyConfig, PopulationConfig
from population.lineage import ancestor_ids, family_tree
from population.models import CaseOutcome, CaseStatus, EvalResult, NewCandidate, Origin, State
from population.run import Run
from population.store import RunStore
from search.cli.lineage_render import item_label, lineage_dot
from search.inspect.export import ExportError, Plan, Route, compose, export_composite, prepare
from search.inspect.view import RunView

BENCH = [c.name for c in get_suite("smoke-bench")]  # dense-8x16-c1, dense-4x32-c1, mixed-4x48-c2, rankdef-2x64-c0

SOURCE = '''"""toy {tag}: torch.geqrf, recording who ran."""
import torch

# qrsearch: params
PARAMS = {{"tag": "{tag}"}}
# qrsearch: end params

WHO = []


def _helper(A):
    PARAMS = None  # a local that shadows the global: stays as it is
    return A if PARAMS is None else None


def custom_kernel(A):
    global WHO
    WHO = WHO + [PARAMS["tag"]]
    return torch.geqrf(_helper(A))
'''


class Builder:
    """A run made through the population API: real champions, lineage and results."""

    def __init__(self, run_dir: Path) -> None:
        families = (FamilyConfig(name="torch_geqrf", islands=1, capacity=1, tuning_budget=0),
                    FamilyConfig(name="f", islands=1, capacity=50, tuning_budget=0))
        config = {"name": "synthetic", "families": [{"name": "f"}],
                  "evaluation": {"verify_suite": "smoke-quick", "bench_suite": "smoke-bench"}}
        self.run = Run.create(run_dir, PopulationConfig(seed=0, families=families),
                              run_config_json=json.dumps(config))
        self.n = 0
        self.add("torch_geqrf", None, Origin.SEED, times=[1.0, 1.0, 1.0, 1.0], tag="base")

    def add(self, family: str, parents: tuple[str, ...] | None, origin: Origin, *, times: list[float] | None = None,
            state: State = State.VERIFIED, reason: str = "", tag: str | None = None) -> str:
        self.n += 1
        tag = tag or f"t{self.n}"
        cand = self.run.add_candidate(NewCandidate(family=family, origin=origin, parent_ids=parents or (),
                                                   source=SOURCE.format(tag=tag), params={"tag": tag},
                                                   fingerprint="s0"))
        self.run.mark_running(cand.id)
        if state is State.VERIFIED:
            cases = tuple(CaseOutcome(case=name, status=CaseStatus.OK, median_ms=t, min_ms=t, max_ms=t,
                                      residuals={"factor": 0.1, "orth": 0.5}) for name, t in zip(BENCH, times))
            geo = 1.0
            for t in times:
                geo *= t
            result = EvalResult(candidate_id=cand.id, cases=cases, geomean_ms=geo ** (1 / len(times)), device="cpu",
                                versions={"torch": "x"})
            self.run.tell(cand.id, State.VERIFIED, result=result)
        else:
            self.run.tell(cand.id, state, reason=reason or f"{state.value} for a reason",
                          result=EvalResult(candidate_id=cand.id, error=reason or "boom", device="cpu"))
        return cand.id


@pytest.fixture()
def built(tmp_path):
    """seed ─┬ 3 failed leaves (run), verified d ─┬ 2 timeouts (run), verified i
             │                                    └ failed x with a child (not a leaf)
             ├ rejected e (alone), verified f; crossover g of (d, f)."""
    b = Builder(tmp_path / "run")
    ids = {"seed": b.add("f", None, Origin.SEED, times=[10, 10, 10, 10])}
    ids["a"] = b.add("f", (ids["seed"],), Origin.LLM, state=State.FAILED_VERIFY, reason='verify dense-2x1-c0: bad "H"')
    ids["b"] = b.add("f", (ids["seed"],), Origin.LLM, state=State.CRASHED, reason="verify mixed-3x8-c2: SIGSEGV")
    ids["c"] = b.add("f", (ids["seed"],), Origin.LLM, state=State.FAILED_VERIFY, reason="verify dense-2x1-c0: bad H")
    ids["d"] = b.add("f", (ids["seed"],), Origin.OPTUNA, times=[2, 2, 9, 9])
    ids["e"] = b.add("f", (ids["seed"],), Origin.LLM, state=State.REJECTED, reason="edit did not apply")
    ids["f"] = b.add("f", (ids["seed"],), Origin.OPTUNA, times=[9, 9, 9, 1])
    ids["g1"] = b.add("f", (ids["d"],), Origin.OPTUNA, state=State.TIMEOUT, reason="bench dense-8x16-c1: timeout")
    ids["g2"] = b.add("f", (ids["d"],), Origin.OPTUNA, state=State.TIMEOUT, reason="bench dense-8x16-c1: timeout")
    ids["i"] = b.add("f", (ids["d"],), Origin.OPTUNA, times=[3, 3, 1, 3])
    ids["x"] = b.add("f", (ids["d"],), Origin.LLM, state=State.CRASHED, reason="crash")
    ids["g"] = b.add("f", (ids["d"], ids["f"]), Origin.CROSSOVER, times=[5, 5, 5, 5])
    b.run.close()
    # A child of a failed candidate (made by hand: the search never does this, but the view must cope).
    with RunStore.open(tmp_path / "run") as store:
        child = store.add_candidate(NewCandidate(family="f", origin=Origin.LLM, parent_ids=(ids["x"],),
                                                 source=SOURCE.format(tag="y"), params={"tag": "y"}, fingerprint="s0"))
        ids["y"] = child.id
    return tmp_path / "run", ids


def flatten(items, depth=0):
    for it in items:
        yield it, depth
        yield from flatten(it.children, depth + 1)


def test_runs_of_failed_leaves_collapse_and_are_counted(built):
    run_dir, ids = built
    view = RunView(run_dir)
    items = list(flatten(view.family_items("f")))
    collapsed = [it for it, _ in items if it.kind == "failed"]
    assert [set(it.ids) for it in collapsed] == [{ids["a"], ids["b"], ids["c"]}, {ids["g1"], ids["g2"]}]
    assert collapsed[0].by_state == {"failed_verify": 2, "crashed": 1}
    assert item_label(collapsed[0], markup=False) == "… 3 failed children: 2 failed_verify, 1 crashed"
    shown = {it.ids[0] for it, _ in items if it.kind == "node"}
    # The lone rejected leaf, and the failed x that has a child, stay on their own lines.
    assert ids["e"] in shown and ids["x"] in shown and ids["y"] in shown
    assert shown | {i for it in collapsed for i in it.ids} == {c.id for c in view.candidates if c.family == "f"}
    # collapse=0: every candidate on its own line
    flat = [it for it, _ in flatten(view.family_items("f", collapse=0))]
    assert all(it.kind == "node" for it in flat) and len(flat) == len(shown) + 5


def test_depth_limit_summarises_what_it_hides(built):
    run_dir, ids = built
    view = RunView(run_dir)
    items = list(flatten(view.family_items("f", depth=1)))
    hidden = [it for it, _ in items if it.kind == "hidden"]
    assert len(hidden) == 1  # only d has children at depth 1
    assert set(hidden[0].ids) == {ids[k] for k in ("g1", "g2", "i", "x", "y", "g")}
    assert hidden[0].champions == 1  # i is the champion
    assert "★ 1 champion(s) inside" in item_label(hidden[0], markup=False)
    assert max(d for _, d in items) == 2


def test_champion_marks_and_tree_agree_with_the_store(built):
    run_dir, ids = built
    view = RunView(run_dir)
    with RunStore.open(run_dir, readonly=True) as store:
        current = store.current_champion_ids()
        ever = {e.change.candidate_id for e in store.champion_history()}
        trees = family_tree(store, "f")
        for cid in view.by_id:
            assert view.ancestor_ids(cid) == ancestor_ids(store, cid)
    assert current["f"] == ids["i"] and {ids["seed"], ids["d"], ids["i"]} <= ever
    data = view.lineage_json(family="f")["families"]["f"]
    nodes = {n["id"]: n for n in data["nodes"]}
    assert set(nodes) == set(trees[0].nodes)
    for cid, node in nodes.items():
        assert node["children"] == list(trees[0].children.get(cid, ()))
        assert node["champion"] == (cid in ever) and node["current_champion"] == (cid == current["f"])
    assert nodes[ids["i"]]["speedup"] == pytest.approx(1 / (3 * 3 * 1 * 3) ** 0.25)


def test_ancestry_of_a_crossover_goes_through_both_parents(built):
    run_dir, ids = built
    view = RunView(run_dir)
    data = view.lineage_json(candidate=ids["g"])
    assert set(data["ancestors"]) == {ids["d"], ids["f"], ids["seed"]}
    assert {(e["parent"], e["child"], e["kind"]) for e in data["edges"]} == {
        (ids["d"], ids["g"], "parent"), (ids["f"], ids["g"], "second parent"),
        (ids["seed"], ids["d"], "parent"), (ids["seed"], ids["f"], "parent")}
    item = view.ancestry_item(ids["g"])
    kinds = [(it.kind, it.ids[0]) for it, _ in flatten([item])]
    assert kinds.count(("seen", ids["seed"])) == 1  # reached twice, shown once


# --- DOT -------------------------------------------------------------------------------------------

_TOKEN = re.compile(r'\s*(?:(?P<str>"(?:[^"\\]|\\.)*")|(?P<arrow>->)|(?P<punct>[{}\[\];,=])|(?P<id>[A-Za-z_0-9.]+)'
                    r'|(?P<comment>//[^\n]*))', re.S)


def parse_dot(text: str) -> tuple[dict[str, dict[str, str]], list[tuple[str, str, dict[str, str]]]]:
    """A strict parser for the DOT subset we write: digraph, subgraphs, attribute statements,
    node statements and edge statements.  Raises AssertionError on anything else."""
    tokens, pos = [], 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        assert m and m.end() > pos, f"bad DOT near {text[pos:pos + 40]!r}"
        pos = m.end()
        if m["comment"] is None:
            kind = m.lastgroup
            tokens.append((kind, m[kind]))
    i = 0

    def peek():
        return tokens[i] if i < len(tokens) else (None, None)

    def take(value=None, kind=None):
        nonlocal i
        tok = peek()
        assert tok[0] is not None, "unexpected end of DOT"
        assert value is None or tok[1] == value, f"expected {value!r}, got {tok[1]!r}"
        assert kind is None or tok[0] == kind, f"expected a {kind}, got {tok[1]!r}"
        i += 1
        return tok

    def ident():
        kind, value = take()
        assert kind in ("id", "str"), f"expected an id, got {value!r}"
        return json.loads(value) if kind == "str" else value

    def attrs():
        out = {}
        if peek()[1] != "[":
            return out
        take("[")
        while peek()[1] != "]":
            key = ident()
            take("=")
            out[key] = ident()
            if peek()[1] in (",", ";"):
                take()
        take("]")
        return out

    nodes: dict[str, dict[str, str]] = {}
    edges: list[tuple[str, str, dict[str, str]]] = []

    def statements():
        take("{")
        while peek()[1] != "}":
            tok = peek()
            if tok[1] == "subgraph":
                take()
                ident()
                statements()
            elif tok[1] in ("graph", "node", "edge"):
                take()
                attrs()
            else:
                a = ident()
                if peek()[1] == "=":
                    take()
                    ident()
                elif peek()[1] == "->":
                    take()
                    b = ident()
                    edges.append((a, b, attrs()))
                else:
                    nodes[a] = attrs()
            if peek()[1] == ";":
                take()
        take("}")

    take("digraph")
    if peek()[0] in ("id", "str") and peek()[1] != "{":
        ident()
    statements()
    assert i == len(tokens), "text after the graph"
    return nodes, edges


def test_dot_is_valid_and_complete(built):
    run_dir, ids = built
    view = RunView(run_dir)
    nodes, edges = parse_dot(lineage_dot(view, None, None, None, 2))
    assert all(a in nodes and b in nodes for a, b, _ in edges)
    assert nodes[ids["i"]]["fillcolor"] == "gold"
    assert (ids["f"], ids["g"], {"style": "dashed", "color": "gray60"}) in edges
    failed = [n for n in nodes if n.startswith("failed_")]
    assert len(failed) == 2 and any("3 failed children" in nodes[n]["label"] for n in failed)
    # uncollapsed, a reason with quotes survives the escaping
    nodes0, _ = parse_dot(lineage_dot(view, "f", None, None, 0))
    assert 'bad "H"' in nodes0[ids["a"]]["label"] and not any(n.startswith("failed_") for n in nodes0)
    # ancestry as DOT, with the second parent dashed
    nodes, edges = parse_dot(lineage_dot(view, None, ids["g"], None, 2))
    assert set(nodes) == {ids["g"], ids["d"], ids["f"], ids["seed"]}
    assert any(a == ids["f"] and b == ids["g"] and e.get("style") == "dashed" for a, b, e in edges)


def test_dot_parser_rejects_broken_text():
    with pytest.raises(AssertionError):
        parse_dot('digraph { "a" -> ; }')
    with pytest.raises(AssertionError):
        parse_dot('digraph { "a" [label="x] }')


# --- export: renaming -------------------------------------------------------------------------------

TRICKY = '''"""tricky names"""
from __future__ import annotations

import math
import torch

# qrsearch: params
PARAMS = {"k": 3}
# qrsearch: end params
SCALE = 2
CACHE = {}
if (LIMIT := 10) > 5:
    BIG = True
else:
    BIG = False


def deco(fn):
    fn.tagged = SCALE
    return fn


class Box:
    PARAMS = "class attribute, not the global"

    def get(self, SCALE=SCALE):
        return (self.PARAMS, SCALE, PARAMS["k"])


@deco
def helper(x, k=PARAMS["k"]):
    squares = [SCALE * i for i in range(k)]
    shadow = [PARAMS for PARAMS in range(2)]
    label = f"{PARAMS['k']}-{SCALE}"
    def inner():
        return SCALE + x
    return squares, shadow, label, inner(), (lambda SCALE: SCALE + 1)(5), dict(SCALE=1)


def local_shadow(SCALE):
    PARAMS = SCALE * 2
    return PARAMS


def bump():
    global SCALE
    SCALE = SCALE + 1
    return SCALE


def probe():
    CACHE["hit"] = True
    return (helper(1), Box().get(), Box().get(7), local_shadow(7), helper.tagged, bump(), LIMIT, BIG, sorted(CACHE),
            math.floor(2.5))


def custom_kernel(A):
    return torch.geqrf(A)


if __name__ == "__main__":
    print("never in the composite")
'''


def _exec(text: str) -> dict:
    scope: dict = {"__name__": "composite_test"}
    exec(compile(text, "<composite>", "exec"), scope)  # noqa: S102 - test of generated code
    return scope


def test_renaming_keeps_behaviour_and_comments():
    part = prepare(TRICKY, "c0000007")
    assert part.from_text and "# qrsearch: params" in part.body  # renamed on the text: comments kept
    assert "PARAMS_c0000007 = {" in part.body and 'PARAMS = "class attribute' in part.body
    assert "self.PARAMS" in part.body and "dict(SCALE=1)" in part.body and "lambda SCALE: SCALE + 1" in part.body
    assert "    PARAMS = SCALE * 2\n    return PARAMS\n" in part.body
    assert "global SCALE_c0000007" in part.body and "__main__" not in part.body
    assert part.imports == ["from __future__ import annotations", "import math", "import torch"]
    original = _exec(TRICKY)["probe"]()
    renamed = _exec("\n".join(part.imports[1:]) + "\n" + part.body)
    assert renamed["probe_c0000007"]() == original
    assert not any(k in renamed for k in ("probe", "PARAMS", "SCALE", "helper", "custom_kernel"))


def test_conflicting_imports_are_refused():
    a = "import numpy as np\n\n\ndef custom_kernel(A):\n    return A\n"
    b = "import torch as np\n\n\ndef custom_kernel(A):\n    return A\n"
    plan = Plan(routes=[Route(batch=1, n=2, candidate="c2", family="f", geomean_ms=1.0, baseline_ms=None,
                              cases=["x"])], fallback="c1", fallback_family="f", fallback_ms=1.0,
                kernels=["c1", "c2"])
    with pytest.raises(ExportError, match="bind np to different modules"):
        compose(plan, {"c1": a, "c2": b}, "doc")


def test_composite_routes_shapes_and_falls_back(built):
    run_dir, ids = built
    view = RunView(run_dir)
    text, plan = export_composite(view, families=["f"])
    assert screen_source(text) == []
    # Per shape the best geomean over its cases: d wins 8x16 and 4x32, i wins 4x48, f wins 2x64;
    # i has the best suite geomean, so it is the fallback.
    expected = {(8, 16): ids["d"], (4, 32): ids["d"], (4, 48): ids["i"], (2, 64): ids["f"]}
    assert {(r.batch, r.n): r.candidate for r in plan.routes} == expected
    assert plan.fallback == ids["i"]
    scope = _exec(text)
    tags = {cid: view.by_id[cid].params["tag"] for cid in plan.kernels}
    for (batch, n), cid in [*expected.items(), ((5, 7), ids["i"]), ((8, 32), ids["i"])]:
        A = torch.randn(batch, n, n)
        assert scope["route"](A) == cid
        before = {k: list(scope[f"WHO_{k}"]) for k in plan.kernels}
        H, tau = scope["custom_kernel"](A)
        ref = torch.geqrf(A)
        assert torch.equal(H, ref[0]) and torch.equal(tau, ref[1])
        after = {k: scope[f"WHO_{k}"] for k in plan.kernels}
        assert {k: after[k][len(before[k]):] for k in plan.kernels} == {k: [tags[k]] if k == cid else []
                                                                        for k in plan.kernels}
    assert scope["route"](torch.randn(16, 16)) == ids["i"]  # not batched: the fallback
    doc = text.split('"""')[1]
    for (batch, n), cid in expected.items():
        assert re.search(rf"^\s+{batch}x{n}\s+{cid}\s", doc, re.M)
    assert re.search(rf"^\s+other\s+{ids['i']}\s.*fallback", doc, re.M)
    # With the baseline allowed it wins everything here (1 ms everywhere).
    _, plan_all = export_composite(view)
    assert plan_all.fallback == view.baseline_id and {r.candidate for r in plan_all.routes} == {view.baseline_id}


def test_composite_of_triton_families_runs_in_the_interpreter(monkeypatch, tmp_path):
    """The real Triton families, renamed into one module: @triton.jit kernels calling each other
    by their new names still compile and give a correct QR (Triton's interpreter on CPU).  The
    CUDA C++ families sit beside them (without CUDA they call torch.geqrf): their CUDA source
    strings keep their text, so the composite builds the very extensions the family files do."""
    from kernels.candidate import load_candidate, materialize
    from kernels.inputs import generate_input
    from kernels.families import FAMILIES_DIR
    from kernels.verify import verify_qr

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    names = {"c1": "torch_geqrf", "c2": "householder_unblocked", "c3": "blocked_wy", "c4": "lookahead_split",
             "c5": "cuda_onchip", "c6": "cuda_blocked"}
    sources = {cid: (FAMILIES_DIR / f"{name}.py").read_text() for cid, name in names.items()}
    routes = [Route(batch=3, n=8, candidate="c2", family=names["c2"], geomean_ms=1, baseline_ms=2, cases=["a"]),
              Route(batch=2, n=32, candidate="c3", family=names["c3"], geomean_ms=1, baseline_ms=2, cases=["b"]),
              Route(batch=2, n=24, candidate="c4", family=names["c4"], geomean_ms=1, baseline_ms=2, cases=["c"]),
              Route(batch=2, n=16, candidate="c5", family=names["c5"], geomean_ms=1, baseline_ms=2, cases=["d"]),
              Route(batch=3, n=40, candidate="c6", family=names["c6"], geomean_ms=1, baseline_ms=2, cases=["e"])]
    plan = Plan(routes=routes, fallback="c1", fallback_family="torch_geqrf", fallback_ms=1, kernels=list(names))
    text = compose(plan, sources, "test composite")
    assert screen_source(text) == []
    assert text.count("@triton.jit") == sum(s.count("@triton.jit") for s in sources.values())
    kernel = load_candidate(materialize(text, tmp_path))
    module = kernel.__globals__
    family_modules = {cid: load_candidate(FAMILIES_DIR / f"{names[cid]}.py").__globals__ for cid in ("c5", "c6")}
    for cid, family in family_modules.items():
        assert module[f"_CUDA_SOURCE_{cid}"] == family["_CUDA_SOURCE"]
    for batch, n, cid in [(3, 8, "c2"), (2, 32, "c3"), (2, 24, "c4"), (2, 16, "c5"), (3, 40, "c6"), (2, 5, "c1")]:
        A = generate_input(batch, n, 1.0, 7, "dense")
        assert module["route"](A) == cid
        result = verify_qr(A, kernel(A.clone()), A)
        assert result.ok, (cid, result.message)


def test_a_chain_thousands_deep_needs_no_recursion(tmp_path):
    from population.models import candidate_id
    from search.cli.lineage_render import lineage_tree

    deep = 3000
    with RunStore.create(tmp_path / "deep", json.dumps({"name": "deep"})) as store:
        news = [NewCandidate(family="f", origin=Origin.SEED if i == 0 else Origin.OPTUNA,
                             parent_ids=() if i == 0 else (candidate_id(i),), source=f"x = {i}\n",
                             params={"i": i}, fingerprint="s0") for i in range(deep)]
        store.add_candidates(news)
    view = RunView(tmp_path / "deep")
    (root,) = view.family_items("f")
    assert sum(1 for _ in flatten_iter(root)) == deep
    assert len(view.lineage_json(family="f")["families"]["f"]["nodes"]) == deep
    assert len(view.ancestor_ids(candidate_id(deep))) == deep - 1
    assert sum(1 for _ in flatten_iter(view.ancestry_item(candidate_id(deep)))) == deep
    parse_dot(lineage_dot(view, "f", None, None, 2))
    tree = lineage_tree(view, "f", depth=3, collapse=2)
    assert "2996 more below the depth limit" in str(list(flatten_rich(tree)))


def flatten_iter(item):
    stack = [item]
    while stack:
        it = stack.pop()
        yield it
        stack.extend(it.children)


def flatten_rich(tree):
    stack = [tree]
    while stack:
        t = stack.pop()
        yield str(t.label)
        stack.extend(t.children)
