"""Composite QR kernel exported by qrsearch from gpu1 (qrv2-bench on NVIDIA H200).

custom_kernel(data) routes on the input's (batch, n): a benchmark shape goes to the verified
candidate with the best geomean time over that shape's cases; any other shape goes to the
fallback, the candidate with the best geomean over the whole suite (verified on every case).

  batch x n    candidate   family                  ms (geomean)   torch.geqrf ms   speedup
  20x32        c0000018    cuda_onchip                   0.02434            0.285    11.71x
  40x176       c0000018    cuda_onchip                    0.2642            15.15    57.35x
  40x352       c0000006    lookahead_split                0.6612            40.02    60.52x
  640x512      c0000072    cuda_blocked                     7.09            995.5   140.41x
  60x1024      c0000006    lookahead_split                 6.321            227.8    36.03x
  8x2048       c0000006    lookahead_split                 11.43            72.16     6.31x
  2x4096       c0000006    lookahead_split                 25.01            46.03     1.84x
  other        c0000001    torch_geqrf                       159              159     1.00x   (fallback; suite geomean)

Times were measured in the run (the cases of each shape: 20x32: dense-20x32-c1; 40x176: dense-40x176-c1; 40x352: dense-40x352-c1; 640x512: dense-640x512-c2, mixed-640x512-c2, rankdef-640x512-c0, clustered-640x512-c0, rowscale-640x512-c0, nearcollinear-640x512-c0; 60x1024: dense-60x1024-c2, mixed-60x1024-c2, nearrank-60x1024-c0; 8x2048: dense-8x2048-c1; 2x4096: dense-2x4096-c1).
Each candidate's module-level names carry its id as a suffix; needs only torch and triton.
"""

import torch
import hashlib
import os
import triton
import triton.language as tl


# ============================================================================
# c0000001: family torch_geqrf, seed, 159 ms suite geomean
# Baseline: torch.geqrf (cuSOLVER on CUDA, LAPACK on CPU).
# ============================================================================

