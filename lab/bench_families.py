"""Device-run helper for the kernel families: parameter sweeps in one process.

    python lab/bench_families.py precompile PLAN WORKER NWORKERS
    python lab/bench_families.py sweep PLAN --json OUT [--budget-s S]
    python lab/bench_families.py table BENCH_JSON      (markdown for kernels/BENCHMARKS.md)

A plan is a list of variants (family, parameter overrides, the qrv2-bench
shapes to time, the qrv2-tests cases to verify).  ``precompile`` runs each
variant once on batch-1 inputs so that Triton's on-disk cache holds every
kernel (run several workers in parallel on the many CPU cores of the device
machine); ``sweep`` then verifies and times them one after the other.

Timing here is a quick sweep, not the official number: median of CUDA-event
times over repeated calls on one input, L2 flushed before each call.  The
official table comes from ``qrsearch bench`` (fresh verified input per timed
call); see lab/bench_families.sh and kernels/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernels.candidate import load_candidate, materialize  # noqa: E402
from kernels.inputs import generate_input  # noqa: E402
from kernels.floors import floors  # noqa: E402
from kernels.harness.profiling import profile_call  # noqa: E402
from kernels.params import read_params, render_params  # noqa: E402
from kernels.suites import Case, get_suite  # noqa: E402
from kernels.verify import verify_qr  # noqa: E402
from population.outcomes import CaseStatus  # noqa: E402

BENCH = {f"{c.batch}x{c.n}": c for c in get_suite("qrv2-bench") if c.case == "dense"}
TESTS = {c.name: c for c in get_suite("qrv2-tests")}
CAND_DIR = Path("/tmp/qrsearch-sweep")


@dataclass
class Variant:
    family: str
    label: str
    params: dict = field(default_factory=dict)
    shapes: list[str] = field(default_factory=list)  # keys of BENCH, timed
    checks: list[str] = field(default_factory=list)  # names of TESTS, verified only
    # Ablations: source replacements that leave a stage out (the output is then
    # wrong and only the time is of interest: "time where it takes").
    patch: list[tuple[str, str]] = field(default_factory=list)

    def path(self) -> Path:
        source = (ROOT / "kernels" / "families" / "files" / f"{self.family}.py").read_text()
        for old, new in self.patch:
            if old not in source:
                raise KeyError(f"{self.family}/{self.label}: patch target not found: {old[:60]!r}")
            source = source.replace(old, new)
        params = read_params(source)
        unknown = set(self.params) - set(params)
        if unknown:
            raise KeyError(f"{self.family} has no parameters {sorted(unknown)}")
        params.update(self.params)
        return materialize(render_params(source, params), CAND_DIR)


def _tests(*ns: int, kinds: tuple[str, ...] = ()) -> list[str]:
    return [name for name, c in TESTS.items() if c.n in ns and (not kinds or c.case in kinds)]


HARD = ("band", "rowscale", "clustered", "rankdef", "nearrank", "mixed", "upper")
X3 = {"prec_w": "tf32x3", "prec_t": "tf32x3", "prec_u": "tf32x3"}
TF32 = {"prec_w": "tf32", "prec_t": "tf32", "prec_u": "tf32"}
L16 = {"leaf": 16}
COOP = {"stages": 2, "panel_programs": 32, "split_rows": 1024}
# When r7-r10 ran, update_le1024 covered every n <= 1024; since then n < 512 has update_lt512.
CB_X3 = {"update_le1024": "tf32x3"}
CB_BF3 = {"update_le1024": "bf16x3"}
MID = ["40x176", "40x352", "640x512", "60x1024"]
BIG = ["60x1024", "8x2048", "2x4096"]

PLANS: dict[str, list[Variant]] = {
    # First device run: every family at its defaults, then one change at a time.
    "r1": [
        Variant("householder_unblocked", "default", {}, ["20x32"]),
        Variant("householder_unblocked", "w1", {"warps_32": 1}, ["20x32"]),
        Variant("householder_unblocked", "w4", {"warps_32": 4}, ["20x32"]),
        Variant("householder_unblocked", "n256", {"max_n": 256, "warps_256": 16}, ["40x176"], _tests(176)),
        Variant("blocked_wy", "default", {}, ["20x32", *MID, "8x2048"]),
        Variant("blocked_wy", "x3", X3, MID, _tests(512, 1024, kinds=HARD)),
        Variant("blocked_wy", "w16", {"warps_le512": 16, "warps_le256": 8}, MID),
        Variant("blocked_wy", "x3-w16", {**X3, "warps_le512": 16, "warps_le256": 8}, MID),
        Variant("blocked_wy", "nb16", {"nb_le512": 16, "nb_le256": 16, "nb_le1024": 16}, MID),
        Variant("blocked_wy", "shrink0", {"shrink": 0}, ["640x512", "60x1024"]),
        Variant("blocked_wy", "shrink2", {"shrink": 2}, ["640x512", "60x1024"]),
        Variant("blocked_wy", "bn64-rb32-s2", {"bn": 64, "rb": 32, "stages": 2}, ["640x512", "60x1024"]),
        Variant("blocked_wy", "tf32", TF32, ["640x512"], _tests(512, kinds=HARD)),
        Variant("lookahead_split", "default", {}, ["40x352", "640x512", *BIG]),
        Variant("lookahead_split", "x3", X3, BIG, _tests(1024, 2048, 4096, kinds=HARD)),
        Variant("lookahead_split", "nb32", {"nb": 32}, BIG),
        Variant("lookahead_split", "bn128", {"bn": 128}, BIG),
        Variant("lookahead_split", "pe16k", {"panel_elems": 16384}, ["2x4096"]),
        Variant("lookahead_split", "w32", {"warps_bm_gt1024": 32}, ["8x2048", "2x4096"]),
    ],
    # Second run: blocked_wy v2 (leaves, T after the panel), lookahead_split v2
    # (pipelined row loops, own row chunk for the panel program), and ablations
    # that leave one stage out to show where the time goes.
    "r2": [
        Variant("householder_unblocked", "nojoin-w1", {"join_reduce": False, "warps_32": 1}, ["20x32"]),
        Variant("householder_unblocked", "w1", {"warps_32": 1}, ["20x32"]),
        Variant("blocked_wy", "v2", {}, ["40x176", "40x352", "640x512"]),
        Variant("blocked_wy", "leaf16", L16, ["40x176", "40x352", "640x512", "60x1024"], _tests(512, kinds=HARD)),
        Variant("blocked_wy", "leaf16-nojoin", {**L16, "join_reduce": False}, ["640x512"]),
        Variant("blocked_wy", "leaf16-mr128", {**L16, "maxnreg_le512": 128, "maxnreg_le256": 128},
                ["40x352", "640x512"]),
        Variant("blocked_wy", "nb64-leaf16", {**L16, "nb_le512": 64}, ["640x512"]),
        Variant("blocked_wy", "leaf16-bn64-s2", {**L16, "bn": 64, "stages": 2}, ["640x512"]),
        Variant("blocked_wy", "leaf16-rb32-s3", {**L16, "rb": 32, "stages": 3}, ["640x512"]),
        Variant("blocked_wy", "leaf16-w4", {**L16, "warps_le256": 4, "warps_le512": 4}, ["40x176", "40x352"]),
        Variant("blocked_wy", "nb16", {**L16, "nb_le256": 16, "nb_le512": 16}, ["40x176", "40x352", "640x512"]),
        Variant("blocked_wy", "leaf16-shrink2", {**L16, "shrink": 2}, ["640x512", "60x1024"]),
        Variant("blocked_wy", "abl-no-update", L16, ["640x512"],
                patch=[("    for j0 in range(k + NB, N, BN):", "    for j0 in range(N, N, BN):")]),
        Variant("blocked_wy", "abl-no-panel", L16, ["640x512"],
                patch=[("        for c in range(0, LEAF):\n            X, tau = _reflect(",
                        "        for c in range(0, 0):\n            X, tau = _reflect(")]),
        Variant("lookahead_split", "v2", {}, ["40x352", "640x512", *BIG]),
        Variant("lookahead_split", "s2", {"stages": 2}, ["40x352", "640x512", *BIG], _tests(1024, 2048, kinds=HARD)),
        Variant("lookahead_split", "s2-w8", {"stages": 2, "warps_bm_le256": 8}, ["640x512", "60x1024"]),
        Variant("lookahead_split", "s3", {"stages": 3}, BIG),
        Variant("lookahead_split", "s2-rbp128", {"stages": 2, "rb_panel": 128}, BIG),
        Variant("lookahead_split", "s2-rbp256", {"stages": 2, "rb_panel": 256}, ["8x2048", "2x4096"]),
        Variant("lookahead_split", "s2-nb32", {"stages": 2, "nb": 32}, ["640x512", *BIG]),
        Variant("lookahead_split", "s2-nb32-rbp128", {"stages": 2, "nb": 32, "rb_panel": 128}, BIG),
        Variant("lookahead_split", "s2-bn32", {"stages": 2, "bn": 32}, ["640x512", *BIG]),
        Variant("lookahead_split", "s2-nojoin", {"stages": 2, "join_reduce": False}, ["60x1024", "2x4096"]),
        Variant("lookahead_split", "abl-s2-no-update", {"stages": 2}, ["8x2048", "2x4096"],
                patch=[("        tiles = triton.cdiv(n - k - nb, bn) if n - k > nb else 0", "        tiles = 0")]),
    ],
    # Third run: cooperative row-split panels for tall panels (lookahead_split),
    # and larger GEMM tiles for the trailing updates (the ablations of r2 put
    # ~75% of the 640×512 time there).
    "r3": [
        Variant("householder_unblocked", "w1", {"warps_32": 1}, ["20x32"]),
        Variant("lookahead_split", "coop32", COOP, BIG, _tests(1024, 2048, 4096)),
        Variant("lookahead_split", "coop16", {**COOP, "panel_programs": 16}, ["8x2048", "2x4096"]),
        Variant("lookahead_split", "coop64", {**COOP, "panel_programs": 64}, ["2x4096"]),
        Variant("lookahead_split", "coop32-sr512", {**COOP, "split_rows": 512}, BIG),
        Variant("lookahead_split", "coop32-nb32", {**COOP, "nb": 32}, BIG, _tests(2048, kinds=HARD)),
        Variant("lookahead_split", "coop32-bn128", {**COOP, "bn": 128}, BIG),
        Variant("lookahead_split", "coop32-w8", {**COOP, "warps_split": 8}, ["8x2048", "2x4096"]),
        Variant("lookahead_split", "abl-coop32-no-update", COOP, ["2x4096"],
                patch=[("        tiles = triton.cdiv(n - k - nb, bn) if n - k > nb else 0", "        tiles = 0")]),
        Variant("lookahead_split", "nb32-bn128", {"nb": 32, "bn": 128}, ["640x512", "60x1024", "40x352"]),
        Variant("lookahead_split", "nb32-bn128-s3", {"nb": 32, "bn": 128, "stages": 3}, ["640x512", "60x1024"]),
        Variant("lookahead_split", "nb32-bn128-w4", {"nb": 32, "bn": 128, "warps_bm_le1024": 4},
                ["640x512", "60x1024"]),
        Variant("lookahead_split", "s2", {"stages": 2}, ["40x352"]),
        Variant("blocked_wy", "mr128-bn64", {**L16, "maxnreg_le512": 128, "bn": 64}, ["640x512", "40x352"]),
        Variant("blocked_wy", "mr128-bn128", {**L16, "maxnreg_le512": 128, "bn": 128}, ["640x512"]),
        Variant("blocked_wy", "bn128-rb32", {**L16, "bn": 128, "rb": 32}, ["640x512"]),
        Variant("blocked_wy", "bn64-w4", {**L16, "bn": 64, "warps_le512": 4}, ["640x512"]),
        Variant("blocked_wy", "bn64-s2", {**L16, "bn": 64, "stages": 2, "maxnreg_le512": 168}, ["640x512"]),
        Variant("blocked_wy", "nb16-bn64", {**L16, "nb_le256": 16, "nb_le512": 16, "bn": 64},
                ["40x176", "40x352", "640x512"]),
        Variant("blocked_wy", "leaf32-bn64", {"bn": 64}, ["40x176", "40x352", "640x512"]),
    ],
    # Fourth run (kernels v3): the CUDA C++ families (cuda_onchip for small n, cuda_blocked:
    # CUDA panels + cuBLAS FP32 updates), and an A/B of the tensor-core (tf32x3) settings the
    # run-h search found for lookahead_split, and of blocked_wy's run-h champion.
    "r4": [
        Variant("cuda_onchip", "default", {}, ["20x32", "40x176"], _tests(32, 176)),
        Variant("cuda_onchip", "w32-2", {"warps_32": 2}, ["20x32"]),
        Variant("cuda_onchip", "w32-4", {"warps_32": 4}, ["20x32"]),
        Variant("cuda_onchip", "w192-32", {"warps_192": 32}, ["40x176"]),
        Variant("cuda_blocked", "default", {}, ["40x352", "640x512", "60x1024"], _tests(352, 512, 1024)),
        Variant("cuda_blocked", "nb32", {"nb_le512": 32}, ["40x352", "640x512"]),
        Variant("cuda_blocked", "nb16", {"nb_le512": 16, "nb_le1024": 16}, ["40x352", "640x512", "60x1024"]),
        Variant("cuda_blocked", "nb32-w32", {"nb_le512": 32, "warps_nb32": 32}, ["40x352", "640x512"]),
        Variant("cuda_blocked", "graph", {"graph": True}, ["40x352", "640x512", "60x1024"], _tests(352, 1024)),
        Variant("lookahead_split", "default", {}, ["40x352", "640x512", *BIG]),
        Variant("lookahead_split", "x3wu", {"prec_w": "tf32x3", "prec_u": "tf32x3"}, ["40x352", "640x512", *BIG],
                _tests(512, 1024, 2048, kinds=HARD)),
        Variant("lookahead_split", "c241", {"bn": 64, "panel_elems": 16384, "bm_min": 128, "warps_bm_le1024": 4,
                                             "prec_w": "tf32x3", "prec_u": "tf32x3"}, ["40x352", "640x512", *BIG]),
        Variant("blocked_wy", "default", {}, ["40x176", "40x352", "640x512"]),
        Variant("blocked_wy", "c167", {"maxnreg_le256": 168, "maxnreg_gt1024": 128, "leaf": 64,
                                       "join_reduce": False, "max_n": 1024}, ["40x176", "40x352", "640x512"]),
        Variant("householder_unblocked", "default", {}, ["20x32"]),
    ],
    # Fifth run: both CUDA kernels reduce all of a warp's columns in one butterfly (r4 waited out
    # each column's five shuffles in turn), cuda_blocked blocks panels recursively (K of the
    # trailing GEMMs = block width), and the new Triton defaults (r4's lookahead_split c241 and
    # blocked_wy c167 settings).
    "r5": [
        Variant("cuda_onchip", "default", {}, ["20x32", "40x176"], _tests(32, 176)),
        Variant("cuda_onchip", "w32-2", {"warps_32": 2}, ["20x32"]),
        Variant("cuda_onchip", "w32-4", {"warps_32": 4}, ["20x32"]),
        Variant("cuda_onchip", "w192-32", {"warps_192": 32}, ["40x176"]),
        Variant("cuda_blocked", "default", {}, ["40x352", "640x512", "60x1024"], _tests(352, 512, 1024)),
        Variant("cuda_blocked", "b64", {"block_le512": 64}, ["40x352", "640x512"]),
        Variant("cuda_blocked", "b256", {"block_le512": 256}, ["40x352", "640x512"], _tests(512, kinds=HARD)),
        Variant("cuda_blocked", "nb32-b128", {"nb_le512": 32}, ["40x352", "640x512"]),
        Variant("cuda_blocked", "nb32-w32-b128", {"nb_le512": 32, "warps_nb32": 32}, ["40x352", "640x512"]),
        Variant("cuda_blocked", "b1024-128", {"block_le1024": 128}, ["60x1024"], _tests(1024, kinds=HARD)),
        Variant("cuda_blocked", "b1024-32", {"block_le1024": 32}, ["60x1024"]),
        Variant("cuda_blocked", "graph", {"graph": True}, ["40x352", "640x512", "60x1024"]),
        Variant("lookahead_split", "default", {}, ["40x352", "640x512", *BIG], _tests(352, 512, 1024, 2048, 4096)),
        Variant("blocked_wy", "default", {}, ["40x176", "40x352", "640x512"], _tests(176, 352, 512)),
        Variant("householder_unblocked", "default", {}, ["20x32"]),
    ],
    # Sixth run: r5's kernels with straight-line butterflies (r5's per-column branches around the
    # shuffles serialised them), a blocked column layout in cuda_onchip (finished warps skip), no
    # local-memory tiles (the alpha select became an indexed load), 1024-row panels on 16 warps.
    "r6": [
        Variant("cuda_onchip", "default", {}, ["20x32", "40x176"], _tests(32, 176)),
        Variant("cuda_onchip", "w32-1", {"warps_32": 1}, ["20x32"]),
        Variant("cuda_onchip", "w32-2", {"warps_32": 2}, ["20x32"]),
        Variant("cuda_onchip", "w192-16", {"warps_192": 16}, ["40x176"]),
        Variant("cuda_blocked", "default", {}, ["40x352", "640x512", "60x1024"], _tests(352, 512, 1024)),
        Variant("cuda_blocked", "nb32-w32-b128", {"nb_le512": 32, "warps_nb32": 32}, ["40x352", "640x512"]),
        Variant("cuda_blocked", "b64", {"block_le512": 64}, ["40x352", "640x512"]),
        Variant("cuda_blocked", "b1024-128", {"block_le1024": 128}, ["60x1024"], _tests(1024, kinds=HARD)),
        Variant("cuda_blocked", "nb16-b64", {"nb_le1024": 16}, ["60x1024"]),
        Variant("cuda_blocked", "n4096", {"max_n": 4096}, ["8x2048", "2x4096"], _tests(2048, 4096)),
        Variant("cuda_blocked", "n4096-nb8-b64", {"max_n": 4096, "nb_le2048": 8, "block_gt1024": 64},
                ["8x2048", "2x4096"]),
    ],
    # Seventh run (kernels v4): cuda_blocked's block updates on the tensor cores (a Triton kernel of
    # split TF32 or bf16 products) against cuBLAS FP32, its tall panels with those updates, and
    # where the time goes (--profile) in the families that hold the large cases now.
    "r7": [
        Variant("cuda_blocked", "default", {}, ["40x352", "640x512", "60x1024"]),
        Variant("cuda_blocked", "x3", CB_X3, ["40x352", "640x512", "60x1024"], _tests(352, 512, 1024, kinds=HARD)),
        Variant("cuda_blocked", "bf3", CB_BF3, ["640x512", "60x1024"], _tests(352, 512, 1024, kinds=HARD)),
        Variant("cuda_blocked", "x3-bn128", {**CB_X3, "apply_bn": 128}, ["640x512", "60x1024"]),
        Variant("cuda_blocked", "x3-w4", {**CB_X3, "apply_warps_le512": 4, "apply_warps_le1024": 4}, ["640x512", "60x1024"]),
        Variant("cuda_blocked", "x3-bm32-s3", {**CB_X3, "apply_bm": 32, "apply_stages": 3}, ["640x512"]),
        Variant("cuda_blocked", "x3-b256", {**CB_X3, "block_le512": 256}, ["640x512"], _tests(512, kinds=HARD)),
        Variant("cuda_blocked", "x3-b1024-128", {**CB_X3, "block_le1024": 128}, ["60x1024"], _tests(1024, kinds=HARD)),
        Variant("cuda_blocked", "x3-nb32", {**CB_X3, "nb_le512": 32, "block_le512": 128}, ["40x352", "640x512"]),
        Variant("cuda_blocked", "x3-graph", {**CB_X3, "graph": True}, ["40x352", "640x512", "60x1024"]),
        Variant("cuda_blocked", "tall", {"max_n": 4096}, ["8x2048", "2x4096"], _tests(2048, 4096)),
        Variant("cuda_blocked", "tall-x3", {**CB_X3, "max_n": 4096, "update_gt1024": "tf32x3"}, ["8x2048", "2x4096"],
                _tests(2048, 4096)),
        Variant("cuda_blocked", "tall-nb8-b64", {"max_n": 4096, "nb_le2048": 8, "block_gt1024": 64},
                ["8x2048", "2x4096"]),
        Variant("lookahead_split", "default", {}, ["40x352", "640x512", *BIG]),
        Variant("cuda_onchip", "default", {}, ["20x32", "40x176"]),
    ],
    # Eighth run: the update kernel's tiles of one matrix launched next to each other (r7 launched
    # each tile of every matrix before the next tile, so Vᵀ came from memory once per tile).
    "r8": [
        Variant("cuda_blocked", "default", {}, ["640x512", "60x1024"]),
        Variant("cuda_blocked", "x3", CB_X3, ["40x352", "640x512", "60x1024"], _tests(512, kinds=HARD)),
        Variant("cuda_blocked", "bf3", CB_BF3, ["640x512", "60x1024"]),
        Variant("cuda_blocked", "x3-w4", {**CB_X3, "apply_warps_le512": 4, "apply_warps_le1024": 4}, ["640x512", "60x1024"]),
        Variant("cuda_blocked", "x3-bn128", {**CB_X3, "apply_bn": 128}, ["640x512", "60x1024"]),
        Variant("cuda_blocked", "x3-bn32", {**CB_X3, "apply_bn": 32, "apply_warps_le512": 4, "apply_warps_le1024": 4}, ["640x512", "60x1024"]),
        Variant("cuda_blocked", "x3-b64", {**CB_X3, "block_le512": 64}, ["640x512"]),
        Variant("cuda_blocked", "x3-b1024-128-w4", {**CB_X3, "block_le1024": 128, "apply_warps_le1024": 4}, ["60x1024"]),
    ],
    # r9 (cuda_onchip with a column on a group of G lanes) and r10 (reflectors published with a
    # flag instead of a block barrier, in cuda_onchip and cuda_blocked's panel kernel) measured
    # code that did not pay and is not on main: kernels/BENCHMARKS.md#tensor-core-block-updates, and
    # docs/device-runs/kernels-v4-r9, -r10.
    # cuda_blocked's tall panels (16 and 8 columns of up to 4096 rows, replayed as a CUDA graph).
    "tall": [
        Variant("cuda_blocked", "n4096", {"max_n": 4096}, ["8x2048", "2x4096"], _tests(2048, 4096)),
        Variant("cuda_blocked", "n4096-nb8-b64", {"max_n": 4096, "nb_le2048": 8, "block_gt1024": 64},
                ["8x2048", "2x4096"]),
        Variant("cuda_blocked", "n4096-b256", {"max_n": 4096, "block_gt1024": 256}, ["8x2048", "2x4096"]),
    ],
}


def _ns(v: Variant) -> list[int]:
    return sorted({BENCH[s].n for s in v.shapes} | {TESTS[t].n for t in v.checks})


def precompile(plan: str, worker: int, nworkers: int) -> None:
    for i, v in enumerate(PLANS[plan]):
        if i % nworkers != worker:
            continue
        t0 = time.time()
        try:
            kernel = load_candidate(v.path())
            for n in _ns(v):
                a = generate_input(1, n, 1.0, 1, "dense", device="cuda")
                kernel(a)
            torch.cuda.synchronize()
            print(f"precompiled {v.family}/{v.label} n={_ns(v)} in {time.time() - t0:.1f}s", flush=True)
        except Exception as exc:  # report and go on: the sweep will show the failure too
            print(f"precompile {v.family}/{v.label} failed: {type(exc).__name__}: {str(exc)[:300]}", flush=True)


class Timer:
    def __init__(self) -> None:
        self.flush_buf = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")

    def time(self, fn, a: torch.Tensor, budget_ms: float = 600.0, max_reps: int = 20) -> list[float]:
        times: list[float] = []
        spent = 0.0
        while len(times) < max_reps and (len(times) < 3 or spent < budget_ms):
            self.flush_buf.zero_()
            torch.cuda.synchronize()
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn(a)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
            spent += times[-1]
        return times


def _resources(kernel_fn) -> list[dict]:
    """Registers, spills and shared memory of every compiled Triton kernel of a candidate module."""
    module = sys.modules[kernel_fn.__module__]
    out = []
    for name, obj in vars(module).items():
        caches = getattr(obj, "device_caches", None)
        if not caches:
            continue
        for device, entry in list(caches.items()):
            for ck in entry[0].values():
                md = ck.metadata
                out.append({"kernel": name, "regs": getattr(ck, "n_regs", None), "spills": getattr(ck, "n_spills", None),
                            "shared": md.shared, "warps": md.num_warps})
    return out


def _profile_line(kernel, case: Case) -> str:
    """Where one call's device time goes (torch.profiler), in one line."""
    prof = profile_call(kernel, case, torch.device("cuda"), seed=case.seed)
    top = "; ".join(f"{k.name[:48]} x{k.calls} {k.total_ms:.3g}ms" for k in prof.top_kernels)
    return f"{prof.kernels_per_call} kernels, {prof.device_ms:.4g} ms on device: {top}"


