"""The composite of several `qrsearch bench --json-out` files: the best file per case, as a table.

    python tools/composite_table.py BENCH.json [BENCH.json ...] [--baseline RUN_OR_BENCH.json]

Per `qrv2-bench` case, the fastest verified median among the files (ok cases only), its file, and
the geomean over the suite's first 12 cases (the kernels-v3 issue's) and over every case any file
timed.  With --baseline (a bench JSON whose cases carry torch.geqrf's medians under
``baseline.median_ms``, or a plain {case: ms} mapping), a speedup column and its geomean.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernels.suites import get_suite  # noqa: E402

FIRST_CASES = 12  # the kernels-v3 issue's composite: qrv2-bench's first 12 cases


def _geomean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def _label(doc: dict[str, Any], path: Path) -> str:
    return Path(str(doc.get("candidate") or path)).stem


def best_per_case(docs: list[tuple[Path, dict[str, Any]]]) -> dict[str, tuple[float, str]]:
    best: dict[str, tuple[float, str]] = {}
    for path, doc in docs:
        for case in doc.get("cases", []):
            timing = case.get("timing") or {}
            ms = timing.get("median_ms")
            if case.get("status", "ok") != "ok" or not ms:
                continue
            if case["name"] not in best or ms < best[case["name"]][0]:
                best[case["name"]] = (ms, _label(doc, path))
    return best


def load_baseline(path: Path | None) -> dict[str, float]:
    if path is None:
        return {}
    doc = json.loads(path.read_text())
    if isinstance(doc, dict) and "cases" not in doc:
        return {str(k): float(v) for k, v in doc.items()}
    out = {}
    for case in doc["cases"]:
        ms = (case.get("baseline") or {}).get("median_ms") or (case.get("timing") or {}).get("median_ms")
        if ms:
            out[case["name"]] = float(ms)
    return out


def table(best: dict[str, tuple[float, str]], order: list[str], baseline: dict[str, float]) -> str:
    lines = ["| case | best ms | file |" + (" torch.geqrf ms | speedup |" if baseline else ""),
             "|---|---|---|" + ("---|---|" if baseline else "")]
    for name in order:
        if name not in best:
            continue
        ms, label = best[name]
        row = f"| {name} | {ms:.4g} | {label} |"
        if baseline:
            base = baseline.get(name)
            row += f" {base:.4g} | {base / ms:.1f}x |" if base else " - | - |"
        lines.append(row)
    for title, names in ((f"first {FIRST_CASES}", order[:FIRST_CASES]), ("all timed", order)):
        timed = [n for n in names if n in best]
        gm = _geomean([best[n][0] for n in timed])
        if gm is None:
            continue
        missing = "" if len(timed) == len(names) else f" (only {len(timed)} of {len(names)} timed)"
        row = f"| **geomean, {title}**{missing} | **{gm:.4g}** | |"
        if baseline:
            ratios = [baseline[n] / best[n][0] for n in timed if n in baseline]
            sp = _geomean(ratios)
            row += f" | **{sp:.1f}x** |" if sp and len(ratios) == len(timed) else " | - |"
        lines.append(row)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("benches", nargs="+", type=Path)
    parser.add_argument("--baseline", type=Path)
    parser.add_argument("--suite", default="qrv2-bench")
    args = parser.parse_args(argv)
    docs = [(p, json.loads(p.read_text())) for p in args.benches]
    order = [c.name for c in get_suite(args.suite)]
    print(table(best_per_case(docs), order, load_baseline(args.baseline)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
