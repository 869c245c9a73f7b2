"""Composite QR kernel exported by qrsearch from gpu1 (qrv2-bench on NVIDIA H200).

custom_kernel(data) routes on the input's (batch, n): a benchmark shape goes to the verified
candidate with the best geomean time over that shape's cases; any other shape goes to the
fallback, the candidate with the best geomean over the whole suite (verified on every case).

  batch x n    candidate   family                  ms (geomean)   torch.geqrf ms   speedup
  20x32        c0000166    householder_unblocked         0.08557           0.3454     4.04x
  40x176       c0000104    blocked_wy                     0.3712            15.21    40.96x
  40x352       c0000171    lookahead_split                0.7481            40.24    53.79x
  640x512      c0000196    lookahead_split                 8.602              988   114.85x
  60x1024      c0000241    lookahead_split                 6.289            226.1    35.95x
  8x2048       c0000237    lookahead_split                 10.65             71.8     6.74x
  2x4096       c0000204    lookahead_split                 24.68            46.08     1.87x
  other        c0000001    torch_geqrf                     118.5            118.5     1.00x   (fallback; suite geomean)

Times were measured in the run (the cases of each shape: 20x32: dense-20x32-c1; 40x176: dense-40x176-c1; 40x352: dense-40x352-c1; 640x512: dense-640x512-c2, mixed-640x512-c2, rankdef-640x512-c0, clustered-640x512-c0; 60x1024: dense-60x1024-c2, mixed-60x1024-c2, nearrank-60x1024-c0; 8x2048: dense-8x2048-c1; 2x4096: dense-2x4096-c1).
Each candidate's module-level names carry its id as a suffix; needs only torch and triton.
"""

import torch
import os
import triton
import triton.language as tl


# ============================================================================
# c0000001: family torch_geqrf, seed, 118.5 ms suite geomean
# Baseline: torch.geqrf (cuSOLVER on CUDA, LAPACK on CPU).
# ============================================================================

