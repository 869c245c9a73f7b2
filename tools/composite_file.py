"""One GPU MODE submission file out of the registered families' defaults: each shape routed to a family.

    python tools/composite_file.py --route 20x32=cuda_onchip --route 2x4096=cuda_blocked ...
        [--fallback cuda_blocked] -o submission.py
    python tools/composite_file.py BENCH.json [BENCH.json ...] [--fallback F] -o submission.py

The file is what ``qrsearch export --composite`` writes for a run (the same renaming and dispatcher,
:func:`search.inspect.export.compose`), built from the family files as they are in this checkout
instead of a run's candidates, so GPU MODE's own runner can time the defaults' composite.  Routes
come from ``--route BATCHxN=FAMILY``, or from ``qrsearch bench --json`` files of family files: per
shape, the family with the best geomean over that shape's verified cases.  Other shapes go to the
fallback family (default cuda_blocked).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernels.families import FAMILIES, get_family  # noqa: E402
from kernels.suites import get_suite  # noqa: E402
from search.inspect.export import Plan, Route, compose  # noqa: E402


def routes_from_benches(paths: list[Path]) -> dict[tuple[int, int], tuple[str, float, list[str]]]:
    """(batch, n) -> (family, geomean ms, cases) of the best family per shape; a family counts for a
    shape only where every case of the shape it timed passed."""
    shapes = {c.name: (c.batch, c.n) for c in get_suite("qrv2-bench")}
    times: dict[tuple[int, int], dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    failed: set[tuple[tuple[int, int], str]] = set()
    for path in paths:
        doc = json.loads(path.read_text())
        family = Path(str(doc.get("candidate") or path)).stem
        if family not in FAMILIES:
            raise SystemExit(f"{path}: {family!r} is not a registered family")
        for case in doc.get("cases", []):
            shape = shapes.get(case["name"])
            if shape is None:
                continue
            ms = (case.get("timing") or {}).get("median_ms")
            if case.get("status", "ok") != "ok" or not ms:
                failed.add((shape, family))
            else:
                times[shape][family][case["name"]] = float(ms)
    best: dict[tuple[int, int], tuple[str, float, list[str]]] = {}
    for shape, by_family in times.items():
        for family, cases in by_family.items():
            if (shape, family) in failed:
                continue
            geomean = math.exp(sum(math.log(v) for v in cases.values()) / len(cases))
            if shape not in best or geomean < best[shape][1]:
                best[shape] = (family, geomean, sorted(cases))
    return best


def parse_route(text: str) -> tuple[tuple[int, int], str]:
    shape, sep, family = text.partition("=")
    batch, x, n = shape.lower().partition("x")
    if not sep or not x or not batch.isdigit() or not n.isdigit():
        raise SystemExit(f"--route {text!r}: expected BATCHxN=FAMILY")
    get_family(family)
    return (int(batch), int(n)), family


def build(routes: dict[tuple[int, int], tuple[str, float, list[str]]], fallback: str) -> str:
    """The composite's text: one part per family used, each renamed with its name as the suffix."""
    get_family(fallback)
    plan = Plan(routes=[Route(batch=b, n=n, candidate=fam, family=fam, geomean_ms=ms, baseline_ms=None, cases=cases)
                        for (b, n), (fam, ms, cases) in sorted(routes.items())],
                fallback=fallback, fallback_family=fallback, fallback_ms=float("nan"),
                kernels=list(dict.fromkeys([fallback, *(fam for fam, _, _ in routes.values())])))
    sources = {name: get_family(name).source() for name in plan.kernels}
    lines = ["Composite of the qrsearch families' defaults (tools/composite_file.py).", "",
             "custom_kernel(data) routes on the input's (batch, n):"]
    lines += [f"  {b}x{n} -> {fam}" + (f" ({ms:.4g} ms geomean in the benches given)" if math.isfinite(ms) else "")
              for (b, n), (fam, ms, _) in sorted(routes.items())]
    lines += [f"  any other shape -> {fallback}", "", "Needs only torch and triton."]
    return compose(plan, sources, "\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("benches", nargs="*", type=Path)
    parser.add_argument("--route", action="append", default=[], help="BATCHxN=FAMILY")
    parser.add_argument("--fallback", default="cuda_blocked")
    parser.add_argument("-o", "--output", type=Path, required=True)
    args = parser.parse_args(argv)
    if bool(args.benches) == bool(args.route):
        parser.error("give bench JSON files or --route options, not both")
    if args.route:
        routes = {shape: (family, float("nan"), []) for shape, family in map(parse_route, args.route)}
    else:
        routes = routes_from_benches(args.benches)
    args.output.write_text(build(routes, args.fallback))
    print(f"{args.output}: {len(routes)} shapes routed, fallback {args.fallback}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
