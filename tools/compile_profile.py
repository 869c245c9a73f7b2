"""Where a candidate's compile time goes: every Triton kernel it compiles for the search's shapes.

For each candidate file, the shapes its evaluation compiles ahead (the gate suite's and the
bench suite's cases inside its family's size domain) are precompiled the way the search does
it (``kernels.harness.precompile``: CUDA hidden, one process per n, one CPU each, an empty
Triton cache per candidate), and the reports' per-kernel seconds are summed up:

    python tools/compile_profile.py [--out DIR] [--top K] [--shards S] [LABEL=]FILE_OR_FAMILY ...

Prints, per candidate, kernels compiled, compile CPU seconds, the wall time from the first
process's start to the last one's end, the slowest n, the seconds per lowering stage, and its
K slowest kernels (with the constexprs they were specialised on).  Runs on any machine with
Triton's ptxas (no GPU needed); the numbers are this host's CPU's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernels.families import FAMILIES, FAMILIES_DIR  # noqa: E402
from kernels.harness.precompile import CompileTarget, PrecompileReport, read_report, start_precompile  # noqa: E402
from kernels.suites import get_suite  # noqa: E402
from search.engine.domains import domain_cases  # noqa: E402

DEFAULT = ("householder_unblocked", "blocked_wy", "lookahead_split")


def resolve(item: str) -> tuple[str, Path, str]:
    """(label, file, family) for ``[LABEL=]FILE_OR_FAMILY``; the family gives the size domain."""
    label, _, target = item.rpartition("=")
    path = Path(target) if target.endswith(".py") else FAMILIES_DIR / f"{target}.py"
    if not path.is_file():
        raise SystemExit(f"compile_profile: no such candidate file or family: {target}")
    family = next((name for name in FAMILIES if path.stem.startswith(name)), path.stem)
    return label or path.stem, path, family


def domain_shapes(family: str, suites: list[str]) -> list[tuple[int, int]]:
    """The shapes the search compiles for ``family``: its size domain's cases of ``suites``."""
    inside = domain_cases([c for s in suites for c in get_suite(s)], FAMILIES.get(family))
    return sorted({(c.batch, c.n) for c in inside}, key=lambda s: (-s[1], s[0]))


def profile(label: str, path: Path, shapes: list[tuple[int, int]], out: Path, cpus: list[int],
            target: CompileTarget, timeout_s: float, shards: int = 1) -> dict:
    cache = out / f"cache-{label}"
    shutil.rmtree(cache, ignore_errors=True)
    by_n: dict[int, list[tuple[int, int]]] = {}
    for batch, n in shapes:
        by_n.setdefault(n, []).append((batch, n))
    # shards = 0: one process per n, largest n first (the search before compile shards);
    # otherwise that many processes sharing the kernels of every shape (the search now).
    if shards:
        ordered = sorted(shapes, key=lambda s: (-s[1], s[0]))
        pending = [(0, i, ordered, (i, shards)) for i in range(shards)]
    else:
        pending = [(n, 0, group, (0, 1)) for n, group in by_n.items()]
    running: dict[tuple[int, int], tuple[subprocess.Popen, float, int]] = {}
    ended: dict[tuple[int, int], tuple[float, float]] = {}
    free = list(cpus)
    started = time.perf_counter()
    while pending or running:
        while pending and free:
            n, i, group, shard = pending.pop(0)
            cpu = free.pop(0)
            proc = start_precompile(path, group, cache_dir=cache, target=target,
                                    report_path=out / f"{label}-n{n}-s{i}.json", cpus=[cpu], shard=shard)
            running[(n, i)] = (proc, time.perf_counter(), cpu)
        for key, (proc, began, cpu) in list(running.items()):
            if proc.poll() is not None or time.perf_counter() - started > timeout_s:
                if proc.poll() is None:
                    os.killpg(proc.pid, 9)
                    proc.wait()
                ended[key] = (began - started, time.perf_counter() - started)
                free.append(cpu)
                del running[key]
        time.sleep(0.05)
    reports: dict[tuple[int, int], PrecompileReport | None] = {
        key: read_report(out / f"{label}-n{key[0]}-s{key[1]}.json") for key in ended}
    kernels = [(key[0] if not shards else f"s{key[1]}", name, s) for key, r in reports.items() if r
               for name, s in r.kernel_seconds]
    stages: dict[str, float] = {}
    for r in reports.values():
        for stage, s in (r.stage_seconds if r else {}).items():
            stages[stage] = stages.get(stage, 0.0) + s
    part = (lambda k: k[1]) if shards else (lambda k: k[0])  # a row per shard, or per n
    per_n: dict[int, tuple[int, float, float]] = {}
    for n in sorted({part(k) for k in ended}):
        mine: list[tuple[PrecompileReport, tuple[float, float]]] = [
            (r, ended[k]) for k, r in reports.items() if part(k) == n and r is not None]
        seconds = [s for r, _ in mine for _, s in r.kernel_seconds]
        span = max((e for _, (_, e) in mine), default=0.0) - min((b for _, (b, _) in mine), default=0.0)
        per_n[n] = (len(seconds), sum(seconds), span)
    return {
        "label": label, "file": str(path), "shapes": shapes, "shards": shards,
        "distinct_kernels": len(list(cache.rglob("*.cubin"))),
        "errors": {k[0]: (r.error if r else "no report") for k, r in reports.items() if r is None or not r.ok},
        "processes": len(ended), "process_s": sum(r.seconds for r in reports.values() if r),
        "kernels": len(kernels), "cpu_s": sum(s for _, _, s in kernels),
        "wall_s": max((e for _, e in ended.values()), default=0.0), "per_n": per_n, "stages": stages,
        "slowest": sorted(kernels, key=lambda k: -k[2]),
    }