def sweep(plan: str, json_path: Path, budget_s: float, profile: bool = False) -> None:
    timer = Timer()
    rows = []
    began = time.time()
    for v in PLANS[plan]:
        if time.time() - began > budget_s:
            rows.append({"family": v.family, "label": v.label, "status": "skipped (sweep budget)"})
            continue
        try:
            kernel = load_candidate(v.path())
        except Exception as exc:
            rows.append({"family": v.family, "label": v.label, "status": f"load failed: {exc}"})
            continue
        for name in v.checks:
            c = TESTS[name]
            row = {"family": v.family, "label": v.label, "case": name, "kind": "check"}
            try:
                a = generate_input(c.batch, c.n, c.cond, c.seed, c.case, device="cuda")
                r = verify_qr(a, kernel(a.clone()))
                row.update(ok=r.ok, factor=r.factor_scaled, orth=r.orth_scaled, message=r.message)
            except Exception as exc:
                row.update(ok=False, message=f"{type(exc).__name__}: {str(exc)[:300]}")
            rows.append(row)
            print(json.dumps(row), flush=True)
        for shape in v.shapes:
            c = BENCH[shape]
            row = {"family": v.family, "label": v.label, "case": c.name, "kind": "time"}
            try:
                a = generate_input(c.batch, c.n, c.cond, c.seed, c.case, device="cuda")
                out = kernel(a.clone())
                torch.cuda.synchronize()
                t_verify = time.time()
                r = verify_qr(a, out)
                row.update(ok=r.ok or bool(v.patch), factor=r.factor_scaled, orth=r.orth_scaled,
                           verify_s=round(time.time() - t_verify, 2), ablation=bool(v.patch))
                del out
                times = timer.time(kernel, a)
                med = statistics.median(times)
                f = floors(c)
                row.update(median_ms=med, min_ms=min(times), reps=len(times),
                           fp32_floor_frac=f.fp32_floor_ms / med, tf32_floor_frac=f.tf32_floor_ms / med)
                if profile:
                    row["profile"] = _profile_line(kernel, c)
            except Exception as exc:
                row.update(ok=False, message=f"{type(exc).__name__}: {str(exc)[:300]}")
            rows.append(row)
            print(json.dumps(row), flush=True)
        try:
            rows.append({"family": v.family, "label": v.label, "kind": "resources", "kernels": _resources(kernel)})
        except Exception as exc:
            rows.append({"family": v.family, "label": v.label, "kind": "resources", "message": str(exc)})
    json_path.write_text(json.dumps(rows, indent=1))
    _summary(rows)


