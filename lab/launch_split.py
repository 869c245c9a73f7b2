"""Per launch of lookahead_split: the whole launch against its panel programs alone.

    python lab/launch_split.py [FILE] --shape 2x4096 [--shape 8x2048] [--repeats 5] [--json OUT]

lookahead_split runs one launch per panel in which P programs per matrix factor the panel while the
others apply the previous panel's reflector to the columns right of it.  Whether the tall cases are
bound by the panel chain or by the update decides what to build next, and one timing of the whole
call cannot tell.  This script records the launches of one call (the family's own launch loop, the
kernel swapped for a recorder), then replays them in order on a fresh copy of the input, timing each
with CUDA events: once with the recorded grid, once with only the panel programs (grid (batch, P)).
The panel-only replay computes the wrong matrix (nothing updates the trailing columns) but does the
panel's work; a cooperative panel with coop_panel=cholqr2 may take its fallback there, which the
table would show as a slower panel.  Prints per launch and summed: full, panel-only, and the
launches where the panel is within 10% of the whole (panel-bound).

On a CPU (TRITON_INTERPRET=1) the same replay runs at small n with wall-clock times, which the tests
use to check that replaying the recorded launches reproduces the family's output exactly.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import torch

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_FILE = ROOT / "kernels" / "families" / "files" / "lookahead_split.py"


@dataclass
class Launch:
    grid: tuple[int, ...]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]

    @property
    def panel_programs(self) -> int:
        return int(self.kwargs["P"])

    @property
    def k(self) -> int:
        return int(self.args[7])  # k_rt: _lookahead_kernel(A, H, TAU, TW, FLAGS, PART, PARTW, k_rt, ...)


@dataclass
class Recorder:
    """Stands in for ``_lookahead_kernel``: ``recorder[grid](*args, **kwargs)`` records the launch
    and runs it, so the call's later launches see the buffers the earlier ones wrote."""

    kernel: Any
    launches: list[Launch] = field(default_factory=list)

    def __getitem__(self, grid: tuple[int, ...]) -> Callable[..., None]:
        def launch(*args: Any, **kwargs: Any) -> None:
            self.launches.append(Launch(tuple(grid), args, dict(kwargs)))
            self.kernel[grid](*args, **kwargs)
        return launch


def load_family(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"launch_split_{path.stem}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def record(module: ModuleType, a: torch.Tensor) -> tuple[list[Launch], tuple[torch.Tensor, torch.Tensor]]:
    """The launches of one call of the family on ``a`` (run for real), and the call's output."""
    kernel = module._lookahead_kernel
    recorder = Recorder(kernel)
    module._lookahead_kernel = recorder
    try:
        out = module.custom_kernel(a)
    finally:
        module._lookahead_kernel = kernel
    return recorder.launches, out


def _rebind(launch: Launch, a: torch.Tensor, buffers: dict[int, torch.Tensor]) -> tuple[Any, ...]:
    """The launch's arguments with the input and every recorded buffer replaced by fresh ones, so
    a replay starts from the state the recorded call started from."""
    args = list(launch.args)
    args[0] = a
    for i in range(1, 7):  # H, TAU, TW, FLAGS, PART, PARTW
        original = launch.args[i]
        key = id(original)
        if key not in buffers:
            # flags start at zero (epochs only grow); the other buffers are written before read
            buffers[key] = torch.zeros_like(original) if original.dtype == torch.int32 else torch.empty_like(original)
        args[i] = buffers[key]
    return tuple(args)


def replay(module: ModuleType, launches: list[Launch], a: torch.Tensor, panel_only: bool,
           clock: Callable[[Callable[[], None]], float]) -> tuple[list[float], dict[int, torch.Tensor]]:
    """Run the recorded launches in order on fresh buffers; the time of each (ms)."""
    # H starts as a copy of the input: the full replay overwrites all of it, and a panel-only
    # replay (whose update programs would have copied it) then factors real numbers, not garbage
    buffers: dict[int, torch.Tensor] = {id(launches[0].args[1]): a.clone()} if launches else {}
    times = []
    for launch in launches:
        args = _rebind(launch, a, buffers)
        grid = (launch.grid[0], launch.panel_programs) if panel_only else launch.grid
        times.append(clock(lambda: module._lookahead_kernel[grid](*args, **launch.kwargs)))
    return times, buffers


def cuda_clock(fn: Callable[[], None]) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def wall_clock(fn: Callable[[], None]) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


def profile_shape(module: ModuleType, batch: int, n: int, repeats: int, seed: int = 0) -> dict[str, Any]:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    gen = torch.Generator(device="cpu").manual_seed(seed)
    a = torch.randn((batch, n, n), generator=gen).to(device)
    launches, _ = record(module, a.clone())
    clock = cuda_clock if device == "cuda" else wall_clock
    runs: dict[str, list[list[float]]] = {"full": [], "panel": []}
    for _ in range(repeats):
        for mode in ("full", "panel"):
            times, _ = replay(module, launches, a.clone(), mode == "panel", clock)
            runs[mode].append(times)
    med = {mode: [sorted(col)[len(col) // 2] for col in zip(*rows)] for mode, rows in runs.items()}
    per_launch = [{"k": launch.k, "programs": launch.grid[1], "panel_programs": launch.panel_programs,
                   "split": bool(launch.kwargs["SPLIT"]), "full_ms": f, "panel_ms": p}
                  for launch, f, p in zip(launches, med["full"], med["panel"])]
    bound = [row for row in per_launch if row["panel_ms"] >= 0.9 * row["full_ms"]]
    return {"shape": f"{batch}x{n}", "device": device, "launches": per_launch,
            "full_ms": sum(med["full"]), "panel_ms": sum(med["panel"]),
            "panel_bound_launches": len(bound), "panel_bound_ms": sum(r["full_ms"] for r in bound)}


def table(result: dict[str, Any], every: int) -> str:
    lines = [f"{result['shape']} on {result['device']}: {len(result['launches'])} launches, "
             f"whole {result['full_ms']:.3f} ms, panel programs alone {result['panel_ms']:.3f} ms; "
             f"{result['panel_bound_launches']} launches panel-bound (panel ≥ 90% of the launch), "
             f"{result['panel_bound_ms']:.3f} ms of the whole",
             "      k  split  programs  whole ms  panel ms  panel/whole"]
    for i, row in enumerate(result["launches"]):
        if i % every == 0 or i == len(result["launches"]) - 1:
            ratio = row["panel_ms"] / row["full_ms"] if row["full_ms"] else float("nan")
            lines.append(f"  {row['k']:5d}  {'yes' if row['split'] else 'no':>5}  {row['programs']:8d}  "
                         f"{row['full_ms']:8.4f}  {row['panel_ms']:8.4f}  {ratio:11.2f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", nargs="?", default=str(DEFAULT_FILE), help="a lookahead_split file")
    parser.add_argument("--shape", action="append", default=[], help="BATCHxN (repeatable)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--every", type=int, default=8, help="print every EVERY-th launch")
    parser.add_argument("--json", help="write the per-launch results here")
    args = parser.parse_args(argv)
    module = load_family(Path(args.file))
    results = []
    for shape in args.shape or ["2x4096", "8x2048"]:
        batch, n = (int(x) for x in shape.lower().split("x"))
        result = profile_shape(module, batch, n, args.repeats)
        results.append(result)
        print(table(result, args.every), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