def render(results: list[dict], top: int) -> str:
    lines = ["| candidate | processes | kernels compiled (distinct) | compile CPU s | processes' s | wall s "
             "| slowest process (kernels, CPU s) | problems |", "|---|---|---|---|---|---|---|---|"]
    for r in results:
        worst = max(r["per_n"].items(), key=lambda kv: kv[1][1], default=None)
        what = "shard" if r["shards"] else "n"
        where = f"{what} {worst[0]} ({worst[1][0]}, {worst[1][1]:.1f})" if worst else "-"
        problems = "; ".join(f"n={n}: {e}" for n, e in r["errors"].items())[:200] or "ok"
        how = f"{r['shards']} shards" if r["shards"] else "one per n"
        lines.append(f"| {r['label']} | {r['processes']} ({how}) | {r['kernels']} ({r['distinct_kernels']}) "
                     f"| {r['cpu_s']:.1f} | {r['process_s']:.0f} | {r['wall_s']:.1f} | {where} "
                     f"| {problems} |")
    for r in results:
        total = sum(r["stages"].values()) or 1.0
        stages = ", ".join(f"{k} {v:.1f} s ({v / total:.0%})" for k, v in sorted(r["stages"].items(),
                                                                                 key=lambda kv: -kv[1]))
        row = "shard" if r["shards"] else "n"
        lines += ["", f"{r['label']}: {stages}", "", f"| {row} | kernels | CPU s | wall s |", "|---|---|---|---|"]
        lines += [f"| {n} | {k} | {s:.1f} | {w:.1f} |" for n, (k, s, w) in sorted(r["per_n"].items())]
        lines += ["", f"slowest {top} of {r['label']}:", "", f"| {row} | s | kernel |", "|---|---|---|"]
        lines += [f"| {n} | {s:.2f} | `{name}` |" for n, name, s in r["slowest"][:top]]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("candidates", nargs="*", default=list(DEFAULT))
    parser.add_argument("--suites", default="qrv2-quick,qrv2-bench")
    parser.add_argument("--out", type=Path, default=Path("/tmp/compile_profile"))
    parser.add_argument("--top", type=int, default=8)
    parser.add_argument("--timeout-s", type=float, default=400.0, help="per candidate")
    parser.add_argument("--shards", type=int, default=0,
                        help="this many processes sharing every shape's kernels (0: one process per n)")
    parser.add_argument("--parallel", action="store_true",
                        help="profile the candidates side by side (CPUs shared out) instead of one after another")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    cpus = sorted(os.sched_getaffinity(0))
    items = [resolve(c) for c in args.candidates]
    suites = args.suites.split(",")
    target = CompileTarget()
    results = []
    if args.parallel:
        import concurrent.futures as cf

        share = max(1, len(cpus) // len(items))
        with cf.ThreadPoolExecutor(len(items)) as pool:
            futures = [pool.submit(profile, label, path, domain_shapes(family, suites), args.out,
                                   cpus[i * share:(i + 1) * share] or cpus[:1], target, args.timeout_s,
                                   args.shards)
                       for i, (label, path, family) in enumerate(items)]
            results = [f.result() for f in futures]
    else:
        for label, path, family in items:
            results.append(profile(label, path, domain_shapes(family, suites), args.out, cpus, target,
                                   args.timeout_s, args.shards))
            print(f"{label}: {results[-1]['kernels']} kernels, {results[-1]['cpu_s']:.1f} CPU s, "
                  f"{results[-1]['wall_s']:.1f} s wall", file=sys.stderr, flush=True)
    table = render(results, args.top)
    (args.out / "compile_profile.md").write_text(table + "\n")
    (args.out / "compile_profile.json").write_text(json.dumps(results, indent=1, default=str))
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