def _summary(rows: list[dict]) -> None:
    print("\n# sweep summary (median ms; FAIL = verification failed)")
    timed = [r for r in rows if r.get("kind") == "time"]
    labels = list(dict.fromkeys((r["family"], r["label"]) for r in timed))
    shapes = list(dict.fromkeys(r["case"] for r in timed))
    print("variant".ljust(34) + "".join(s.replace("dense-", "")[:13].rjust(14) for s in shapes))
    for fam, lab in labels:
        cells = []
        for s in shapes:
            r = next((r for r in timed if (r["family"], r["label"], r["case"]) == (fam, lab, s)), None)
            if r is None:
                cells.append("")
            elif not r.get("ok"):
                cells.append("FAIL")
            else:
                cells.append(f"{r['median_ms']:.4g}")
        print(f"{fam[:20]}/{lab}"[:34].ljust(34) + "".join(c.rjust(14) for c in cells))
    for r in timed:
        if r.get("profile"):
            print(f"  {r['family'][:12]}/{r['label']} {r['case'].replace('dense-', '')}: {r['profile']}")
    bad = [r for r in rows if r.get("kind") == "check" and not r.get("ok")]
    checks = [r for r in rows if r.get("kind") == "check"]
    print(f"checks: {len(checks) - len(bad)}/{len(checks)} passed")
    for r in bad:
        print(f"  FAIL {r['family']}/{r['label']} {r['case']}: {r.get('message', '')[:160]}")


