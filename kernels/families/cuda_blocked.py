"""cuda_blocked: blocked Householder QR whose panels are a CUDA C++ kernel (built with
torch.utils.cpp_extension.load_inline) and whose trailing updates are cuBLAS FP32 GEMMs
through torch.bmm, so the update runs at cuBLAS's SGEMM rate rather than a hand-written
dot's.  Exact FP32 throughout (torch's default keeps TF32 off for matmuls).

For each panel of nb columns (rows k..n), one thread block per matrix loads the panel
into registers through shared memory (coalesced), with row i on lane i % 32 of every warp
and column j on warp j % W, so every reduction a column needs is a warp shuffle and each
column costs one __syncthreads (the reflector v is published in shared memory, double
buffered; the warp owning column c+1 builds reflector c+1 while the others still apply
reflector c; all of a warp's columns are reduced in one straight-line butterfly).  The
same dots give G = VᵀV one column at a time (the new reflector with the warp's finished
columns), then each thread builds one row of T by LAPACK's slarft recurrence.  The kernel
writes the panel of H, tau, Vᵀ (explicit, zeros above the diagonal and ones on it) and T,
into windows of its block's buffers.  Panels are grouped into blocks (PARAMS block_*): a
block is split in halves down to panels, the left half's reflector applied to the right
half and the two T merged, T = [[T1, -T1 V1ᵀV2 T2], [0, T2]].  Then, for the rest of the
matrix C = H[:, k:, k+block:], with K = the block width:

    W = Vᵀ C     (torch.bmm)      W = Tᵀ W     (torch.bmm)      C -= V W     (baddbmm_, in place)

or (PARAMS update_* = "tf32x3" or "bf16x3") one Triton kernel per update, a program per
matrix and BN-column tile of C: W = VᵀC over C's row blocks, then C -= V·(TᵀW) over them
again, C's tile read twice and written once, every product on the tensor cores as three
products of split operands (x = hi + lo; hi·hi + hi·lo + lo·hi accumulated in FP32).  With
TF32 halves a product keeps about 2^-21 of relative accuracy, with bf16 halves (twice the
tensor-core rate) about 2^-16; plain TF32 (2^-11) failed the residual gate.  The default is
bf16 halves for 512 <= n <= 1024: on an H200 every qrv2-tests case passed with at most 0.45
of the gate's 20 (640x512 9.08 -> 8.10 ms against cuBLAS FP32, 60x1024 7.5 -> 7.3 ms); below
n = 512 the gate is tighter (it scales with n) and CPU-emulated mixed inputs at n = 97 reached
10 of 20, so smaller n keep FP32.

The first block reads the input and writes H (its panels and the update of the rest of the matrix
cover every element), so H is allocated, not copied from A (0.32 of 6 ms at 640x512).  Panels of at
most 512 rows and 32 columns, when there are more matrices than SMs (a launch in waves), run as 8
warps of four columns with registers capped for two blocks an SM, so one block's per-column latency
overlaps another's (640x512 panels 2.12 -> 1.70 ms on an H200).  The warp that builds the next
reflector works on its slot of the register tile in place (a copy of the step per slot) where
registers allow, instead of selecting the column out and back: at 60x1024 the selects spilled
(panels 2.27 -> 1.63 ms without them), at 640x512 they cost 1.70 -> 1.54 ms.

Reflectors follow LAPACK slarfg (beta = -sign(alpha)·‖x‖, tau = 0 for a zero tail), the
norm rescaled by max|x| when its square would under- or overflow.  With
PARAMS["graph"] the whole factorisation of one shape is captured once as a CUDA graph
and replayed (input copied in, outputs cloned out), which removes the host's launch
work (a few launches per panel) from every later call: by default for n <= 384 (40x352: 1.98 ms
eager, 0.78 replayed) and 512 < n <= 1024, where a call's 175 launches made 60x1024 host-bound in
some processes (5.6-6.8 ms eager, 5.5-5.6 replayed); not at 640x512, where the device is the bound
and the replay's copy in and clone out would cost 0.6 ms.

Panels of up to 384 rows are 64 columns wide (in blocks of 64) by default and of up to 512 rows
32 (PARAMS: at 640x512 panels of 32 in blocks of 64 ran 12% faster than 64 in 128, at 40x352
1.8x slower), up to 1024 rows 32 or 16, up to 2048 rows 16 or 8, up to 4096 rows 8: a block's
registers hold the panel.  Above
PARAMS["max_n"] (or without CUDA) the file calls torch.geqrf.  Above n = 1024 the
factorisation is a few thousand launches, so it is replayed as a CUDA graph
(PARAMS["graph_gt1024"]).  The build is cached by a hash of the source and target in
TORCH_EXTENSIONS_DIR (first call on a new source: about a minute of nvcc).
"""

