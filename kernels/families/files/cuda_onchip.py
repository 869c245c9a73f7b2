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

This kernel's H leaves row by row through shared memory (PARAMS["staged_stores"]): written
from the registers, a warp's store puts one float in each of 32 rows, and those stores were
13% of 40x176's time.

The host side is one pybind call that allocates H and tau and launches one kernel:
host work per call is a few microseconds, which is what matters below n ≈ 64, where
a Triton launch's Python path costs more than the factorisation itself.

A second layout, the group kernel, puts a column on G lanes of one warp (thread g holds rows
g + G·s) and CPT columns on a thread, cyclic, so a dot product is the thread's own FMAs and
log2(G) shuffles, and v reaches every thread as float4 loads from shared memory; its panel form
factors K consecutive columns inside one group and publishes them with their T, one barrier per
K columns.  At 20x32 (panels of 4 on groups of 8) it is 10% faster than the lane-per-row kernel;
at 40x176 both forms are slower (kernels/BENCHMARKS.md#onchip-groups).

A third layout, the tiled kernel, is blocked: warp 0 factors NB columns at a time from its
registers (a column's dot products with the rest of the panel in one butterfly, which also gives
the panel's T), then every warp updates the trailing matrix with the panel's block reflector as small
matrix products out of shared memory, looking one panel ahead (warp 0 factors the next panel while
the others update the rest).  Up to n = 192 the matrix lives in shared memory; from 193
to 384 in H itself (L2 holds a batch of 40 of them), which is the only kernel of this file there.

Meant for small n (20x32, 40x176, 40x352), where launch overhead and the serial chain
of n reflectors dominate.  Registers bound the first two layouts: n ≤ 192.  The knobs are the warps a
block has for each size class of the lane-per-row kernel (PARAMS["warps_<32·RPL>"]), the
group kernel's layout for each of its classes (PARAMS["groups_<NP>"]: "GxCPT", "GkKxCPB" with
K-column panels, or "off" for the lane-per-row kernel) and the tiled kernel's (PARAMS["tiled_<NP>"]:
"NBxW", or "off"); a call reads PARAMS through _KEYS, a cache
of the kernel per n that whoever changes PARAMS in place clears.  Above PARAMS["max_n"], or without
CUDA, the file calls torch.geqrf.  Measured times: kernels/BENCHMARKS.md.  The build is cached
by a hash of the source and target in TORCH_EXTENSIONS_DIR (first call on a new source: about a
minute of nvcc).
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
    'groups_32': '8k4x1',
    'groups_64': 'off',
    'groups_96': 'off',
    'groups_128': 'off',
    'groups_160': 'off',
    'groups_176': 'off',
    'groups_192': 'off',
    'staged_stores': True,
    'tiled_128': 'off',
    'tiled_192': 'off',
    'tiled_384': 'off',
}
# qrsearch: end params

