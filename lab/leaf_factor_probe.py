"""Probe (lab): what the tall leaf's 32x32 Cholesky factor with its inverse costs on a GPU, by layout.

    python lab/leaf_factor_probe.py [--batch 2 --batch 8] [--reps 64] [--file kernels/families/files/cuda_blocked.py]

cuda_blocked's six launches spend most of a leaf in two single-block kernels whose 32x32 sweeps are
latency chains: Nsight Compute put the second at 37 us a leaf, each of its 32 warps issuing ~4,000
instructions one every 17 cycles, a third of it at the steps' block barriers
(kernels/BENCHMARKS.md#sweep-and-four-update-warps).  Before building a kernel on another layout this
probe measures the factorisation alone (G = RᵀR and R^-1 of a float64 Gram, ``--reps`` times in one
launch, one block a matrix):

* ``elems1``: the family's own ``cholesky_inverse_elems`` on 1024 threads, an element each, a block
  barrier a step (the six launches' layout);
* ``elems4``: the same routine on 256 threads, four elements each (the fused leaf's layout);
* ``warp``: the family's ``warp_cholesky_inverse`` (PARAMS cholqr_inverse = "warp"): one warp, lane j
  holding column j of G and of the identity that becomes L^-1 in registers; the pivot row reaches
  every lane by shuffles, so a step has no barrier at all.

Every layout's R and R^-1 are checked against float64 torch before it is timed.  The table is us per
factorisation (the launch amortised over the reps).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from types import ModuleType

from blocked_probe import load as family_module  # a family file loaded as a module

ROOT = Path(__file__).resolve().parents[1]

PROBE_SOURCE = r"""
// The gram of matrix b read into this thread's elements (i, j), i <= j < w.
__device__ __forceinline__ double probe_gram(const double* G, int b, int i, int j, int w) {
    return (i <= j && j < w) ? G[(size_t)b * QB * QB + i * QB + j] : 0.0;
}

template <int E>
__global__ void __launch_bounds__(1024 / E) probe_elems_kernel(const double* G, double* R, double* RI, int* ok_out,
                                                              int w, int reps) {
    const int b = blockIdx.x, j = threadIdx.x & 31;
    __shared__ double tile[QB][QL];
    __shared__ double rows[4 * QB], diag[QB], rinvs[QB];
    __shared__ int ok[2];
    double x[E];
    bool good = true;
    for (int rep = 0; rep < reps; ++rep) {
#pragma unroll
        for (int u = 0; u < E; ++u) x[u] = probe_gram(G, b, elem_row<E>(u), j, w);
        good = cholesky_inverse_elems<E>(x, tile, w, 1e-12, rows, diag, rinvs, ok);
        __syncthreads();  // tile and the scratch are read before the next rep writes them
        if (!good) break;
    }
    if (threadIdx.x == 0) ok_out[b] = good ? 1 : 0;
    if (!good) return;
#pragma unroll
    for (int u = 0; u < E; ++u) {
        const int i = elem_row<E>(u);
        R[(size_t)b * QB * QB + i * QB + j] = (i <= j && j < w) ? x[u] : 0.0;
        RI[(size_t)b * QB * QB + i * QB + j] = tile[i][j];
    }
}

__global__ void __launch_bounds__(32) probe_warp_kernel(const double* G, double* R, double* RI, int* ok_out, int w,
                                                       int reps) {
    const int b = blockIdx.x, j = threadIdx.x & 31;
    double x[QB], y[QB], own_diag;  // y: the identity that becomes row j of R^-1
    bool good = true;
    for (int rep = 0; rep < reps; ++rep) {
#pragma unroll
        for (int i = 0; i < QB; ++i) x[i] = probe_gram(G, b, i, j, w);
        good = warp_cholesky_inverse(x, y, w, 1e-12, own_diag);
        if (!good) break;
    }
    if (j == 0) ok_out[b] = good ? 1 : 0;
    if (!good) return;
#pragma unroll
    for (int i = 0; i < QB; ++i) {
        R[(size_t)b * QB * QB + i * QB + j] = (i <= j) ? x[i] : 0.0;  // column j of R
        RI[(size_t)b * QB * QB + j * QB + i] = y[i];                  // row j of R^-1
    }
}
"""

_LAUNCHER = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAGuard.h>
#include <ATen/cuda/CUDAContext.h>

void factor(at::Tensor G, at::Tensor R, at::Tensor RI, at::Tensor ok, int64_t w, int64_t reps, int64_t layout) {
    const c10::cuda::CUDAGuard guard(G.device());
    const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const unsigned batch = (unsigned)G.size(0);
    const double* g = G.data_ptr<double>();
    double *r = R.data_ptr<double>(), *ri = RI.data_ptr<double>();
    int* o = ok.data_ptr<int>();
    if (layout == 1) probe_elems_kernel<1><<<batch, 1024, 0, stream>>>(g, r, ri, o, (int)w, (int)reps);
    else if (layout == 4) probe_elems_kernel<4><<<batch, 256, 0, stream>>>(g, r, ri, o, (int)w, (int)reps);
    else probe_warp_kernel<<<batch, 32, 0, stream>>>(g, r, ri, o, (int)w, (int)reps);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}
"""