import hashlib
import os

import torch
import triton
import triton.language as tl

# qrsearch: params
PARAMS = {
    'max_n': 1024,
    'nb_le384': 64,
    'block_le384': 64,
    'nb_le512': 32,
    'block_le512': 64,
    'nb_le1024': 32,
    'block_le1024': 64,
    'nb_le2048': 16,
    'block_gt1024': 128,
    'warps_nb32': 8,
    'warps_nb32_few': 16,
    'panel_min_blocks': 2,
    'panel_min_blocks_le256': 2,
    'graph': False,
    'graph_le384': True,
    'graph_le1024': True,
    'graph_gt1024': True,
    'update_lt512': 'fp32',
    'update_le1024': 'bf16x3',
    'update_gt1024': 'fp32',
    'apply_bn': 64,
    'apply_bm': 64,
    'apply_warps_le512': 4,
    'apply_warps_le1024': 4,
    'apply_warps_gt1024': 8,
    'apply_stages': 3,
}
# qrsearch: end params

# The interpreter's dot mishandles bf16 operands: there the split halves are multiplied as
# float32, which is the same arithmetic (a product of two bf16 values is exact in float32).
_EMULATE = tl.constexpr(os.environ.get("TRITON_INTERPRET") == "1")


@triton.jit
def _split(x):
    """x = hi + lo with hi and lo bf16 (lo carries the next 8 bits of x's mantissa)."""
    hi = x.to(tl.bfloat16)
    lo = (x - hi.to(tl.float32)).to(tl.bfloat16)
    if _EMULATE:
        return hi.to(tl.float32), lo.to(tl.float32)
    return hi, lo


@triton.jit
def _dot3(a, b, acc):
    """acc + a·b to about 2^-16 relative per product: three bf16 tensor-core products."""
    ah, al = _split(a)
    bh, bl = _split(b)
    acc = tl.dot(al, bh, acc, input_precision="ieee")
    acc = tl.dot(ah, bl, acc, input_precision="ieee")
    return tl.dot(ah, bh, acc, input_precision="ieee")


@triton.jit
def _mma(a, b, acc, PREC: tl.constexpr):
    if PREC == "bf16x3":
        return _dot3(a, b, acc)
    return tl.dot(a, b, acc, input_precision=PREC)