# params of c0000001
PARAMS_c0000001 = {}
# end of the params of c0000001
def custom_kernel_c0000001(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.geqrf(A)


# ============================================================================
# c0000018: family cuda_onchip, optuna, 0.0802 ms suite geomean
# cuda_onchip: CUDA C++ (built with torch.utils.cpp_extension.load_inline), one thread
# ============================================================================

# params of c0000018
PARAMS_c0000018 = {
    "max_n": 192,
    "warps_32": 4,
    "warps_64": 4,
    "warps_96": 8,
    "warps_128": 16,
    "warps_160": 16,
    "warps_192": 16,
}
# end of the params of c0000018
# Device code (CUDA runtime only: it compiles without torch's headers).
_DEVICE_SOURCE_c0000018 = r"""

constexpr unsigned FULL = 0xffffffffu;

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(FULL, x, o);
    return x;
}

__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(FULL, x, o));
    return x;
}

// d[t] = vᵀ reg[t] for every column this warp holds, all reduced together.  Straight-line on
// purpose: each butterfly level issues every column's shuffle back to back, so their
// latencies overlap (a branch per column made the compiler run them one after the other, each
// waiting out five dependent shuffles).  Rows above the reflector hold v = 0.
template <int RPL, int CPW>
__device__ __forceinline__ void dots(const float (&reg)[CPW][RPL], const float (&v)[RPL], float (&d)[CPW]) {
#pragma unroll
    for (int t = 0; t < CPW; ++t) {
        float x = 0.f;
#pragma unroll
        for (int s = 0; s < RPL; ++s) x = fmaf(v[s], reg[t][s], x);
        d[t] = x;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
#pragma unroll
        for (int t = 0; t < CPW; ++t) d[t] += __shfl_xor_sync(FULL, d[t], o);
}

// Build the reflector of column c (held by this warp): publish v (zeros above row c, 1 at
// row c) and tau, and leave the column as H holds it (beta on the diagonal, v below).
template <int RPL>
__device__ __forceinline__ void reflect(float (&col)[RPL], int c, int n, int lane, float* vout, float* tauout,
                                        float* tau_all) {
    float tail2 = 0.f, mine = 0.f;
#pragma unroll
    for (int s = 0; s < RPL; ++s) {
        const int i = lane + 32 * s;
        if (i > c && i < n) tail2 = fmaf(col[s], col[s], tail2);
        // Arithmetic, not a select: the compiler turned "s == c / 32 ? col[s]" into an indexed
        // load and moved the column to local memory for it.
        mine = fmaf(col[s], s == (c >> 5) ? 1.f : 0.f, mine);
    }
    tail2 = warp_sum(tail2);
    const float alpha = __shfl_sync(FULL, mine, c & 31);
    float nrm = sqrtf(alpha * alpha + tail2);
    bool has = tail2 > 0.f;
    if (tail2 < 1e-30f || tail2 > 1e30f || fabsf(alpha) > 1e15f) {  // rare, and warp-uniform
        float amax = 0.f;
#pragma unroll
        for (int s = 0; s < RPL; ++s) {
            const int i = lane + 32 * s;
            if (i > c && i < n) amax = fmaxf(amax, fabsf(col[s]));
        }
        amax = warp_max(amax);
        has = amax > 0.f;
        if (has) {
            const float scale = 1.f / amax;
            float t2 = 0.f;
#pragma unroll
            for (int s = 0; s < RPL; ++s) {
                const int i = lane + 32 * s;
                if (i > c && i < n) {
                    const float y = col[s] * scale;
                    t2 = fmaf(y, y, t2);
                }
            }
            t2 = warp_sum(t2);
            const float as = alpha * scale;
            nrm = amax * sqrtf(as * as + t2);
        } else {
            nrm = fabsf(alpha);
        }
    }
    const float beta = alpha >= 0.f ? -nrm : nrm;
    const float tau = has ? (beta - alpha) / beta : 0.f;
    const float inv = has ? 1.f / (alpha - beta) : 0.f;
#pragma unroll
    for (int s = 0; s < RPL; ++s) {
        const int i = lane + 32 * s;
        float v = 0.f;
        if (i == c) {
            v = 1.f;
            col[s] = has ? beta : alpha;
        } else if (i > c && i < n) {
            v = col[s] * inv;
            col[s] = has ? v : col[s];
        }
        vout[i] = v;
    }
    if (lane == 0) {
        *tauout = tau;
        tau_all[c] = tau;
    }
}

// One block per matrix: W warps, warp w owns the CPW columns w CPW + t (a block of them, so
// that once its columns are finished a warp skips the rest), lane l the rows l + 32 s.
template <int RPL, int W>
__global__ void __launch_bounds__(W * 32, 1)
qr_onchip_kernel(const float* __restrict__ A, float* __restrict__ H, float* __restrict__ TAU, int n) {
    constexpr int NP = 32 * RPL;
    constexpr int CPW = (NP + W - 1) / W;
    __shared__ float vbuf[2][NP];
    __shared__ float tbuf[2];
    __shared__ float tau_all[NP];
    const int lane = threadIdx.x & 31;
    const int w = threadIdx.x >> 5;
    const int first = w * CPW;  // this warp's columns: first .. first + CPW - 1
    const size_t base = (size_t)blockIdx.x * n * n;
    const float* a = A + base;
    float reg[CPW][RPL];
#pragma unroll
    for (int t = 0; t < CPW; ++t) {
        const int j = first + t;
#pragma unroll
        for (int s = 0; s < RPL; ++s) {
            const int i = lane + 32 * s;
            reg[t][s] = (i < n && j < n) ? __ldg(a + (size_t)i * n + j) : 0.f;
        }
    }
    if (w == 0) reflect<RPL>(reg[0], 0, n, lane, vbuf[0], &tbuf[0], tau_all);
    __syncthreads();
    for (int c = 0; c + 1 < n; ++c) {
        const int next = c + 1;
        if (first < n && first + CPW - 1 >= next) {  // some of its columns are unfinished (warp-uniform)
            const int cur = c & 1;
            float v[RPL];
#pragma unroll
            for (int s = 0; s < RPL; ++s) v[s] = vbuf[cur][lane + 32 * s];
            const float tau = tbuf[cur];
            float d[CPW];
            dots<RPL, CPW>(reg, v, d);
            if (next / CPW == w) {
                // The critical path: column c+1 gets reflector c, then becomes reflector c+1.
                // Selected out of the register tile and back (no branch per slot, one copy of
                // the code).
                const int tn = next - first;
                float col[RPL];
                float dn = 0.f;
#pragma unroll
                for (int s = 0; s < RPL; ++s) col[s] = 0.f;
#pragma unroll
                for (int t = 0; t < CPW; ++t) {
                    dn = t == tn ? d[t] : dn;
#pragma unroll
                    for (int s = 0; s < RPL; ++s) col[s] = t == tn ? reg[t][s] : col[s];
                }
                const float f = tau * dn;
#pragma unroll
                for (int s = 0; s < RPL; ++s) col[s] = fmaf(-f, v[s], col[s]);
                reflect<RPL>(col, next, n, lane, vbuf[cur ^ 1], &tbuf[cur ^ 1], tau_all);
#pragma unroll
                for (int t = 0; t < CPW; ++t)
#pragma unroll
                    for (int s = 0; s < RPL; ++s) reg[t][s] = t == tn ? col[s] : reg[t][s];
            }
#pragma unroll
            for (int t = 0; t < CPW; ++t) {
                const int j = first + t;
                const float f = (j > next && j < n) ? tau * d[t] : 0.f;  // finished columns: f = 0
#pragma unroll
                for (int s = 0; s < RPL; ++s) reg[t][s] = fmaf(-f, v[s], reg[t][s]);
            }
        }
        __syncthreads();
    }
    float* h = H + base;
#pragma unroll
    for (int t = 0; t < CPW; ++t) {
        const int j = first + t;
#pragma unroll
        for (int s = 0; s < RPL; ++s) {
            const int i = lane + 32 * s;
            if (i < n && j < n) h[(size_t)i * n + j] = reg[t][s];
        }
    }
    for (int i = threadIdx.x; i < n; i += W * 32) TAU[(size_t)blockIdx.x * n + i] = tau_all[i];
}
"""

# The host side: the launchers and the function Python calls.
_HOST_SOURCE_c0000018 = r"""
template <int RPL, int W>
void launch(const at::Tensor& A, at::Tensor& H, at::Tensor& tau, int n, cudaStream_t stream) {
    qr_onchip_kernel<RPL, W><<<(unsigned)A.size(0), W * 32, 0, stream>>>(
        A.data_ptr<float>(), H.data_ptr<float>(), tau.data_ptr<float>(), n);
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> qr(at::Tensor A, int64_t warps) {
    TORCH_CHECK(A.is_cuda() && A.scalar_type() == at::kFloat && A.dim() == 3 && A.size(1) == A.size(2),
                "qr: A must be a batch x n x n float32 CUDA tensor");
    A = A.contiguous();
    const int64_t n = A.size(2);
    TORCH_CHECK(n >= 1 && n <= 192, "qr: n must be in [1, 192], got ", n);
    auto H = at::empty_like(A);
    auto tau = at::empty({A.size(0), n}, A.options());
    if (A.size(0) == 0) return {H, tau};
    const c10::cuda::CUDAGuard guard(A.device());
    const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const int rpl = (int)((n + 31) / 32);
    const int key = rpl * 100 + (int)warps;
    const int nn = (int)n;
    switch (key) {
        case 101: launch<1, 1>(A, H, tau, nn, stream); break;
        case 102: launch<1, 2>(A, H, tau, nn, stream); break;
        case 104: launch<1, 4>(A, H, tau, nn, stream); break;
        case 202: launch<2, 2>(A, H, tau, nn, stream); break;
        case 204: launch<2, 4>(A, H, tau, nn, stream); break;
        case 208: launch<2, 8>(A, H, tau, nn, stream); break;
        case 304: launch<3, 4>(A, H, tau, nn, stream); break;
        case 308: launch<3, 8>(A, H, tau, nn, stream); break;
        case 316: launch<3, 16>(A, H, tau, nn, stream); break;
        case 408: launch<4, 8>(A, H, tau, nn, stream); break;
        case 416: launch<4, 16>(A, H, tau, nn, stream); break;
        case 432: launch<4, 32>(A, H, tau, nn, stream); break;
        case 516: launch<5, 16>(A, H, tau, nn, stream); break;
        case 532: launch<5, 32>(A, H, tau, nn, stream); break;
        case 616: launch<6, 16>(A, H, tau, nn, stream); break;
        case 632: launch<6, 32>(A, H, tau, nn, stream); break;
        default: TORCH_CHECK(false, "qr: no kernel for n = ", n, " with ", warps, " warps");
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return {H, tau};
}
"""

_CUDA_SOURCE_c0000018 = r"""
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <tuple>

namespace {
""" + _DEVICE_SOURCE_c0000018 + "\n" + _HOST_SOURCE_c0000018

_CPP_SOURCE_c0000018 = "std::tuple<at::Tensor, at::Tensor> qr(at::Tensor A, int64_t warps);"

# Warps per size class: the kernel is compiled for n ≤ 32, 64, ..., 192 (register slots per lane).
_WARPS_c0000018 = {rpl: PARAMS_c0000018["warps_%d" % (32 * rpl)] for rpl in range(1, 7)}
_EXTENSIONS_c0000018 = {}


def _extension_c0000018(device: torch.device):
    """The built extension for this device's architecture (built once, cached on disk by hash)."""
    major, minor = torch.cuda.get_device_capability(device)
    arch = "%d%d" % (major, minor)
    if arch not in _EXTENSIONS_c0000018:
        from torch.utils.cpp_extension import load_inline

        digest = hashlib.sha256((_CUDA_SOURCE_c0000018 + _CPP_SOURCE_c0000018 + arch).encode()).hexdigest()[:16]
        _EXTENSIONS_c0000018[arch] = load_inline(
            name="qr_onchip_" + digest, cpp_sources=_CPP_SOURCE_c0000018, cuda_sources=_CUDA_SOURCE_c0000018, functions=["qr"],
            extra_cflags=["-O3"], extra_cuda_cflags=["-O3", "-gencode=arch=compute_%s,code=sm_%s" % (arch, arch)],
        )
    return _EXTENSIONS_c0000018[arch]


def custom_kernel_c0000018(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    n = A.shape[-1]
    if not A.is_cuda or n > PARAMS_c0000018["max_n"]:
        return torch.geqrf(A)
    return _extension_c0000018(A.device).qr(A, _WARPS_c0000018[(n + 31) // 32])


# ============================================================================
# c0000006: family lookahead_split, seed, 7.259 ms suite geomean
# lookahead_split: blocked Householder QR for few large matrices, one launch
# ============================================================================

# params of c0000006
PARAMS_c0000006 = {
    "nb": 32,
    "bn": 64,
    "bn_coop": 64,
    "rb": 64,
    "rb_panel": 64,
    "stages": 3,
    "stages_coop": 2,
    "join_reduce": True,
    "panel_programs": 32,
    "split_rows": 1024,
    "warps_split": 4,
    "warps_n_le512": 4,
    "stages_n_le512": 1,
    "panel_elems": 16384,
    "bm_min": 128,
    "warps_bm_le256": 4,
    "warps_bm_le1024": 4,
    "warps_bm_gt1024": 16,
    "prec_w": "tf32x3",
    "prec_t": "ieee",
    "prec_u": "tf32x3",
    "prec_g": "ieee",
}
# end of the params of c0000006
@triton.jit
def _reflect_c0000006(P, rows, cols, cr, cc, JOIN: tl.constexpr):
    """Annihilate tile column cc below tile row cr (its diagonal element).

    One cross-warp reduction gives s = x_tailᵀP and p = P[cr, :] (stacked with
    tl.join when JOIN, else two sums); then w = vᵀP = p + s/(alpha - beta).
    Returns the tile and tau; columns < cc and rows < cr are left untouched.
    """
    x = tl.sum(tl.where(cols[None, :] == cc, P, 0.0), axis=1)
    xt = tl.where(rows > cr, x, 0.0)
    if JOIN:
        sp = tl.sum(tl.join(xt[:, None] * P, tl.where(rows[:, None] == cr, P, 0.0)), axis=0)
        s, p = tl.split(sp)
    else:
        s = tl.sum(xt[:, None] * P, axis=0)
        p = tl.sum(tl.where(rows[:, None] == cr, P, 0.0), axis=0)
    alpha = tl.sum(tl.where(cols == cc, p, 0.0), axis=0)
    tail2 = tl.sum(tl.where(cols == cc, s, 0.0), axis=0)
    nrm = tl.sqrt(alpha * alpha + tail2)
    has = tail2 > 0.0
    if (tail2 < 1e-30) | (tail2 > 1e30) | (tl.abs(alpha) > 1e15):
        # rare: squares under- or overflow, or the tail is exactly zero
        amax = tl.max(tl.abs(xt), axis=0)
        scale = tl.where(amax > 0.0, 1.0 / tl.where(amax > 0.0, amax, 1.0), 0.0)
        t2 = tl.sum((xt * scale) * (xt * scale), axis=0)
        a_s = alpha * scale
        nrm = tl.where(amax > 0.0, amax * tl.sqrt(a_s * a_s + t2), tl.abs(alpha))
        has = amax > 0.0
    beta = tl.where(alpha >= 0.0, -nrm, nrm)
    tau = tl.where(has, (beta - alpha) / tl.where(has, beta, 1.0), 0.0)
    inv = tl.where(has, 1.0 / tl.where(has, alpha - beta, 1.0), 0.0)
    w = p + s * inv
    wu = tl.where(cols > cc, w, 0.0) * tau
    v = tl.where(rows > cr, x * inv, 0.0) + tl.where(rows == cr, 1.0, 0.0)
    P = P - v[:, None] * wu[None, :]
    newcol = tl.where(rows == cr, tl.where(has, beta, alpha), tl.where(rows > cr, tl.where(has, x * inv, x), x))
    P = tl.where(cols[None, :] == cc, newcol[:, None], P)
    return P, tau


@triton.jit
def _load_v_c0000006(h, kp, r0, shr, shc, N, NB: tl.constexpr, RB: tl.constexpr):
    """Rows r0..r0+RB of the unit lower-trapezoidal V of the panel at column kp."""
    rr = r0 + tl.arange(0, RB)
    cc = kp + tl.arange(0, NB)
    V = tl.load(h + rr[:, None] * shr + cc[None, :] * shc,
                mask=(rr[:, None] > cc[None, :]) & (rr[:, None] < N) & (cc[None, :] < N), other=0.0)
    return tl.where(rr[:, None] == cc[None, :], 1.0, V)


@triton.jit
def _apply_wy_c0000006(h, tw, kp, c0, shr, shc, N, NB: tl.constexpr, RB: tl.constexpr, WIDTH: tl.constexpr,
              STAGES: tl.constexpr, PREC_W: tl.constexpr, PREC_T: tl.constexpr, PREC_U: tl.constexpr):
    """Columns c0..c0+WIDTH, rows kp..N  <-  (I - V T Vᵀ)ᵀ times themselves (panel at kp)."""
    cc = c0 + tl.arange(0, WIDTH)
    ti = tl.arange(0, NB)
    T = tl.load(tw + ti[:, None] * NB + ti[None, :])
    W = tl.zeros([NB, WIDTH], dtype=tl.float32)
    for r0 in tl.range(kp, N, RB, num_stages=STAGES):
        rr = r0 + tl.arange(0, RB)
        V = _load_v_c0000006(h, kp, r0, shr, shc, N, NB, RB)
        C = tl.load(h + rr[:, None] * shr + cc[None, :] * shc, mask=(rr[:, None] < N) & (cc[None, :] < N), other=0.0)
        W = tl.dot(tl.trans(V), C, W, input_precision=PREC_W)
    W2 = tl.dot(tl.trans(T), W, input_precision=PREC_T)
    for r0 in tl.range(kp, N, RB, num_stages=STAGES):
        rr = r0 + tl.arange(0, RB)
        V = _load_v_c0000006(h, kp, r0, shr, shc, N, NB, RB)
        cm = (rr[:, None] < N) & (cc[None, :] < N)
        C = tl.load(h + rr[:, None] * shr + cc[None, :] * shc, mask=cm, other=0.0)
        C = C - tl.dot(V, W2, input_precision=PREC_U)
        tl.store(h + rr[:, None] * shr + cc[None, :] * shc, C, mask=cm)


@triton.jit
def _factor_panel_c0000006(src, h, tau_ptr, tw, k, ssr, ssc, shr, shc, N, BM: tl.constexpr, NB: tl.constexpr,
                  SB: tl.constexpr, RB: tl.constexpr, STAGES: tl.constexpr, JOIN: tl.constexpr,
                  PREC_G: tl.constexpr):
    """Factor columns k..k+NB (rows k..N) in H, write tau and T (NB×NB) to tw."""
    rows = tl.arange(0, BM)
    cols = tl.arange(0, SB)
    rmask = (k + rows) < N
    for s in range(0, NB // SB):
        c0 = k + s * SB
        m2 = rmask[:, None] & ((c0 + cols)[None, :] < N)
        X = tl.load(src + (k + rows)[:, None] * ssr + (c0 + cols)[None, :] * ssc, mask=m2, other=0.0)
        # left-looking: this panel's earlier reflectors, one at a time (v re-read from H)
        for i in range(0, s * SB):
            v = tl.load(h + (k + rows) * shr + (k + i) * shc, mask=rmask & (rows > i), other=0.0)
            v = tl.where(rows == i, 1.0, v)
            ti = tl.load(tau_ptr + k + i)
            wv = tl.sum(v[:, None] * X, axis=0)
            X = X - (ti * v)[:, None] * wv[None, :]
        taus = tl.zeros([SB], dtype=tl.float32)
        for c in range(0, SB):
            X, tau = _reflect_c0000006(X, rows, cols, s * SB + c, c, JOIN)
            taus = tl.where(cols == c, tau, taus)
        tl.store(h + (k + rows)[:, None] * shr + (c0 + cols)[None, :] * shc, X, mask=m2)
        tl.store(tau_ptr + c0 + cols, taus, mask=(c0 + cols) < N)
        tl.debug_barrier()
    # T from G = VᵀV:  T[:c, c] = -tau_c T[:c, :c] G[:c, c],  T[c, c] = tau_c
    ti = tl.arange(0, NB)
    G = tl.zeros([NB, NB], dtype=tl.float32)
    for r0 in tl.range(k, N, RB, num_stages=STAGES):
        V = _load_v_c0000006(h, k, r0, shr, shc, N, NB, RB)
        G = tl.dot(tl.trans(V), V, G, input_precision=PREC_G)
    tv = tl.load(tau_ptr + k + ti, mask=(k + ti) < N, other=0.0)
    T = tl.zeros([NB, NB], dtype=tl.float32)
    for c in range(0, NB):
        g = tl.sum(tl.where(ti[None, :] == c, G, 0.0), axis=1)
        g = tl.where(ti < c, g, 0.0)
        tc = tl.sum(tl.where(ti == c, tv, 0.0), axis=0)
        tcol = -tc * tl.sum(T * g[None, :], axis=1)
        tcol = tl.where(ti == c, tc, tcol)
        T = tl.where(ti[None, :] == c, tcol[:, None], T)
    tl.store(tw + ti[:, None] * NB + ti[None, :], T)


@triton.jit
def _sync_c0000006(flags, me, epoch, alive, P: tl.constexpr, WAIT, MAXSPIN: tl.constexpr):
    """Barrier of the P panel programs of one matrix: publish ``epoch`` in my
    flag, then (if WAIT) spin until every flag has reached it.  Flags only grow,
    so the barrier needs no reset.  A barrier that spins MAXSPIN times gives up
    and clears ``alive`` (the output is then wrong, and fails verification,
    instead of hanging); later barriers of a dead program do not wait."""
    tl.debug_barrier()  # this program's partial sums are written
    tl.atomic_max(flags + me, epoch, sem="release", scope="gpu")
    if WAIT:
        ar = tl.arange(0, P)
        seen = tl.min(tl.load(flags + ar, volatile=True), axis=0)
        spins = 0
        while (seen < epoch) & (spins < MAXSPIN) & (alive > 0):
            seen = tl.min(tl.load(flags + ar, volatile=True), axis=0)
            spins += 1
        alive = tl.where(seen >= epoch, alive, 0)
        tl.atomic_add(flags + me, 0, sem="acquire", scope="gpu")
        tl.debug_barrier()
    return alive


@triton.jit
def _coop_panel_c0000006(src, h, tau_ptr, tw_old, tw_new, flags, part, partw, me, k, N, ssr, ssc, shr, shc, e0,
                NB: tl.constexpr, P: tl.constexpr, R: tl.constexpr, PW: tl.constexpr, FIRST: tl.constexpr,
                PREC_W: tl.constexpr, PREC_T: tl.constexpr, PREC_U: tl.constexpr, PREC_G: tl.constexpr,
                MAXSPIN: tl.constexpr):
    """Panel at column k split by rows over P cooperating programs (me = 0..P-1).

    Program ``me`` holds rows base + me*R .. +R (base = k - NB, or 0 at the
    first panel) of the panel's NB columns in registers.  It applies the
    previous panel's reflector (one barrier to sum W = VᵀC), then factors the
    NB columns with one barrier per column: each program publishes s = x_tailᵀX,
    the pivot row p, and (max|x|, Σ(x/max)²) of its rows; after the barrier all
    programs sum them (the norm is combined from scaled partial sums, so it
    neither under- nor overflows) and update their own rows.  Finally G = VᵀV
    is summed by program 0, which writes T.  Epochs e0+1 .. e0+NB+2.
    """
    cols = tl.arange(0, NB)
    pr = tl.arange(0, P)
    if FIRST:
        grow = me * R + tl.arange(0, R)
    else:
        grow = k - NB + me * R + tl.arange(0, R)
    rmask = (grow >= 0) & (grow < N)
    m2 = rmask[:, None] & ((k + cols)[None, :] < N)
    X = tl.load(src + grow[:, None] * ssr + (k + cols)[None, :] * ssc, mask=m2, other=0.0)
    alive = 1
    if not FIRST:
        # previous panel (columns k-NB..k): X -= V (Tᵀ (Vᵀ C)), VᵀC summed over the P programs
        kp = k - NB
        V = tl.load(h + grow[:, None] * shr + (kp + cols)[None, :] * shc,
                    mask=rmask[:, None] & (grow[:, None] > (kp + cols)[None, :]), other=0.0)
        V = tl.where(grow[:, None] == (kp + cols)[None, :], 1.0, V)
        Wp = tl.dot(tl.trans(V), X, input_precision=PREC_W)
        tl.store(partw + me * NB * NB + cols[:, None] * NB + cols[None, :], Wp)
        alive = _sync_c0000006(flags, me, e0 + 1, alive, P, True, MAXSPIN)
        W = tl.zeros([NB, NB], dtype=tl.float32)
        for q in range(0, P):
            W += tl.load(partw + q * NB * NB + cols[:, None] * NB + cols[None, :], volatile=True)
        T = tl.load(tw_old + cols[:, None] * NB + cols[None, :])
        W2 = tl.dot(tl.trans(T), W, input_precision=PREC_T)
        X = X - tl.dot(V, W2, input_precision=PREC_U)
    taus = tl.zeros([NB], dtype=tl.float32)
    for c in range(0, NB):
        dr = k + c
        x = tl.sum(tl.where(cols[None, :] == c, X, 0.0), axis=1)
        xt = tl.where(grow > dr, x, 0.0)
        s_t = tl.sum(xt[:, None] * X, axis=0)
        p_t = tl.sum(tl.where(grow[:, None] == dr, X, 0.0), axis=0)
        am = tl.max(tl.abs(xt), axis=0)
        sc = tl.where(am > 0.0, 1.0 / tl.where(am > 0.0, am, 1.0), 0.0)
        q_t = tl.sum((xt * sc) * (xt * sc), axis=0)
        slot = part + ((c % 2) * P + me) * PW
        tl.store(slot + cols, s_t)
        tl.store(slot + NB + cols, p_t)
        tl.store(slot + 2 * NB, am)
        tl.store(slot + 2 * NB + 1, q_t)
        alive = _sync_c0000006(flags, me, e0 + 2 + c, alive, P, True, MAXSPIN)
        base = part + (c % 2) * P * PW
        s = tl.sum(tl.load(base + pr[:, None] * PW + cols[None, :], volatile=True), axis=0)
        p = tl.sum(tl.load(base + pr[:, None] * PW + NB + cols[None, :], volatile=True), axis=0)
        AM = tl.load(base + pr * PW + 2 * NB, volatile=True)
        Q = tl.load(base + pr * PW + 2 * NB + 1, volatile=True)
        scale = tl.max(AM, axis=0)
        ratio = AM / tl.where(scale > 0.0, scale, 1.0)
        qq = tl.sum(Q * ratio * ratio, axis=0)  # tail² / scale²
        alpha = tl.sum(tl.where(cols == c, p, 0.0), axis=0)
        has = scale > 0.0
        big = tl.maximum(tl.abs(alpha), scale)
        bs = tl.where(big > 0.0, big, 1.0)
        nrm = big * tl.sqrt((alpha / bs) * (alpha / bs) + qq * (scale / bs) * (scale / bs))
        beta = tl.where(alpha >= 0.0, -nrm, nrm)
        tau = tl.where(has, (beta - alpha) / tl.where(has, beta, 1.0), 0.0)
        inv = tl.where(has, 1.0 / tl.where(has, alpha - beta, 1.0), 0.0)
        w = p + s * inv
        wu = tl.where(cols > c, w, 0.0) * tau
        v = tl.where(grow > dr, x * inv, 0.0) + tl.where(grow == dr, 1.0, 0.0)
        X = X - v[:, None] * wu[None, :]
        newcol = tl.where(grow == dr, tl.where(has, beta, alpha), tl.where(grow > dr, tl.where(has, x * inv, x), x))
        X = tl.where(cols[None, :] == c, newcol[:, None], X)
        taus = tl.where(cols == c, tau, taus)
    tl.store(h + grow[:, None] * shr + (k + cols)[None, :] * shc, X, mask=m2)
    if me == 0:
        tl.store(tau_ptr + k + cols, taus, mask=(k + cols) < N)
    # G = VᵀV summed over the programs; program 0 builds T
    Vl = tl.where(grow[:, None] > (k + cols)[None, :], X, 0.0)
    Vl = tl.where((grow[:, None] == (k + cols)[None, :]) & rmask[:, None], 1.0, Vl)
    Gp = tl.dot(tl.trans(Vl), Vl, input_precision=PREC_G)
    tl.store(partw + me * NB * NB + cols[:, None] * NB + cols[None, :], Gp)
    alive = _sync_c0000006(flags, me, e0 + NB + 2, alive, P, me == 0, MAXSPIN)
    if me == 0:
        G = tl.zeros([NB, NB], dtype=tl.float32)
        for q in range(0, P):
            G += tl.load(partw + q * NB * NB + cols[:, None] * NB + cols[None, :], volatile=True)
        tv = tl.where((k + cols) < N, taus, 0.0)
        T = tl.zeros([NB, NB], dtype=tl.float32)
        for c in range(0, NB):
            g = tl.sum(tl.where(cols[None, :] == c, G, 0.0), axis=1)
            g = tl.where(cols < c, g, 0.0)
            tc = tl.sum(tl.where(cols == c, tv, 0.0), axis=0)
            tcol = -tc * tl.sum(T * g[None, :], axis=1)
            tcol = tl.where(cols == c, tc, tcol)
            T = tl.where(cols[None, :] == c, tcol[:, None], T)
        tl.store(tw_new + cols[:, None] * NB + cols[None, :], T)


@triton.jit
def _step_c0000006(a, h, tp, tw_new, tw_old, t, k, N, sar, sac, shr, shc, flags, part, partw, e0,
          BM: tl.constexpr, NB: tl.constexpr, SB: tl.constexpr, RB: tl.constexpr, RBP: tl.constexpr,
          BN: tl.constexpr, FIRST: tl.constexpr, STAGES: tl.constexpr, JOIN: tl.constexpr,
          SPLIT: tl.constexpr, P: tl.constexpr, R: tl.constexpr, PW: tl.constexpr, MAXSPIN: tl.constexpr,
          PREC_W: tl.constexpr, PREC_T: tl.constexpr, PREC_U: tl.constexpr, PREC_G: tl.constexpr):
    # k and N arrive as arguments (never assigned here): the interpreter turns
    # assigned ints into tensors, which cannot bound a loop.
    if SPLIT:
        if t < P:
            if FIRST:
                _coop_panel_c0000006(a, h, tp, tw_old, tw_new, flags, part, partw, t, k, N, sar, sac, shr, shc, e0,
                            NB, P, R, PW, FIRST, PREC_W, PREC_T, PREC_U, PREC_G, MAXSPIN)
            else:
                _coop_panel_c0000006(h, h, tp, tw_old, tw_new, flags, part, partw, t, k, N, shr, shc, shr, shc, e0,
                            NB, P, R, PW, FIRST, PREC_W, PREC_T, PREC_U, PREC_G, MAXSPIN)
    else:
        if t == 0:
            if FIRST:
                _factor_panel_c0000006(a, h, tp, tw_new, k, sar, sac, shr, shc, N, BM, NB, SB, RBP, STAGES, JOIN, PREC_G)
            else:
                _apply_wy_c0000006(h, tw_old, k - NB, k, shr, shc, N, NB, RBP, NB, STAGES, PREC_W, PREC_T, PREC_U)
                tl.debug_barrier()
                _factor_panel_c0000006(h, h, tp, tw_new, k, shr, shc, shr, shc, N, BM, NB, SB, RBP, STAGES, JOIN, PREC_G)
    if t >= P:
        c0 = k + NB + (t - P) * BN
        if FIRST:
            cc = c0 + tl.arange(0, BN)
            for r0 in tl.range(0, N, RB, num_stages=STAGES):
                rr = r0 + tl.arange(0, RB)
                cm = (rr[:, None] < N) & (cc[None, :] < N)
                C = tl.load(a + rr[:, None] * sar + cc[None, :] * sac, mask=cm, other=0.0)
                tl.store(h + rr[:, None] * shr + cc[None, :] * shc, C, mask=cm)
        else:
            _apply_wy_c0000006(h, tw_old, k - NB, c0, shr, shc, N, NB, RB, BN, STAGES, PREC_W, PREC_T, PREC_U)


# e0 (the barrier epoch) only numbers flags: specialising on its divisibility by 16 would
# compile a second variant of every step for nothing.
@triton.jit(do_not_specialize=["e0"])
def _lookahead_kernel_c0000006(A, H, TAU, TW, FLAGS, PART, PARTW, k_rt, n_rt, e0, sab, sar, sac, shb, shr, shc, stb,
                      K_CONST: tl.constexpr, N_CONST: tl.constexpr, BM: tl.constexpr, NB: tl.constexpr,
                      SB: tl.constexpr, RB: tl.constexpr, RBP: tl.constexpr, BN: tl.constexpr,
                      FIRST: tl.constexpr, STAGES: tl.constexpr, JOIN: tl.constexpr, SPLIT: tl.constexpr,
                      P: tl.constexpr, R: tl.constexpr, PW: tl.constexpr, MAXSPIN: tl.constexpr,
                      PREC_W: tl.constexpr, PREC_T: tl.constexpr, PREC_U: tl.constexpr, PREC_G: tl.constexpr):
    """Step for the panel at column k.  Programs 0..P-1 of a matrix factor the
    panel (P = 1: one program; SPLIT: P programs splitting its rows) after
    applying the previous panel's reflector to it; programs P.. apply that
    reflector to one BN-column tile each of the columns right of it.
    K_CONST/N_CONST >= 0 (interpreter only) pass k and n as constants; on the
    GPU they are -1 and k, n are runtime values."""
    pid = tl.program_id(0).to(tl.int64)
    t = tl.program_id(1)
    a = A + pid * sab
    h = H + pid * shb
    tp = TAU + pid * stb
    slot = (k_rt // NB) % 2
    tw_new = TW + (pid * 2 + slot) * NB * NB
    tw_old = TW + (pid * 2 + 1 - slot) * NB * NB
    flags = FLAGS + pid * P
    part = PART + pid * (2 * P * PW)
    partw = PARTW + pid * (P * NB * NB)
    if K_CONST >= 0:
        _step_c0000006(a, h, tp, tw_new, tw_old, t, K_CONST, N_CONST, sar, sac, shr, shc, flags, part, partw, e0,
              BM, NB, SB, RB, RBP, BN, FIRST, STAGES, JOIN, SPLIT, P, R, PW, MAXSPIN, PREC_W, PREC_T, PREC_U, PREC_G)
    else:
        _step_c0000006(a, h, tp, tw_new, tw_old, t, k_rt, n_rt, sar, sac, shr, shc, flags, part, partw, e0,
              BM, NB, SB, RB, RBP, BN, FIRST, STAGES, JOIN, SPLIT, P, R, PW, MAXSPIN, PREC_W, PREC_T, PREC_U, PREC_G)


def _use_triton_c0000006(A: torch.Tensor) -> bool:
    return A.is_cuda or os.environ.get("TRITON_INTERPRET") == "1"


def _warps_c0000006(bm: int) -> int:
    if bm <= 256:
        return PARAMS_c0000006["warps_bm_le256"]
    if bm <= 1024:
        return PARAMS_c0000006["warps_bm_le1024"]
    return PARAMS_c0000006["warps_bm_gt1024"]


_SM_COUNT_c0000006 = {}


def _sm_count_c0000006(device: torch.device) -> int:
    if device.type != "cuda":
        return 1 << 30
    if device not in _SM_COUNT_c0000006:
        _SM_COUNT_c0000006[device] = torch.cuda.get_device_properties(device).multi_processor_count
    return _SM_COUNT_c0000006[device]


def custom_kernel_c0000006(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    batch, n = A.shape[0], A.shape[-1]
    if not _use_triton_c0000006(A):
        return torch.geqrf(A)
    nb, bn, rb = PARAMS_c0000006["nb"], PARAMS_c0000006["bn"], PARAMS_c0000006["rb"]
    H = torch.empty_like(A)
    tau = torch.empty((batch, n), dtype=A.dtype, device=A.device)
    tw = torch.empty((batch, 2, nb, nb), dtype=A.dtype, device=A.device)
    interp = os.environ.get("TRITON_INTERPRET") == "1"
    # Cooperative panels: every panel program must be resident at once (they
    # wait for each other), so P * batch may not exceed the SM count.
    # (The interpreter runs programs one after the other: there P is 1, which
    # still runs the cooperative code path.)
    coop = PARAMS_c0000006["panel_programs"] > 1
    p = 1 if interp else PARAMS_c0000006["panel_programs"]
    while p > 1 and p * batch > _sm_count_c0000006(A.device):
        p //= 2
    if not interp and p < 4:  # too few programs per matrix to pay for the barriers
        coop = False
    split_from = n - PARAMS_c0000006["split_rows"] if coop else -1  # panels k < split_from are split
    # Few large matrices (cooperative panels) want more, narrower update tiles.
    bn = PARAMS_c0000006["bn_coop"] if coop else bn
    stages = PARAMS_c0000006["stages_coop"] if coop else PARAMS_c0000006["stages"]
    small_warps = PARAMS_c0000006["warps_n_le512"] if n <= 512 else 0  # 0: by panel height
    stages = PARAMS_c0000006["stages_n_le512"] if n <= 512 else stages
    pw = triton.next_power_of_2(2 * nb + 2)
    flags = torch.zeros((batch, max(p, 1)), dtype=torch.int32, device=A.device)
    part = torch.empty((batch, 2, max(p, 1), pw), dtype=A.dtype, device=A.device)
    partw = torch.empty((batch, max(p, 1), nb, nb), dtype=A.dtype, device=A.device)
    strides = (A.stride(0), A.stride(1), A.stride(2), H.stride(0), H.stride(1), H.stride(2), tau.stride(0))
    for k in range(0, n, nb):
        split = k < split_from
        rows = n - k + (nb if k else 0)  # rows a split panel's programs cover
        r = max(16, triton.next_power_of_2(triton.cdiv(rows, p))) if split else 16
        bm = max(PARAMS_c0000006["bm_min"], triton.next_power_of_2(n - k))
        sb = max(1, min(nb, PARAMS_c0000006["panel_elems"] // bm))
        npan = p if split else 1
        if split:
            # A split step never reads the one-program panel's settings: fixed values, so that
            # neither the panel height nor a child's panel parameters make new variants of it.
            bm, sb, rbp = 16, 1, 16
        else:
            rbp = PARAMS_c0000006["rb_panel"]
        tiles = triton.cdiv(n - k - nb, bn) if n - k > nb else 0
        _lookahead_kernel_c0000006[(batch, npan + tiles)](
            A, H, tau, tw, flags, part, partw, k, n, (k // nb) * (nb + 3), *strides,
            K_CONST=k if interp else -1, N_CONST=n if interp else -1,
            BM=bm, NB=nb, SB=sb, RB=rb, RBP=rbp, BN=bn, FIRST=(k == 0), STAGES=stages,
            JOIN=PARAMS_c0000006["join_reduce"], SPLIT=split, P=npan, R=r, PW=pw, MAXSPIN=1 << 20,
            PREC_W=PARAMS_c0000006["prec_w"], PREC_T=PARAMS_c0000006["prec_t"], PREC_U=PARAMS_c0000006["prec_u"],
            PREC_G=PARAMS_c0000006["prec_g"], num_warps=PARAMS_c0000006["warps_split"] if split else (small_warps or _warps_c0000006(bm)),
        )
    return H, tau


# ============================================================================
# c0000072: family cuda_blocked, optuna, 6.229 ms suite geomean
# cuda_blocked: blocked Householder QR whose panels are a CUDA C++ kernel (built with
# ============================================================================

# params of c0000072
PARAMS_c0000072 = {
    "max_n": 1024,
    "nb_le512": 64,
    "block_le512": 128,
    "nb_le1024": 32,
    "block_le1024": 64,
    "nb_le2048": 16,
    "block_gt1024": 128,
    "warps_nb32": 16,
    "graph": False,
    "graph_gt1024": True,
    "update_lt512": "tf32x3",
    "update_le1024": "bf16x3",
    "update_gt1024": "fp32",
    "apply_bn": 64,
    "apply_bm": 64,
    "apply_warps": 4,
    "apply_stages": 2,
}
# end of the params of c0000072
# The interpreter's dot mishandles bf16 operands: there the split halves are multiplied as
# float32, which is the same arithmetic (a product of two bf16 values is exact in float32).
_EMULATE_c0000072 = tl.constexpr(os.environ.get("TRITON_INTERPRET") == "1")


@triton.jit
def _split_c0000072(x):
    """x = hi + lo with hi and lo bf16 (lo carries the next 8 bits of x's mantissa)."""
    hi = x.to(tl.bfloat16)
    lo = (x - hi.to(tl.float32)).to(tl.bfloat16)
    if _EMULATE_c0000072:
        return hi.to(tl.float32), lo.to(tl.float32)
    return hi, lo


@triton.jit
def _dot3_c0000072(a, b, acc):
    """acc + a·b to about 2^-16 relative per product: three bf16 tensor-core products."""
    ah, al = _split_c0000072(a)
    bh, bl = _split_c0000072(b)
    acc = tl.dot(al, bh, acc, input_precision="ieee")
    acc = tl.dot(ah, bl, acc, input_precision="ieee")
    return tl.dot(ah, bh, acc, input_precision="ieee")


@triton.jit
def _mma_c0000072(a, b, acc, PREC: tl.constexpr):
    if PREC == "bf16x3":
        return _dot3_c0000072(a, b, acc)
    return tl.dot(a, b, acc, input_precision=PREC)


@triton.jit
def _apply_kernel_c0000072(C, VT, T, m, ncols, width, scb, scr, svb, svr, stb, str_,
                  KP: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, STAGES: tl.constexpr,
                  PREC: tl.constexpr):
    """One matrix's columns j·BN.. of C (m rows, scr apart, unit column stride) <- (I - V T Vᵀ)ᵀ C,
    with VT = Vᵀ (width x m, rows svr apart) and T (width x width, rows str_ apart)."""
    # Tiles of one matrix are neighbours in launch order, so its Vᵀ (read by every tile, twice)
    # stays in L2 between them instead of coming from memory once per tile.
    b = tl.program_id(1).to(tl.int64)
    cols = tl.program_id(0) * BN + tl.arange(0, BN)
    ks = tl.arange(0, KP)
    c_ptr = C + b * scb
    v_ptr = VT + b * svb
    kmask = ks < width
    W = tl.zeros([KP, BN], dtype=tl.float32)
    for r0 in tl.range(0, m, BM, num_stages=STAGES):
        rows = r0 + tl.arange(0, BM)
        cm = (rows[:, None] < m) & (cols[None, :] < ncols)
        c = tl.load(c_ptr + rows[:, None] * scr + cols[None, :], mask=cm, other=0.0)
        vt = tl.load(v_ptr + ks[:, None] * svr + rows[None, :], mask=kmask[:, None] & (rows[None, :] < m), other=0.0)
        W = _mma_c0000072(vt, c, W, PREC)
    tt = tl.load(T + b * stb + ks[None, :] * str_ + ks[:, None], mask=kmask[:, None] & kmask[None, :], other=0.0)
    W2 = -_mma_c0000072(tt, W, tl.zeros([KP, BN], dtype=tl.float32), PREC)  # -(Tᵀ W)
    for r0 in tl.range(0, m, BM, num_stages=STAGES):
        rows = r0 + tl.arange(0, BM)
        cm = (rows[:, None] < m) & (cols[None, :] < ncols)
        c = tl.load(c_ptr + rows[:, None] * scr + cols[None, :], mask=cm, other=0.0)
        v = tl.load(v_ptr + ks[None, :] * svr + rows[:, None], mask=kmask[None, :] & (rows[:, None] < m), other=0.0)
        c = _mma_c0000072(v, W2, c, PREC)
        tl.store(c_ptr + rows[:, None] * scr + cols[None, :], c, mask=cm)


# Device code (CUDA runtime only: it compiles without torch's headers).
_DEVICE_SOURCE_c0000072 = r"""

constexpr unsigned FULL = 0xffffffffu;

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(FULL, x, o);
    return x;
}

__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(FULL, x, o));
    return x;
}

// The published reflector as this lane sees it (its rows lane + 32 s) is either copied into
// a register array (float[RPL]) or, where the panel's own registers need them all (32 rows
// per lane), read from shared memory through this view.  (A struct holding the array made the
// compiler keep it in local memory.)
struct SharedReflector {
    const float* p;  // vbuf + lane: element s is at p[32 s]
    __device__ __forceinline__ float operator[](int s) const { return p[32 * s]; }
};

// d[t] = vᵀ reg[t] for every column this warp holds, all reduced together.  Straight-line on
// purpose: each butterfly level issues every column's shuffle back to back, so their
// latencies overlap (a branch per column made the compiler run them one after the other).
// For a finished column (j < c) the dot is G[j][c] = v_jᵀ v_c (its rows from c on hold v_j);
// for a column right of c it is what the reflector needs.  Rows above c hold v = 0.
template <int RPL, int CPW, class V>
__device__ __forceinline__ void dots(const float (&reg)[CPW][RPL], const V& v, float (&d)[CPW]) {
#pragma unroll
    for (int t = 0; t < CPW; ++t) {
        float x = 0.f;
#pragma unroll
        for (int s = 0; s < RPL; ++s) x = fmaf(v[s], reg[t][s], x);
        d[t] = x;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
#pragma unroll
        for (int t = 0; t < CPW; ++t) d[t] += __shfl_xor_sync(FULL, d[t], o);
}

// col <- col - f v: the reflector applied once its dot is known (f = 0 leaves col as it is).
template <int RPL, class V>
__device__ __forceinline__ void update(float (&col)[RPL], const V& v, float f) {
#pragma unroll
    for (int s = 0; s < RPL; ++s) col[s] = fmaf(-f, v[s], col[s]);
}

// Reflector of panel column c (rows c..m-1, held by this warp): publish v and tau, and
// leave the column as H holds it (beta on the diagonal, v below).
template <int RPL>
__device__ __forceinline__ void reflect(float (&col)[RPL], int c, int m, int lane, float* vout, float* tauout,
                                        float* tau_all) {
    float tail2 = 0.f, mine = 0.f;
#pragma unroll
    for (int s = 0; s < RPL; ++s) {
        const int i = lane + 32 * s;
        if (i > c && i < m) tail2 = fmaf(col[s], col[s], tail2);
        // Arithmetic, not a select: the compiler turned "s == c / 32 ? col[s]" into an indexed
        // load and moved the column to local memory for it.
        mine = fmaf(col[s], s == (c >> 5) ? 1.f : 0.f, mine);
    }
    tail2 = warp_sum(tail2);
    const float alpha = __shfl_sync(FULL, mine, c & 31);
    float nrm = sqrtf(alpha * alpha + tail2);
    bool has = tail2 > 0.f;
    if (tail2 < 1e-30f || tail2 > 1e30f || fabsf(alpha) > 1e15f) {  // rare, and warp-uniform
        float amax = 0.f;
#pragma unroll
        for (int s = 0; s < RPL; ++s) {
            const int i = lane + 32 * s;
            if (i > c && i < m) amax = fmaxf(amax, fabsf(col[s]));
        }
        amax = warp_max(amax);
        has = amax > 0.f;
        if (has) {
            const float scale = 1.f / amax;
            float t2 = 0.f;
#pragma unroll
            for (int s = 0; s < RPL; ++s) {
                const int i = lane + 32 * s;
                if (i > c && i < m) {
                    const float y = col[s] * scale;
                    t2 = fmaf(y, y, t2);
                }
            }
            t2 = warp_sum(t2);
            const float as = alpha * scale;
            nrm = amax * sqrtf(as * as + t2);
        } else {
            nrm = fabsf(alpha);
        }
    }
    const float beta = alpha >= 0.f ? -nrm : nrm;
    const float tau = has ? (beta - alpha) / beta : 0.f;
    const float inv = has ? 1.f / (alpha - beta) : 0.f;
#pragma unroll
    for (int s = 0; s < RPL; ++s) {
        const int i = lane + 32 * s;
        float v = 0.f;
        if (i == c) {
            v = 1.f;
            col[s] = has ? beta : alpha;
        } else if (i > c && i < m) {
            v = col[s] * inv;
            col[s] = has ? v : col[s];
        }
        vout[i] = v;
    }
    if (lane == 0) {
        *tauout = tau;
        tau_all[c] = tau;
    }
}

// One column of the panel, for every warp: G's entries for column c, reflector c applied to
// the columns right of it, and (the warp owning column c+1) reflector c+1 built first.
template <int RPL, int W, int CPW, class V>
__device__ __forceinline__ void panel_step(float (&reg)[CPW][RPL], const V& v, int c, int w, int m, int lane,
                                           int wid, float* vbuf, float* tauc, float* tau_all, float* gbuf,
                                           int lds, int mp) {
    const int cur = c & 1;
    const float tau = tauc[cur];
    float d[CPW];
    dots<RPL, CPW>(reg, v, d);
    if (lane == 0) {
#pragma unroll
        for (int t = 0; t < CPW; ++t)
            if (wid + W * t < c) gbuf[(wid + W * t) * lds + c] = d[t];
    }
    const int next = c + 1;
    if (next < w && next % W == wid) {
        // The critical path: column c+1 gets reflector c, then becomes reflector c+1.
        if constexpr (CPW == 1) {
            update<RPL>(reg[0], v, tau * d[0]);
            reflect<RPL>(reg[0], next, m, lane, vbuf + (cur ^ 1) * mp, &tauc[cur ^ 1], tau_all);
        } else {
            // Selected out of the register tile and back: a loop over the slots around the
            // reflector's code was not unrolled, and the tile went to local memory.
            const int tn = next / W;
            float col[RPL];
            float dn = 0.f;
#pragma unroll
            for (int s = 0; s < RPL; ++s) col[s] = 0.f;
#pragma unroll
            for (int t = 0; t < CPW; ++t) {
                dn = t == tn ? d[t] : dn;
#pragma unroll
                for (int s = 0; s < RPL; ++s) col[s] = t == tn ? reg[t][s] : col[s];
            }
            update<RPL>(col, v, tau * dn);
            reflect<RPL>(col, next, m, lane, vbuf + (cur ^ 1) * mp, &tauc[cur ^ 1], tau_all);
#pragma unroll
            for (int t = 0; t < CPW; ++t)
#pragma unroll
                for (int s = 0; s < RPL; ++s) reg[t][s] = t == tn ? col[s] : reg[t][s];
        }
    }
#pragma unroll
    for (int t = 0; t < CPW; ++t) {
        const int j = wid + W * t;
        update<RPL>(reg[t], v, (j > next && j < w) ? tau * d[t] : 0.f);  // finished columns: f = 0
    }
}

template <int RPL, int W, int CPW>
constexpr size_t panel_smem_bytes() {
    return sizeof(float) * ((size_t)32 * RPL * (W * CPW + 1) + 2 * 32 * RPL
                            + 2 * (size_t)(W * CPW) * (W * CPW + 1) + 2 + W * CPW);
}

// One block per matrix factors panel columns k..k+w (rows k..n) of H in place and writes
// tau[k..k+w], VT (w x (n-k) from its pointer, rows n apart, row j = reflector j) and T
// (w x w upper triangular, rows ldt apart); vstride and tstride step from one matrix to the
// next, so both can be windows of a wider block's buffers.
template <int RPL, int W, int CPW>
__global__ void __launch_bounds__(W * 32, 1)
panel_kernel(float* __restrict__ H, float* __restrict__ TAU, float* __restrict__ VT, float* __restrict__ T,
             int n, int k, int w, long long vstride, long long tstride, int ldt) {
    constexpr int MP = 32 * RPL;
    constexpr int NBP = W * CPW;
    constexpr int LDS = NBP + 1;  // odd stride: a warp reading one column hits 32 banks
    extern __shared__ float smem[];
    float* stage = smem;                 // MP x LDS
    float* vbuf = stage + MP * LDS;      // 2 x MP
    float* gbuf = vbuf + 2 * MP;         // NBP x LDS: G = VᵀV (strict upper part)
    float* tbuf = gbuf + NBP * LDS;      // NBP x LDS: T, one row per thread
    float* tauc = tbuf + NBP * LDS;      // 2: tau of the reflector in vbuf
    float* tau_all = tauc + 2;           // NBP
    const int lane = threadIdx.x & 31;
    const int wid = threadIdx.x >> 5;
    const int m = n - k;
    const size_t mat = (size_t)blockIdx.x * n * n;
    float* h = H + mat + (size_t)k * n + k;
    for (int e = threadIdx.x; e < MP * NBP; e += W * 32) {
        const int r = e / NBP, q = e % NBP;
        stage[r * LDS + q] = (r < m && q < w) ? h[(size_t)r * n + q] : 0.f;
    }
    __syncthreads();
    float reg[CPW][RPL];
#pragma unroll
    for (int t = 0; t < CPW; ++t)
#pragma unroll
        for (int s = 0; s < RPL; ++s) reg[t][s] = stage[(lane + 32 * s) * LDS + wid + W * t];
    if (wid == 0) reflect<RPL>(reg[0], 0, m, lane, vbuf, &tauc[0], tau_all);
    __syncthreads();
    for (int c = 0; c < w; ++c) {
        const int cur = c & 1;
        if constexpr (RPL < 32) {
            float v[RPL];
#pragma unroll
            for (int s = 0; s < RPL; ++s) v[s] = vbuf[cur * MP + lane + 32 * s];
            panel_step<RPL, W, CPW>(reg, v, c, w, m, lane, wid, vbuf, tauc, tau_all, gbuf, LDS, MP);
        } else {
            const SharedReflector v{vbuf + cur * MP + lane};
            panel_step<RPL, W, CPW>(reg, v, c, w, m, lane, wid, vbuf, tauc, tau_all, gbuf, LDS, MP);
        }
        __syncthreads();
    }
    // VT: row j is reflector j (coalesced: consecutive lanes hold consecutive rows).
    float* vt = VT + (size_t)blockIdx.x * vstride;
#pragma unroll
    for (int t = 0; t < CPW; ++t) {
        const int j = wid + W * t;
        if (j < w) {
#pragma unroll
            for (int s = 0; s < RPL; ++s) {
                const int i = lane + 32 * s;
                if (i < m) vt[(size_t)j * n + i] = i > j ? reg[t][s] : (i == j ? 1.f : 0.f);
            }
        }
#pragma unroll
        for (int s = 0; s < RPL; ++s) stage[(lane + 32 * s) * LDS + wid + W * t] = reg[t][s];
    }
    // T: thread r builds row r by slarft's recurrence, T[r][c] = -tau_c sum_{q=r}^{c-1} T[r][q] G[q][c]
    // (a row needs only its own earlier entries and the finished G).
    float* tout = T + (size_t)blockIdx.x * tstride;
    if (threadIdx.x < w) {
        const int r = threadIdx.x;
        float* row = tbuf + r * LDS;
        for (int c = 0; c < w; ++c) {
            float value = 0.f;
            if (c == r) {
                value = tau_all[r];
            } else if (c > r) {
                float acc = 0.f;
                for (int q = r; q < c; ++q) acc = fmaf(row[q], gbuf[q * LDS + c], acc);
                value = -tau_all[c] * acc;
            }
            row[c] = value;
            tout[(size_t)r * ldt + c] = value;
        }
    }
    __syncthreads();
    for (int e = threadIdx.x; e < MP * NBP; e += W * 32) {
        const int r = e / NBP, q = e % NBP;
        if (r < m && q < w) h[(size_t)r * n + q] = stage[r * LDS + q];
    }
    for (int c = threadIdx.x; c < w; c += W * 32) TAU[(size_t)blockIdx.x * n + k + c] = tau_all[c];
}
"""

# The host side: the launchers and the function Python calls.
_HOST_SOURCE_c0000072 = r"""
template <int RPL, int W, int CPW>
void launch(at::Tensor& H, at::Tensor& tau, at::Tensor& vt, at::Tensor& t, int n, int k, int w,
            cudaStream_t stream) {
    constexpr size_t bytes = panel_smem_bytes<RPL, W, CPW>();
    static bool ready = false;  // the opt-in above 48 KB of shared memory, once per kernel
    if (!ready) {
        C10_CUDA_CHECK(cudaFuncSetAttribute(panel_kernel<RPL, W, CPW>,
                                            cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
        ready = true;
    }
    panel_kernel<RPL, W, CPW><<<(unsigned)H.size(0), W * 32, bytes, stream>>>(
        H.data_ptr<float>(), tau.data_ptr<float>(), vt.data_ptr<float>(), t.data_ptr<float>(), n, k, w,
        (long long)vt.stride(0), (long long)t.stride(0), (int)t.stride(1));
}

}  // namespace

// Factor panel columns k..k+w of H (batch x n x n, contiguous, in place); rows per lane
// rpl (n - k <= 32 rpl), warps and columns per warp (w <= warps * cpw).  vt (rows n apart)
// and t (contiguous rows) may be windows of wider buffers: the kernel writes vt[:, :w, :n-k]
// and t[:, :w, :w] only.
void panel(at::Tensor H, at::Tensor tau, at::Tensor vt, at::Tensor t, int64_t k, int64_t w, int64_t rpl,
           int64_t warps, int64_t cpw) {
    TORCH_CHECK(H.is_cuda() && H.is_contiguous() && H.scalar_type() == at::kFloat && H.dim() == 3,
                "panel: H must be a contiguous batch x n x n float32 CUDA tensor");
    const int n = (int)H.size(2);
    TORCH_CHECK(k >= 0 && w >= 1 && k + w <= n && n - k <= 32 * rpl && w <= warps * cpw,
                "panel: bad panel k=", k, " w=", w, " for n=", n);
    TORCH_CHECK(vt.is_cuda() && vt.scalar_type() == at::kFloat && vt.dim() == 3 && vt.stride(2) == 1 &&
                vt.stride(1) == n && vt.size(0) == H.size(0) && vt.size(1) >= w && vt.size(2) >= n - k,
                "panel: vt must be a float32 CUDA window of rows n apart holding w x (n - k)");
    TORCH_CHECK(t.is_cuda() && t.scalar_type() == at::kFloat && t.dim() == 3 && t.stride(2) == 1 &&
                t.size(0) == H.size(0) && t.size(1) >= w && t.size(2) >= w,
                "panel: t must be a float32 CUDA window holding w x w");
    TORCH_CHECK(tau.is_cuda() && tau.is_contiguous() && tau.size(0) == H.size(0) && tau.size(1) == n,
                "panel: tau must be a contiguous batch x n float32 CUDA tensor");
    if (H.size(0) == 0) return;
    const c10::cuda::CUDAGuard guard(H.device());
    const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const int key = (int)(rpl * 10000 + warps * 100 + cpw);
    const int kk = (int)k, ww = (int)w;
    switch (key) {
        case 41604: launch<4, 16, 4>(H, tau, vt, t, n, kk, ww, stream); break;
        case 81604: launch<8, 16, 4>(H, tau, vt, t, n, kk, ww, stream); break;
        case 161604: launch<16, 16, 4>(H, tau, vt, t, n, kk, ww, stream); break;
        case 41602: launch<4, 16, 2>(H, tau, vt, t, n, kk, ww, stream); break;
        case 81602: launch<8, 16, 2>(H, tau, vt, t, n, kk, ww, stream); break;
        case 161602: launch<16, 16, 2>(H, tau, vt, t, n, kk, ww, stream); break;
        case 321602: launch<32, 16, 2>(H, tau, vt, t, n, kk, ww, stream); break;
        case 43201: launch<4, 32, 1>(H, tau, vt, t, n, kk, ww, stream); break;
        case 83201: launch<8, 32, 1>(H, tau, vt, t, n, kk, ww, stream); break;
        case 163201: launch<16, 32, 1>(H, tau, vt, t, n, kk, ww, stream); break;
        case 41601: launch<4, 16, 1>(H, tau, vt, t, n, kk, ww, stream); break;
        case 81601: launch<8, 16, 1>(H, tau, vt, t, n, kk, ww, stream); break;
        case 161601: launch<16, 16, 1>(H, tau, vt, t, n, kk, ww, stream); break;
        case 321601: launch<32, 16, 1>(H, tau, vt, t, n, kk, ww, stream); break;
        case 641601: launch<64, 16, 1>(H, tau, vt, t, n, kk, ww, stream); break;
        case 40801: launch<4, 8, 1>(H, tau, vt, t, n, kk, ww, stream); break;
        case 80801: launch<8, 8, 1>(H, tau, vt, t, n, kk, ww, stream); break;
        case 160801: launch<16, 8, 1>(H, tau, vt, t, n, kk, ww, stream); break;
        case 320801: launch<32, 8, 1>(H, tau, vt, t, n, kk, ww, stream); break;
        case 640801: launch<64, 8, 1>(H, tau, vt, t, n, kk, ww, stream); break;
        case 1280801: launch<128, 8, 1>(H, tau, vt, t, n, kk, ww, stream); break;
        default: TORCH_CHECK(false, "panel: no kernel for rpl=", rpl, " warps=", warps, " cpw=", cpw);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}
"""

_CUDA_SOURCE_c0000072 = r"""
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

namespace {
""" + _DEVICE_SOURCE_c0000072 + "\n" + _HOST_SOURCE_c0000072

_CPP_SOURCE_c0000072 = ("void panel(at::Tensor H, at::Tensor tau, at::Tensor vt, at::Tensor t, int64_t k, int64_t w, "
               "int64_t rpl, int64_t warps, int64_t cpw);")

_EXTENSIONS_c0000072 = {}
_GRAPHS_c0000072 = {}


def _extension_c0000072(device: torch.device):
    """The built extension for this device's architecture (built once, cached on disk by hash)."""
    major, minor = torch.cuda.get_device_capability(device)
    arch = "%d%d" % (major, minor)
    if arch not in _EXTENSIONS_c0000072:
        from torch.utils.cpp_extension import load_inline

        digest = hashlib.sha256((_CUDA_SOURCE_c0000072 + _CPP_SOURCE_c0000072 + arch).encode()).hexdigest()[:16]
        _EXTENSIONS_c0000072[arch] = load_inline(
            name="qr_blocked_" + digest, cpp_sources=_CPP_SOURCE_c0000072, cuda_sources=_CUDA_SOURCE_c0000072, functions=["panel"],
            extra_cflags=["-O3"], extra_cuda_cflags=["-O3", "-gencode=arch=compute_%s,code=sm_%s" % (arch, arch)],
        )
    return _EXTENSIONS_c0000072[arch]


def _widths_c0000072(n: int) -> tuple[int, int]:
    """(panel width, block width) for matrices of size n: panels of the block are factored by
    the kernel, then the rest of the matrix is updated once per block (K = block width).
    Taller panels hold fewer columns: a block's registers hold rows x panel width."""
    if n <= 512:
        nb, block = PARAMS_c0000072["nb_le512"], PARAMS_c0000072["block_le512"]
    elif n <= 1024:
        nb, block = PARAMS_c0000072["nb_le1024"], PARAMS_c0000072["block_le1024"]
    elif n <= 2048:
        nb, block = PARAMS_c0000072["nb_le2048"], PARAMS_c0000072["block_gt1024"]
    else:
        nb, block = 8, PARAMS_c0000072["block_gt1024"]
    return nb, max(nb, block)


def _rows_per_lane_c0000072(m: int) -> int:
    rpl = 4
    while 32 * rpl < m:
        rpl *= 2
    return rpl


def _shape_c0000072(nb: int, rpl: int) -> tuple[int, int]:
    """(warps, columns per warp) of the panel kernel: nb = warps x columns per warp.  At 32
    rows per lane, 32 warps (64 registers a thread) spill the tile: 16 warps of two columns."""
    if nb == 64:
        return 16, 4
    if nb == 32:
        warps = 16 if rpl >= 32 else PARAMS_c0000072["warps_nb32"]
        return warps, 32 // warps
    if nb == 16:
        return 16, 1
    return 8, 1


def _apply_c0000072(c: torch.Tensor, v_t: torch.Tensor, t: torch.Tensor) -> None:
    """c <- (I - V T Vᵀ)ᵀ c in place (v_t = Vᵀ): three cuBLAS FP32 GEMMs, or the Triton
    kernel's split tensor-core products (PARAMS update_*: "tf32x3" or "bf16x3")."""
    n = c.stride(1)  # c is a view of H
    mode = PARAMS_c0000072["update_lt512" if n < 512 else "update_le1024" if n <= 1024 else "update_gt1024"]
    if mode != "fp32" and c.stride(2) == 1 and c.numel() and c.shape[0] < 65536:  # grid's y limit
        width = v_t.shape[1]
        bn = PARAMS_c0000072["apply_bn"]
        _apply_kernel_c0000072[(triton.cdiv(c.shape[2], bn), c.shape[0])](
            c, v_t, t, c.shape[1], c.shape[2], width, c.stride(0), c.stride(1), v_t.stride(0), v_t.stride(1),
            t.stride(0), t.stride(1), KP=max(16, triton.next_power_of_2(width)), BM=PARAMS_c0000072["apply_bm"], BN=bn,
            STAGES=PARAMS_c0000072["apply_stages"], PREC=mode, num_warps=PARAMS_c0000072["apply_warps"])
        return
    update = torch.bmm(v_t, c)
    update = torch.bmm(t.transpose(1, 2), update)
    c.baddbmm_(v_t.transpose(1, 2), update, alpha=-1.0)


def _block_c0000072(ext, H: torch.Tensor, tau: torch.Tensor, vt: torch.Tensor, t: torch.Tensor, k: int, width: int,
           nb: int) -> None:
    """Factor columns k..k+width of H (rows k..n): on return vt[:, :width, :n-k] holds Vᵀ (rows
    relative to k) and t[:, :width, :width] the block's T.  Wider than a panel: the left part,
    its reflector applied to the right part, the right part, then T = [[T1, -T1 V1ᵀV2 T2], [0, T2]]."""
    n = H.shape[-1]
    m = n - k
    if width <= nb:
        rpl = _rows_per_lane_c0000072(m)
        ext.panel(H, tau, vt, t, k, width, rpl, *_shape_c0000072(nb, rpl))
        return
    w1 = nb * -(-width // (2 * nb))  # half, rounded up to whole panels
    _block_c0000072(ext, H, tau, vt, t, k, w1, nb)
    _apply_c0000072(H[:, k:, k + w1:k + width], vt[:, :w1, :m], t[:, :w1, :w1])
    vt[:, w1:width, :w1].zero_()  # V2 is zero above its first row
    _block_c0000072(ext, H, tau, vt[:, w1:, w1:], t[:, w1:, w1:], k + w1, width - w1, nb)
    cross = torch.bmm(vt[:, :w1, w1:m], vt[:, w1:width, w1:m].transpose(1, 2))
    t[:, :w1, w1:width] = -torch.bmm(torch.bmm(t[:, :w1, :w1], cross), t[:, w1:width, w1:width])
    t[:, w1:width, :w1].zero_()


def _factor_c0000072(H: torch.Tensor, tau: torch.Tensor) -> None:
    """Factor H (batch x n x n, contiguous) in place, tau written."""
    batch, n = H.shape[0], H.shape[-1]
    nb, block = _widths_c0000072(n)
    ext = _extension_c0000072(H.device)
    vt = torch.empty((batch, block, n), dtype=H.dtype, device=H.device)
    t = torch.empty((batch, block, block), dtype=H.dtype, device=H.device)
    for k in range(0, n, block):
        width = min(block, n - k)
        _block_c0000072(ext, H, tau, vt, t, k, width, nb)
        if k + width < n:
            _apply_c0000072(H[:, k:, k + width:], vt[:, :width, :n - k], t[:, :width, :width])


def _replay_c0000072(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The factorisation of A's shape as a captured CUDA graph (captured on the first call)."""
    key = (A.shape[0], A.shape[-1], A.device)
    entry = _GRAPHS_c0000072.get(key)
    if entry is None:
        a_in = torch.empty_like(A)
        h_out = torch.empty_like(A)
        tau_out = torch.empty((A.shape[0], A.shape[-1]), dtype=A.dtype, device=A.device)
        a_in.copy_(A)
        side = torch.cuda.Stream(A.device)
        side.wait_stream(torch.cuda.current_stream(A.device))
        with torch.cuda.stream(side):  # one eager run first: workspaces, kernel attributes
            h_out.copy_(a_in)
            _factor_c0000072(h_out, tau_out)
        torch.cuda.current_stream(A.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            h_out.copy_(a_in)
            _factor_c0000072(h_out, tau_out)
        entry = _GRAPHS_c0000072[key] = (graph, a_in, h_out, tau_out)
    graph, a_in, h_out, tau_out = entry
    a_in.copy_(A)
    graph.replay()
    return h_out.clone(), tau_out.clone()


def custom_kernel_c0000072(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    n = A.shape[-1]
    if not A.is_cuda or n > PARAMS_c0000072["max_n"] or A.shape[0] == 0:
        return torch.geqrf(A)
    if PARAMS_c0000072["graph"] or (n > 1024 and PARAMS_c0000072["graph_gt1024"]):
        return _replay_c0000072(A.contiguous())
    H = A.contiguous().clone()
    tau = torch.empty((A.shape[0], n), dtype=A.dtype, device=A.device)
    _factor_c0000072(H, tau)
    return H, tau


# ============================================================================
# dispatcher
# ============================================================================

ROUTES = {
    (20, 32): 'c0000018',  # cuda_onchip, 0.02434 ms
    (40, 176): 'c0000018',  # cuda_onchip, 0.2642 ms
    (40, 352): 'c0000006',  # lookahead_split, 0.6612 ms
    (640, 512): 'c0000072',  # cuda_blocked, 7.09 ms
    (60, 1024): 'c0000006',  # lookahead_split, 6.321 ms
    (8, 2048): 'c0000006',  # lookahead_split, 11.43 ms
    (2, 4096): 'c0000006',  # lookahead_split, 25.01 ms
}
FALLBACK = 'c0000001'  # torch_geqrf, best suite geomean
_KERNELS = {
    'c0000001': custom_kernel_c0000001,
    'c0000018': custom_kernel_c0000018,
    'c0000006': custom_kernel_c0000006,
    'c0000072': custom_kernel_c0000072,
}


def route(data):
    """The id of the candidate that handles an input of this shape."""
    if data.dim() != 3:
        return FALLBACK
    return ROUTES.get((int(data.shape[0]), int(data.shape[-1])), FALLBACK)


def custom_kernel(data):
    return _KERNELS[route(data)](data)
