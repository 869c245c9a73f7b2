"""Time PARAMS variants of a family file in one process, and say where each one's device time goes.

    python lab/blocked_probe.py [--file kernels/families/files/cuda_blocked.py] --shape 640x512[:PROFILE] [--shape 60x1024]
        --variant 'name:KEY=VALUE[,KEY=VALUE]' [--variant ...] [--rounds 5] [--calls 10] [--profile]
        [--check PROFILE ...]

A family file's PARAMS is a module-level dict its launch path reads on every call, so variants that
differ only in PARAMS can share one process, one build of the CUDA extension and one input: the
variants run in interleaved rounds (drift hits all of them alike), every variant's output is checked
once with the float64 verifier before it is timed, and each timing is the median over rounds of the
median of ``--calls`` back-to-back calls timed with CUDA events.  The inputs are hundreds of MB, far
above the L2, so back-to-back calls do not run from a warm cache.  ``--profile`` adds, per variant
and shape, one call under torch.profiler with the device time per kernel name (top 6), so a change
shows which kernel it moved.  ``--check PROFILE`` (repeatable) also verifies every variant at every
shape on a fresh input of that profile (rankdef, mixed, ...: the paths a dense input never takes), and
a variant that fails any check is not timed.  Process-level effects (the 60x1024 modes in kernels/BENCHMARKS.md) are
the same for every variant here; compare variants within a run, and confirm a winner with
tools/param_ab.sh in fresh processes.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernels.inputs import generate_input  # noqa: E402
from kernels.verify import verify_qr  # noqa: E402


def parse_variant(text: str) -> tuple[str, dict[str, Any]]:
    """'name:KEY=VALUE,...' -> (name, overrides); 'base' or 'base:' is the file's own PARAMS."""
    name, _, body = text.partition(":")
    overrides: dict[str, Any] = {}
    for item in filter(None, body.split(",")):
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"variant {text!r}: {item!r} is not KEY=VALUE")
        try:
            overrides[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            overrides[key] = value
    return name, overrides


def read_medians(path: str | Path) -> tuple[dict[tuple[str, str], float], dict[str, dict[str, Any]]]:
    """What main() printed to a file: the median of each (shape, variant) timed, and each variant's
    overrides (the device scripts that adopt a winner read the probe's table with this)."""
    medians: dict[tuple[str, str], float] = {}
    overrides: dict[str, dict[str, Any]] = {}
    shape = None
    for line in Path(path).read_text().splitlines():
        if m := re.match(r"^(\S+): median", line):
            shape = m[1]
        elif (m := re.match(r"^  (\S+)\s+([\d.]+) \(.*?(\{.*\})\s*$", line)) and shape:
            medians[(shape, m[1])] = float(m[2])
            overrides[m[1]] = ast.literal_eval(m[3])
    return medians, overrides


def use(module: ModuleType, base: dict[str, Any], overrides: dict[str, Any]) -> None:
    """The file's PARAMS as base with overrides, and no CUDA graph captured or kernel chosen under
    other PARAMS (a graph replays what it captured, a cached choice stays, whatever PARAMS say now)."""
    module.PARAMS.clear()
    module.PARAMS.update(base, **overrides)
    getattr(module, "_GRAPHS", {}).clear()
    getattr(module, "_KEYS", {}).clear()


def load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("probe_" + path.stem, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def time_calls(fn: Any, a: torch.Tensor, calls: int) -> float:
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
    for s, e in zip(starts, ends):
        s.record()
        fn(a)
        e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))


def kernel_times(fn: Any, a: torch.Tensor) -> list[tuple[str, float, int]]:
    """(kernel name, device ms, launches) of one call, largest first."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn(a)
        torch.cuda.synchronize()
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            entry = totals[event.name[:60]]
            entry[0] += event.device_time_total / 1e3
            entry[1] += 1
    return sorted(((name, ms, int(count)) for name, (ms, count) in totals.items()), key=lambda r: -r[1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--file", type=Path, default=ROOT / "kernels" / "families" / "files" / "cuda_blocked.py")
    parser.add_argument("--shape", action="append", required=True, help="BATCHxN")
    parser.add_argument("--variant", action="append", default=[], help="name:KEY=VALUE,...")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--check", action="append", default=[], help="verify on this input profile too")
    args = parser.parse_args(argv)
    module = load(args.file)
    base = dict(module.PARAMS)
    variants = [parse_variant(v) for v in (args.variant or ["base"])]
    for name, overrides in variants:
        unknown = set(overrides) - set(base)
        if unknown:
            raise SystemExit(f"variant {name}: {args.file.name} has no parameter(s) {sorted(unknown)}")
    for shape in args.shape:
        size, _, timed_profile = shape.partition(":")
        batch, n = (int(x) for x in size.lower().split("x"))
        a = generate_input(batch, n, 1.0, 11, timed_profile or "dense", device="cuda")
        ok: dict[str, bool] = {name: True for name, _ in variants}
        for seed, profile in enumerate([timed_profile or "dense", *args.check]):
            checked = a if seed == 0 else generate_input(batch, n, 2.0, 100 + seed, profile, device="cuda")
            for name, overrides in variants:
                if not ok[name]:
                    continue
                use(module, base, overrides)
                try:
                    result = verify_qr(checked, module.custom_kernel(checked.clone()), None, exact_q=False)
                    ok[name] = result.ok
                    print(f"{shape} {name} {profile}: verify {'ok' if result.ok else 'FAILED'} {result.message}"[:240],
                          flush=True)
                except Exception as error:  # a variant without a kernel must not stop the others
                    ok[name] = False
                    print(f"{shape} {name} {profile}: error {type(error).__name__}: {error}"[:300], flush=True)
            if seed:
                del checked
        times: dict[str, list[float]] = defaultdict(list)
        for _ in range(args.rounds):
            for name, overrides in variants:
                if not ok[name]:
                    continue
                use(module, base, overrides)
                module.custom_kernel(a)
                times[name].append(time_calls(module.custom_kernel, a, args.calls))
        reference = statistics.median(times[variants[0][0]]) if times.get(variants[0][0]) else None
        print(f"\n{shape}: median over {args.rounds} rounds of the median of {args.calls} calls (ms)")
        for name, overrides in variants:
            if name not in times:
                print(f"  {name:14s} skipped (failed)")
                continue
            med = statistics.median(times[name])
            rel = f"  x{med / reference:.3f}" if reference else ""
            spread = f"{min(times[name]):.3f}-{max(times[name]):.3f}"
            print(f"  {name:14s} {med:8.3f} ({spread}){rel}  {overrides}")
        if args.profile:
            for name, overrides in variants:
                if name not in times:
                    continue
                use(module, base, overrides)
                module.custom_kernel(a)  # a graph is captured outside the profiled call
                rows = kernel_times(module.custom_kernel, a)
                total = sum(ms for _, ms, _ in rows)
                print(f"  profile {shape} {name}: {total:.3f} ms on device")
                for kname, ms, count in rows[:10]:
                    print(f"    {ms:7.3f} ms {count:5d}x  {kname}")
        print(flush=True)
        use(module, base, {})
        del a
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
