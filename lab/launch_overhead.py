"""Host overhead apart from device time, per candidate file, on launch-bound cases (GPU host).

For a case whose kernel runs for tens of microseconds, the harness's per-call time is mostly host
work: the file's Python, output allocation, the Triton launcher.  This script separates them, in
several fresh processes per file (launch-bound medians move between processes):

  harness     ``measure``'s median with the event overhead calibrated once at process start
              (what ``qrsearch bench`` and the search report)
  harness@w   the same timed calls, the event overhead re-calibrated after the warm-up calls
  overhead    the calibrated empty-region cost: at process start / after warm-up
  host        the call's own host time (perf_counter around it, no synchronisation)
  device      the call's device time alone: the GPU is held by a queued ``torch.cuda._sleep``
              while the host enqueues the call, so launch gaps do not count
  wall        perf_counter around call + synchronize

    python lab/launch_overhead.py FILE [FILE ...] [--case dense-20x32-c1] [--processes 3] [--calls 50]

Files may be family files, seeds or an exported composite (then the difference between a composite
and the family file it routes to is its routing cost).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _child(path: str, case_name: str, calls: int) -> dict[str, float]:
    import torch

    from kernels.candidate import load_candidate
    from kernels.harness.settings import TimingPolicy
    from kernels.harness.timing import DeviceClock, measure
    from kernels.inputs import generate_input
    from kernels.suites import get_suite

    case = next(c for c in get_suite("qrv2-bench") if c.name == case_name)
    device = torch.device("cuda")
    kernel = load_candidate(path)
    clock = DeviceClock(device)
    overhead_start = clock.overhead_ms
    stats, verdict = measure(kernel, case, device, clock, TimingPolicy(max_seconds=0.5))
    if stats is None:
        raise SystemExit(f"{path}: {verdict.message}")
    overhead_warm = clock._calibrate()
    a = generate_input(case.batch, case.n, case.cond, case.seed, case.case, device=device)
    host, device_ms, wall = [], [], []
    for _ in range(calls):
        given = a.clone()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        kernel(given)
        host.append((time.perf_counter() - t0) * 1e3)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        kernel(given)
        torch.cuda.synchronize()
        wall.append((time.perf_counter() - t0) * 1e3)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(2_000_000)  # about 1 ms at boost clock: longer than the host's enqueue
        start.record()
        kernel(given)
        end.record()
        end.synchronize()
        device_ms.append(start.elapsed_time(end))
    shift = overhead_start - overhead_warm
    return {"harness": stats.median_ms, "harness_warm": max(0.0, stats.median_ms + shift),
            "overhead_start": overhead_start, "overhead_warm": overhead_warm,
            "host": statistics.median(host), "device": statistics.median(device_ms), "wall": statistics.median(wall)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*")
    ap.add_argument("--case", default="dense-20x32-c1")
    ap.add_argument("--processes", type=int, default=3)
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--json")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(_child(args.child, args.case, args.calls)))
        return
    keys = ["harness", "harness_warm", "overhead_start", "overhead_warm", "host", "device", "wall"]
    rows = []
    print(f"{args.case}, ms (median of {args.calls} calls; one row per fresh process)")
    print(f"{'file':34s} " + " ".join(f"{k:>14s}" for k in keys))
    for path in args.files:
        for p in range(args.processes):
            done = subprocess.run([sys.executable, __file__, "--child", path, "--case", args.case,
                                   "--calls", str(args.calls)], capture_output=True, text=True)
            if done.returncode != 0:
                print(f"{Path(path).name[:34]:34s} failed: {done.stderr.strip().splitlines()[-1:]}")
                continue
            row = json.loads(done.stdout.strip().splitlines()[-1])
            rows.append({"file": path, "process": p, **row})
            print(f"{Path(path).name[:34]:34s} " + " ".join(f"{row[k]:14.4f}" for k in keys), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