LAYOUTS = {"elems1": 1, "elems4": 4, "warp": 0}


def device_source(family: ModuleType) -> str:
    """The family's device code (its constants and element-parallel routines) and the probe's kernels."""
    return family._DEVICE_SOURCE + PROBE_SOURCE


def spd_grams(batch: int, rows: int, seed: int):  # -> torch.Tensor (float64, batch x 32 x 32)
    import torch

    gen = torch.Generator().manual_seed(seed)
    panel = torch.randn((batch, rows, 32), generator=gen, dtype=torch.float64)
    panel *= torch.logspace(0, -3, 32, dtype=torch.float64)  # columns of unequal scale, as panels have
    return panel.transpose(1, 2) @ panel


def check(grams, r, ri) -> float:
    """The largest relative error of R against float64 Cholesky and of R^-1 against its inverse."""
    import torch

    want = torch.linalg.cholesky(grams, upper=True)
    err_r = ((r - want).abs().amax((1, 2)) / want.abs().amax((1, 2))).max().item()
    err_i = ((ri @ want - torch.eye(32, dtype=torch.float64)).abs().amax()).item()
    return max(err_r, err_i)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--file", type=Path, default=ROOT / "kernels" / "families" / "files" / "cuda_blocked.py")
    ap.add_argument("--batch", type=int, action="append", default=None)
    ap.add_argument("--reps", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    import torch
    from torch.utils.cpp_extension import load_inline

    if not torch.cuda.is_available():
        print("leaf_factor_probe: needs a CUDA device", file=sys.stderr)
        return 2
    major, minor = torch.cuda.get_device_capability()
    declaration = "void factor(at::Tensor G, at::Tensor R, at::Tensor RI, at::Tensor ok, int64_t w, int64_t reps, int64_t layout);"
    ext = load_inline("leaf_factor_probe", cpp_sources=declaration, cuda_sources=device_source(family_module(args.file))
                      + _LAUNCHER, functions=["factor"], extra_cuda_cflags=["-O3", f"-arch=sm_{major}{minor}"],
                      verbose=False)
    print(f"{torch.cuda.get_device_name()}: us per 32x32 Cholesky factor and inverse ({args.reps} in a launch)")
    print(f"{'batch':>6} " + " ".join(f"{name:>10}" for name in LAYOUTS))
    for batch in args.batch or [2, 8]:
        grams = spd_grams(batch, 64, batch)
        g = grams.cuda()
        row = []
        for name, layout in LAYOUTS.items():
            r, ri = torch.zeros_like(g), torch.zeros_like(g)
            ok = torch.zeros(batch, dtype=torch.int32, device="cuda")
            ext.factor(g, r, ri, ok, 32, 1, layout)
            err = check(grams, r.cpu(), ri.cpu())
            if not bool(ok.all()) or not err < 1e-9:
                row.append(f"{'FAILED':>10}")
                print(f"  {name} at batch {batch}: flags {ok.tolist()}, error {err:.2e}", file=sys.stderr)
                continue
            times = []
            for _ in range(args.rounds):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                ext.factor(g, r, ri, ok, 32, args.reps, layout)
                end.record()
                end.synchronize()
                times.append(1000 * start.elapsed_time(end) / args.reps)
            row.append(f"{sorted(times)[len(times) // 2]:>10.2f}")
        print(f"{batch:>6} " + " ".join(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
