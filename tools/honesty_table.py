"""Are the search's timings honest?  Each seed's per-case medians as the search recorded them,
against a standalone ``qrsearch bench`` of the same file on the same machine right after.

    python tools/honesty_table.py plan RUN_DIR   # one line per seed: FILE CASES FAMILY SHORT_CASES
    python tools/honesty_table.py region RUN_DIR # the run's timed region (call or gpumode)
    python tools/honesty_table.py table RUN_DIR B1.json [B2.json ...] [--repeats R1.json ...] [--json out.json]

``plan`` picks the seeds with their family's default parameters (island 0) and the reference,
writes each one's source next to the run (the exact file the evaluator ran) and prints the
cases the search timed it on, and those of them under 1 ms (launch-bound: ``-`` if none).
``table`` matches the bench JSONs to those seeds by file and prints search vs bench per case;
the bar is 3%, or 10% for cases under 0.2 ms.  Beside each pair, what else the timed calls cost
where it was recorded, in the search and alone: the time a call kept the host (near the median, a
busy host slows the call) and the device allocator's calls inside the timed regions, the two
explanations of a search median above its bench.  The ``--repeats`` JSONs, second benches of the
same files (their short cases benched again), give the ``repeat`` column: how far two standalone
benches of one file differ, the noise floor the search's difference is to be read against.
Which is which is said, never inferred from the order of the files (a shell glob sorted
``bench_repeat*`` before ``bench_seed*`` and swapped the columns of a table once).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernels.candidate import materialize  # noqa: E402
from population.models import Origin, State  # noqa: E402
from population.store import RunStore  # noqa: E402
from search.config import RunConfig  # noqa: E402


def seeds(run_dir: Path) -> list[dict]:
    out = []
    with RunStore.open(run_dir, readonly=True, integrity=False) as store:
        for cand in store.list_candidates():
            if cand.origin is not Origin.SEED or cand.island != 0 or cand.state is not State.VERIFIED:
                continue
            result = store.get_result(cand.id)
            if result is None:
                continue
            path = materialize(store.source(cand.source_sha256), run_dir / "seeds")
            out.append({"id": cand.id, "family": cand.family, "file": str(path.resolve()),
                        "medians": {c.case: c.median_ms for c in result.cases if c.median_ms},
                        "costs": {c.case: (c.host_ms, c.allocator_calls) for c in result.cases if c.median_ms}})
    return out


def timing_region(run_dir: Path) -> str:
    """What one timed region held in the run (``evaluation.timing.region``), so the standalone bench
    times the seeds the same way."""
    with RunStore.open(run_dir, readonly=True, integrity=False) as store:
        config = RunConfig.model_validate_json(store.config_json() or "{}")  # its defaults where the run had none
    return config.evaluation.timing.region


def limit_for(ms: float) -> float:
    return 0.10 if ms < 0.2 else 0.03


def _timings(paths: list[Path]) -> dict[str, dict[str, dict]]:
    """Per candidate file, its per-case timing records in these bench JSONs."""
    out: dict[str, dict[str, dict]] = {}
    for path in paths:
        data = json.loads(path.read_text())
        for report in data.get("reports", [data]):
            file = str(Path(report["candidate"]).resolve())
            out.setdefault(file, {}).update({c["name"]: c["timing"] for c in report["cases"] if c.get("timing")})
    return out


def _medians(paths: list[Path]) -> dict[str, dict[str, float]]:
    """Per candidate file, its per-case medians in these bench JSONs."""
    return {file: {case: t["median_ms"] for case, t in cases.items()} for file, cases in _timings(paths).items()}


def table(run_dir: Path, bench_files: list[Path], repeat_files: list[Path] | None = None) -> list[dict]:
    benched = _timings(bench_files)
    repeats = _medians(repeat_files or [])
    rows = []
    for seed in seeds(run_dir):
        bench = benched.get(seed["file"], {})
        again = repeats.get(seed["file"], {})
        for case, searched in seed["medians"].items():
            record = bench.get(case, {})
            alone = record.get("median_ms")
            host, allocs = seed["costs"].get(case, (None, None))
            diff = None if alone is None else searched / alone - 1
            repeat = None if alone is None or case not in again else again[case] / alone - 1
            rows.append({"seed": seed["id"], "family": seed["family"], "case": case, "search_ms": searched,
                         "bench_ms": alone, "diff": diff, "limit": limit_for(alone or searched),
                         "ok": diff is not None and abs(diff) <= limit_for(alone or searched),
                         "repeat_ms": again.get(case), "repeat_diff": repeat,
                         # what else the timed calls cost, in the search and alone (None: not recorded)
                         "search_host_ms": host, "bench_host_ms": record.get("host_ms"),
                         "search_allocator_calls": allocs, "bench_allocator_calls": record.get("allocator_calls")})
    return rows


def _pair(searched: float | int | None, alone: float | int | None, spec: str) -> str:
    if searched is None and alone is None:
        return ""
    return " / ".join("-" if x is None else format(x, spec) for x in (searched, alone))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["plan", "region", "table"])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("bench", nargs="*", type=Path)
    parser.add_argument("--repeats", nargs="*", type=Path, default=[],
                        help="second benches of the same files (the noise floor)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if args.mode == "plan":
        for seed in seeds(args.run_dir):
            short = [case for case, ms in seed["medians"].items() if ms < 1.0]
            print(seed["file"], ",".join(seed["medians"]), seed["family"], ",".join(short) or "-")
        return 0
    if args.mode == "region":
        print(timing_region(args.run_dir))
        return 0
    rows = table(args.run_dir, args.bench, args.repeats)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    print(f"{'seed':9s} {'family':22s} {'case':22s} {'search ms':>10s} {'bench ms':>10s} {'diff':>7s} {'limit':>6s}"
          f"     {'repeat':>7s}  {'host ms (search / bench)':>24s}  {'allocator calls':>15s}")
    for r in rows:
        diff = "-" if r["diff"] is None else f"{100 * r['diff']:+.1f}%"
        repeat = "" if r["repeat_diff"] is None else f"{100 * r['repeat_diff']:+.1f}%"
        print(f"{r['seed']:9s} {r['family']:22s} {r['case']:22s} {r['search_ms']:10.4g} "
              f"{r['bench_ms'] if r['bench_ms'] is not None else float('nan'):10.4g} {diff:>7s} "
              f"{100 * r['limit']:5.0f}% {'ok ' if r['ok'] else 'OUT'} {repeat:>7s}  "
              f"{_pair(r['search_host_ms'], r['bench_host_ms'], '.4g'):>24s}  "
              f"{_pair(r['search_allocator_calls'], r['bench_allocator_calls'], 'd'):>15s}")
    inside = sum(r["ok"] for r in rows)
    print(f"{inside}/{len(rows)} cases within the bar")
    return 0 if rows and inside == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