@triton.jit
def _apply_kernel(S, C, VT, T, m, ncols, width, scb, scr, svb, svr, stb, str_,
                  KP: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, STAGES: tl.constexpr,
                  PREC: tl.constexpr):
    """One matrix's columns j·BN.. of C (m rows, scr apart, unit column stride) <- (I - V T Vᵀ)ᵀ S,
    with VT = Vᵀ (width x m, rows svr apart) and T (width x width, rows str_ apart); S is C, or the
    input laid out as C where C does not hold it yet."""
    # Tiles of one matrix are neighbours in launch order, so its Vᵀ (read by every tile, twice)
    # stays in L2 between them instead of coming from memory once per tile.
    b = tl.program_id(1).to(tl.int64)
    cols = tl.program_id(0) * BN + tl.arange(0, BN)
    ks = tl.arange(0, KP)
    c_ptr = C + b * scb
    s_ptr = S + b * scb
    v_ptr = VT + b * svb
    kmask = ks < width
    W = tl.zeros([KP, BN], dtype=tl.float32)
    for r0 in tl.range(0, m, BM, num_stages=STAGES):
        rows = r0 + tl.arange(0, BM)
        cm = (rows[:, None] < m) & (cols[None, :] < ncols)
        c = tl.load(s_ptr + rows[:, None] * scr + cols[None, :], mask=cm, other=0.0)
        vt = tl.load(v_ptr + ks[:, None] * svr + rows[None, :], mask=kmask[:, None] & (rows[None, :] < m), other=0.0)
        W = _mma(vt, c, W, PREC)
    tt = tl.load(T + b * stb + ks[None, :] * str_ + ks[:, None], mask=kmask[:, None] & kmask[None, :], other=0.0)
    W2 = -_mma(tt, W, tl.zeros([KP, BN], dtype=tl.float32), PREC)  # -(Tᵀ W)
    for r0 in tl.range(0, m, BM, num_stages=STAGES):
        rows = r0 + tl.arange(0, BM)
        cm = (rows[:, None] < m) & (cols[None, :] < ncols)
        c = tl.load(s_ptr + rows[:, None] * scr + cols[None, :], mask=cm, other=0.0)
        v = tl.load(v_ptr + ks[None, :] * svr + rows[:, None], mask=kmask[None, :] & (rows[:, None] < m), other=0.0)
        c = _mma(v, W2, c, PREC)
        tl.store(c_ptr + rows[:, None] * scr + cols[None, :], c, mask=cm)


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
template <int RPL, int W, int CPW, int MINB, class V>
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
        } else if constexpr (RPL >= 32 || (W == 8 && MINB <= 2)) {
            // One copy of the step per slot, each on a fixed slot of the tile: at 32 rows a lane
            // the selected copy below needs 32 more registers, and the tile spilled (200 bytes
            // of local loads a thread at 60x1024); with 8 warps it fits and the owner warp skips
            // the selects; with 16 warps of 4 slots the copies spill instead.
            const int tn = next / W;
#pragma unroll
            for (int t = 0; t < CPW; ++t) {
                if (t == tn) {
                    update<RPL>(reg[t], v, tau * d[t]);
                    reflect<RPL>(reg[t], next, m, lane, vbuf + (cur ^ 1) * mp, &tauc[cur ^ 1], tau_all);
                }
            }
        } else {
            // Selected out of the register tile and back: one copy of the step's code, where
            // the per-slot copies above spill (16 warps of four slots).
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
// MINB blocks per SM is a register cap (65536 / (MINB * W * 32) a thread): with 1, a 512-thread
// block takes a whole SM at 640x512 and the SM idles through the block's per-column latency.
template <int RPL, int W, int CPW, int MINB>
__global__ void __launch_bounds__(W * 32, MINB)
panel_kernel(const float* S, float* H, float* __restrict__ TAU, float* __restrict__ VT, float* __restrict__ T,
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
    const float* src = S + mat + (size_t)k * n + k;  // S is H, or the input where H is not yet written
    for (int e = threadIdx.x; e < MP * NBP; e += W * 32) {
        const int r = e / NBP, q = e % NBP;
        stage[r * LDS + q] = (r < m && q < w) ? src[(size_t)r * n + q] : 0.f;
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
        if constexpr (RPL * MINB < 32) {  // a register copy of v, where registers allow it
            float v[RPL];
#pragma unroll
            for (int s = 0; s < RPL; ++s) v[s] = vbuf[cur * MP + lane + 32 * s];
            panel_step<RPL, W, CPW, MINB>(reg, v, c, w, m, lane, wid, vbuf, tauc, tau_all, gbuf, LDS, MP);
        } else {
            const SharedReflector v{vbuf + cur * MP + lane};
            panel_step<RPL, W, CPW, MINB>(reg, v, c, w, m, lane, wid, vbuf, tauc, tau_all, gbuf, LDS, MP);
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
_HOST_SOURCE = r"""
template <int RPL, int W, int CPW, int MINB>
void launch(const at::Tensor& S, at::Tensor& H, at::Tensor& tau, at::Tensor& vt, at::Tensor& t, int n, int k, int w,
            cudaStream_t stream) {
    constexpr size_t bytes = panel_smem_bytes<RPL, W, CPW>();
    static bool ready = false;  // the opt-in above 48 KB of shared memory, once per kernel
    if (!ready) {
        C10_CUDA_CHECK(cudaFuncSetAttribute(panel_kernel<RPL, W, CPW, MINB>,
                                            cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
        // All of the unified L1 as shared memory, so MINB blocks' shared memory fits on an SM.
        C10_CUDA_CHECK(cudaFuncSetAttribute(panel_kernel<RPL, W, CPW, MINB>,
                                            cudaFuncAttributePreferredSharedMemoryCarveout,
                                            (int)cudaSharedmemCarveoutMaxShared));
        ready = true;
    }
    panel_kernel<RPL, W, CPW, MINB><<<(unsigned)H.size(0), W * 32, bytes, stream>>>(
        S.data_ptr<float>(), H.data_ptr<float>(), tau.data_ptr<float>(), vt.data_ptr<float>(), t.data_ptr<float>(), n, k, w,
        (long long)vt.stride(0), (long long)t.stride(0), (int)t.stride(1));
}


}  // namespace

// Factor panel columns k..k+w of S into H (batch x n x n, contiguous; S is H to factor in place, or
// the input while H does not hold those columns yet); rows per lane
// rpl (n - k <= 32 rpl), warps and columns per warp (w <= warps * cpw).  vt (rows n apart)
// and t (contiguous rows) may be windows of wider buffers: the kernel writes vt[:, :w, :n-k]
// and t[:, :w, :w] only.
void panel(at::Tensor S, at::Tensor H, at::Tensor tau, at::Tensor vt, at::Tensor t, int64_t k, int64_t w, int64_t rpl,
           int64_t warps, int64_t cpw, int64_t minb) {
    TORCH_CHECK(H.is_cuda() && H.is_contiguous() && H.scalar_type() == at::kFloat && H.dim() == 3,
                "panel: H must be a contiguous batch x n x n float32 CUDA tensor");
    TORCH_CHECK(S.is_cuda() && S.is_contiguous() && S.scalar_type() == at::kFloat && S.sizes() == H.sizes(),
                "panel: S (where the panel is read from) must be a contiguous float32 CUDA tensor shaped as H");
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
    const long long key = ((minb * 1000 + rpl) * 100 + warps) * 100 + cpw;
    const int kk = (int)k, ww = (int)w;
    switch (key) {
        case 10041604LL: launch<4, 16, 4, 1>(S, H, tau, vt, t, n, kk, ww, stream); break;
        case 10081604LL: launch<8, 16, 4, 1>(S, H, tau, vt, t, n, kk, ww, stream); break;
        case 10161604LL: launch<16, 16, 4, 1>(S, H, tau, vt, t, n, kk, ww, stream); break;
        case 10041602LL: launch<4, 16, 2, 1>(S, H, tau, vt, t, n, kk, ww, stream); break;
        case 10081602LL: launch<8, 16, 2, 1>(S, H, tau, vt, t, n, kk, ww, stream); break;
        case 10161602LL: launch<16, 16, 2, 1>(S, H, tau, vt, t, n, kk, ww, stream); break;
        case 10321602LL: launch<32, 16, 2, 1>(S, H, tau, vt, t, n, kk, ww, stream); break;
        case 10043201LL: launch<4, 32, 1, 1>(S, H, tau, vt, t, n, kk, ww, stream); break;
        case 10083201LL: launch<8, 32, 1, 1>(S, H, tau, vt, t, n, kk, ww, stream); break;
        case 10163201LL: launch<16, 32, 1, 1>(S, H, tau, vt, t, n, kk, ww, stream); break;
        case 10041601LL: launch<4, 16, 1, 1>(S, H, tau, vt, t, n, kk, ww, stream); break;
        case 10081601LL: launch<8, 16, 1, 1>(S, H, tau, vt, t, n, kk, ww, stream); break;
        case 10161601LL: launch<16, 16, 1, 1>(S, H, tau, vt, t, n, kk, ww, stream); break;
        case 10321601LL: launch<32, 16, 1, 1>(S, H, tau, vt, t, n, kk, ww, stream); break;
        case 10641601LL: launch<64, 16, 1, 1>(S, H, tau, vt, t, n, kk, ww, stream); break;
        case 10040801LL: launch<4, 8, 1, 1>(S, H, tau, vt, t, n, kk, ww, stream); break;
        case 10080801LL: launch<8, 8, 1, 1>(S, H, tau, vt, t, n, kk, ww, stream); break;
        case 10160801LL: launch<16, 8, 1, 1>(S, H, tau, vt, t, n, kk, ww, stream); break;
        case 10320801LL: launch<32, 8, 1, 1>(S, H, tau, vt, t, n, kk, ww, stream); break;
        case 10640801LL: launch<64, 8, 1, 1>(S, H, tau, vt, t, n, kk, ww, stream); break;
        case 11280801LL: launch<128, 8, 1, 1>(S, H, tau, vt, t, n, kk, ww, stream); break;
        case 10040804LL: launch<4, 8, 4, 1>(S, H, tau, vt, t, n, kk, ww, stream); break;
        case 10080804LL: launch<8, 8, 4, 1>(S, H, tau, vt, t, n, kk, ww, stream); break;
        case 10160804LL: launch<16, 8, 4, 1>(S, H, tau, vt, t, n, kk, ww, stream); break;
        case 20041602LL: launch<4, 16, 2, 2>(S, H, tau, vt, t, n, kk, ww, stream); break;
        case 20081602LL: launch<8, 16, 2, 2>(S, H, tau, vt, t, n, kk, ww, stream); break;
        case 20161602LL: launch<16, 16, 2, 2>(S, H, tau, vt, t, n, kk, ww, stream); break;
        case 20040804LL: launch<4, 8, 4, 2>(S, H, tau, vt, t, n, kk, ww, stream); break;
        case 20080804LL: launch<8, 8, 4, 2>(S, H, tau, vt, t, n, kk, ww, stream); break;
        case 20160804LL: launch<16, 8, 4, 2>(S, H, tau, vt, t, n, kk, ww, stream); break;
        case 40040804LL: launch<4, 8, 4, 4>(S, H, tau, vt, t, n, kk, ww, stream); break;
        case 40080804LL: launch<8, 8, 4, 4>(S, H, tau, vt, t, n, kk, ww, stream); break;
        default: TORCH_CHECK(false, "panel: no kernel for rpl=", rpl, " warps=", warps, " cpw=", cpw, " minb=", minb);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}

"""

_CUDA_SOURCE = r"""
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

namespace {
""" + _DEVICE_SOURCE + "\n" + _HOST_SOURCE

_CPP_SOURCE = ("void panel(at::Tensor S, at::Tensor H, at::Tensor tau, at::Tensor vt, at::Tensor t, int64_t k, int64_t w, "
               "int64_t rpl, int64_t warps, int64_t cpw, int64_t minb);")

_EXTENSIONS = {}
_GRAPHS = {}


def _extension(device: torch.device):
    """The built extension for this device's architecture (built once, cached on disk by hash)."""
    major, minor = torch.cuda.get_device_capability(device)
    arch = "%d%d" % (major, minor)
    if arch not in _EXTENSIONS:
        from torch.utils.cpp_extension import load_inline

        digest = hashlib.sha256((_CUDA_SOURCE + _CPP_SOURCE + arch).encode()).hexdigest()[:16]
        _EXTENSIONS[arch] = load_inline(
            name="qr_blocked_" + digest, cpp_sources=_CPP_SOURCE, cuda_sources=_CUDA_SOURCE, functions=["panel"],
            extra_cflags=["-O3"], extra_cuda_cflags=["-O3", "-gencode=arch=compute_%s,code=sm_%s" % (arch, arch)],
        )
    return _EXTENSIONS[arch]


def _widths(n: int) -> tuple[int, int]:
    """(panel width, block width) for matrices of size n: panels of the block are factored by
    the kernel, then the rest of the matrix is updated once per block (K = block width).
    Taller panels hold fewer columns: a block's registers hold rows x panel width."""
    if n <= 384:
        nb, block = PARAMS["nb_le384"], PARAMS["block_le384"]
    elif n <= 512:
        nb, block = PARAMS["nb_le512"], PARAMS["block_le512"]
    elif n <= 1024:
        nb, block = PARAMS["nb_le1024"], PARAMS["block_le1024"]
    elif n <= 2048:
        nb, block = PARAMS["nb_le2048"], PARAMS["block_gt1024"]
    else:
        nb, block = 8, PARAMS["block_gt1024"]
    return nb, max(nb, block)


def _rows_per_lane(m: int) -> int:
    rpl = 4
    while 32 * rpl < m:
        rpl *= 2
    return rpl


def _shape(nb: int, rpl: int, batch: int, sms: int) -> tuple[int, int, int]:
    """(warps, columns per warp, blocks per SM the registers are capped for) of the panel kernel:
    nb = warps x columns per warp.  At 32 rows per lane, 32 warps (64 registers a thread) spill
    the tile: 16 warps of two columns, one block per SM.  With more matrices than SMs a panel
    launch runs in waves, and two blocks an SM hide each other's per-column latency (640x512:
    8 warps of 4 columns, 2 blocks an SM, panels 2.12 -> 1.70 ms); with fewer, every block has an
    SM of its own and 16 warps were 1% faster (60x1024)."""
    if nb == 64:
        return 16, 4, 1
    if nb == 32:
        if rpl >= 32:
            return 16, 2, 1
        if batch <= sms:
            warps = PARAMS["warps_nb32_few"]
            return warps, 32 // warps, 1
        warps = PARAMS["warps_nb32"]
        minb = PARAMS["panel_min_blocks_le256" if rpl <= 8 else "panel_min_blocks"]
        # 16 warps spill at 4 blocks an SM (32 registers), 32 warps at 2
        return warps, 32 // warps, 1 if warps == 32 else min(minb, 2) if warps == 16 else minb
    if nb == 16:
        return 16, 1, 1
    return 8, 1, 1


def _apply(c: torch.Tensor, v_t: torch.Tensor, t: torch.Tensor, src: torch.Tensor | None = None) -> None:
    """c <- (I - V T Vᵀ)ᵀ src (src defaults to c; else a view of the input laid out as c) with
    v_t = Vᵀ: three cuBLAS FP32 GEMMs, or the Triton kernel's split tensor-core products
    (PARAMS update_*: "tf32x3" or "bf16x3")."""
    n = c.stride(1)  # c is a view of H
    mode = PARAMS["update_lt512" if n < 512 else "update_le1024" if n <= 1024 else "update_gt1024"]
    warps = PARAMS["apply_warps_le512" if n <= 512 else "apply_warps_le1024" if n <= 1024 else "apply_warps_gt1024"]
    if mode != "fp32" and c.stride(2) == 1 and c.numel() and c.shape[0] < 65536:  # grid's y limit
        source = c if src is None else src
        assert source.stride() == c.stride()
        width = v_t.shape[1]
        bn = PARAMS["apply_bn"]
        _apply_kernel[(triton.cdiv(c.shape[2], bn), c.shape[0])](
            source, c, v_t, t, c.shape[1], c.shape[2], width, c.stride(0), c.stride(1), v_t.stride(0),
            v_t.stride(1), t.stride(0), t.stride(1), KP=max(16, triton.next_power_of_2(width)),
            BM=PARAMS["apply_bm"], BN=bn, STAGES=PARAMS["apply_stages"], PREC=mode, num_warps=warps)
        return
    if src is not None:
        c.copy_(src)
    update = torch.bmm(v_t, c)
    update = torch.bmm(t.transpose(1, 2), update)
    c.baddbmm_(v_t.transpose(1, 2), update, alpha=-1.0)


def _block(ext, S: torch.Tensor, H: torch.Tensor, tau: torch.Tensor, vt: torch.Tensor, t: torch.Tensor, k: int,
           width: int, nb: int, sms: int) -> None:
    """Factor columns k..k+width of S into H (rows k..n; S is H, or the input while H does not
    hold these columns yet): on return vt[:, :width, :n-k] holds Vᵀ (rows relative to k) and
    t[:, :width, :width] the block's T.  Wider than a panel: the left part, its reflector applied
    to the right part, the right part, then T = [[T1, -T1 V1ᵀV2 T2], [0, T2]]."""
    n = H.shape[-1]
    m = n - k
    if width <= nb:
        rpl = _rows_per_lane(m)
        ext.panel(S, H, tau, vt, t, k, width, rpl, *_shape(nb, rpl, H.shape[0], sms))
        return
    w1 = nb * -(-width // (2 * nb))  # half, rounded up to whole panels
    _block(ext, S, H, tau, vt, t, k, w1, nb, sms)
    right = slice(k + w1, k + width)
    _apply(H[:, k:, right], vt[:, :w1, :m], t[:, :w1, :w1], None if S is H else S[:, k:, right])
    vt[:, w1:width, :w1].zero_()  # V2 is zero above its first row
    _block(ext, H, H, tau, vt[:, w1:, w1:], t[:, w1:, w1:], k + w1, width - w1, nb, sms)
    cross = torch.bmm(vt[:, :w1, w1:m], vt[:, w1:width, w1:m].transpose(1, 2))
    t[:, :w1, w1:width] = -torch.bmm(torch.bmm(t[:, :w1, :w1], cross), t[:, w1:width, w1:width])
    t[:, w1:width, :w1].zero_()


def _factor(H: torch.Tensor, tau: torch.Tensor, A: torch.Tensor | None = None) -> None:
    """Factor A into H (batch x n x n, both contiguous; A defaults to H, in place), tau written.
    The first block reads A and every element of H is written by it (its panels and the update
    of the rest), so H needs no copy of A first: at 640x512 that copy was 0.32 of 6 ms."""
    batch, n = H.shape[0], H.shape[-1]
    nb, block = _widths(n)
    ext = _extension(H.device)
    sms = torch.cuda.get_device_properties(H.device).multi_processor_count if H.is_cuda else 1
    vt = torch.empty((batch, block, n), dtype=H.dtype, device=H.device)
    t = torch.empty((batch, block, block), dtype=H.dtype, device=H.device)
    source = H if A is None else A
    for k in range(0, n, block):
        width = min(block, n - k)
        _block(ext, source, H, tau, vt, t, k, width, nb, sms)
        if k + width < n:
            rest = slice(k + width, n)
            _apply(H[:, k:, rest], vt[:, :width, :n - k], t[:, :width, :width],
                   None if source is H else source[:, k:, rest])
        source = H


def _replay(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The factorisation of A's shape as a captured CUDA graph (captured on the first call)."""
    key = (A.shape[0], A.shape[-1], A.device)
    entry = _GRAPHS.get(key)
    if entry is None:
        a_in = torch.empty_like(A)
        h_out = torch.empty_like(A)
        tau_out = torch.empty((A.shape[0], A.shape[-1]), dtype=A.dtype, device=A.device)
        a_in.copy_(A)
        side = torch.cuda.Stream(A.device)
        side.wait_stream(torch.cuda.current_stream(A.device))
        with torch.cuda.stream(side):  # one eager run first: workspaces, kernel attributes
            _factor(h_out, tau_out, a_in)
        torch.cuda.current_stream(A.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            _factor(h_out, tau_out, a_in)
        entry = _GRAPHS[key] = (graph, a_in, h_out, tau_out)
    graph, a_in, h_out, tau_out = entry
    a_in.copy_(A)
    graph.replay()
    return h_out.clone(), tau_out.clone()


def custom_kernel(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    n = A.shape[-1]
    if not A.is_cuda or n > PARAMS["max_n"] or A.shape[0] == 0:
        return torch.geqrf(A)
    graph = PARAMS["graph_le384" if n <= 384 else "graph" if n <= 512 else "graph_le1024" if n <= 1024 else "graph_gt1024"]
    if PARAMS["graph"] or graph:
        return _replay(A.contiguous())
    A = A.contiguous()
    H = torch.empty_like(A)
    tau = torch.empty((A.shape[0], n), dtype=A.dtype, device=A.device)
    _factor(H, tau, A)
    return H, tau