def table(bench_json: Path) -> None:
    """Markdown tables (per family and composite) from a ``qrsearch bench --json-out`` file."""
    data = json.loads(bench_json.read_text())
    reports = data["reports"] if "reports" in data else [data]
    composite = data.get("composite")

    def rows(report: dict, winners: bool) -> list[str]:
        out = []
        logs = []
        for c in report["cases"]:
            case = Case.model_validate(c["case"])
            f = floors(case)
            t = c.get("timing") or {}
            med = t.get("median_ms")
            base = c.get("baseline_ms")
            speed = c.get("speedup")
            if speed:
                logs.append(speed)
            who = f" | {Path(c.get('candidate') or '').stem}" if winners else ""
            frac = lambda floor: f"{100 * floor / med:.1f}%" if med else "-"  # noqa: E731
            out.append(
                f"| {case.name} | {c['status']} | {med:.4g} | {base:.4g} | {speed:.2f}x | {f.fp32_ms:.3g} | "
                f"{f.tf32_ms:.3g} | {f.bytes_ms:.3g} | {frac(f.fp32_floor_ms)} | {frac(f.tf32_floor_ms)}{who} |"
                if med and base and speed else f"| {case.name} | {c['status']} | - | - | - | - | - | - | - | -{who} |")
        import math
        geo = math.exp(sum(math.log(x) for x in logs) / len(logs)) if logs else float("nan")
        out.append(f"\ngeomean speedup over the {len(logs)} cases: **{geo:.2f}x**")
        return out

    header = ("| case | status | median ms | torch.geqrf ms | speedup | fp32 floor ms | tf32 floor ms | bytes floor ms "
              "| % of fp32 floor | % of tf32 floor |")
    for report in reports:
        print(f"\n### {Path(report['candidate']).stem}\n")
        print(header)
        print("|" + "---|" * 10)
        print("\n".join(rows(report, False)))
    if composite:
        print(f"\n### {composite['candidate']}\n")
        print(header + " family |")
        print("|" + "---|" * 11)
        cases = []
        for i, c in enumerate(composite["cases"]):
            best = min((r["cases"][i] for r in reports if CaseStatus(r["cases"][i]["status"]).ok),
                       key=lambda x: x["timing"]["median_ms"])
            owner = next(r for r in reports if r["cases"][i] is best)
            cases.append({**c, "candidate": owner["candidate"]})
        print("\n".join(rows({**composite, "cases": cases}, True)))


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("precompile")
    p.add_argument("plan")
    p.add_argument("worker", type=int)
    p.add_argument("nworkers", type=int)
    s = sub.add_parser("sweep")
    s.add_argument("plan")
    s.add_argument("--json", type=Path, required=True)
    s.add_argument("--budget-s", type=float, default=240.0)
    s.add_argument("--profile", action="store_true", help="also profile one call of every timed shape")
    t = sub.add_parser("table", help="markdown tables from a qrsearch bench --json-out file")
    t.add_argument("bench_json", type=Path)
    args = parser.parse_args()
    if args.cmd == "precompile":
        precompile(args.plan, args.worker, args.nworkers)
    elif args.cmd == "table":
        table(args.bench_json)
    else:
        sweep(args.plan, args.json, args.budget_s, args.profile)


if __name__ == "__main__":
    main()
