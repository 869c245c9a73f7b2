"""Where a bench job's wall time goes, and how much of each part keeps the GPU busy.

    python lab/stage_profile.py [--families a,b] [--region gpumode] [--max-seconds 0.5]

Runs, in this one process, what an evaluation child runs for each family's seed file: load the
candidate, the verify stage's gate calls (the verify suite with the exact Q, the bench cases'
first calls with the fast one), then the bench job (warm-up, timed regions, their re-checks) on
every bench case.  The harness's own functions run; each part is wrapped in a profiler range,
and the GPU's busy time inside each range is the union of the kernels, copies and sets that the
profiler saw run in it.  Prints, per family and over all, wall seconds and GPU-busy percent per
part: the numbers that say which part of an evaluation leaves the GPU idle.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import torch
from torch.profiler import ProfilerActivity, profile, record_function

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import kernels.harness.timing as timing  # noqa: E402
import kernels.verify as verify  # noqa: E402
from kernels.candidate import load_candidate  # noqa: E402
from kernels.harness.precompile import CompileTarget, start_precompile  # noqa: E402
from kernels.harness.settings import TimingPolicy  # noqa: E402
from kernels.families import get_family  # noqa: E402
from kernels.suites import get_suite  # noqa: E402
from search.engine.domains import domain_cases  # noqa: E402

# Each family is profiled on its domain only, as the search times it: outside it a file hands the
# case to torch.geqrf, whose per-column launches made a 5-minute trace (householder_unblocked's
# n > 128 cases took 310 s of one device call before domains were applied here).
FAMILIES = ["householder_unblocked", "blocked_wy", "lookahead_split", "cuda_onchip", "cuda_blocked"]
PARTS = ("load", "clock", "gate_quick", "gate_bench", "warmup", "inputs", "flush", "region", "recheck")


def _wrap(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        with record_function(f"part:{name}"):
            return fn(*args, **kwargs)
    return wrapped


@contextmanager
def _parts_instrumented() -> Iterator[None]:
    """The harness's timing module with its steps inside profiler ranges (restored after)."""
    saved = {name: getattr(timing, name) for name in ("generate_input", "verify_many")}
    flush, region = timing.DeviceClock.flush, timing.DeviceClock.region
    timing.generate_input = _wrap("inputs", saved["generate_input"])  # type: ignore[attr-defined]
    timing.verify_many = _wrap("recheck", saved["verify_many"])  # type: ignore[attr-defined]
    timing.DeviceClock.flush = _wrap("flush", flush)  # type: ignore[method-assign]
    timing.DeviceClock.region = _wrap("region", region)  # type: ignore[method-assign]
    try:
        yield
    finally:
        for name, fn in saved.items():
            setattr(timing, name, fn)
        timing.DeviceClock.flush, timing.DeviceClock.region = flush, region  # type: ignore[method-assign]


