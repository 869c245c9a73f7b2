"""cuda_onchip: CUDA C++ (built with torch.utils.cpp_extension.load_inline), one thread
block per matrix, the whole matrix held in registers, Householder column by column in
exact FP32, one __syncthreads per column.

Layout: row i lives on lane i % 32 (register slot i / 32) of every warp, and column j
belongs to warp j / CPW (a block of CPW columns per warp), so a column is spread over the
32 lanes of one warp, and a warp whose columns are all finished skips the rest.
That makes every reduction a column needs (its norm, and vᵀA_j for each column j the
reflector touches) a warp shuffle, never a block-wide reduction: the only block-wide
step per column is publishing the reflector v (n floats in shared memory, double
buffered) and tau.  Look-ahead by one column: the warp owning column c+1 applies
reflector c to it first and builds reflector c+1 while the other warps are still
applying reflector c to their columns.  Reflectors follow LAPACK slarfg (beta =
-sign(alpha)·‖x‖, tau = (beta - alpha)/beta, tau = 0 for a zero tail) with the norm
rescaled by max|x| when its square would under- or overflow.

The host side is one pybind call that allocates H and tau and launches one kernel:
host work per call is a few microseconds, which is what matters below n ≈ 64, where
a Triton launch's Python path costs more than the factorisation itself.

Meant for small n (20x32, 40x176), where launch overhead and the serial chain
of n reflectors dominate.  Registers bound the size: n ≤ 32·RPL with RPL ≤ 6
(192).  The knobs are the warps a block has for each size class of n
(PARAMS["warps_<32·RPL>"]).  Above PARAMS["max_n"], or without CUDA, the file
calls torch.geqrf.  Measured times: kernels/BENCHMARKS.md.  The build is cached by a hash of the source
and target in TORCH_EXTENSIONS_DIR (first call on a new source: about a minute of nvcc).
"""

import hashlib

import torch

# qrsearch: params
PARAMS = {
    'max_n': 192,
    'warps_32': 4,
    'warps_64': 4,
    'warps_96': 4,
    'warps_128': 8,
    'warps_160': 32,
    'warps_192': 16,
}
# qrsearch: end params

# What a tuner may give each PARAMS key (the values above are the defaults): warps per block for
# each size class of n (n ≤ 32, 64, ..., 192: 32·RPL rows, RPL register slots per lane), the warp
# counts whose register tile fits (warps × 32 threads × the tile's registers within one SM's 64K).
# qrsearch: space
SPACE = {
    "max_n": [32, 64, 128, 192],
    "warps_32": [1, 2, 4],
    "warps_64": [2, 4, 8],
    "warps_96": [4, 8, 16],
    "warps_128": [8, 16, 32],
    "warps_160": [16, 32],
    "warps_192": [16, 32],
}
# qrsearch: end space

# Device code (CUDA runtime only: it compiles without torch's headers).
_DEVICE_SOURCE = r"""

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

# The kernel's instantiations, (register slots per lane, warps): for each size class of n the warp
# counts its space offers.  The host code's dispatch over them is generated from this list.
_KERNELS = (
    (1, 1), (1, 2), (1, 4), (2, 2), (2, 4), (2, 8), (3, 4), (3, 8), (3, 16), (4, 8), (4, 16), (4, 32), (5, 16), (5, 32), (6, 16), (6, 32),
)


def _dispatch() -> str:
    """The cases of the host code's switch over _KERNELS, keyed as qr() keys them."""
    return "".join("        case %d: launch<%d, %d>(A, H, tau, nn, stream); break;\n" % (rpl * 100 + warps, rpl, warps)
                   for rpl, warps in _KERNELS)


# The host side: the launchers and the function Python calls.
_HOST_SOURCE = r"""
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
        // cases: _KERNELS
        default: TORCH_CHECK(false, "qr: no kernel for n = ", n, " with ", warps, " warps");
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return {H, tau};
}
""".replace("        // cases: _KERNELS\n", _dispatch())

_CUDA_SOURCE = r"""
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <tuple>

namespace {
""" + _DEVICE_SOURCE + "\n" + _HOST_SOURCE

_CPP_SOURCE = "std::tuple<at::Tensor, at::Tensor> qr(at::Tensor A, int64_t warps);"

# Warps per size class: the kernel is compiled for n ≤ 32, 64, ..., 192 (register slots per lane).
_WARPS = {rpl: PARAMS["warps_%d" % (32 * rpl)] for rpl in range(1, 7)}
_EXTENSIONS = {}


def _extension(device: torch.device):
    """The built extension for this device's architecture (built once, cached on disk by hash)."""
    major, minor = torch.cuda.get_device_capability(device)
    arch = "%d%d" % (major, minor)
    if arch not in _EXTENSIONS:
        from torch.utils.cpp_extension import load_inline

        digest = hashlib.sha256((_CUDA_SOURCE + _CPP_SOURCE + arch).encode()).hexdigest()[:16]
        _EXTENSIONS[arch] = load_inline(
            name="qr_onchip_" + digest, cpp_sources=_CPP_SOURCE, cuda_sources=_CUDA_SOURCE, functions=["qr"],
            extra_cflags=["-O3"], extra_cuda_cflags=["-O3", "-gencode=arch=compute_%s,code=sm_%s" % (arch, arch)],
        )
    return _EXTENSIONS[arch]


def custom_kernel(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    n = A.shape[-1]
    if not A.is_cuda or n > PARAMS["max_n"]:
        return torch.geqrf(A)
    return _extension(A.device).qr(A, _WARPS[(n + 31) // 32])