# params of c0000001
PARAMS_c0000001 = {}
# end of the params of c0000001
def custom_kernel_c0000001(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.geqrf(A)


# ============================================================================
# c0000166: family householder_unblocked, crossover, 0.08557 ms suite geomean
# householder_unblocked: one Triton program per matrix, the whole matrix held
# ============================================================================

# params of c0000166
PARAMS_c0000166 = {
    "max_n": 256,
    "join_reduce": True,
    "warps_16": 2,
    "warps_32": 1,
    "warps_64": 1,
    "warps_128": 4,
    "warps_256": 8,
}
# end of the params of c0000166
@triton.jit
def _reflect_c0000166(P, rows, cols, cr, cc, JOIN: tl.constexpr):
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
def _qr_tile_kernel_c0000166(A, H, TAU, sab, sar, sac, shb, shr, shc, stb, n: tl.constexpr, NP: tl.constexpr,
                    JOIN: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    rows = tl.arange(0, NP)
    cols = tl.arange(0, NP)
    mask = (rows[:, None] < n) & (cols[None, :] < n)
    P = tl.load(A + pid * sab + rows[:, None] * sar + cols[None, :] * sac, mask=mask, other=0.0)
    taus = tl.zeros([NP], dtype=tl.float32)
    for c in range(0, n):
        P, tau = _reflect_c0000166(P, rows, cols, c, c, JOIN)
        taus = tl.where(cols == c, tau, taus)
    tl.store(H + pid * shb + rows[:, None] * shr + cols[None, :] * shc, P, mask=mask)
    tl.store(TAU + pid * stb + cols, taus, mask=cols < n)


def _use_triton_c0000166(A: torch.Tensor) -> bool:
    return A.is_cuda or os.environ.get("TRITON_INTERPRET") == "1"


def custom_kernel_c0000166(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    batch, n = A.shape[0], A.shape[-1]
    if n > PARAMS_c0000166["max_n"] or not _use_triton_c0000166(A):
        return torch.geqrf(A)
    np2 = max(16, triton.next_power_of_2(n))
    H = torch.empty_like(A)
    tau = torch.empty((batch, n), dtype=A.dtype, device=A.device)
    warps = PARAMS_c0000166["warps_%d" % np2]
    _qr_tile_kernel_c0000166[(batch,)](
        A, H, tau, A.stride(0), A.stride(1), A.stride(2), H.stride(0), H.stride(1), H.stride(2),
        tau.stride(0), n=n, NP=np2, JOIN=PARAMS_c0000166["join_reduce"], num_warps=warps,
    )
    return H, tau


# ============================================================================
# c0000104: family blocked_wy, optuna, 4.827 ms suite geomean
# blocked_wy: blocked Householder QR, one Triton program per matrix, all
# ============================================================================

# params of c0000104
PARAMS_c0000104 = {
    "nb_le256": 16,
    "nb_le512": 32,
    "nb_le1024": 32,
    "nb_gt1024": 16,
    "warps_le256": 4,
    "warps_le512": 8,
    "warps_le1024": 16,
    "warps_gt1024": 16,
    "maxnreg_le256": 0,
    "maxnreg_le512": 128,
    "maxnreg_le1024": 0,
    "maxnreg_gt1024": 0,
    "leaf": 16,
    "bn": 64,
    "rb": 32,
    "stages": 1,
    "shrink": 1,
    "join_reduce": True,
    "prec_w": "ieee",
    "prec_t": "ieee",
    "prec_u": "ieee",
    "prec_g": "ieee",
    "max_n": 2048,
}
# end of the params of c0000104
@triton.jit
def _reflect_c0000104(P, rows, cols, cr, cc, JOIN: tl.constexpr):
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
def _load_v_c0000104(h, kv, r0, shr, shc, N: tl.constexpr, NBT: tl.constexpr, RB: tl.constexpr, VALID: tl.constexpr):
    """Rows r0..r0+RB of the unit lower-trapezoidal V whose first column is kv
    (VALID columns, zero-padded to NBT)."""
    rr = r0 + tl.arange(0, RB)
    cc = kv + tl.arange(0, NBT)
    ok = (rr[:, None] > cc[None, :]) & (rr[:, None] < N) & (cc[None, :] < N) & (cc[None, :] < kv + VALID)
    V = tl.load(h + rr[:, None] * shr + cc[None, :] * shc, mask=ok, other=0.0)
    return tl.where((rr[:, None] == cc[None, :]) & (cc[None, :] < kv + VALID), 1.0, V)


@triton.jit
def _build_t_c0000104(h, tau_ptr, kv, shr, shc, N: tl.constexpr, NBT: tl.constexpr, VALID: tl.constexpr,
             RB: tl.constexpr, STAGES: tl.constexpr, PREC_G: tl.constexpr):
    """Compact-WY T of the reflectors in columns kv..kv+VALID (LAPACK slarft,
    forward/columnwise; tau = 0 gives a zero row and column):
    G = VᵀV, then T[:c, c] = -tau_c T[:c, :c] G[:c, c], T[c, c] = tau_c."""
    ti = tl.arange(0, NBT)
    G = tl.zeros([NBT, NBT], dtype=tl.float32)
    for r0 in tl.range(kv, N, RB, num_stages=STAGES):
        V = _load_v_c0000104(h, kv, r0, shr, shc, N, NBT, RB, VALID)
        G = tl.dot(tl.trans(V), V, G, input_precision=PREC_G)
    tv = tl.load(tau_ptr + kv + ti, mask=(ti < VALID) & (kv + ti < N), other=0.0)
    T = tl.zeros([NBT, NBT], dtype=tl.float32)
    for c in range(0, NBT):
        g = tl.sum(tl.where(ti[None, :] == c, G, 0.0), axis=1)
        g = tl.where(ti < c, g, 0.0)
        tc = tl.sum(tl.where(ti == c, tv, 0.0), axis=0)
        tcol = -tc * tl.sum(T * g[None, :], axis=1)
        tcol = tl.where(ti == c, tc, tcol)
        T = tl.where(ti[None, :] == c, tcol[:, None], T)
    return T


@triton.jit
def _apply_wy_c0000104(src, h, T, kv, c0, c_lo, c_hi, ssr, ssc, shr, shc, N: tl.constexpr, NBT: tl.constexpr,
              VALID: tl.constexpr, RB: tl.constexpr, WIDTH: tl.constexpr, STAGES: tl.constexpr,
              PREC_W: tl.constexpr, PREC_T: tl.constexpr, PREC_U: tl.constexpr):
    """Columns c0..c0+WIDTH that lie in [c_lo, c_hi), rows kv..N: read from src,
    apply (I - V T Vᵀ)ᵀ of the reflectors at column kv, write to h."""
    cc = c0 + tl.arange(0, WIDTH)
    cm = (cc >= c_lo) & (cc < c_hi) & (cc < N)
    W = tl.zeros([NBT, WIDTH], dtype=tl.float32)
    for r0 in tl.range(kv, N, RB, num_stages=STAGES):
        rr = r0 + tl.arange(0, RB)
        V = _load_v_c0000104(h, kv, r0, shr, shc, N, NBT, RB, VALID)
        C = tl.load(src + rr[:, None] * ssr + cc[None, :] * ssc, mask=(rr[:, None] < N) & cm[None, :], other=0.0)
        W = tl.dot(tl.trans(V), C, W, input_precision=PREC_W)
    W2 = tl.dot(tl.trans(T), W, input_precision=PREC_T)
    for r0 in tl.range(kv, N, RB, num_stages=STAGES):
        rr = r0 + tl.arange(0, RB)
        V = _load_v_c0000104(h, kv, r0, shr, shc, N, NBT, RB, VALID)
        m2 = (rr[:, None] < N) & cm[None, :]
        C = tl.load(src + rr[:, None] * ssr + cc[None, :] * ssc, mask=m2, other=0.0)
        C = C - tl.dot(V, W2, input_precision=PREC_U)
        tl.store(h + rr[:, None] * shr + cc[None, :] * shc, C, mask=m2)


@triton.jit
def _step_c0000104(src, h, tau_ptr, k, ssr, ssc, shr, shc,
          N: tl.constexpr, BM: tl.constexpr, NB: tl.constexpr, LEAF: tl.constexpr, RB: tl.constexpr,
          BN: tl.constexpr, STAGES: tl.constexpr, JOIN: tl.constexpr, PREC_W: tl.constexpr,
          PREC_T: tl.constexpr, PREC_U: tl.constexpr, PREC_G: tl.constexpr):
    """Factor the panel at column k (rows k..N) and update the trailing columns.

    The panel is factored LEAF columns at a time in registers; each leaf's
    reflectors reach the panel's later columns through its own compact WY.
    """
    rows = tl.arange(0, BM)
    lc = tl.arange(0, LEAF)
    for l in tl.static_range(NB // LEAF):
        c0 = k + l * LEAF
        m2 = ((k + rows)[:, None] < N) & ((c0 + lc)[None, :] < N)
        if l == 0:
            X = tl.load(src + (k + rows)[:, None] * ssr + (c0 + lc)[None, :] * ssc, mask=m2, other=0.0)
        else:
            X = tl.load(h + (k + rows)[:, None] * shr + (c0 + lc)[None, :] * shc, mask=m2, other=0.0)
        taus = tl.zeros([LEAF], dtype=tl.float32)
        for c in range(0, LEAF):
            X, tau = _reflect_c0000104(X, rows, lc, l * LEAF + c, c, JOIN)
            taus = tl.where(lc == c, tau, taus)
        tl.store(h + (k + rows)[:, None] * shr + (c0 + lc)[None, :] * shc, X, mask=m2)
        tl.store(tau_ptr + c0 + lc, taus, mask=(c0 + lc) < N)
        tl.debug_barrier()
        if l < NB // LEAF - 1:
            # (loop bounds are passed as expressions, not assigned names: the
            # interpreter turns every assigned int into a tensor)
            TL = _build_t_c0000104(h, tau_ptr, k + l * LEAF, shr, shc, N, LEAF, LEAF, RB, STAGES, PREC_G)
            if l == 0:
                _apply_wy_c0000104(src, h, TL, k + l * LEAF, k, c0 + LEAF, k + NB, ssr, ssc, shr, shc, N, LEAF, LEAF,
                          RB, NB, STAGES, PREC_W, PREC_T, PREC_U)
            else:
                _apply_wy_c0000104(h, h, TL, k + l * LEAF, k, c0 + LEAF, k + NB, shr, shc, shr, shc, N, LEAF, LEAF,
                          RB, NB, STAGES, PREC_W, PREC_T, PREC_U)
            tl.debug_barrier()
    T = _build_t_c0000104(h, tau_ptr, k, shr, shc, N, NB, NB, RB, STAGES, PREC_G)
    for j0 in range(k + NB, N, BN):
        _apply_wy_c0000104(src, h, T, k, j0, j0, N, ssr, ssc, shr, shc, N, NB, NB, RB, BN, STAGES, PREC_W, PREC_T, PREC_U)
    tl.debug_barrier()


@triton.jit
def _blocked_qr_kernel_c0000104(A, H, TAU, sab, sar, sac, shb, shr, shc, stb,
                       N: tl.constexpr, BM: tl.constexpr, NB: tl.constexpr, LEAF: tl.constexpr, RB: tl.constexpr,
                       BN: tl.constexpr, K1: tl.constexpr, K2: tl.constexpr, STAGES: tl.constexpr,
                       JOIN: tl.constexpr, PREC_W: tl.constexpr, PREC_T: tl.constexpr, PREC_U: tl.constexpr,
                       PREC_G: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    a = A + pid * sab
    h = H + pid * shb
    t = TAU + pid * stb
    # The first step reads A and writes every column of H; later steps work in H.
    _step_c0000104(a, h, t, 0, sar, sac, shr, shc, N, BM, NB, LEAF, RB, BN, STAGES, JOIN, PREC_W, PREC_T, PREC_U, PREC_G)
    for k in range(NB, K1, NB):
        _step_c0000104(h, h, t, k, shr, shc, shr, shc, N, BM, NB, LEAF, RB, BN, STAGES, JOIN,
              PREC_W, PREC_T, PREC_U, PREC_G)
    if K2 > K1:  # the remaining rows fit in half the panel height
        for k in range(K1, K2, NB):
            _step_c0000104(h, h, t, k, shr, shc, shr, shc, N, BM // 2, NB, LEAF, RB, BN, STAGES, JOIN,
                  PREC_W, PREC_T, PREC_U, PREC_G)
    if N > K2:  # ... in a quarter
        for k in range(K2, N, NB):
            _step_c0000104(h, h, t, k, shr, shc, shr, shc, N, BM // 4, NB, LEAF, RB, BN, STAGES, JOIN,
                  PREC_W, PREC_T, PREC_U, PREC_G)


def _size_class_c0000104(n: int) -> str:
    if n <= 256:
        return "le256"
    if n <= 512:
        return "le512"
    if n <= 1024:
        return "le1024"
    return "gt1024"


def _first_panel_fitting_c0000104(n: int, nb: int, rows: int) -> int:
    """First panel start k (a multiple of nb, at least nb) with n - k <= rows."""
    k = max(nb, n - rows)
    return min(n, -(-k // nb) * nb)


def _use_triton_c0000104(A: torch.Tensor) -> bool:
    return A.is_cuda or os.environ.get("TRITON_INTERPRET") == "1"


def custom_kernel_c0000104(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    batch, n = A.shape[0], A.shape[-1]
    if n > PARAMS_c0000104["max_n"] or not _use_triton_c0000104(A):
        return torch.geqrf(A)
    size = _size_class_c0000104(n)
    nb = PARAMS_c0000104["nb_" + size]
    bm = max(16, triton.next_power_of_2(n))
    shrink = PARAMS_c0000104["shrink"] if bm >= 64 else 0
    k1 = _first_panel_fitting_c0000104(n, nb, bm // 2) if shrink >= 1 else n
    k2 = max(k1, _first_panel_fitting_c0000104(n, nb, bm // 4)) if shrink >= 2 else n
    H = torch.empty_like(A)
    tau = torch.empty((batch, n), dtype=A.dtype, device=A.device)
    extra = {"maxnreg": PARAMS_c0000104["maxnreg_" + size]} if PARAMS_c0000104["maxnreg_" + size] and A.is_cuda else {}
    _blocked_qr_kernel_c0000104[(batch,)](
        A, H, tau, A.stride(0), A.stride(1), A.stride(2), H.stride(0), H.stride(1), H.stride(2), tau.stride(0),
        N=n, BM=bm, NB=nb, LEAF=min(nb, PARAMS_c0000104["leaf"]), RB=PARAMS_c0000104["rb"], BN=PARAMS_c0000104["bn"], K1=k1, K2=k2,
        STAGES=PARAMS_c0000104["stages"], JOIN=PARAMS_c0000104["join_reduce"], PREC_W=PARAMS_c0000104["prec_w"], PREC_T=PARAMS_c0000104["prec_t"],
        PREC_U=PARAMS_c0000104["prec_u"], PREC_G=PARAMS_c0000104["prec_g"], num_warps=PARAMS_c0000104["warps_" + size], **extra,
    )
    return H, tau


# ============================================================================
# c0000171: family lookahead_split, optuna, 7.317 ms suite geomean
# lookahead_split: blocked Householder QR for few large matrices, one launch
# ============================================================================

# params of c0000171
PARAMS_c0000171 = {
    "nb": 32,
    "bn": 128,
    "bn_coop": 64,
    "rb": 64,
    "rb_panel": 64,
    "stages": 3,
    "stages_coop": 2,
    "join_reduce": False,
    "panel_programs": 32,
    "split_rows": 1024,
    "warps_split": 4,
    "warps_n_le512": 4,
    "stages_n_le512": 1,
    "panel_elems": 16384,
    "bm_min": 128,
    "warps_bm_le256": 4,
    "warps_bm_le1024": 8,
    "warps_bm_gt1024": 16,
    "prec_w": "tf32x3",
    "prec_t": "ieee",
    "prec_u": "tf32x3",
    "prec_g": "ieee",
}
# end of the params of c0000171
@triton.jit
def _reflect_c0000171(P, rows, cols, cr, cc, JOIN: tl.constexpr):
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
def _load_v_c0000171(h, kp, r0, shr, shc, N, NB: tl.constexpr, RB: tl.constexpr):
    """Rows r0..r0+RB of the unit lower-trapezoidal V of the panel at column kp."""
    rr = r0 + tl.arange(0, RB)
    cc = kp + tl.arange(0, NB)
    V = tl.load(h + rr[:, None] * shr + cc[None, :] * shc,
                mask=(rr[:, None] > cc[None, :]) & (rr[:, None] < N) & (cc[None, :] < N), other=0.0)
    return tl.where(rr[:, None] == cc[None, :], 1.0, V)


@triton.jit
def _apply_wy_c0000171(h, tw, kp, c0, shr, shc, N, NB: tl.constexpr, RB: tl.constexpr, WIDTH: tl.constexpr,
              STAGES: tl.constexpr, PREC_W: tl.constexpr, PREC_T: tl.constexpr, PREC_U: tl.constexpr):
    """Columns c0..c0+WIDTH, rows kp..N  <-  (I - V T Vᵀ)ᵀ times themselves (panel at kp)."""
    cc = c0 + tl.arange(0, WIDTH)
    ti = tl.arange(0, NB)
    T = tl.load(tw + ti[:, None] * NB + ti[None, :])
    W = tl.zeros([NB, WIDTH], dtype=tl.float32)
    for r0 in tl.range(kp, N, RB, num_stages=STAGES):
        rr = r0 + tl.arange(0, RB)
        V = _load_v_c0000171(h, kp, r0, shr, shc, N, NB, RB)
        C = tl.load(h + rr[:, None] * shr + cc[None, :] * shc, mask=(rr[:, None] < N) & (cc[None, :] < N), other=0.0)
        W = tl.dot(tl.trans(V), C, W, input_precision=PREC_W)
    W2 = tl.dot(tl.trans(T), W, input_precision=PREC_T)
    for r0 in tl.range(kp, N, RB, num_stages=STAGES):
        rr = r0 + tl.arange(0, RB)
        V = _load_v_c0000171(h, kp, r0, shr, shc, N, NB, RB)
        cm = (rr[:, None] < N) & (cc[None, :] < N)
        C = tl.load(h + rr[:, None] * shr + cc[None, :] * shc, mask=cm, other=0.0)
        C = C - tl.dot(V, W2, input_precision=PREC_U)
        tl.store(h + rr[:, None] * shr + cc[None, :] * shc, C, mask=cm)


@triton.jit
def _factor_panel_c0000171(src, h, tau_ptr, tw, k, ssr, ssc, shr, shc, N, BM: tl.constexpr, NB: tl.constexpr,
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
            X, tau = _reflect_c0000171(X, rows, cols, s * SB + c, c, JOIN)
            taus = tl.where(cols == c, tau, taus)
        tl.store(h + (k + rows)[:, None] * shr + (c0 + cols)[None, :] * shc, X, mask=m2)
        tl.store(tau_ptr + c0 + cols, taus, mask=(c0 + cols) < N)
        tl.debug_barrier()
    # T from G = VᵀV:  T[:c, c] = -tau_c T[:c, :c] G[:c, c],  T[c, c] = tau_c
    ti = tl.arange(0, NB)
    G = tl.zeros([NB, NB], dtype=tl.float32)
    for r0 in tl.range(k, N, RB, num_stages=STAGES):
        V = _load_v_c0000171(h, k, r0, shr, shc, N, NB, RB)
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
def _sync_c0000171(flags, me, epoch, alive, P: tl.constexpr, WAIT, MAXSPIN: tl.constexpr):
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
def _coop_panel_c0000171(src, h, tau_ptr, tw_old, tw_new, flags, part, partw, me, k, N, ssr, ssc, shr, shc, e0,
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
        alive = _sync_c0000171(flags, me, e0 + 1, alive, P, True, MAXSPIN)
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
        alive = _sync_c0000171(flags, me, e0 + 2 + c, alive, P, True, MAXSPIN)
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
    alive = _sync_c0000171(flags, me, e0 + NB + 2, alive, P, me == 0, MAXSPIN)
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
def _step_c0000171(a, h, tp, tw_new, tw_old, t, k, N, sar, sac, shr, shc, flags, part, partw, e0,
          BM: tl.constexpr, NB: tl.constexpr, SB: tl.constexpr, RB: tl.constexpr, RBP: tl.constexpr,
          BN: tl.constexpr, FIRST: tl.constexpr, STAGES: tl.constexpr, JOIN: tl.constexpr,
          SPLIT: tl.constexpr, P: tl.constexpr, R: tl.constexpr, PW: tl.constexpr, MAXSPIN: tl.constexpr,
          PREC_W: tl.constexpr, PREC_T: tl.constexpr, PREC_U: tl.constexpr, PREC_G: tl.constexpr):
    # k and N arrive as arguments (never assigned here): the interpreter turns
    # assigned ints into tensors, which cannot bound a loop.
    if SPLIT:
        if t < P:
            if FIRST:
                _coop_panel_c0000171(a, h, tp, tw_old, tw_new, flags, part, partw, t, k, N, sar, sac, shr, shc, e0,
                            NB, P, R, PW, FIRST, PREC_W, PREC_T, PREC_U, PREC_G, MAXSPIN)
            else:
                _coop_panel_c0000171(h, h, tp, tw_old, tw_new, flags, part, partw, t, k, N, shr, shc, shr, shc, e0,
                            NB, P, R, PW, FIRST, PREC_W, PREC_T, PREC_U, PREC_G, MAXSPIN)
    else:
        if t == 0:
            if FIRST:
                _factor_panel_c0000171(a, h, tp, tw_new, k, sar, sac, shr, shc, N, BM, NB, SB, RBP, STAGES, JOIN, PREC_G)
            else:
                _apply_wy_c0000171(h, tw_old, k - NB, k, shr, shc, N, NB, RBP, NB, STAGES, PREC_W, PREC_T, PREC_U)
                tl.debug_barrier()
                _factor_panel_c0000171(h, h, tp, tw_new, k, shr, shc, shr, shc, N, BM, NB, SB, RBP, STAGES, JOIN, PREC_G)
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
            _apply_wy_c0000171(h, tw_old, k - NB, c0, shr, shc, N, NB, RB, BN, STAGES, PREC_W, PREC_T, PREC_U)


# e0 (the barrier epoch) only numbers flags: specialising on its divisibility by 16 would
# compile a second variant of every step for nothing.
@triton.jit(do_not_specialize=["e0"])
def _lookahead_kernel_c0000171(A, H, TAU, TW, FLAGS, PART, PARTW, k_rt, n_rt, e0, sab, sar, sac, shb, shr, shc, stb,
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
        _step_c0000171(a, h, tp, tw_new, tw_old, t, K_CONST, N_CONST, sar, sac, shr, shc, flags, part, partw, e0,
              BM, NB, SB, RB, RBP, BN, FIRST, STAGES, JOIN, SPLIT, P, R, PW, MAXSPIN, PREC_W, PREC_T, PREC_U, PREC_G)
    else:
        _step_c0000171(a, h, tp, tw_new, tw_old, t, k_rt, n_rt, sar, sac, shr, shc, flags, part, partw, e0,
              BM, NB, SB, RB, RBP, BN, FIRST, STAGES, JOIN, SPLIT, P, R, PW, MAXSPIN, PREC_W, PREC_T, PREC_U, PREC_G)


def _use_triton_c0000171(A: torch.Tensor) -> bool:
    return A.is_cuda or os.environ.get("TRITON_INTERPRET") == "1"


def _warps_c0000171(bm: int) -> int:
    if bm <= 256:
        return PARAMS_c0000171["warps_bm_le256"]
    if bm <= 1024:
        return PARAMS_c0000171["warps_bm_le1024"]
    return PARAMS_c0000171["warps_bm_gt1024"]


_SM_COUNT_c0000171 = {}


def _sm_count_c0000171(device: torch.device) -> int:
    if device.type != "cuda":
        return 1 << 30
    if device not in _SM_COUNT_c0000171:
        _SM_COUNT_c0000171[device] = torch.cuda.get_device_properties(device).multi_processor_count
    return _SM_COUNT_c0000171[device]


def custom_kernel_c0000171(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    batch, n = A.shape[0], A.shape[-1]
    if not _use_triton_c0000171(A):
        return torch.geqrf(A)
    nb, bn, rb = PARAMS_c0000171["nb"], PARAMS_c0000171["bn"], PARAMS_c0000171["rb"]
    H = torch.empty_like(A)
    tau = torch.empty((batch, n), dtype=A.dtype, device=A.device)
    tw = torch.empty((batch, 2, nb, nb), dtype=A.dtype, device=A.device)
    interp = os.environ.get("TRITON_INTERPRET") == "1"
    # Cooperative panels: every panel program must be resident at once (they
    # wait for each other), so P * batch may not exceed the SM count.
    # (The interpreter runs programs one after the other: there P is 1, which
    # still runs the cooperative code path.)
    coop = PARAMS_c0000171["panel_programs"] > 1
    p = 1 if interp else PARAMS_c0000171["panel_programs"]
    while p > 1 and p * batch > _sm_count_c0000171(A.device):
        p //= 2
    if not interp and p < 4:  # too few programs per matrix to pay for the barriers
        coop = False
    split_from = n - PARAMS_c0000171["split_rows"] if coop else -1  # panels k < split_from are split
    # Few large matrices (cooperative panels) want more, narrower update tiles.
    bn = PARAMS_c0000171["bn_coop"] if coop else bn
    stages = PARAMS_c0000171["stages_coop"] if coop else PARAMS_c0000171["stages"]
    small_warps = PARAMS_c0000171["warps_n_le512"] if n <= 512 else 0  # 0: by panel height
    stages = PARAMS_c0000171["stages_n_le512"] if n <= 512 else stages
    pw = triton.next_power_of_2(2 * nb + 2)
    flags = torch.zeros((batch, max(p, 1)), dtype=torch.int32, device=A.device)
    part = torch.empty((batch, 2, max(p, 1), pw), dtype=A.dtype, device=A.device)
    partw = torch.empty((batch, max(p, 1), nb, nb), dtype=A.dtype, device=A.device)
    strides = (A.stride(0), A.stride(1), A.stride(2), H.stride(0), H.stride(1), H.stride(2), tau.stride(0))
    for k in range(0, n, nb):
        split = k < split_from
        rows = n - k + (nb if k else 0)  # rows a split panel's programs cover
        r = max(16, triton.next_power_of_2(triton.cdiv(rows, p))) if split else 16
        bm = max(PARAMS_c0000171["bm_min"], triton.next_power_of_2(n - k))
        sb = max(1, min(nb, PARAMS_c0000171["panel_elems"] // bm))
        npan = p if split else 1
        if split:
            # A split step never reads the one-program panel's settings: fixed values, so that
            # neither the panel height nor a child's panel parameters make new variants of it.
            bm, sb, rbp = 16, 1, 16
        else:
            rbp = PARAMS_c0000171["rb_panel"]
        tiles = triton.cdiv(n - k - nb, bn) if n - k > nb else 0
        _lookahead_kernel_c0000171[(batch, npan + tiles)](
            A, H, tau, tw, flags, part, partw, k, n, (k // nb) * (nb + 3), *strides,
            K_CONST=k if interp else -1, N_CONST=n if interp else -1,
            BM=bm, NB=nb, SB=sb, RB=rb, RBP=rbp, BN=bn, FIRST=(k == 0), STAGES=stages,
            JOIN=PARAMS_c0000171["join_reduce"], SPLIT=split, P=npan, R=r, PW=pw, MAXSPIN=1 << 20,
            PREC_W=PARAMS_c0000171["prec_w"], PREC_T=PARAMS_c0000171["prec_t"], PREC_U=PARAMS_c0000171["prec_u"],
            PREC_G=PARAMS_c0000171["prec_g"], num_warps=PARAMS_c0000171["warps_split"] if split else (small_warps or _warps_c0000171(bm)),
        )
    return H, tau


# ============================================================================
# c0000196: family lookahead_split, optuna, 7.918 ms suite geomean
# lookahead_split: blocked Householder QR for few large matrices, one launch
# ============================================================================

# params of c0000196
PARAMS_c0000196 = {
    "nb": 32,
    "bn": 128,
    "bn_coop": 64,
    "rb": 64,
    "rb_panel": 64,
    "stages": 3,
    "stages_coop": 2,
    "join_reduce": False,
    "panel_programs": 32,
    "split_rows": 2048,
    "warps_split": 4,
    "warps_n_le512": 4,
    "stages_n_le512": 1,
    "panel_elems": 16384,
    "bm_min": 128,
    "warps_bm_le256": 4,
    "warps_bm_le1024": 8,
    "warps_bm_gt1024": 16,
    "prec_w": "tf32x3",
    "prec_t": "ieee",
    "prec_u": "tf32x3",
    "prec_g": "ieee",
}
# end of the params of c0000196
@triton.jit
def _reflect_c0000196(P, rows, cols, cr, cc, JOIN: tl.constexpr):
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
def _load_v_c0000196(h, kp, r0, shr, shc, N, NB: tl.constexpr, RB: tl.constexpr):
    """Rows r0..r0+RB of the unit lower-trapezoidal V of the panel at column kp."""
    rr = r0 + tl.arange(0, RB)
    cc = kp + tl.arange(0, NB)
    V = tl.load(h + rr[:, None] * shr + cc[None, :] * shc,
                mask=(rr[:, None] > cc[None, :]) & (rr[:, None] < N) & (cc[None, :] < N), other=0.0)
    return tl.where(rr[:, None] == cc[None, :], 1.0, V)


@triton.jit
def _apply_wy_c0000196(h, tw, kp, c0, shr, shc, N, NB: tl.constexpr, RB: tl.constexpr, WIDTH: tl.constexpr,
              STAGES: tl.constexpr, PREC_W: tl.constexpr, PREC_T: tl.constexpr, PREC_U: tl.constexpr):
    """Columns c0..c0+WIDTH, rows kp..N  <-  (I - V T Vᵀ)ᵀ times themselves (panel at kp)."""
    cc = c0 + tl.arange(0, WIDTH)
    ti = tl.arange(0, NB)
    T = tl.load(tw + ti[:, None] * NB + ti[None, :])
    W = tl.zeros([NB, WIDTH], dtype=tl.float32)
    for r0 in tl.range(kp, N, RB, num_stages=STAGES):
        rr = r0 + tl.arange(0, RB)
        V = _load_v_c0000196(h, kp, r0, shr, shc, N, NB, RB)
        C = tl.load(h + rr[:, None] * shr + cc[None, :] * shc, mask=(rr[:, None] < N) & (cc[None, :] < N), other=0.0)
        W = tl.dot(tl.trans(V), C, W, input_precision=PREC_W)
    W2 = tl.dot(tl.trans(T), W, input_precision=PREC_T)
    for r0 in tl.range(kp, N, RB, num_stages=STAGES):
        rr = r0 + tl.arange(0, RB)
        V = _load_v_c0000196(h, kp, r0, shr, shc, N, NB, RB)
        cm = (rr[:, None] < N) & (cc[None, :] < N)
        C = tl.load(h + rr[:, None] * shr + cc[None, :] * shc, mask=cm, other=0.0)
        C = C - tl.dot(V, W2, input_precision=PREC_U)
        tl.store(h + rr[:, None] * shr + cc[None, :] * shc, C, mask=cm)


@triton.jit
def _factor_panel_c0000196(src, h, tau_ptr, tw, k, ssr, ssc, shr, shc, N, BM: tl.constexpr, NB: tl.constexpr,
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
            X, tau = _reflect_c0000196(X, rows, cols, s * SB + c, c, JOIN)
            taus = tl.where(cols == c, tau, taus)
        tl.store(h + (k + rows)[:, None] * shr + (c0 + cols)[None, :] * shc, X, mask=m2)
        tl.store(tau_ptr + c0 + cols, taus, mask=(c0 + cols) < N)
        tl.debug_barrier()
    # T from G = VᵀV:  T[:c, c] = -tau_c T[:c, :c] G[:c, c],  T[c, c] = tau_c
    ti = tl.arange(0, NB)
    G = tl.zeros([NB, NB], dtype=tl.float32)
    for r0 in tl.range(k, N, RB, num_stages=STAGES):
        V = _load_v_c0000196(h, k, r0, shr, shc, N, NB, RB)
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
def _sync_c0000196(flags, me, epoch, alive, P: tl.constexpr, WAIT, MAXSPIN: tl.constexpr):
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
def _coop_panel_c0000196(src, h, tau_ptr, tw_old, tw_new, flags, part, partw, me, k, N, ssr, ssc, shr, shc, e0,
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
        alive = _sync_c0000196(flags, me, e0 + 1, alive, P, True, MAXSPIN)
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
        alive = _sync_c0000196(flags, me, e0 + 2 + c, alive, P, True, MAXSPIN)
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
    alive = _sync_c0000196(flags, me, e0 + NB + 2, alive, P, me == 0, MAXSPIN)
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
def _step_c0000196(a, h, tp, tw_new, tw_old, t, k, N, sar, sac, shr, shc, flags, part, partw, e0,
          BM: tl.constexpr, NB: tl.constexpr, SB: tl.constexpr, RB: tl.constexpr, RBP: tl.constexpr,
          BN: tl.constexpr, FIRST: tl.constexpr, STAGES: tl.constexpr, JOIN: tl.constexpr,
          SPLIT: tl.constexpr, P: tl.constexpr, R: tl.constexpr, PW: tl.constexpr, MAXSPIN: tl.constexpr,
          PREC_W: tl.constexpr, PREC_T: tl.constexpr, PREC_U: tl.constexpr, PREC_G: tl.constexpr):
    # k and N arrive as arguments (never assigned here): the interpreter turns
    # assigned ints into tensors, which cannot bound a loop.
    if SPLIT:
        if t < P:
            if FIRST:
                _coop_panel_c0000196(a, h, tp, tw_old, tw_new, flags, part, partw, t, k, N, sar, sac, shr, shc, e0,
                            NB, P, R, PW, FIRST, PREC_W, PREC_T, PREC_U, PREC_G, MAXSPIN)
            else:
                _coop_panel_c0000196(h, h, tp, tw_old, tw_new, flags, part, partw, t, k, N, shr, shc, shr, shc, e0,
                            NB, P, R, PW, FIRST, PREC_W, PREC_T, PREC_U, PREC_G, MAXSPIN)
    else:
        if t == 0:
            if FIRST:
                _factor_panel_c0000196(a, h, tp, tw_new, k, sar, sac, shr, shc, N, BM, NB, SB, RBP, STAGES, JOIN, PREC_G)
            else:
                _apply_wy_c0000196(h, tw_old, k - NB, k, shr, shc, N, NB, RBP, NB, STAGES, PREC_W, PREC_T, PREC_U)
                tl.debug_barrier()
                _factor_panel_c0000196(h, h, tp, tw_new, k, shr, shc, shr, shc, N, BM, NB, SB, RBP, STAGES, JOIN, PREC_G)
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
            _apply_wy_c0000196(h, tw_old, k - NB, c0, shr, shc, N, NB, RB, BN, STAGES, PREC_W, PREC_T, PREC_U)


# e0 (the barrier epoch) only numbers flags: specialising on its divisibility by 16 would
# compile a second variant of every step for nothing.
@triton.jit(do_not_specialize=["e0"])
def _lookahead_kernel_c0000196(A, H, TAU, TW, FLAGS, PART, PARTW, k_rt, n_rt, e0, sab, sar, sac, shb, shr, shc, stb,
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
        _step_c0000196(a, h, tp, tw_new, tw_old, t, K_CONST, N_CONST, sar, sac, shr, shc, flags, part, partw, e0,
              BM, NB, SB, RB, RBP, BN, FIRST, STAGES, JOIN, SPLIT, P, R, PW, MAXSPIN, PREC_W, PREC_T, PREC_U, PREC_G)
    else:
        _step_c0000196(a, h, tp, tw_new, tw_old, t, k_rt, n_rt, sar, sac, shr, shc, flags, part, partw, e0,
              BM, NB, SB, RB, RBP, BN, FIRST, STAGES, JOIN, SPLIT, P, R, PW, MAXSPIN, PREC_W, PREC_T, PREC_U, PREC_G)


def _use_triton_c0000196(A: torch.Tensor) -> bool:
    return A.is_cuda or os.environ.get("TRITON_INTERPRET") == "1"


def _warps_c0000196(bm: int) -> int:
    if bm <= 256:
        return PARAMS_c0000196["warps_bm_le256"]
    if bm <= 1024:
        return PARAMS_c0000196["warps_bm_le1024"]
    return PARAMS_c0000196["warps_bm_gt1024"]


_SM_COUNT_c0000196 = {}


def _sm_count_c0000196(device: torch.device) -> int:
    if device.type != "cuda":
        return 1 << 30
    if device not in _SM_COUNT_c0000196:
        _SM_COUNT_c0000196[device] = torch.cuda.get_device_properties(device).multi_processor_count
    return _SM_COUNT_c0000196[device]


def custom_kernel_c0000196(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    batch, n = A.shape[0], A.shape[-1]
    if not _use_triton_c0000196(A):
        return torch.geqrf(A)
    nb, bn, rb = PARAMS_c0000196["nb"], PARAMS_c0000196["bn"], PARAMS_c0000196["rb"]
    H = torch.empty_like(A)
    tau = torch.empty((batch, n), dtype=A.dtype, device=A.device)
    tw = torch.empty((batch, 2, nb, nb), dtype=A.dtype, device=A.device)
    interp = os.environ.get("TRITON_INTERPRET") == "1"
    # Cooperative panels: every panel program must be resident at once (they
    # wait for each other), so P * batch may not exceed the SM count.
    # (The interpreter runs programs one after the other: there P is 1, which
    # still runs the cooperative code path.)
    coop = PARAMS_c0000196["panel_programs"] > 1
    p = 1 if interp else PARAMS_c0000196["panel_programs"]
    while p > 1 and p * batch > _sm_count_c0000196(A.device):
        p //= 2
    if not interp and p < 4:  # too few programs per matrix to pay for the barriers
        coop = False
    split_from = n - PARAMS_c0000196["split_rows"] if coop else -1  # panels k < split_from are split
    # Few large matrices (cooperative panels) want more, narrower update tiles.
    bn = PARAMS_c0000196["bn_coop"] if coop else bn
    stages = PARAMS_c0000196["stages_coop"] if coop else PARAMS_c0000196["stages"]
    small_warps = PARAMS_c0000196["warps_n_le512"] if n <= 512 else 0  # 0: by panel height
    stages = PARAMS_c0000196["stages_n_le512"] if n <= 512 else stages
    pw = triton.next_power_of_2(2 * nb + 2)
    flags = torch.zeros((batch, max(p, 1)), dtype=torch.int32, device=A.device)
    part = torch.empty((batch, 2, max(p, 1), pw), dtype=A.dtype, device=A.device)
    partw = torch.empty((batch, max(p, 1), nb, nb), dtype=A.dtype, device=A.device)
    strides = (A.stride(0), A.stride(1), A.stride(2), H.stride(0), H.stride(1), H.stride(2), tau.stride(0))
    for k in range(0, n, nb):
        split = k < split_from
        rows = n - k + (nb if k else 0)  # rows a split panel's programs cover
        r = max(16, triton.next_power_of_2(triton.cdiv(rows, p))) if split else 16
        bm = max(PARAMS_c0000196["bm_min"], triton.next_power_of_2(n - k))
        sb = max(1, min(nb, PARAMS_c0000196["panel_elems"] // bm))
        npan = p if split else 1
        if split:
            # A split step never reads the one-program panel's settings: fixed values, so that
            # neither the panel height nor a child's panel parameters make new variants of it.
            bm, sb, rbp = 16, 1, 16
        else:
            rbp = PARAMS_c0000196["rb_panel"]
        tiles = triton.cdiv(n - k - nb, bn) if n - k > nb else 0
        _lookahead_kernel_c0000196[(batch, npan + tiles)](
            A, H, tau, tw, flags, part, partw, k, n, (k // nb) * (nb + 3), *strides,
            K_CONST=k if interp else -1, N_CONST=n if interp else -1,
            BM=bm, NB=nb, SB=sb, RB=rb, RBP=rbp, BN=bn, FIRST=(k == 0), STAGES=stages,
            JOIN=PARAMS_c0000196["join_reduce"], SPLIT=split, P=npan, R=r, PW=pw, MAXSPIN=1 << 20,
            PREC_W=PARAMS_c0000196["prec_w"], PREC_T=PARAMS_c0000196["prec_t"], PREC_U=PARAMS_c0000196["prec_u"],
            PREC_G=PARAMS_c0000196["prec_g"], num_warps=PARAMS_c0000196["warps_split"] if split else (small_warps or _warps_c0000196(bm)),
        )
    return H, tau


# ============================================================================
# c0000241: family lookahead_split, optuna, 7.167 ms suite geomean
# lookahead_split: blocked Householder QR for few large matrices, one launch
# ============================================================================

# params of c0000241
PARAMS_c0000241 = {
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
# end of the params of c0000241
@triton.jit
def _reflect_c0000241(P, rows, cols, cr, cc, JOIN: tl.constexpr):
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
def _load_v_c0000241(h, kp, r0, shr, shc, N, NB: tl.constexpr, RB: tl.constexpr):
    """Rows r0..r0+RB of the unit lower-trapezoidal V of the panel at column kp."""
    rr = r0 + tl.arange(0, RB)
    cc = kp + tl.arange(0, NB)
    V = tl.load(h + rr[:, None] * shr + cc[None, :] * shc,
                mask=(rr[:, None] > cc[None, :]) & (rr[:, None] < N) & (cc[None, :] < N), other=0.0)
    return tl.where(rr[:, None] == cc[None, :], 1.0, V)


@triton.jit
def _apply_wy_c0000241(h, tw, kp, c0, shr, shc, N, NB: tl.constexpr, RB: tl.constexpr, WIDTH: tl.constexpr,
              STAGES: tl.constexpr, PREC_W: tl.constexpr, PREC_T: tl.constexpr, PREC_U: tl.constexpr):
    """Columns c0..c0+WIDTH, rows kp..N  <-  (I - V T Vᵀ)ᵀ times themselves (panel at kp)."""
    cc = c0 + tl.arange(0, WIDTH)
    ti = tl.arange(0, NB)
    T = tl.load(tw + ti[:, None] * NB + ti[None, :])
    W = tl.zeros([NB, WIDTH], dtype=tl.float32)
    for r0 in tl.range(kp, N, RB, num_stages=STAGES):
        rr = r0 + tl.arange(0, RB)
        V = _load_v_c0000241(h, kp, r0, shr, shc, N, NB, RB)
        C = tl.load(h + rr[:, None] * shr + cc[None, :] * shc, mask=(rr[:, None] < N) & (cc[None, :] < N), other=0.0)
        W = tl.dot(tl.trans(V), C, W, input_precision=PREC_W)
    W2 = tl.dot(tl.trans(T), W, input_precision=PREC_T)
    for r0 in tl.range(kp, N, RB, num_stages=STAGES):
        rr = r0 + tl.arange(0, RB)
        V = _load_v_c0000241(h, kp, r0, shr, shc, N, NB, RB)
        cm = (rr[:, None] < N) & (cc[None, :] < N)
        C = tl.load(h + rr[:, None] * shr + cc[None, :] * shc, mask=cm, other=0.0)
        C = C - tl.dot(V, W2, input_precision=PREC_U)
        tl.store(h + rr[:, None] * shr + cc[None, :] * shc, C, mask=cm)


@triton.jit
def _factor_panel_c0000241(src, h, tau_ptr, tw, k, ssr, ssc, shr, shc, N, BM: tl.constexpr, NB: tl.constexpr,
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
            X, tau = _reflect_c0000241(X, rows, cols, s * SB + c, c, JOIN)
            taus = tl.where(cols == c, tau, taus)
        tl.store(h + (k + rows)[:, None] * shr + (c0 + cols)[None, :] * shc, X, mask=m2)
        tl.store(tau_ptr + c0 + cols, taus, mask=(c0 + cols) < N)
        tl.debug_barrier()
    # T from G = VᵀV:  T[:c, c] = -tau_c T[:c, :c] G[:c, c],  T[c, c] = tau_c
    ti = tl.arange(0, NB)
    G = tl.zeros([NB, NB], dtype=tl.float32)
    for r0 in tl.range(k, N, RB, num_stages=STAGES):
        V = _load_v_c0000241(h, k, r0, shr, shc, N, NB, RB)
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
def _sync_c0000241(flags, me, epoch, alive, P: tl.constexpr, WAIT, MAXSPIN: tl.constexpr):
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
def _coop_panel_c0000241(src, h, tau_ptr, tw_old, tw_new, flags, part, partw, me, k, N, ssr, ssc, shr, shc, e0,
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
        alive = _sync_c0000241(flags, me, e0 + 1, alive, P, True, MAXSPIN)
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
        alive = _sync_c0000241(flags, me, e0 + 2 + c, alive, P, True, MAXSPIN)
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
    alive = _sync_c0000241(flags, me, e0 + NB + 2, alive, P, me == 0, MAXSPIN)
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
def _step_c0000241(a, h, tp, tw_new, tw_old, t, k, N, sar, sac, shr, shc, flags, part, partw, e0,
          BM: tl.constexpr, NB: tl.constexpr, SB: tl.constexpr, RB: tl.constexpr, RBP: tl.constexpr,
          BN: tl.constexpr, FIRST: tl.constexpr, STAGES: tl.constexpr, JOIN: tl.constexpr,
          SPLIT: tl.constexpr, P: tl.constexpr, R: tl.constexpr, PW: tl.constexpr, MAXSPIN: tl.constexpr,
          PREC_W: tl.constexpr, PREC_T: tl.constexpr, PREC_U: tl.constexpr, PREC_G: tl.constexpr):
    # k and N arrive as arguments (never assigned here): the interpreter turns
    # assigned ints into tensors, which cannot bound a loop.
    if SPLIT:
        if t < P:
            if FIRST:
                _coop_panel_c0000241(a, h, tp, tw_old, tw_new, flags, part, partw, t, k, N, sar, sac, shr, shc, e0,
                            NB, P, R, PW, FIRST, PREC_W, PREC_T, PREC_U, PREC_G, MAXSPIN)
            else:
                _coop_panel_c0000241(h, h, tp, tw_old, tw_new, flags, part, partw, t, k, N, shr, shc, shr, shc, e0,
                            NB, P, R, PW, FIRST, PREC_W, PREC_T, PREC_U, PREC_G, MAXSPIN)
    else:
        if t == 0:
            if FIRST:
                _factor_panel_c0000241(a, h, tp, tw_new, k, sar, sac, shr, shc, N, BM, NB, SB, RBP, STAGES, JOIN, PREC_G)
            else:
                _apply_wy_c0000241(h, tw_old, k - NB, k, shr, shc, N, NB, RBP, NB, STAGES, PREC_W, PREC_T, PREC_U)
                tl.debug_barrier()
                _factor_panel_c0000241(h, h, tp, tw_new, k, shr, shc, shr, shc, N, BM, NB, SB, RBP, STAGES, JOIN, PREC_G)
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
            _apply_wy_c0000241(h, tw_old, k - NB, c0, shr, shc, N, NB, RB, BN, STAGES, PREC_W, PREC_T, PREC_U)


# e0 (the barrier epoch) only numbers flags: specialising on its divisibility by 16 would
# compile a second variant of every step for nothing.
@triton.jit(do_not_specialize=["e0"])
def _lookahead_kernel_c0000241(A, H, TAU, TW, FLAGS, PART, PARTW, k_rt, n_rt, e0, sab, sar, sac, shb, shr, shc, stb,
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
        _step_c0000241(a, h, tp, tw_new, tw_old, t, K_CONST, N_CONST, sar, sac, shr, shc, flags, part, partw, e0,
              BM, NB, SB, RB, RBP, BN, FIRST, STAGES, JOIN, SPLIT, P, R, PW, MAXSPIN, PREC_W, PREC_T, PREC_U, PREC_G)
    else:
        _step_c0000241(a, h, tp, tw_new, tw_old, t, k_rt, n_rt, sar, sac, shr, shc, flags, part, partw, e0,
              BM, NB, SB, RB, RBP, BN, FIRST, STAGES, JOIN, SPLIT, P, R, PW, MAXSPIN, PREC_W, PREC_T, PREC_U, PREC_G)


def _use_triton_c0000241(A: torch.Tensor) -> bool:
    return A.is_cuda or os.environ.get("TRITON_INTERPRET") == "1"


def _warps_c0000241(bm: int) -> int:
    if bm <= 256:
        return PARAMS_c0000241["warps_bm_le256"]
    if bm <= 1024:
        return PARAMS_c0000241["warps_bm_le1024"]
    return PARAMS_c0000241["warps_bm_gt1024"]


_SM_COUNT_c0000241 = {}


def _sm_count_c0000241(device: torch.device) -> int:
    if device.type != "cuda":
        return 1 << 30
    if device not in _SM_COUNT_c0000241:
        _SM_COUNT_c0000241[device] = torch.cuda.get_device_properties(device).multi_processor_count
    return _SM_COUNT_c0000241[device]


def custom_kernel_c0000241(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    batch, n = A.shape[0], A.shape[-1]
    if not _use_triton_c0000241(A):
        return torch.geqrf(A)
    nb, bn, rb = PARAMS_c0000241["nb"], PARAMS_c0000241["bn"], PARAMS_c0000241["rb"]
    H = torch.empty_like(A)
    tau = torch.empty((batch, n), dtype=A.dtype, device=A.device)
    tw = torch.empty((batch, 2, nb, nb), dtype=A.dtype, device=A.device)
    interp = os.environ.get("TRITON_INTERPRET") == "1"
    # Cooperative panels: every panel program must be resident at once (they
    # wait for each other), so P * batch may not exceed the SM count.
    # (The interpreter runs programs one after the other: there P is 1, which
    # still runs the cooperative code path.)
    coop = PARAMS_c0000241["panel_programs"] > 1
    p = 1 if interp else PARAMS_c0000241["panel_programs"]
    while p > 1 and p * batch > _sm_count_c0000241(A.device):
        p //= 2
    if not interp and p < 4:  # too few programs per matrix to pay for the barriers
        coop = False
    split_from = n - PARAMS_c0000241["split_rows"] if coop else -1  # panels k < split_from are split
    # Few large matrices (cooperative panels) want more, narrower update tiles.
    bn = PARAMS_c0000241["bn_coop"] if coop else bn
    stages = PARAMS_c0000241["stages_coop"] if coop else PARAMS_c0000241["stages"]
    small_warps = PARAMS_c0000241["warps_n_le512"] if n <= 512 else 0  # 0: by panel height
    stages = PARAMS_c0000241["stages_n_le512"] if n <= 512 else stages
    pw = triton.next_power_of_2(2 * nb + 2)
    flags = torch.zeros((batch, max(p, 1)), dtype=torch.int32, device=A.device)
    part = torch.empty((batch, 2, max(p, 1), pw), dtype=A.dtype, device=A.device)
    partw = torch.empty((batch, max(p, 1), nb, nb), dtype=A.dtype, device=A.device)
    strides = (A.stride(0), A.stride(1), A.stride(2), H.stride(0), H.stride(1), H.stride(2), tau.stride(0))
    for k in range(0, n, nb):
        split = k < split_from
        rows = n - k + (nb if k else 0)  # rows a split panel's programs cover
        r = max(16, triton.next_power_of_2(triton.cdiv(rows, p))) if split else 16
        bm = max(PARAMS_c0000241["bm_min"], triton.next_power_of_2(n - k))
        sb = max(1, min(nb, PARAMS_c0000241["panel_elems"] // bm))
        npan = p if split else 1
        if split:
            # A split step never reads the one-program panel's settings: fixed values, so that
            # neither the panel height nor a child's panel parameters make new variants of it.
            bm, sb, rbp = 16, 1, 16
        else:
            rbp = PARAMS_c0000241["rb_panel"]
        tiles = triton.cdiv(n - k - nb, bn) if n - k > nb else 0
        _lookahead_kernel_c0000241[(batch, npan + tiles)](
            A, H, tau, tw, flags, part, partw, k, n, (k // nb) * (nb + 3), *strides,
            K_CONST=k if interp else -1, N_CONST=n if interp else -1,
            BM=bm, NB=nb, SB=sb, RB=rb, RBP=rbp, BN=bn, FIRST=(k == 0), STAGES=stages,
            JOIN=PARAMS_c0000241["join_reduce"], SPLIT=split, P=npan, R=r, PW=pw, MAXSPIN=1 << 20,
            PREC_W=PARAMS_c0000241["prec_w"], PREC_T=PARAMS_c0000241["prec_t"], PREC_U=PARAMS_c0000241["prec_u"],
            PREC_G=PARAMS_c0000241["prec_g"], num_warps=PARAMS_c0000241["warps_split"] if split else (small_warps or _warps_c0000241(bm)),
        )
    return H, tau


# ============================================================================
# c0000237: family lookahead_split, crossover, 7.272 ms suite geomean
# lookahead_split: blocked Householder QR for few large matrices, one launch
# ============================================================================

# params of c0000237
PARAMS_c0000237 = {
    "nb": 32,
    "bn": 128,
    "bn_coop": 64,
    "rb": 64,
    "rb_panel": 64,
    "stages": 3,
    "stages_coop": 1,
    "join_reduce": False,
    "panel_programs": 16,
    "split_rows": 1024,
    "warps_split": 4,
    "warps_n_le512": 4,
    "stages_n_le512": 1,
    "panel_elems": 16384,
    "bm_min": 128,
    "warps_bm_le256": 4,
    "warps_bm_le1024": 8,
    "warps_bm_gt1024": 16,
    "prec_w": "tf32x3",
    "prec_t": "ieee",
    "prec_u": "tf32x3",
    "prec_g": "ieee",
}
# end of the params of c0000237
@triton.jit
def _reflect_c0000237(P, rows, cols, cr, cc, JOIN: tl.constexpr):
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
def _load_v_c0000237(h, kp, r0, shr, shc, N, NB: tl.constexpr, RB: tl.constexpr):
    """Rows r0..r0+RB of the unit lower-trapezoidal V of the panel at column kp."""
    rr = r0 + tl.arange(0, RB)
    cc = kp + tl.arange(0, NB)
    V = tl.load(h + rr[:, None] * shr + cc[None, :] * shc,
                mask=(rr[:, None] > cc[None, :]) & (rr[:, None] < N) & (cc[None, :] < N), other=0.0)
    return tl.where(rr[:, None] == cc[None, :], 1.0, V)


@triton.jit
def _apply_wy_c0000237(h, tw, kp, c0, shr, shc, N, NB: tl.constexpr, RB: tl.constexpr, WIDTH: tl.constexpr,
              STAGES: tl.constexpr, PREC_W: tl.constexpr, PREC_T: tl.constexpr, PREC_U: tl.constexpr):
    """Columns c0..c0+WIDTH, rows kp..N  <-  (I - V T Vᵀ)ᵀ times themselves (panel at kp)."""
    cc = c0 + tl.arange(0, WIDTH)
    ti = tl.arange(0, NB)
    T = tl.load(tw + ti[:, None] * NB + ti[None, :])
    W = tl.zeros([NB, WIDTH], dtype=tl.float32)
    for r0 in tl.range(kp, N, RB, num_stages=STAGES):
        rr = r0 + tl.arange(0, RB)
        V = _load_v_c0000237(h, kp, r0, shr, shc, N, NB, RB)
        C = tl.load(h + rr[:, None] * shr + cc[None, :] * shc, mask=(rr[:, None] < N) & (cc[None, :] < N), other=0.0)
        W = tl.dot(tl.trans(V), C, W, input_precision=PREC_W)
    W2 = tl.dot(tl.trans(T), W, input_precision=PREC_T)
    for r0 in tl.range(kp, N, RB, num_stages=STAGES):
        rr = r0 + tl.arange(0, RB)
        V = _load_v_c0000237(h, kp, r0, shr, shc, N, NB, RB)
        cm = (rr[:, None] < N) & (cc[None, :] < N)
        C = tl.load(h + rr[:, None] * shr + cc[None, :] * shc, mask=cm, other=0.0)
        C = C - tl.dot(V, W2, input_precision=PREC_U)
        tl.store(h + rr[:, None] * shr + cc[None, :] * shc, C, mask=cm)


@triton.jit
def _factor_panel_c0000237(src, h, tau_ptr, tw, k, ssr, ssc, shr, shc, N, BM: tl.constexpr, NB: tl.constexpr,
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
            X, tau = _reflect_c0000237(X, rows, cols, s * SB + c, c, JOIN)
            taus = tl.where(cols == c, tau, taus)
        tl.store(h + (k + rows)[:, None] * shr + (c0 + cols)[None, :] * shc, X, mask=m2)
        tl.store(tau_ptr + c0 + cols, taus, mask=(c0 + cols) < N)
        tl.debug_barrier()
    # T from G = VᵀV:  T[:c, c] = -tau_c T[:c, :c] G[:c, c],  T[c, c] = tau_c
    ti = tl.arange(0, NB)
    G = tl.zeros([NB, NB], dtype=tl.float32)
    for r0 in tl.range(k, N, RB, num_stages=STAGES):
        V = _load_v_c0000237(h, k, r0, shr, shc, N, NB, RB)
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
def _sync_c0000237(flags, me, epoch, alive, P: tl.constexpr, WAIT, MAXSPIN: tl.constexpr):
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
def _coop_panel_c0000237(src, h, tau_ptr, tw_old, tw_new, flags, part, partw, me, k, N, ssr, ssc, shr, shc, e0,
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
        alive = _sync_c0000237(flags, me, e0 + 1, alive, P, True, MAXSPIN)
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
        alive = _sync_c0000237(flags, me, e0 + 2 + c, alive, P, True, MAXSPIN)
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
    alive = _sync_c0000237(flags, me, e0 + NB + 2, alive, P, me == 0, MAXSPIN)
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
def _step_c0000237(a, h, tp, tw_new, tw_old, t, k, N, sar, sac, shr, shc, flags, part, partw, e0,
          BM: tl.constexpr, NB: tl.constexpr, SB: tl.constexpr, RB: tl.constexpr, RBP: tl.constexpr,
          BN: tl.constexpr, FIRST: tl.constexpr, STAGES: tl.constexpr, JOIN: tl.constexpr,
          SPLIT: tl.constexpr, P: tl.constexpr, R: tl.constexpr, PW: tl.constexpr, MAXSPIN: tl.constexpr,
          PREC_W: tl.constexpr, PREC_T: tl.constexpr, PREC_U: tl.constexpr, PREC_G: tl.constexpr):
    # k and N arrive as arguments (never assigned here): the interpreter turns
    # assigned ints into tensors, which cannot bound a loop.
    if SPLIT:
        if t < P:
            if FIRST:
                _coop_panel_c0000237(a, h, tp, tw_old, tw_new, flags, part, partw, t, k, N, sar, sac, shr, shc, e0,
                            NB, P, R, PW, FIRST, PREC_W, PREC_T, PREC_U, PREC_G, MAXSPIN)
            else:
                _coop_panel_c0000237(h, h, tp, tw_old, tw_new, flags, part, partw, t, k, N, shr, shc, shr, shc, e0,
                            NB, P, R, PW, FIRST, PREC_W, PREC_T, PREC_U, PREC_G, MAXSPIN)
    else:
        if t == 0:
            if FIRST:
                _factor_panel_c0000237(a, h, tp, tw_new, k, sar, sac, shr, shc, N, BM, NB, SB, RBP, STAGES, JOIN, PREC_G)
            else:
                _apply_wy_c0000237(h, tw_old, k - NB, k, shr, shc, N, NB, RBP, NB, STAGES, PREC_W, PREC_T, PREC_U)
                tl.debug_barrier()
                _factor_panel_c0000237(h, h, tp, tw_new, k, shr, shc, shr, shc, N, BM, NB, SB, RBP, STAGES, JOIN, PREC_G)
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
            _apply_wy_c0000237(h, tw_old, k - NB, c0, shr, shc, N, NB, RB, BN, STAGES, PREC_W, PREC_T, PREC_U)


# e0 (the barrier epoch) only numbers flags: specialising on its divisibility by 16 would
# compile a second variant of every step for nothing.
@triton.jit(do_not_specialize=["e0"])
def _lookahead_kernel_c0000237(A, H, TAU, TW, FLAGS, PART, PARTW, k_rt, n_rt, e0, sab, sar, sac, shb, shr, shc, stb,
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
        _step_c0000237(a, h, tp, tw_new, tw_old, t, K_CONST, N_CONST, sar, sac, shr, shc, flags, part, partw, e0,
              BM, NB, SB, RB, RBP, BN, FIRST, STAGES, JOIN, SPLIT, P, R, PW, MAXSPIN, PREC_W, PREC_T, PREC_U, PREC_G)
    else:
        _step_c0000237(a, h, tp, tw_new, tw_old, t, k_rt, n_rt, sar, sac, shr, shc, flags, part, partw, e0,
              BM, NB, SB, RB, RBP, BN, FIRST, STAGES, JOIN, SPLIT, P, R, PW, MAXSPIN, PREC_W, PREC_T, PREC_U, PREC_G)


def _use_triton_c0000237(A: torch.Tensor) -> bool:
    return A.is_cuda or os.environ.get("TRITON_INTERPRET") == "1"


def _warps_c0000237(bm: int) -> int:
    if bm <= 256:
        return PARAMS_c0000237["warps_bm_le256"]
    if bm <= 1024:
        return PARAMS_c0000237["warps_bm_le1024"]
    return PARAMS_c0000237["warps_bm_gt1024"]


_SM_COUNT_c0000237 = {}


def _sm_count_c0000237(device: torch.device) -> int:
    if device.type != "cuda":
        return 1 << 30
    if device not in _SM_COUNT_c0000237:
        _SM_COUNT_c0000237[device] = torch.cuda.get_device_properties(device).multi_processor_count
    return _SM_COUNT_c0000237[device]


def custom_kernel_c0000237(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    batch, n = A.shape[0], A.shape[-1]
    if not _use_triton_c0000237(A):
        return torch.geqrf(A)
    nb, bn, rb = PARAMS_c0000237["nb"], PARAMS_c0000237["bn"], PARAMS_c0000237["rb"]
    H = torch.empty_like(A)
    tau = torch.empty((batch, n), dtype=A.dtype, device=A.device)
    tw = torch.empty((batch, 2, nb, nb), dtype=A.dtype, device=A.device)
    interp = os.environ.get("TRITON_INTERPRET") == "1"
    # Cooperative panels: every panel program must be resident at once (they
    # wait for each other), so P * batch may not exceed the SM count.
    # (The interpreter runs programs one after the other: there P is 1, which
    # still runs the cooperative code path.)
    coop = PARAMS_c0000237["panel_programs"] > 1
    p = 1 if interp else PARAMS_c0000237["panel_programs"]
    while p > 1 and p * batch > _sm_count_c0000237(A.device):
        p //= 2
    if not interp and p < 4:  # too few programs per matrix to pay for the barriers
        coop = False
    split_from = n - PARAMS_c0000237["split_rows"] if coop else -1  # panels k < split_from are split
    # Few large matrices (cooperative panels) want more, narrower update tiles.
    bn = PARAMS_c0000237["bn_coop"] if coop else bn
    stages = PARAMS_c0000237["stages_coop"] if coop else PARAMS_c0000237["stages"]
    small_warps = PARAMS_c0000237["warps_n_le512"] if n <= 512 else 0  # 0: by panel height
    stages = PARAMS_c0000237["stages_n_le512"] if n <= 512 else stages
    pw = triton.next_power_of_2(2 * nb + 2)
    flags = torch.zeros((batch, max(p, 1)), dtype=torch.int32, device=A.device)
    part = torch.empty((batch, 2, max(p, 1), pw), dtype=A.dtype, device=A.device)
    partw = torch.empty((batch, max(p, 1), nb, nb), dtype=A.dtype, device=A.device)
    strides = (A.stride(0), A.stride(1), A.stride(2), H.stride(0), H.stride(1), H.stride(2), tau.stride(0))
    for k in range(0, n, nb):
        split = k < split_from
        rows = n - k + (nb if k else 0)  # rows a split panel's programs cover
        r = max(16, triton.next_power_of_2(triton.cdiv(rows, p))) if split else 16
        bm = max(PARAMS_c0000237["bm_min"], triton.next_power_of_2(n - k))
        sb = max(1, min(nb, PARAMS_c0000237["panel_elems"] // bm))
        npan = p if split else 1
        if split:
            # A split step never reads the one-program panel's settings: fixed values, so that
            # neither the panel height nor a child's panel parameters make new variants of it.
            bm, sb, rbp = 16, 1, 16
        else:
            rbp = PARAMS_c0000237["rb_panel"]
        tiles = triton.cdiv(n - k - nb, bn) if n - k > nb else 0
        _lookahead_kernel_c0000237[(batch, npan + tiles)](
            A, H, tau, tw, flags, part, partw, k, n, (k // nb) * (nb + 3), *strides,
            K_CONST=k if interp else -1, N_CONST=n if interp else -1,
            BM=bm, NB=nb, SB=sb, RB=rb, RBP=rbp, BN=bn, FIRST=(k == 0), STAGES=stages,
            JOIN=PARAMS_c0000237["join_reduce"], SPLIT=split, P=npan, R=r, PW=pw, MAXSPIN=1 << 20,
            PREC_W=PARAMS_c0000237["prec_w"], PREC_T=PARAMS_c0000237["prec_t"], PREC_U=PARAMS_c0000237["prec_u"],
            PREC_G=PARAMS_c0000237["prec_g"], num_warps=PARAMS_c0000237["warps_split"] if split else (small_warps or _warps_c0000237(bm)),
        )
    return H, tau


# ============================================================================
# c0000204: family lookahead_split, optuna, 7.759 ms suite geomean
# lookahead_split: blocked Householder QR for few large matrices, one launch
# ============================================================================

# params of c0000204
PARAMS_c0000204 = {
    "nb": 32,
    "bn": 128,
    "bn_coop": 64,
    "rb": 64,
    "rb_panel": 64,
    "stages": 2,
    "stages_coop": 1,
    "join_reduce": True,
    "panel_programs": 16,
    "split_rows": 1024,
    "warps_split": 4,
    "warps_n_le512": 4,
    "stages_n_le512": 1,
    "panel_elems": 32768,
    "bm_min": 64,
    "warps_bm_le256": 8,
    "warps_bm_le1024": 8,
    "warps_bm_gt1024": 16,
    "prec_w": "ieee",
    "prec_t": "ieee",
    "prec_u": "tf32x3",
    "prec_g": "ieee",
}
# end of the params of c0000204
@triton.jit
def _reflect_c0000204(P, rows, cols, cr, cc, JOIN: tl.constexpr):
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
def _load_v_c0000204(h, kp, r0, shr, shc, N, NB: tl.constexpr, RB: tl.constexpr):
    """Rows r0..r0+RB of the unit lower-trapezoidal V of the panel at column kp."""
    rr = r0 + tl.arange(0, RB)
    cc = kp + tl.arange(0, NB)
    V = tl.load(h + rr[:, None] * shr + cc[None, :] * shc,
                mask=(rr[:, None] > cc[None, :]) & (rr[:, None] < N) & (cc[None, :] < N), other=0.0)
    return tl.where(rr[:, None] == cc[None, :], 1.0, V)


@triton.jit
def _apply_wy_c0000204(h, tw, kp, c0, shr, shc, N, NB: tl.constexpr, RB: tl.constexpr, WIDTH: tl.constexpr,
              STAGES: tl.constexpr, PREC_W: tl.constexpr, PREC_T: tl.constexpr, PREC_U: tl.constexpr):
    """Columns c0..c0+WIDTH, rows kp..N  <-  (I - V T Vᵀ)ᵀ times themselves (panel at kp)."""
    cc = c0 + tl.arange(0, WIDTH)
    ti = tl.arange(0, NB)
    T = tl.load(tw + ti[:, None] * NB + ti[None, :])
    W = tl.zeros([NB, WIDTH], dtype=tl.float32)
    for r0 in tl.range(kp, N, RB, num_stages=STAGES):
        rr = r0 + tl.arange(0, RB)
        V = _load_v_c0000204(h, kp, r0, shr, shc, N, NB, RB)
        C = tl.load(h + rr[:, None] * shr + cc[None, :] * shc, mask=(rr[:, None] < N) & (cc[None, :] < N), other=0.0)
        W = tl.dot(tl.trans(V), C, W, input_precision=PREC_W)
    W2 = tl.dot(tl.trans(T), W, input_precision=PREC_T)
    for r0 in tl.range(kp, N, RB, num_stages=STAGES):
        rr = r0 + tl.arange(0, RB)
        V = _load_v_c0000204(h, kp, r0, shr, shc, N, NB, RB)
        cm = (rr[:, None] < N) & (cc[None, :] < N)
        C = tl.load(h + rr[:, None] * shr + cc[None, :] * shc, mask=cm, other=0.0)
        C = C - tl.dot(V, W2, input_precision=PREC_U)
        tl.store(h + rr[:, None] * shr + cc[None, :] * shc, C, mask=cm)


@triton.jit
def _factor_panel_c0000204(src, h, tau_ptr, tw, k, ssr, ssc, shr, shc, N, BM: tl.constexpr, NB: tl.constexpr,
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
            X, tau = _reflect_c0000204(X, rows, cols, s * SB + c, c, JOIN)
            taus = tl.where(cols == c, tau, taus)
        tl.store(h + (k + rows)[:, None] * shr + (c0 + cols)[None, :] * shc, X, mask=m2)
        tl.store(tau_ptr + c0 + cols, taus, mask=(c0 + cols) < N)
        tl.debug_barrier()
    # T from G = VᵀV:  T[:c, c] = -tau_c T[:c, :c] G[:c, c],  T[c, c] = tau_c
    ti = tl.arange(0, NB)
    G = tl.zeros([NB, NB], dtype=tl.float32)
    for r0 in tl.range(k, N, RB, num_stages=STAGES):
        V = _load_v_c0000204(h, k, r0, shr, shc, N, NB, RB)
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
def _sync_c0000204(flags, me, epoch, alive, P: tl.constexpr, WAIT, MAXSPIN: tl.constexpr):
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
def _coop_panel_c0000204(src, h, tau_ptr, tw_old, tw_new, flags, part, partw, me, k, N, ssr, ssc, shr, shc, e0,
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
        alive = _sync_c0000204(flags, me, e0 + 1, alive, P, True, MAXSPIN)
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
        alive = _sync_c0000204(flags, me, e0 + 2 + c, alive, P, True, MAXSPIN)
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
    alive = _sync_c0000204(flags, me, e0 + NB + 2, alive, P, me == 0, MAXSPIN)
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
def _step_c0000204(a, h, tp, tw_new, tw_old, t, k, N, sar, sac, shr, shc, flags, part, partw, e0,
          BM: tl.constexpr, NB: tl.constexpr, SB: tl.constexpr, RB: tl.constexpr, RBP: tl.constexpr,
          BN: tl.constexpr, FIRST: tl.constexpr, STAGES: tl.constexpr, JOIN: tl.constexpr,
          SPLIT: tl.constexpr, P: tl.constexpr, R: tl.constexpr, PW: tl.constexpr, MAXSPIN: tl.constexpr,
          PREC_W: tl.constexpr, PREC_T: tl.constexpr, PREC_U: tl.constexpr, PREC_G: tl.constexpr):
    # k and N arrive as arguments (never assigned here): the interpreter turns
    # assigned ints into tensors, which cannot bound a loop.
    if SPLIT:
        if t < P:
            if FIRST:
                _coop_panel_c0000204(a, h, tp, tw_old, tw_new, flags, part, partw, t, k, N, sar, sac, shr, shc, e0,
                            NB, P, R, PW, FIRST, PREC_W, PREC_T, PREC_U, PREC_G, MAXSPIN)
            else:
                _coop_panel_c0000204(h, h, tp, tw_old, tw_new, flags, part, partw, t, k, N, shr, shc, shr, shc, e0,
                            NB, P, R, PW, FIRST, PREC_W, PREC_T, PREC_U, PREC_G, MAXSPIN)
    else:
        if t == 0:
            if FIRST:
                _factor_panel_c0000204(a, h, tp, tw_new, k, sar, sac, shr, shc, N, BM, NB, SB, RBP, STAGES, JOIN, PREC_G)
            else:
                _apply_wy_c0000204(h, tw_old, k - NB, k, shr, shc, N, NB, RBP, NB, STAGES, PREC_W, PREC_T, PREC_U)
                tl.debug_barrier()
                _factor_panel_c0000204(h, h, tp, tw_new, k, shr, shc, shr, shc, N, BM, NB, SB, RBP, STAGES, JOIN, PREC_G)
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
            _apply_wy_c0000204(h, tw_old, k - NB, c0, shr, shc, N, NB, RB, BN, STAGES, PREC_W, PREC_T, PREC_U)


# e0 (the barrier epoch) only numbers flags: specialising on its divisibility by 16 would
# compile a second variant of every step for nothing.
@triton.jit(do_not_specialize=["e0"])
def _lookahead_kernel_c0000204(A, H, TAU, TW, FLAGS, PART, PARTW, k_rt, n_rt, e0, sab, sar, sac, shb, shr, shc, stb,
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
        _step_c0000204(a, h, tp, tw_new, tw_old, t, K_CONST, N_CONST, sar, sac, shr, shc, flags, part, partw, e0,
              BM, NB, SB, RB, RBP, BN, FIRST, STAGES, JOIN, SPLIT, P, R, PW, MAXSPIN, PREC_W, PREC_T, PREC_U, PREC_G)
    else:
        _step_c0000204(a, h, tp, tw_new, tw_old, t, k_rt, n_rt, sar, sac, shr, shc, flags, part, partw, e0,
              BM, NB, SB, RB, RBP, BN, FIRST, STAGES, JOIN, SPLIT, P, R, PW, MAXSPIN, PREC_W, PREC_T, PREC_U, PREC_G)


def _use_triton_c0000204(A: torch.Tensor) -> bool:
    return A.is_cuda or os.environ.get("TRITON_INTERPRET") == "1"


def _warps_c0000204(bm: int) -> int:
    if bm <= 256:
        return PARAMS_c0000204["warps_bm_le256"]
    if bm <= 1024:
        return PARAMS_c0000204["warps_bm_le1024"]
    return PARAMS_c0000204["warps_bm_gt1024"]


_SM_COUNT_c0000204 = {}


def _sm_count_c0000204(device: torch.device) -> int:
    if device.type != "cuda":
        return 1 << 30
    if device not in _SM_COUNT_c0000204:
        _SM_COUNT_c0000204[device] = torch.cuda.get_device_properties(device).multi_processor_count
    return _SM_COUNT_c0000204[device]


def custom_kernel_c0000204(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    batch, n = A.shape[0], A.shape[-1]
    if not _use_triton_c0000204(A):
        return torch.geqrf(A)
    nb, bn, rb = PARAMS_c0000204["nb"], PARAMS_c0000204["bn"], PARAMS_c0000204["rb"]
    H = torch.empty_like(A)
    tau = torch.empty((batch, n), dtype=A.dtype, device=A.device)
    tw = torch.empty((batch, 2, nb, nb), dtype=A.dtype, device=A.device)
    interp = os.environ.get("TRITON_INTERPRET") == "1"
    # Cooperative panels: every panel program must be resident at once (they
    # wait for each other), so P * batch may not exceed the SM count.
    # (The interpreter runs programs one after the other: there P is 1, which
    # still runs the cooperative code path.)
    coop = PARAMS_c0000204["panel_programs"] > 1
    p = 1 if interp else PARAMS_c0000204["panel_programs"]
    while p > 1 and p * batch > _sm_count_c0000204(A.device):
        p //= 2
    if not interp and p < 4:  # too few programs per matrix to pay for the barriers
        coop = False
    split_from = n - PARAMS_c0000204["split_rows"] if coop else -1  # panels k < split_from are split
    # Few large matrices (cooperative panels) want more, narrower update tiles.
    bn = PARAMS_c0000204["bn_coop"] if coop else bn
    stages = PARAMS_c0000204["stages_coop"] if coop else PARAMS_c0000204["stages"]
    small_warps = PARAMS_c0000204["warps_n_le512"] if n <= 512 else 0  # 0: by panel height
    stages = PARAMS_c0000204["stages_n_le512"] if n <= 512 else stages
    pw = triton.next_power_of_2(2 * nb + 2)
    flags = torch.zeros((batch, max(p, 1)), dtype=torch.int32, device=A.device)
    part = torch.empty((batch, 2, max(p, 1), pw), dtype=A.dtype, device=A.device)
    partw = torch.empty((batch, max(p, 1), nb, nb), dtype=A.dtype, device=A.device)
    strides = (A.stride(0), A.stride(1), A.stride(2), H.stride(0), H.stride(1), H.stride(2), tau.stride(0))
    for k in range(0, n, nb):
        split = k < split_from
        rows = n - k + (nb if k else 0)  # rows a split panel's programs cover
        r = max(16, triton.next_power_of_2(triton.cdiv(rows, p))) if split else 16
        bm = max(PARAMS_c0000204["bm_min"], triton.next_power_of_2(n - k))
        sb = max(1, min(nb, PARAMS_c0000204["panel_elems"] // bm))
        npan = p if split else 1
        if split:
            # A split step never reads the one-program panel's settings: fixed values, so that
            # neither the panel height nor a child's panel parameters make new variants of it.
            bm, sb, rbp = 16, 1, 16
        else:
            rbp = PARAMS_c0000204["rb_panel"]
        tiles = triton.cdiv(n - k - nb, bn) if n - k > nb else 0
        _lookahead_kernel_c0000204[(batch, npan + tiles)](
            A, H, tau, tw, flags, part, partw, k, n, (k // nb) * (nb + 3), *strides,
            K_CONST=k if interp else -1, N_CONST=n if interp else -1,
            BM=bm, NB=nb, SB=sb, RB=rb, RBP=rbp, BN=bn, FIRST=(k == 0), STAGES=stages,
            JOIN=PARAMS_c0000204["join_reduce"], SPLIT=split, P=npan, R=r, PW=pw, MAXSPIN=1 << 20,
            PREC_W=PARAMS_c0000204["prec_w"], PREC_T=PARAMS_c0000204["prec_t"], PREC_U=PARAMS_c0000204["prec_u"],
            PREC_G=PARAMS_c0000204["prec_g"], num_warps=PARAMS_c0000204["warps_split"] if split else (small_warps or _warps_c0000204(bm)),
        )
    return H, tau


# ============================================================================
# dispatcher
# ============================================================================

ROUTES = {
    (20, 32): 'c0000166',  # householder_unblocked, 0.08557 ms
    (40, 176): 'c0000104',  # blocked_wy, 0.3712 ms
    (40, 352): 'c0000171',  # lookahead_split, 0.7481 ms
    (640, 512): 'c0000196',  # lookahead_split, 8.602 ms
    (60, 1024): 'c0000241',  # lookahead_split, 6.289 ms
    (8, 2048): 'c0000237',  # lookahead_split, 10.65 ms
    (2, 4096): 'c0000204',  # lookahead_split, 24.68 ms
}
FALLBACK = 'c0000001'  # torch_geqrf, best suite geomean
_KERNELS = {
    'c0000001': custom_kernel_c0000001,
    'c0000166': custom_kernel_c0000166,
    'c0000104': custom_kernel_c0000104,
    'c0000171': custom_kernel_c0000171,
    'c0000196': custom_kernel_c0000196,
    'c0000241': custom_kernel_c0000241,
    'c0000237': custom_kernel_c0000237,
    'c0000204': custom_kernel_c0000204,
}


def route(data):
    """The id of the candidate that handles an input of this shape."""
    if data.dim() != 3:
        return FALLBACK
    return ROUTES.get((int(data.shape[0]), int(data.shape[-1])), FALLBACK)


def custom_kernel(data):
    return _KERNELS[route(data)](data)
