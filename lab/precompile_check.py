"""Does compile-ahead pay on the GPU?  For each family at the qrv2-bench shapes:

1. precompile it in a CUDA-hidden process into an empty Triton cache;
2. run it in a fresh GPU process with that cache, counting compiles vs cache hits,
   and time each shape's first call (what the evaluation child pays today);
3. for comparison, run it in a fresh GPU process with another empty cache.

    python lab/precompile_check.py [--out DIR] [family ...]

Prints a Markdown table and writes it, with the raw JSON, under --out.  The precompiles
and the cold runs go at once, on disjoint CPUs; the warm runs follow one at a time.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernels.families import FAMILIES_DIR  # noqa: E402
from kernels.harness.precompile import CompileTarget, read_report, start_precompile  # noqa: E402
from kernels.harness.process import child_env  # noqa: E402
from kernels.suites import SUITES  # noqa: E402

FAMILIES = ("householder_unblocked", "blocked_wy", "lookahead_split")


def bench_shapes() -> list[tuple[int, int]]:
    return sorted({(c.batch, c.n) for c in SUITES["qrv2-bench"]}, key=lambda s: s[1])


def run_family(candidate: str, shapes: str) -> None:
    """The GPU side (``--run``): first call per shape, compiles and hits; one JSON line out."""
    import torch

    from kernels.candidate import load_candidate
    from kernels.harness.compile_stats import install_compile_counter
    from kernels.harness.precompile import parse_shapes

    counter = install_compile_counter()
    torch.empty(1, device="cuda")
    started = time.perf_counter()
    kernel = load_candidate(candidate)
    first_calls = {}
    for batch, n in parse_shapes(shapes):
        A = torch.randn(batch, n, n, device="cuda", generator=torch.Generator("cuda").manual_seed(n))
        torch.cuda.synchronize()
        began = time.perf_counter()
        kernel(A)
        torch.cuda.synchronize()
        first_calls[f"{batch}x{n}"] = time.perf_counter() - began
    print(json.dumps({"compiled": counter.compiled, "cache_hits": counter.cache_hits,
                      "first_calls_s": first_calls, "load_and_calls_s": time.perf_counter() - started,
                      "device": torch.cuda.get_device_name()}), flush=True)


def start_gpu_run(candidate: Path, shapes: str, cache: Path, cpus: list[int]) -> subprocess.Popen:
    env = child_env({"TRITON_CACHE_DIR": str(cache)})
    return subprocess.Popen(
        [sys.executable, __file__, "--run", str(candidate), "--shapes", shapes], env=env, cwd=ROOT,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: os.sched_setaffinity(0, cpus))


def finish_gpu_run(proc: subprocess.Popen, timeout: float) -> dict:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return {"error": f"still running after {timeout:.0f} s; killed"}
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"error": (err.strip().splitlines() or ["no output"])[-1][:300]}
    return json.loads(lines[-1])


def _status(report: object, cold: dict, warm: dict) -> str:
    notes = [] if report is None or report.ok else [f"precompile: {report.error}"]  # type: ignore[attr-defined]
    notes += [f"{name} run: {r['error']}" for name, r in (("cold", cold), ("warm", warm)) if "error" in r]
    return "; ".join(notes)[:300] or "ok"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--run")
    parser.add_argument("--shapes")
    parser.add_argument("--out", type=Path, default=Path("/tmp/precompile_check"))
    parser.add_argument("--budget-s", type=float, default=600.0, help="kill whatever is still running by then")
    parser.add_argument("families", nargs="*", default=list(FAMILIES))
    args = parser.parse_args()
    if args.run:
        run_family(args.run, args.shapes)
        return 0
    shapes = bench_shapes()
    shape_text = ",".join(f"{b}x{n}" for b, n in shapes)
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    cores = sorted(os.sched_getaffinity(0))
    per = max(1, len(cores) // (2 * len(args.families)))
    started = time.perf_counter()
    pre, cold = {}, {}
    for i, family in enumerate(args.families):
        path = FAMILIES_DIR / f"{family}.py"
        pre_cpus = cores[(2 * i) * per:(2 * i + 1) * per] or cores[:1]
        run_cpus = cores[(2 * i + 1) * per:(2 * i + 2) * per] or cores[-1:]
        pre[family] = start_precompile(path, shapes, cache_dir=out / f"cache-pre-{family}", target=CompileTarget(),
                                       report_path=out / f"pre-{family}.json", cpus=pre_cpus)
        cold[family] = start_gpu_run(path, shape_text, out / f"cache-cold-{family}", run_cpus)
    rows, raw = [], {}
    for family in args.families:
        path = FAMILIES_DIR / f"{family}.py"
        left = lambda share: max(1.0, share * args.budget_s - (time.perf_counter() - started))  # noqa: E731
        try:
            pre[family].wait(timeout=left(0.7))
        except subprocess.TimeoutExpired:
            os.killpg(pre[family].pid, 9)
        report = read_report(out / f"pre-{family}.json")
        cold_result = finish_gpu_run(cold[family], timeout=left(0.8))
        warm_result = finish_gpu_run(start_gpu_run(path, shape_text, out / f"cache-pre-{family}", cores),
                                     timeout=left(1.0))
        raw[family] = {"precompile": report.model_dump(mode="json") if report else None, "cold": cold_result,
                       "warm": warm_result}
        hits, misses = warm_result.get("cache_hits"), warm_result.get("compiled")
        rows.append(
            f"| {family} | {report.seconds:.1f} | {report.kernels_compiled} | {hits}/{misses} "
            f"| {sum(cold_result.get('first_calls_s', {}).values()):.2f} "
            f"| {sum(warm_result.get('first_calls_s', {}).values()):.2f} "
            f"| {cold_result.get('compiled')} | {_status(report, cold_result, warm_result)} |" if report else
            f"| {family} | no report | | | | | | {_status(report, cold_result, warm_result)} |")
    table = "\n".join([
        f"shapes: {shape_text}; device: {next((r['warm'].get('device') for r in raw.values()), '?')}",
        "",
        "| family | precompile s | kernels precompiled | real run hits/misses | first calls s, no precompile "
        "| first calls s, precompiled | compiles, no precompile | precompile status |",
        "|---|---|---|---|---|---|---|---|", *rows])
    print(table, flush=True)
    (out / "table.md").write_text(table + "\n")
    (out / "raw.json").write_text(json.dumps(raw, indent=1))
    print(json.dumps(raw), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