# What a tuner may give each PARAMS key (the values above are the defaults): warps per block for
# each size class of n (n ≤ 32, 64, ..., 192: 32·RPL rows, RPL register slots per lane), the warp
# counts whose register tile fits (warps × 32 threads × the tile's registers within one SM's 64K);
# for the group kernel's classes (n ≤ NP) "off" or a layout "GxCPT" / "GkKxCPB" whose tile is a thread's
# registers within one SM (ptxas on sm_90: the panel forms at 160-192 spill 156-1572 bytes and
# 176's 8x4 52; kept in the space as they measured, kernels/BENCHMARKS.md#onchip-groups); whether the
# lane-per-row kernel writes H row by row through shared memory (staged_stores) or from its registers;
# for the tiled kernel's classes "off" or "NBxW" (panels of NB columns, W warps), the shapes
# _TILED_KERNELS instantiates.
# qrsearch: space
SPACE = {
    "max_n": [32, 64, 128, 192, 384],
    "warps_32": [1, 2, 4],
    "warps_64": [2, 4, 8],
    "warps_96": [4, 8, 16],
    "warps_128": [8, 16, 32],
    "warps_160": [16, 32],
    "warps_192": [16, 32],
    "groups_32": ["off", "1x1", "2x1", "4x1", "4k2x1", "4k4x1", "8k4x1"],
    "groups_64": ["off", "2x1", "4x1", "4x2", "4k4x1"],
    "groups_96": ["off", "4x2", "8x2", "4x3", "8k4x1"],
    "groups_128": ["off", "4x2", "8x2", "8x4", "8k4x1"],
    "groups_160": ["off", "8x4", "16x4", "16x8", "8k4x1"],
    "groups_176": ["off", "8x4", "16x8", "16x11", "8k2x2", "8k4x1", "16k4x2"],
    "groups_192": ["off", "8x6", "16x8", "16x12", "8k4x1"],
    "staged_stores": [False, True],
    "tiled_128": ["off", "8x8"],
    "tiled_192": ["off", "8x8"],
    "tiled_384": ["off", "8x8"],
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
qr_onchip_kernel(const float* __restrict__ A, float* __restrict__ H, float* __restrict__ TAU, int n, int staged) {
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
    if (staged) {
        // H row by row through shared memory (n x (n + 1) floats of dynamic shared memory): a warp's
        // direct stores write one float to each of 32 rows an instruction, 13% of 40x176's samples
        // in Nsight (-13% at 40x176 staged); the odd stride puts a warp's 32 rows in 32 banks.
#ifdef QR_HOST_EMULATION
        float* stage = reinterpret_cast<float*>(dynamic_shared());  // (tests/kernels/host_emulation.h)
#else
        extern __shared__ float stage[];
#endif
        const int ld = n + 1;
#pragma unroll
        for (int t = 0; t < CPW; ++t) {
            const int j = first + t;
#pragma unroll
            for (int s = 0; s < RPL; ++s) {
                const int i = lane + 32 * s;
                if (i < n && j < n) stage[i * ld + j] = reg[t][s];
            }
        }
        __syncthreads();
        for (int i = w; i < n; i += W)
            for (int j = lane; j < n; j += 32) h[(size_t)i * n + j] = stage[i * ld + j];
    } else {
#pragma unroll
        for (int t = 0; t < CPW; ++t) {
            const int j = first + t;
#pragma unroll
            for (int s = 0; s < RPL; ++s) {
                const int i = lane + 32 * s;
                if (i < n && j < n) h[(size_t)i * n + j] = reg[t][s];
            }
        }
    }
    for (int i = threadIdx.x; i < n; i += W * 32) TAU[(size_t)blockIdx.x * n + i] = tau_all[i];
}

// ---- The group layout: G threads a column, a thread CPT columns ----
//
// Above n ≈ 64 the lane-per-row layout spends a step on shuffles: every open column's dot product is a
// five-level butterfly, and a warp's shuffles share one pipe.  Here a column lives on a group of G
// lanes of one warp, thread g holding its rows g + G·s (RPT = NP / G of them), so a dot product is RPT
// FMAs in one thread and log2(G) shuffles; v reaches every thread as float4 loads from shared memory.
// A thread holds CPT columns q + NQ·t, cyclic, so the columns still open spread over every warp to
// the end.  Look-ahead by one column as above: the group owning column c+1 applies reflector c to it
// first and publishes reflector c+1 before its other columns.

template <int G>
__device__ __forceinline__ float group_sum(float x) {
#pragma unroll
    for (int o = 32 / G; o < 32; o <<= 1) x += __shfl_xor_sync(FULL, x, o);
    return x;
}

template <int G>
__device__ __forceinline__ float group_max(float x) {
#pragma unroll
    for (int o = 32 / G; o < 32; o <<= 1) x = fmaxf(x, __shfl_xor_sync(FULL, x, o));
    return x;
}

// A thread's slice of v in shared memory: whole float4s, an odd number of them, so the G slices a
// warp loads at once start in different banks.
__host__ __device__ constexpr int slice_stride(int rpt) { return ((rpt + 3) / 4) % 2 == 1 ? (rpt + 3) / 4 * 4 : (rpt + 3) / 4 * 4 + 4; }

// The reflector of column r, held by a group (thread g: rows g + G·s).  Every lane of the warp runs it
// (the shuffles need the whole warp); only the owner group (own) keeps what it computes: H's column
// (beta at row r, v below it) in col, v (1 at row r, zeros above) in its slice of vnext, and tau (in
// tnext where given, in tau_all, and returned: the same in every lane of the group).
template <int RPT, int G, int VS>
__device__ __forceinline__ float reflect_group(float (&col)[RPT], int r, int n, int g, bool own, float* vnext,
                                               float* tnext, float* tau_all) {
    float tail2 = 0.f, mine = 0.f;
#pragma unroll
    for (int s = 0; s < RPT; ++s) {
        const int i = g + G * s;
        if (i > r && i < n) tail2 = fmaf(col[s], col[s], tail2);
        mine = fmaf(col[s], i == r ? 1.f : 0.f, mine);  // arithmetic: a select became an indexed load
    }
    tail2 = group_sum<G>(tail2);
    const float alpha = group_sum<G>(mine);
    float nrm = sqrtf(alpha * alpha + tail2);
    bool has = tail2 > 0.f;
    const bool rare = tail2 < 1e-30f || tail2 > 1e30f || fabsf(alpha) > 1e15f;
    if (__any_sync(FULL, own && rare)) {  // the whole warp takes the rescaled norm's shuffles
        float amax = 0.f;
#pragma unroll
        for (int s = 0; s < RPT; ++s) {
            const int i = g + G * s;
            if (i > r && i < n) amax = fmaxf(amax, fabsf(col[s]));
        }
        amax = group_max<G>(amax);
        const float scale = amax > 0.f ? 1.f / amax : 0.f;
        float t2 = 0.f;
#pragma unroll
        for (int s = 0; s < RPT; ++s) {
            const int i = g + G * s;
            if (i > r && i < n) {
                const float y = col[s] * scale;
                t2 = fmaf(y, y, t2);
            }
        }
        t2 = group_sum<G>(t2);
        if (rare) {
            has = amax > 0.f;
            const float as = alpha * scale;
            nrm = has ? amax * sqrtf(as * as + t2) : fabsf(alpha);
        }
    }
    const float beta = alpha >= 0.f ? -nrm : nrm;
    const float tau = has ? (beta - alpha) / beta : 0.f;
    const float inv = has ? 1.f / (alpha - beta) : 0.f;
    float v[VS];
#pragma unroll
    for (int s = 0; s < VS; ++s) {
        v[s] = 0.f;
        if (s < RPT) {
            const int i = g + G * s;
            const bool below = i > r && i < n;
            v[s] = i == r ? 1.f : (below ? col[s] * inv : 0.f);
            if (own) col[s] = i == r ? (has ? beta : alpha) : (below && has ? v[s] : col[s]);
        }
    }
    if (own) {
        float4* slice = reinterpret_cast<float4*>(vnext + g * VS);
#pragma unroll
        for (int k = 0; k < VS / 4; ++k) slice[k] = make_float4(v[4 * k], v[4 * k + 1], v[4 * k + 2], v[4 * k + 3]);
        if (g == 0) {
            if (tnext) *tnext = tau;
            tau_all[r] = tau;
        }
    }
    return tau;
}

// One block per matrix of n ≤ NP: NQ = NP / CPT groups of G threads.
template <int NP, int G, int CPT>
__global__ void __launch_bounds__(G * ((NP + CPT - 1) / CPT), 1)
qr_groups_kernel(const float* __restrict__ A, float* __restrict__ H, float* __restrict__ TAU, int n) {
    constexpr int RPT = NP / G;
    constexpr int P = 32 / G;  // groups a warp
    constexpr int NQ = (NP + CPT - 1) / CPT;
    constexpr int VS = slice_stride(RPT);
    static_assert(NP % G == 0 && 32 % G == 0 && NQ % P == 0, "a group's rows and a warp's groups must be whole");
    alignas(16) __shared__ float vbuf[2][G * VS];
    __shared__ float tbuf[2];
    __shared__ float tau_all[NP];
    const int lane = threadIdx.x & 31;
    const int w = threadIdx.x >> 5;
    const int g = lane / P;  // the group's lanes differ in their high bits: the reductions' xors
    const int p = lane % P;
    const int q = w * P + p;
    const size_t base = (size_t)blockIdx.x * n * n;
    const float* a = A + base;
    float reg[CPT][RPT];
#pragma unroll
    for (int t = 0; t < CPT; ++t) {
        const int j = q + NQ * t;
#pragma unroll
        for (int s = 0; s < RPT; ++s) {
            const int i = g + G * s;
            reg[t][s] = (i < n && j < n) ? a[(size_t)i * n + j] : 0.f;
        }
    }
    if (w == 0) reflect_group<RPT, G, VS>(reg[0], 0, n, g, p == 0, vbuf[0], &tbuf[0], tau_all);
    __syncthreads();
    for (int c = 0; c + 1 < n; ++c) {
        const int cur = c & 1;
        const int next = c + 1;
        bool open[CPT];  // warp-uniform: the warp's last column in slot t is past c
        bool any = false;
#pragma unroll
        for (int t = 0; t < CPT; ++t) {
            open[t] = w * P + P - 1 + NQ * t > c;
            any = any || open[t];
        }
        if (any) {
            float v[RPT];
            const float4* slice = reinterpret_cast<const float4*>(vbuf[cur] + g * VS);
#pragma unroll
            for (int k = 0; k < VS / 4; ++k) {
                if (4 * k < RPT) {
                    const float4 x = slice[k];
                    v[4 * k] = x.x;
                    if (4 * k + 1 < RPT) v[4 * k + 1] = x.y;
                    if (4 * k + 2 < RPT) v[4 * k + 2] = x.z;
                    if (4 * k + 3 < RPT) v[4 * k + 3] = x.w;
                }
            }
            const float tau = tbuf[cur];
            float d[CPT];
#pragma unroll
            for (int t = 0; t < CPT; ++t) {
                float even = 0.f, odd = 0.f;
                if (open[t]) {
#pragma unroll
                    for (int s = 0; s < RPT; s += 2) {
                        even = fmaf(v[s], reg[t][s], even);
                        if (s + 1 < RPT) odd = fmaf(v[s + 1], reg[t][s + 1], odd);
                    }
                }
                d[t] = even + odd;
            }
#pragma unroll
            for (int o = P; o < 32; o <<= 1)
#pragma unroll
                for (int t = 0; t < CPT; ++t)
                    if (open[t]) d[t] += __shfl_xor_sync(FULL, d[t], o);
            const int q_next = next % NQ;
            const int t_next = next / NQ;
            const bool owner_warp = q_next / P == w;
            if (owner_warp) {  // the critical path first: column c+1 gets reflector c, then becomes reflector c+1
#pragma unroll
                for (int t = 0; t < CPT; ++t) {
                    if (t == t_next) {
                        const float f = q + NQ * t > c ? tau * d[t] : 0.f;
#pragma unroll
                        for (int s = 0; s < RPT; ++s) reg[t][s] = fmaf(-f, v[s], reg[t][s]);
                        reflect_group<RPT, G, VS>(reg[t], next, n, g, p == q_next % P, vbuf[cur ^ 1], &tbuf[cur ^ 1],
                                                  tau_all);
                    }
                }
            }
#pragma unroll
            for (int t = 0; t < CPT; ++t) {
                if (open[t] && !(owner_warp && t == t_next)) {
                    const float f = q + NQ * t > c ? tau * d[t] : 0.f;  // finished columns: f = 0
#pragma unroll
                    for (int s = 0; s < RPT; ++s) reg[t][s] = fmaf(-f, v[s], reg[t][s]);
                }
            }
        }
        __syncthreads();
    }
    float* h = H + base;
#pragma unroll
    for (int t = 0; t < CPT; ++t) {
        const int j = q + NQ * t;
#pragma unroll
        for (int s = 0; s < RPT; ++s) {
            const int i = g + G * s;
            if (i < n && j < n) h[(size_t)i * n + j] = reg[t][s];
        }
    }
    for (int i = threadIdx.x; i < n; i += blockDim.x) TAU[(size_t)blockIdx.x * n + i] = tau_all[i];
}

// ---- The group layout with K-column panels: one barrier per K columns ----
//
// With a barrier a column, every step waits for the owner's whole chain (its dot products, the
// reflector's norm, square root and divisions) while the other warps' updates take its issue slots
// (Nsight: barrier stalls are half of every warp's cycles).  Here the columns come in panels of K
// consecutive ones, panel b on group b % NQ (a thread holds CPB panels): the owner factors its panel
// inside the group (K reflectors, no barrier), publishes V (K slices) and the panel's T (K x K, upper
// triangular: its reflectors are I - V T Vᵀ), and every other column then takes the panel at once,
// x -= V (Tᵀ (Vᵀ x)), its K dot products reduced in one round of shuffles.

// A compiler barrier: loads of V after it are loads again, so a slice is read back from shared
// memory where it is needed rather than kept in registers beside the tile.  (With these fences and
// the read-back the panel forms at 160-192 still spill; they were not measured without them.)
__device__ __forceinline__ void reload_fence() { asm volatile("" ::: "memory"); }

// A thread's slice of v (rows g + G·s) from shared memory into registers.
template <int RPT>
__device__ __forceinline__ void load_slice(const float* slice_start, float (&v)[RPT]) {
    const float4* slice = reinterpret_cast<const float4*>(slice_start);
#pragma unroll
    for (int k = 0; 4 * k < RPT; ++k) {
        const float4 x = slice[k];
        v[4 * k] = x.x;
        if (4 * k + 1 < RPT) v[4 * k + 1] = x.y;
        if (4 * k + 2 < RPT) v[4 * k + 2] = x.z;
        if (4 * k + 3 < RPT) v[4 * k + 3] = x.w;
    }
}

// The owner group's panel (columns c0 .. c0+K-1, every earlier panel applied): K reflectors inside the
// group, then V (K slices of vout) and T (tout, K x K row-major) published by the owner's lanes.
// Every lane of the warp runs it; the other groups' columns are left as they were.  Each reflector's
// v is read back from the slice its group has just written (a thread reads the rows it wrote, so no
// barrier): in registers, K of them beside the tile spilled.
template <int RPT, int G, int VS, int K>
__device__ __forceinline__ void factor_panel(float (&pan)[K][RPT], int c0, int n, int g, bool own, float* vout,
                                             float* tout, float* tau_all) {
    float tau[K];
    float vv[K][K];  // v_aᵀ v_o, a < o
#pragma unroll
    for (int o = 0; o < K; ++o) {
        tau[o] = reflect_group<RPT, G, VS>(pan[o], c0 + o, n, g, own, vout + o * G * VS, nullptr, tau_all);
        reload_fence();
        float vo[RPT];
        load_slice<RPT>(vout + o * G * VS + g * VS, vo);
        float d[K];
#pragma unroll
        for (int u = 0; u < K; ++u) {
            d[u] = 0.f;
            if (u != o) {
                float x = 0.f;
                if (u > o) {
#pragma unroll
                    for (int s = 0; s < RPT; ++s) x = fmaf(vo[s], pan[u][s], x);
                } else {
                    reload_fence();
                    float va[RPT];
                    load_slice<RPT>(vout + u * G * VS + g * VS, va);
#pragma unroll
                    for (int s = 0; s < RPT; ++s) x = fmaf(vo[s], va[s], x);
                }
                d[u] = x;
            }
        }
#pragma unroll
        for (int m = 32 / G; m < 32; m <<= 1)
#pragma unroll
            for (int u = 0; u < K; ++u)
                if (u != o) d[u] += __shfl_xor_sync(FULL, d[u], m);
#pragma unroll
        for (int u = 0; u < K; ++u) {
            if (u < o) vv[u][o] = d[u];
            if (u > o) {
                const float f = own ? tau[o] * d[u] : 0.f;
#pragma unroll
                for (int s = 0; s < RPT; ++s) pan[u][s] = fmaf(-f, vo[s], pan[u][s]);
            }
        }
    }
    // T (LAPACK's forward, columnwise larft): T[o][o] = tau_o, T[:o, o] = -tau_o T[:o, :o] (V[:, :o]ᵀ v_o).
    float t[K][K];
#pragma unroll
    for (int o = 0; o < K; ++o) {
#pragma unroll
        for (int a = 0; a < K; ++a) t[a][o] = 0.f;
        t[o][o] = tau[o];
#pragma unroll
        for (int a = 0; a < o; ++a) {
            float z = 0.f;
#pragma unroll
            for (int b = a; b < o; ++b) z = fmaf(t[a][b], vv[b][o], z);
            t[a][o] = -tau[o] * z;
        }
    }
    if (own && g == 0)
#pragma unroll
        for (int a = 0; a < K; ++a)
#pragma unroll
            for (int o = 0; o < K; ++o) tout[a * K + o] = t[a][o];
}

// One block per matrix of n ≤ NP: NQ groups of G threads, panel b (columns bK .. bK+K-1) on group
// b % NQ, slot b / NQ.
template <int NP, int G, int K, int CPB>
__global__ void __launch_bounds__(G * ((NP / K + CPB - 1) / CPB), 1)
qr_panels_kernel(const float* __restrict__ A, float* __restrict__ H, float* __restrict__ TAU, int n) {
    constexpr int RPT = NP / G;
    constexpr int P = 32 / G;
    constexpr int NQ = (NP / K + CPB - 1) / CPB;
    constexpr int VS = slice_stride(RPT);
    static_assert(NP % G == 0 && NP % K == 0 && 32 % G == 0 && NQ % P == 0, "whole rows, panels and warps");
    alignas(16) __shared__ float vbuf[2][K * G * VS];
    __shared__ float tbuf[2][K * K];
    __shared__ float tau_all[NP];
    const int lane = threadIdx.x & 31;
    const int w = threadIdx.x >> 5;
    const int g = lane / P;
    const int p = lane % P;
    const int q = w * P + p;
    const size_t base = (size_t)blockIdx.x * n * n;
    const float* a = A + base;
    float reg[CPB][K][RPT];
#pragma unroll
    for (int tb = 0; tb < CPB; ++tb)
#pragma unroll
        for (int u = 0; u < K; ++u) {
            const int j = (q + NQ * tb) * K + u;
#pragma unroll
            for (int s = 0; s < RPT; ++s) {
                const int i = g + G * s;
                reg[tb][u][s] = (i < n && j < n) ? a[(size_t)i * n + j] : 0.f;
            }
        }
    if (w == 0) factor_panel<RPT, G, VS, K>(reg[0], 0, n, g, p == 0, vbuf[0], tbuf[0], tau_all);
    __syncthreads();
    const int panels = (n + K - 1) / K;
    for (int b = 0; b + 1 < panels; ++b) {
        const int cur = b & 1;
        const int done = (b + 1) * K;  // columns before this one are finished once panel b is applied
        bool open[CPB];                // warp-uniform: the warp's last column in slot tb is not finished
        bool any = false;
#pragma unroll
        for (int tb = 0; tb < CPB; ++tb) {
            open[tb] = (w * P + P - 1 + NQ * tb) * K + K - 1 >= done;
            any = any || open[tb];
        }
        if (any) {
            const float* vcur = vbuf[cur] + g * VS;
            float e[CPB][K][K];  // Vᵀx per column, then Tᵀ(Vᵀx)
#pragma unroll
            for (int tb = 0; tb < CPB; ++tb)
#pragma unroll
                for (int u = 0; u < K; ++u)
#pragma unroll
                    for (int o = 0; o < K; ++o) e[tb][u][o] = 0.f;
            // Vᵀx chunk by chunk of four rows: K float4s of V live at a time, whatever K is
#pragma unroll
            for (int k = 0; 4 * k < RPT; ++k) {
                float4 vk[K];
#pragma unroll
                for (int o = 0; o < K; ++o) vk[o] = reinterpret_cast<const float4*>(vcur + o * G * VS)[k];
#pragma unroll
                for (int tb = 0; tb < CPB; ++tb)
                    if (open[tb])
#pragma unroll
                        for (int u = 0; u < K; ++u)
#pragma unroll
                            for (int o = 0; o < K; ++o) {
                                float x = e[tb][u][o];
                                x = fmaf(vk[o].x, reg[tb][u][4 * k], x);
                                if (4 * k + 1 < RPT) x = fmaf(vk[o].y, reg[tb][u][4 * k + 1], x);
                                if (4 * k + 2 < RPT) x = fmaf(vk[o].z, reg[tb][u][4 * k + 2], x);
                                if (4 * k + 3 < RPT) x = fmaf(vk[o].w, reg[tb][u][4 * k + 3], x);
                                e[tb][u][o] = x;
                            }
            }
#pragma unroll
            for (int m = P; m < 32; m <<= 1)
#pragma unroll
                for (int tb = 0; tb < CPB; ++tb)
                    if (open[tb])
#pragma unroll
                        for (int u = 0; u < K; ++u)
#pragma unroll
                            for (int o = 0; o < K; ++o) e[tb][u][o] += __shfl_xor_sync(FULL, e[tb][u][o], m);
            float t[K][K];
#pragma unroll
            for (int x = 0; x < K; ++x)
#pragma unroll
                for (int o = 0; o < K; ++o) t[x][o] = tbuf[cur][x * K + o];
#pragma unroll
            for (int tb = 0; tb < CPB; ++tb)
#pragma unroll
                for (int u = 0; u < K; ++u) {
                    const bool live = (q + NQ * tb) * K + u >= done;  // finished columns take nothing
#pragma unroll
                    for (int o = K - 1; o >= 0; --o) {  // e = Tᵀ d in place, T upper triangular
                        float x = 0.f;
#pragma unroll
                        for (int y = 0; y <= o; ++y) x = fmaf(t[y][o], e[tb][u][y], x);
                        e[tb][u][o] = live ? x : 0.f;
                    }
                }
            reload_fence();
            const int nb = b + 1;
            const int q_next = nb % NQ;
            const int tb_next = nb / NQ;
            const bool owner_warp = q_next / P == w;
            // The owner's panel first (the next barrier waits for it), then every other open column.
#pragma unroll
            for (int pass = 0; pass < 2; ++pass)
#pragma unroll
                for (int tb = 0; tb < CPB; ++tb) {
                    const bool first = owner_warp && tb == tb_next;
                    if (pass == 0 ? first : (open[tb] && !first)) {
#pragma unroll
                        for (int k = 0; 4 * k < RPT; ++k) {
                            float4 vk[K];
#pragma unroll
                            for (int o = 0; o < K; ++o) vk[o] = reinterpret_cast<const float4*>(vcur + o * G * VS)[k];
#pragma unroll
                            for (int u = 0; u < K; ++u)
#pragma unroll
                                for (int o = 0; o < K; ++o) {
                                    const float f = -e[tb][u][o];
                                    reg[tb][u][4 * k] = fmaf(f, vk[o].x, reg[tb][u][4 * k]);
                                    if (4 * k + 1 < RPT) reg[tb][u][4 * k + 1] = fmaf(f, vk[o].y, reg[tb][u][4 * k + 1]);
                                    if (4 * k + 2 < RPT) reg[tb][u][4 * k + 2] = fmaf(f, vk[o].z, reg[tb][u][4 * k + 2]);
                                    if (4 * k + 3 < RPT) reg[tb][u][4 * k + 3] = fmaf(f, vk[o].w, reg[tb][u][4 * k + 3]);
                                }
                        }
                        if (pass == 0)
                            factor_panel<RPT, G, VS, K>(reg[tb], nb * K, n, g, p == q_next % P, vbuf[cur ^ 1],
                                                        tbuf[cur ^ 1], tau_all);
                    }
                }
        }
        __syncthreads();
    }
    // n made opaque: the compiler kept the loads' offsets and bounds in registers for these stores
    // (one 64-bit offset an entry of the tile, live through the whole factorisation) and spilled.
    int m = n;
    asm volatile("" : "+r"(m));
    float* h = H + base;
#pragma unroll
    for (int tb = 0; tb < CPB; ++tb)
#pragma unroll
        for (int u = 0; u < K; ++u) {
            const int j = (q + NQ * tb) * K + u;
#pragma unroll
            for (int s = 0; s < RPT; ++s) {
                const int i = g + G * s;
                if (i < m && j < m) h[(size_t)i * m + j] = reg[tb][u][s];
            }
        }
    for (int i = threadIdx.x; i < n; i += blockDim.x) TAU[(size_t)blockIdx.x * n + i] = tau_all[i];
}

// ---- The tiled layout: panels of NB columns on one warp, the rest as small matrix products ----
//
// The layouts above walk n reflectors each a step of the whole block (a barrier, and every open
// column's dot product); at 40x176 half the warps wait at each barrier.  Here warp 0 factors NB
// columns at a time from its registers (lane l: the panel's rows l + 32 s), a column's dot products
// with the rest of the panel in one butterfly, and builds the panel's T (its reflectors' product is
// I - V T Vᵀ) from the same butterflies (v_c·v_j for the columns before j); then every warp updates
// the trailing matrix, C <- (I - V T Vᵀ)ᵀ C, as small matrix products (a thread a column, or a
// column's rows in chunks) out of shared memory, or out of H where the matrix does not fit there.
// Looking one panel ahead, the next panel's columns are updated first, and warp 0 factors them while
// the other warps update the rest.

#ifdef QR_HOST_EMULATION
__device__ __forceinline__ void range_barrier(int id, int threads) { named_barrier(id, threads); }
#else
__device__ __forceinline__ void range_barrier(int id, int threads) {
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
#endif

__host__ __device__ constexpr int round4(int x) { return (x + 3) / 4 * 4; }

// Classes above this n keep the matrix in H (global memory: L2 holds a batch of them) instead of
// shared memory, which 193 x 193 floats would outgrow.
constexpr int TILED_SMEM_MAX = 192;

// Dynamic shared memory of the tiled kernel, in floats: the matrix where it fits (n rows, ld = n | 1
// apart: an odd stride puts a lane-per-row access in 32 banks), V (rows nb + 4 apart: eight lanes'
// float4 stores in different banks) and T twice (the look-ahead's panel is built beside the update
// that reads the last one), the chunks' partial products, tau.
__host__ __device__ constexpr int tiled_floats(int n, int np, int nb, int threads) {
    return (np > TILED_SMEM_MAX ? 0 : round4(n * (n | 1))) + 2 * np * (nb + 4) + 2 * nb * nb + threads * nb + np;
}

// The reflector of panel column j (this lane's rows lane + 32 s of the panel, m rows): col becomes H's
// column (beta at row j, v below it), v the reflector (zero above row j, 1 at row j); returns tau.
// The same slarfg as reflect(), on rows counted from the panel's top.
template <int RPL>
__device__ __forceinline__ float panel_reflect(float (&col)[RPL], int j, int m, int lane, float (&v)[RPL]) {
    float tail2 = 0.f;
#pragma unroll
    for (int s = 0; s < RPL; ++s) {
        const int i = lane + 32 * s;
        if (i > j && i < m) tail2 = fmaf(col[s], col[s], tail2);
    }
    tail2 = warp_sum(tail2);
    const float alpha = __shfl_sync(FULL, col[0], j);  // j < 32: slot 0 of lane j
    float nrm = sqrtf(alpha * alpha + tail2);
    bool has = tail2 > 0.f;
    if (tail2 < 1e-30f || tail2 > 1e30f || fabsf(alpha) > 1e15f) {  // rare, and warp-uniform
        float amax = 0.f;
#pragma unroll
        for (int s = 0; s < RPL; ++s) {
            const int i = lane + 32 * s;
            if (i > j && i < m) amax = fmaxf(amax, fabsf(col[s]));
        }
        amax = warp_max(amax);
        has = amax > 0.f;
        if (has) {
            const float scale = 1.f / amax;
            float t2 = 0.f;
#pragma unroll
            for (int s = 0; s < RPL; ++s) {
                const int i = lane + 32 * s;
                if (i > j && i < m) {
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
        v[s] = 0.f;
        if (i == j) {
            v[s] = 1.f;
            col[s] = has ? beta : alpha;
        } else if (i > j && i < m) {
            v[s] = col[s] * inv;
            col[s] = has ? v[s] : col[s];
        }
    }
    return tau;
}

// Warp 0: factor the panel of columns k .. k + NB - 1 (rows k .. n - 1) of S in place (R above the
// diagonal, v below it), write V (panel rows, NB + 4 apart, zero above each reflector's row, 1 on it), T
// (NB x NB, upper) and tau.  A panel past column n - 1 has zero columns: no reflector (V and T zero).
template <int RPL, int NB>
__device__ __forceinline__ void tiled_panel(float* S, int ld, int k, int n, float* V, float* T, float* tau_all,
                                            int lane) {
    const int m = n - k;
    const int w = min(NB, m);
    float reg[NB][RPL];
#pragma unroll
    for (int c = 0; c < NB; ++c)
#pragma unroll
        for (int s = 0; s < RPL; ++s) {
            const int i = lane + 32 * s;
            reg[c][s] = (i < m && c < w) ? S[(k + i) * ld + k + c] : 0.f;
        }
    float trow[NB];  // lane t < NB: row t of T
#pragma unroll
    for (int c = 0; c < NB; ++c) trow[c] = 0.f;
#pragma unroll
    for (int j = 0; j < NB; ++j) {
        if (j < w) {  // warp-uniform
            float v[RPL];
            const float tau = panel_reflect<RPL>(reg[j], j, m, lane, v);
            // every other panel column's dot product with v in one butterfly: before j it is v_c·v_j
            // (T's column j), after j the column's update
            float d[NB];
#pragma unroll
            for (int c = 0; c < NB; ++c) {
                float x = 0.f;
                if (c != j)
#pragma unroll
                    for (int s = 0; s < RPL; ++s) x = fmaf(v[s], reg[c][s], x);
                d[c] = x;
            }
#pragma unroll
            for (int o = 16; o > 0; o >>= 1)
#pragma unroll
                for (int c = 0; c < NB; ++c)
                    if (c != j) d[c] += __shfl_xor_sync(FULL, d[c], o);
#pragma unroll
            for (int c = j + 1; c < NB; ++c) {
                const float f = tau * d[c];
#pragma unroll
                for (int s = 0; s < RPL; ++s) reg[c][s] = fmaf(-f, v[s], reg[c][s]);
            }
            // T[t][j] = -tau Σ_{a=t}^{j-1} T[t][a] (v_a·v_j): row t from its own entries
            float x = 0.f;
#pragma unroll
            for (int a = 0; a < j; ++a) x = fmaf(trow[a], d[a], x);
            trow[j] = lane < j ? -tau * x : (lane == j ? tau : 0.f);
            if (lane == 0) tau_all[k + j] = tau;
        }
    }
    // H's columns back, and V as H holds it below the diagonal (a reflector with tau 0 has a zero
    // column there too), 1 on it, zero above and past the panel's columns
#pragma unroll
    for (int s = 0; s < RPL; ++s) {
        const int i = lane + 32 * s;
#pragma unroll
        for (int c = 0; c < NB; ++c)
            if (i < m && c < w) S[(k + i) * ld + k + c] = reg[c][s];
#pragma unroll
        for (int q = 0; q < NB / 4; ++q) {
            float e[4];
#pragma unroll
            for (int x = 0; x < 4; ++x) {
                const int c = 4 * q + x;
                e[x] = (c >= w || i >= m) ? 0.f : (i > c ? reg[c][s] : (i == c ? 1.f : 0.f));
            }
            reinterpret_cast<float4*>(V + i * (NB + 4))[q] = make_float4(e[0], e[1], e[2], e[3]);
        }
    }
    if (lane < NB)
#pragma unroll
        for (int c = 0; c < NB; ++c) T[lane * NB + c] = trow[c];
}

// The update's rows go in batches of ROWS, loaded before any is used: from global memory (the classes
// above TILED_SMEM_MAX) one load in flight a warp would leave it waiting on L2 every row.
template <bool GLOBAL>
constexpr int ROWS = GLOBAL ? 8 : 4;

// n x n floats from src (rows lds apart) to dst (rows ldd apart) by a block of W warps: a warp a row,
// BATCH rows a warp loaded before any is stored (a load then its store, row after row, would keep one
// load in flight a warp).
template <int W, int CT, int BATCH>
__device__ __forceinline__ void copy_matrix(const float* src, int lds, float* dst, int ldd, int n, int warp,
                                            int lane) {
    for (int i0 = warp; i0 < n; i0 += W * BATCH) {
        float x[BATCH][CT];
#pragma unroll
        for (int r = 0; r < BATCH; ++r)
#pragma unroll
            for (int t = 0; t < CT; ++t) {
                const int i = i0 + W * r, j = lane + 32 * t;
                x[r][t] = (i < n && j < n) ? src[(size_t)i * lds + j] : 0.f;
            }
#pragma unroll
        for (int r = 0; r < BATCH; ++r)
#pragma unroll
            for (int t = 0; t < CT; ++t) {
                const int i = i0 + W * r, j = lane + 32 * t;
                if (i < n && j < n) dst[(size_t)i * ldd + j] = x[r][t];
            }
    }
}

template <int NB>
__device__ __forceinline__ void add_row(const float* V, int i, float c, float (&w)[NB]) {
    const float4* vr = reinterpret_cast<const float4*>(V + i * (NB + 4));
#pragma unroll
    for (int q = 0; q < NB / 4; ++q) {
        const float4 x = vr[q];
        w[4 * q] = fmaf(x.x, c, w[4 * q]);
        w[4 * q + 1] = fmaf(x.y, c, w[4 * q + 1]);
        w[4 * q + 2] = fmaf(x.z, c, w[4 * q + 2]);
        w[4 * q + 3] = fmaf(x.w, c, w[4 * q + 3]);
    }
}

// Column j of C (S's rows k + r0 .. k + r1 - 1) against the panel's V: w += Vᵀ C_j over those rows.
template <int NB, int ROWS>
__device__ __forceinline__ void partial_w(const float* S, int ld, int k, int j, int r0, int r1, const float* V,
                                          float (&w)[NB]) {
    int i = r0;
    for (; i + ROWS <= r1; i += ROWS) {
        float c[ROWS];
#pragma unroll
        for (int u = 0; u < ROWS; ++u) c[u] = S[(k + i + u) * ld + j];
#pragma unroll
        for (int u = 0; u < ROWS; ++u) add_row<NB>(V, i + u, c[u], w);
    }
    for (; i < r1; ++i) add_row<NB>(V, i, S[(k + i) * ld + j], w);
}

// V's row i times w (two chains: 16 dependent FMAs a row left a few warps latency-bound).
template <int NB>
__device__ __forceinline__ float row_times(const float* V, int i, const float (&w)[NB]) {
    const float4* vr = reinterpret_cast<const float4*>(V + i * (NB + 4));
    float x0 = 0.f, x1 = 0.f;
#pragma unroll
    for (int q = 0; q < NB / 4; ++q) {
        const float4 x = vr[q];
        x0 = fmaf(x.x, w[4 * q], x0);
        x1 = fmaf(x.y, w[4 * q + 1], x1);
        x0 = fmaf(x.z, w[4 * q + 2], x0);
        x1 = fmaf(x.w, w[4 * q + 3], x1);
    }
    return x0 + x1;
}

// w <- Tᵀ w (T upper), then C_j's rows r0 .. r1 - 1 -= V w.
template <int NB, int ROWS>
__device__ __forceinline__ void apply_w(float* S, int ld, int k, int j, int r0, int r1, const float* V, const float* T,
                                        float (&w)[NB]) {
#pragma unroll
    for (int o = NB - 1; o >= 0; --o) {
        float x = 0.f;
#pragma unroll
        for (int a = 0; a <= o; ++a) x = fmaf(T[a * NB + o], w[a], x);
        w[o] = x;
    }
    int i = r0;
    for (; i + ROWS <= r1; i += ROWS) {
        float c[ROWS];
#pragma unroll
        for (int u = 0; u < ROWS; ++u) c[u] = S[(k + i + u) * ld + j];
#pragma unroll
        for (int u = 0; u < ROWS; ++u) S[(k + i + u) * ld + j] = c[u] - row_times<NB>(V, i + u, w);
    }
    for (; i < r1; ++i) S[(k + i) * ld + j] -= row_times<NB>(V, i, w);
}

// Each chunk's partial Vᵀ C is summed by every thread of its column, one after the other.
constexpr int MAX_CHUNKS = 8;

// Columns c0 .. c1 - 1 of S (rows k .. n - 1) <- (I - V T Vᵀ)ᵀ C, by threads u = 0 .. nt - 1 of a
// range: a thread a column where there are as many columns as threads, else each column's rows in
// up to nt / (c1 - c0) chunks whose partial Vᵀ C meet in Wp (sync: the range's barrier, called once by
// every thread of the range, or never).
template <int NB, int ROWS, class Sync>
__device__ __forceinline__ void tiled_update(float* S, int ld, int k, int n, int c0, int c1, const float* V,
                                             const float* T, float* Wp, int u, int nt, Sync sync) {
    const int m = n - k, nc = c1 - c0;
    if (nc <= 0) return;
    float w[NB];
    if (nc >= nt) {
        for (int j = c0 + u; j < c1; j += nt) {
#pragma unroll
            for (int o = 0; o < NB; ++o) w[o] = 0.f;
            partial_w<NB, ROWS>(S, ld, k, j, 0, m, V, w);
            apply_w<NB, ROWS>(S, ld, k, j, 0, m, V, T, w);
        }
        return;
    }
    const int chunks = min(nt / nc, MAX_CHUNKS);
    const int col = u % nc, ch = u / nc;
    const bool act = ch < chunks;
    const int step = (m + chunks - 1) / chunks;
    const int r0 = min(m, ch * step), r1 = min(m, r0 + step);
    const int j = c0 + col;
#pragma unroll
    for (int o = 0; o < NB; ++o) w[o] = 0.f;
    if (act) {
        partial_w<NB, ROWS>(S, ld, k, j, r0, r1, V, w);
#pragma unroll
        for (int o = 0; o < NB; ++o) Wp[(ch * NB + o) * nc + col] = w[o];
    }
    sync();
    if (act) {
#pragma unroll
        for (int o = 0; o < NB; ++o) {
            float x = 0.f;
            for (int h = 0; h < chunks; ++h) x += Wp[(h * NB + o) * nc + col];
            w[o] = x;
        }
        apply_w<NB, ROWS>(S, ld, k, j, r0, r1, V, T, w);
    }
}

struct BlockSync {
    __device__ __forceinline__ void operator()() const { __syncthreads(); }
};

struct RangeSync {  // warps 1 .. W - 1
    int threads;
    __device__ __forceinline__ void operator()() const { range_barrier(1, threads); }
};

// One block per matrix of n ≤ NP: W warps, panels of NB columns, looking one panel ahead; the matrix
// in shared memory up to TILED_SMEM_MAX, above it in H.
template <int NP, int NB, int W>
__global__ void __launch_bounds__(W * 32, 1)
qr_tiled_kernel(const float* __restrict__ A, float* __restrict__ H, float* __restrict__ TAU, int n) {
    constexpr int RPL = NP / 32;
    constexpr int NT = W * 32;
    constexpr bool GLOBAL = NP > TILED_SMEM_MAX;  // the matrix in H, worked on in place
    static_assert(NP % 32 == 0 && NB % 4 == 0 && NB <= 32 && W >= 2, "tiled kernel's shape");
#ifdef QR_HOST_EMULATION
    float* smem = reinterpret_cast<float*>(dynamic_shared());
#else
    extern __shared__ float4 smem4[];
    float* smem = reinterpret_cast<float*>(smem4);
#endif
    const size_t base = (size_t)blockIdx.x * n * n;
    const int ld = GLOBAL ? n : n | 1;
    float* S = GLOBAL ? H + base : smem;
    float* V = GLOBAL ? smem : S + round4(n * ld);
    float* T = V + 2 * NP * (NB + 4);
    float* Wp = T + 2 * NB * NB;
    float* tau_all = Wp + NT * NB;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    copy_matrix<W, RPL, 4>(A + base, n, S, ld, n, warp, lane);
    __syncthreads();  // (global memory too: a block's barrier orders its threads' accesses to both)
    if (warp == 0) tiled_panel<RPL, NB>(S, ld, 0, n, V, T, tau_all, lane);
    __syncthreads();
    int buf = 0;
    for (int k = 0; k < n; k += NB) {
        const float* Vc = V + buf * NP * (NB + 4);
        const float* Tc = T + buf * NB * NB;
        const int next = k + NB;
        // the next panel's columns first, by every warp
        tiled_update<NB, ROWS<GLOBAL>>(S, ld, k, n, next, min(n, next + NB), Vc, Tc, Wp, tid, NT, BlockSync{});
        __syncthreads();
        if (next >= n) break;
        if (warp == 0)
            tiled_panel<RPL, NB>(S, ld, next, n, V + (buf ^ 1) * NP * (NB + 4), T + (buf ^ 1) * NB * NB, tau_all, lane);
        else
            tiled_update<NB, ROWS<GLOBAL>>(S, ld, k, n, next + NB, n, Vc, Tc, Wp, tid - 32, NT - 32,
                                           RangeSync{NT - 32});
        __syncthreads();
        buf ^= 1;
    }
    if (!GLOBAL) copy_matrix<W, RPL, 4>(S, ld, H + base, n, n, warp, lane);
    for (int i = tid; i < n; i += NT) TAU[(size_t)blockIdx.x * n + i] = tau_all[i];
}
"""

# The kernels' instantiations.  The lane-per-row kernel: (register slots per lane, warps), for each size
# class of n the warp counts its space offers.  The group kernel: (NP, G, CPT) for n ≤ NP, G threads a
# column, CPT columns a thread (its space: PARAMS["groups_<NP>"] = "GxCPT").  The host code's dispatch
# over both is generated from these lists.
_KERNELS = (
    (1, 1), (1, 2), (1, 4), (2, 2), (2, 4), (2, 8), (3, 4), (3, 8), (3, 16), (4, 8), (4, 16), (4, 32), (5, 16), (5, 32), (6, 16), (6, 32),
)
_GROUP_KERNELS = (
    (32, 1, 1), (32, 2, 1), (32, 4, 1),
    (64, 2, 1), (64, 4, 1), (64, 4, 2),
    (96, 4, 2), (96, 8, 2), (96, 4, 3),
    (128, 4, 2), (128, 8, 2), (128, 8, 4),
    (160, 8, 4), (160, 16, 4), (160, 16, 8),
    (176, 8, 4), (176, 16, 8), (176, 16, 11),
    (192, 8, 6), (192, 16, 8), (192, 16, 12),
)
# The group kernel with K-column panels: (NP, G, K, CPB) for n ≤ NP, CPB panels a thread
# (PARAMS["groups_<NP>"] = "GkKxCPB").
_PANEL_KERNELS = (
    (32, 4, 2, 1), (32, 4, 4, 1), (32, 8, 4, 1),
    (64, 4, 4, 1), (96, 8, 4, 1), (128, 8, 4, 1), (160, 8, 4, 1),
    (176, 8, 2, 2), (176, 8, 4, 1), (176, 16, 4, 2),
    (192, 8, 4, 1),
)
# The tiled kernel: (NP, NB, W) for n ≤ NP, panels of NB columns, W warps (PARAMS["tiled_<NP>"] =
# "NBxW").  Warp 0 holds a panel in NB x NP / 32
# registers a lane, so NB = 16 at NP = 192 needs W ≤ 8 (255 registers a thread).  The 384 class
# (193 ≤ n ≤ 384) is this kernel's alone: with it "off" the file calls torch.geqrf there.
# Each instantiation is about seven seconds of nvcc (fully unrolled panels); the shapes measured
# slower (16-column panels, 4 or 16 warps, no look-ahead: kernels/BENCHMARKS.md#onchip-tiled) are
# not built.
_TILED_KERNELS = ((128, 8, 8), (192, 8, 8), (384, 8, 8))
_TILED_CLASSES = tuple(sorted({k[0] for k in _TILED_KERNELS}))
# The group kernels' size classes (n ≤ NP), smallest first.
_GROUP_CLASSES = tuple(sorted({np_ for np_, _, _ in _GROUP_KERNELS} | {k[0] for k in _PANEL_KERNELS}))


def _group_key(np_: int, g: int, cpt: int) -> int:
    return np_ * 1000 + g * 10 + cpt


def _panel_key(np_: int, g: int, k: int, cpb: int) -> int:
    return 1_000_000 + np_ * 10_000 + g * 100 + k * 10 + cpb


def _tiled_key(np_: int, nb: int, w: int) -> int:
    return 2_000_000 + np_ * 10_000 + nb * 100 + w


def _dispatch() -> str:
    """The cases of the host code's switch over the three lists, keyed as _key() keys them."""
    rows = "".join("        case %d: launch<%d, %d>(A, H, tau, nn, (int)staged, stream); break;\n"
                   % (rpl * 100 + warps, rpl, warps) for rpl, warps in _KERNELS)
    groups = "".join("        case %d: launch_groups<%d, %d, %d>(A, H, tau, nn, stream); break;\n"
                     % (_group_key(np_, g, cpt), np_, g, cpt) for np_, g, cpt in _GROUP_KERNELS)
    panels = "".join("        case %d: launch_panels<%d, %d, %d, %d>(A, H, tau, nn, stream); break;\n"
                     % (_panel_key(*k), *k) for k in _PANEL_KERNELS)
    tiled = "".join("        case %d: launch_tiled<%d, %d, %d>(A, H, tau, nn, stream); break;\n"
                    % (_tiled_key(*k), *k) for k in _TILED_KERNELS)
    return rows + groups + panels + tiled


# The host side: the launchers and the function Python calls.
_HOST_SOURCE = r"""
template <int RPL, int W>
void launch(const at::Tensor& A, at::Tensor& H, at::Tensor& tau, int n, int staged, cudaStream_t stream) {
    const size_t bytes = staged ? (size_t)n * (n + 1) * sizeof(float) : 0;
    if (bytes > 48 * 1024)  // set on every launch: the attribute is per device
        C10_CUDA_CHECK(cudaFuncSetAttribute(qr_onchip_kernel<RPL, W>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            (int)bytes));
    qr_onchip_kernel<RPL, W><<<(unsigned)A.size(0), W * 32, bytes, stream>>>(
        A.data_ptr<float>(), H.data_ptr<float>(), tau.data_ptr<float>(), n, staged ? 1 : 0);
}

template <int NP, int G, int CPT>
void launch_groups(const at::Tensor& A, at::Tensor& H, at::Tensor& tau, int n, cudaStream_t stream) {
    TORCH_CHECK(n <= NP, "qr: the group kernel for n <= ", NP, " got n = ", n);
    qr_groups_kernel<NP, G, CPT><<<(unsigned)A.size(0), G * ((NP + CPT - 1) / CPT), 0, stream>>>(
        A.data_ptr<float>(), H.data_ptr<float>(), tau.data_ptr<float>(), n);
}

template <int NP, int G, int K, int CPB>
void launch_panels(const at::Tensor& A, at::Tensor& H, at::Tensor& tau, int n, cudaStream_t stream) {
    TORCH_CHECK(n <= NP, "qr: the panel kernel for n <= ", NP, " got n = ", n);
    qr_panels_kernel<NP, G, K, CPB><<<(unsigned)A.size(0), G * ((NP / K + CPB - 1) / CPB), 0, stream>>>(
        A.data_ptr<float>(), H.data_ptr<float>(), tau.data_ptr<float>(), n);
}

template <int NP, int NB, int W>
void launch_tiled(const at::Tensor& A, at::Tensor& H, at::Tensor& tau, int n, cudaStream_t stream) {
    TORCH_CHECK(n <= NP, "qr: the tiled kernel for n <= ", NP, " got n = ", n);
    const size_t bytes = (size_t)tiled_floats(n, NP, NB, W * 32) * sizeof(float);
    if (bytes > 48 * 1024)  // set on every launch: the attribute is per device
        C10_CUDA_CHECK(cudaFuncSetAttribute(qr_tiled_kernel<NP, NB, W>,
                                            cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    qr_tiled_kernel<NP, NB, W><<<(unsigned)A.size(0), W * 32, bytes, stream>>>(
        A.data_ptr<float>(), H.data_ptr<float>(), tau.data_ptr<float>(), n);
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> qr(at::Tensor A, int64_t key, int64_t staged) {
    TORCH_CHECK(A.is_cuda() && A.scalar_type() == at::kFloat && A.dim() == 3 && A.size(1) == A.size(2),
                "qr: A must be a batch x n x n float32 CUDA tensor");
    A = A.contiguous();
    const int64_t n = A.size(2);
    TORCH_CHECK(n >= 1 && n <= 384, "qr: n must be in [1, 384], got ", n);
    auto H = at::empty_like(A);
    auto tau = at::empty({A.size(0), n}, A.options());
    if (A.size(0) == 0) return {H, tau};
    const c10::cuda::CUDAGuard guard(A.device());
    const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const int nn = (int)n;
    switch (key) {
        // cases: _KERNELS
        default: TORCH_CHECK(false, "qr: no kernel ", key, " for n = ", n);
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

_CPP_SOURCE = "std::tuple<at::Tensor, at::Tensor> qr(at::Tensor A, int64_t key, int64_t staged);"

_EXTENSIONS = {}


def _extension(device: torch.device):
    """The built extension for this device's architecture (built once, cached on disk by hash)."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _EXTENSIONS:
        from torch.utils.cpp_extension import load_inline

        major, minor = torch.cuda.get_device_capability(index)
        arch = "%d%d" % (major, minor)
        digest = hashlib.sha256((_CUDA_SOURCE + _CPP_SOURCE + arch).encode()).hexdigest()[:16]
        _EXTENSIONS[index] = load_inline(
            name="qr_onchip_" + digest, cpp_sources=_CPP_SOURCE, cuda_sources=_CUDA_SOURCE, functions=["qr"],
            extra_cflags=["-O3"], extra_cuda_cflags=["-O3", "-gencode=arch=compute_%s,code=sm_%s" % (arch, arch)],
        )
    return _EXTENSIONS[index]


# _key(n) per n: at 20x32 the host's work a call is as long as the kernel, and this saves the lookup's
# string work.  Whoever changes PARAMS in place clears it (lab/blocked_probe.py does).
_KEYS: dict[int, int] = {}


def _key(n: int) -> int:
    """The kernel for n, as the host code's switch keys it: the group kernel of the smallest class
    holding n where PARAMS gives it a layout, else the lane-per-row kernel; the tiled kernel before
    both where its class's PARAMS gives one."""
    for np_ in _TILED_CLASSES:
        if n <= np_:
            layout = PARAMS["tiled_%d" % np_]
            if layout != "off":  # "NBxW"
                nb, w = layout.split("x")
                return _tiled_key(np_, int(nb), int(w))
            break
    for np_ in _GROUP_CLASSES:
        if n <= np_:
            layout = PARAMS["groups_%d" % np_]
            if "k" in layout:  # "GkKxCPB": panels of K columns
                g, rest = layout.split("k")
                k, cpb = rest.split("x")
                return _panel_key(np_, int(g), int(k), int(cpb))
            if layout != "off":  # "GxCPT"
                g, cpt = (int(x) for x in layout.split("x"))
                return _group_key(np_, g, cpt)
            break
    if n > 192:
        return -1  # no other kernel of this file: torch.geqrf
    rpl = (n + 31) // 32
    return rpl * 100 + PARAMS["warps_%d" % (32 * rpl)]


def custom_kernel(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    n = A.shape[-1]
    if not A.is_cuda or n > PARAMS["max_n"]:
        return torch.geqrf(A)
    key = _KEYS.get(n)
    if key is None:
        key = _KEYS[n] = _key(n)
    if key < 0:
        return torch.geqrf(A)
    extension = _EXTENSIONS.get(A.get_device()) or _extension(A.device)
    return extension.qr(A, key, 1 if PARAMS["staged_stores"] else 0)