def _merged(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Overlapping or touching spans joined, in order."""
    out: list[tuple[float, float]] = []
    for lo, hi in sorted(spans):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def _trace_events(trace: dict) -> list[dict]:
    return trace.get("traceEvents", trace) if isinstance(trace, dict) else trace


def _gpu_spans(events: list[dict]) -> list[tuple[float, float]]:
    """The GPU's busy spans: kernels, copies and sets, merged."""
    return _merged([(e["ts"], e["ts"] + e["dur"]) for e in events
                    if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")])


def _part_spans(events: list[dict]) -> dict[str, list[tuple[float, float]]]:
    """Each ``part:`` range's spans, by part name."""
    ranges: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and str(e.get("name", "")).startswith("part:"):
            ranges[e["name"][5:]].append((e["ts"], e["ts"] + e["dur"]))
    return ranges


def busy_by_part(trace: dict) -> dict[str, dict[str, float]]:
    """Wall and GPU-busy microseconds per ``part:`` range of a Chrome trace (nested ranges of the
    same part count once: the innermost is not double-counted, the ranges are merged first)."""
    events = _trace_events(trace)
    gpu = _gpu_spans(events)
    out: dict[str, dict[str, float]] = {}
    for part, spans in _part_spans(events).items():
        merged = _merged(spans)
        # The GPU's spans are disjoint once merged, and so are the part's: their clipped pieces too.
        busy = sum(min(b, hi) - max(a, lo) for lo, hi in merged for a, b in gpu if b > lo and a < hi)
        out[part] = {"wall_us": sum(hi - lo for lo, hi in merged), "busy_us": busy, "count": float(len(spans))}
    return out


_HOST_CATS = ("cpu_op", "cuda_runtime", "cuda_driver", "python_function")


def idle_by_host_op(trace: dict, parts: tuple[str, ...] = ("warmup", "region", "recheck", "inputs", "flush")
                    ) -> dict[str, float]:
    """Microseconds the GPU sat idle inside the given parts, by what the host was doing then: the
    innermost host op (ATen op, CUDA runtime call) running at that moment, or "(no op)" for
    Python between ops.  The question it answers: which host work leaves the GPU idle."""
    events = _trace_events(trace)
    gpu = _gpu_spans(events)
    ranges = _part_spans(events)
    windows = _merged([span for part in parts for span in ranges.get(part, [])])
    # Idle = the parts' windows minus the GPU's busy spans.
    idle: list[tuple[float, float]] = []
    g = 0
    for lo, hi in windows:
        cursor = lo
        while g < len(gpu) and gpu[g][1] <= lo:
            g += 1
        k = g
        while k < len(gpu) and gpu[k][0] < hi:
            if gpu[k][0] > cursor:
                idle.append((cursor, gpu[k][0]))
            cursor = max(cursor, gpu[k][1])
            k += 1
        if cursor < hi:
            idle.append((cursor, hi))
    # The innermost host op at each moment: a sweep over op boundaries keeping the ops that cover the
    # slice (ops nest per thread; across threads the shortest covering op wins).
    ops = [(e["ts"], e["ts"] + e["dur"], str(e.get("name", "?"))) for e in events
           if e.get("ph") == "X" and e.get("cat") in _HOST_CATS and e.get("dur", 0) > 0]
    bounds = sorted({t for lo, hi, _ in ops for t in (lo, hi)} | {t for lo, hi in idle for t in (lo, hi)})
    starts = sorted(ops)
    active: list[tuple[float, float, str]] = []
    out: dict[str, float] = defaultdict(float)
    i = j = 0
    for left, right in zip(bounds, bounds[1:]):
        while i < len(starts) and starts[i][0] <= left:
            active.append(starts[i])
            i += 1
        active = [op for op in active if op[1] > left]
        while j < len(idle) and idle[j][1] <= left:
            j += 1
        if j >= len(idle) or idle[j][0] > left:
            continue  # this slice is not idle
        inner = min(active, key=lambda op: op[1] - op[0])[2] if active else "(no op)"
        out[inner] += right - left
    return dict(out)


def profile_family(family: str, policy: TimingPolicy, verify_suite: str, bench_suite: str,
                   trace_dir: Path) -> dict[str, dict[str, float]]:
    """Each part's wall and busy microseconds, and under "idle_by_host_op" the bench job's GPU-idle
    microseconds by the host op running then."""
    device = torch.device("cuda")
    path = ROOT / "kernels" / "families" / "files" / f"{family}.py"
    bench_cases = domain_cases(list(get_suite(bench_suite)), get_family(family))
    verify_cases = domain_cases(list(get_suite(verify_suite)), get_family(family))
    with _parts_instrumented(), profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        with record_function("part:load"):
            kernel = load_candidate(path)
        with record_function("part:clock"):
            clock = timing.DeviceClock(device)
        for case in verify_cases:
            with record_function("part:gate_quick"):
                timing.call_verified(kernel, case, case.seed, device, exact_q=True)
        for case in bench_cases:
            with record_function("part:gate_bench"):
                timing.call_verified(kernel, case, case.seed, device, exact_q=False)
        for case in bench_cases:
            with record_function("part:case"):
                for w in range(policy.warmup_calls):
                    with record_function("part:warmup"):
                        timing.call_verified(kernel, case, timing.timed_input_seed(case, -2 - w), device,
                                             exact_q=False)
                timing.measure(kernel, case, device, clock, policy.model_copy(update={"warmup_calls": 0}))
    trace_path = trace_dir / f"{family}.json"
    prof.export_chrome_trace(str(trace_path))
    trace = json.loads(trace_path.read_text())
    parts = busy_by_part(trace)
    parts["idle_by_host_op"] = idle_by_host_op(trace)
    return parts


def precompile(families: list[str], suites: list[str], shards: int, cache_dir: Path, logs: Path) -> float:
    """Every family's kernels compiled into ``cache_dir`` first, ``shards`` processes each (as the
    search compiles ahead), so that the profile sees the cache hits an evaluation child sees."""
    began = time.perf_counter()
    def shapes(family: str) -> list[tuple[int, int]]:
        return sorted({(c.batch, c.n) for suite in suites
                       for c in domain_cases(list(get_suite(suite)), get_family(family))})

    procs = [start_precompile(ROOT / "kernels" / "families" / "files" / f"{family}.py", shapes(family),
                              cache_dir=cache_dir,
                              target=CompileTarget(sm_count=torch.cuda.get_device_properties(0).multi_processor_count),
                              report_path=logs / f"pre-{family}-{i}.json", shard=(i, shards))
             for family in families for i in range(shards)]
    for proc in procs:
        proc.wait()
    return time.perf_counter() - began


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", default=",".join(FAMILIES))
    parser.add_argument("--region", default="gpumode", choices=["call", "gpumode"])
    parser.add_argument("--max-seconds", type=float, default=0.5)
    parser.add_argument("--verify-suite", default="qrv2-quick")
    parser.add_argument("--bench-suite", default="qrv2-bench")
    parser.add_argument("--trace-dir", type=Path, default=Path("/tmp/stage-traces"))
    parser.add_argument("--json", type=Path)
    parser.add_argument("--idle-ops", type=int, default=10, help="host ops listed per family by GPU-idle time")
    parser.add_argument("--q64-block", type=int, default=0,
                        help="columns per block of the re-checks' float64 Q (kernels.verify.householder_q64; "
                        "0: its default), to measure a wider one")
    parser.add_argument("--chunk-elements", type=int, default=0,
                        help="float64 elements per chunk of matrices the re-checks verify at once "
                        "(kernels.verify._CHUNK_ELEMENTS; 0: its default), to measure fewer, larger chunks")
    parser.add_argument("--precompile-shards", type=int, default=0,
                        help="compile every family ahead into $TRITON_CACHE_DIR in this many processes each")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("stage_profile needs a CUDA device", file=sys.stderr)
        return 2
    args.trace_dir.mkdir(parents=True, exist_ok=True)
    policy = TimingPolicy(max_seconds=args.max_seconds, region=args.region)
    if args.q64_block:
        verify.householder_q64 = functools.partial(verify.householder_q64, block=args.q64_block)  # type: ignore[assignment]
        print(f"re-checks form Q {args.q64_block} columns at a time", flush=True)
    if args.chunk_elements:
        verify._CHUNK_ELEMENTS = args.chunk_elements
        print(f"re-checks verify {args.chunk_elements} float64 elements of matrices at a time", flush=True)
    families = args.families.split(",")
    if args.precompile_shards:
        cache = Path(os.environ.get("TRITON_CACHE_DIR", Path.home() / ".triton" / "cache"))
        seconds = precompile(families, [args.verify_suite, args.bench_suite], args.precompile_shards, cache,
                             args.trace_dir)
        print(f"precompiled {len(families)} families in {seconds:.1f} s", flush=True)
    results: dict[str, dict[str, dict[str, float]]] = {}
    total: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    # A row per family as soon as it is profiled (and the JSON rewritten): a call cut by its time
    # limit still reports the families it finished.
    print(f"\n{'family':22s} " + " ".join(f"{p:>16s}" for p in (*PARTS, "case")), flush=True)
    for family in families:
        began = time.perf_counter()
        parts = profile_family(family, policy, args.verify_suite, args.bench_suite, args.trace_dir)
        results[family] = parts
        cells = []
        for part in (*PARTS, "case"):
            p = parts.get(part, {"wall_us": 0.0, "busy_us": 0.0})
            for key in ("wall_us", "busy_us"):
                total[part][key] += p[key]
            cells.append(f"{p['wall_us'] / 1e6:7.2f}s {100 * p['busy_us'] / max(p['wall_us'], 1):4.0f}%")
        print(f"{family:22s} " + " ".join(f"{c:>16s}" for c in cells)
              + f"   ({time.perf_counter() - began:.0f} s)", flush=True)
        idle = sorted(parts["idle_by_host_op"].items(), key=lambda kv: -kv[1])
        print(f"{'':22s} GPU idle in the bench job {sum(v for _, v in idle) / 1e6:.2f} s, by host op: " + ", ".join(
            f"{name} {us / 1e3:.0f} ms" for name, us in idle[:args.idle_ops]), flush=True)
        if args.json:
            args.json.write_text(json.dumps(results, indent=1))
    print(f"{'all':22s} " + " ".join(
        f"{total[p]['wall_us'] / 1e6:7.2f}s {100 * total[p]['busy_us'] / max(total[p]['wall_us'], 1):4.0f}%"
        for p in (*PARTS, "case")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
