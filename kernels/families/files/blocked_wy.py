"""blocked_wy: blocked Householder QR, one Triton program per matrix, all
panels and trailing updates fused in a single launch.

For each panel of NB columns (rows k..n, padded to BM rows, the height
halved once or twice when the remaining rows fit: PARAMS["shrink"]), leaves
of PARAMS["leaf"] columns are factored in registers column by column (one
fused cross-warp reduction per column, LAPACK slarfg conventions, rescaled
norms when squares under- or overflow), and each leaf's compact WY reaches the
rest of its panel.  The panel's compact-WY factor T comes from G = VᵀV (tl.dot)
and the LAPACK slarft recurrence (tau = 0 safe).  The trailing matrix is then
updated as C -= V·(Tᵀ·(VᵀC)) in BN-column tiles and RB-row chunks with three
tl.dot GEMMs whose input precision is a parameter each ("ieee" exact FP32,
"tf32x3" near-FP32 on tensor cores; plain TF32 fails the residual gate at
n = 512).  The input is read once (the first panel step reads A and writes H),
never modified.

Meant for n from about 128 to 512 and batches large enough to fill the GPU
(640×512 above all).  At 640×512 the trailing updates are where the time goes
(ablation on an H200: the panels about 2.9 ms, the FP32 update GEMMs about
10 ms, Triton's FMA dot at about 12 TFLOP/s; kernels/BENCHMARKS.md).  For n
above PARAMS["max_n"] the file calls torch.geqrf.  On CPU the Triton kernel
runs under TRITON_INTERPRET=1; otherwise torch.geqrf.
"""

import os

import torch
import triton
import triton.language as tl

# qrsearch: params
PARAMS = {
    'nb_le256': 16,
    'nb_le512': 32,
    'nb_le1024': 32,
    'nb_gt1024': 16,
    'warps_le256': 4,
    'warps_le512': 8,
    'warps_le1024': 16,
    'warps_gt1024': 16,
    'maxnreg_le256': 168,
    'maxnreg_le512': 128,
    'maxnreg_le1024': 0,
    'maxnreg_gt1024': 128,
    'leaf': 64,
    'bn': 64,
    'rb': 64,
    'stages': 1,
    'shrink': 1,
    'join_reduce': False,
    'prec_w': 'ieee',
    'prec_t': 'ieee',
    'prec_u': 'ieee',
    'prec_g': 'ieee',
    'max_n': 1024,
}
# qrsearch: end params

# What a tuner may give each PARAMS key (the values above are the defaults): per size class (n ≤ 256,
# ≤ 512, ≤ 1024, > 1024) a panel width nb_*, warps_* and a register cap maxnreg_* (0: none); leaf
# columns of a panel are factored in registers at a time; update tiles are bn columns × rb rows with
# stages software-pipeline stages; shrink halves the panel height once (twice) when the remaining
# rows fit; one precision per GEMM (W = VᵀC, Tᵀ·W, C -= V·W2, G = VᵀV).  Plain "tf32" is no choice:
# it failed the residual gate at n = 512 (kernels/BENCHMARKS.md#first-versions).
# qrsearch: space
SPACE = {
    "nb_le256": [16, 32, 64],
    "nb_le512": [16, 32, 64],
    "nb_le1024": [16, 32, 64],
    "nb_gt1024": [16, 32],
    "warps_le256": [2, 4, 8],
    "warps_le512": [4, 8, 16],
    "warps_le1024": [8, 16, 32],
    "warps_gt1024": [8, 16, 32],
    "maxnreg_le256": [0, 96, 128, 168, 255],
    "maxnreg_le512": [0, 96, 128, 168, 255],
    "maxnreg_le1024": [0, 64, 96, 128],
    "maxnreg_gt1024": [0, 64, 96, 128],
    "leaf": [16, 32, 64],
    "bn": [16, 32, 64, 128],
    "rb": [16, 32, 64, 128],
    "stages": [1, 2, 3],
    "shrink": [0, 1, 2],
    "join_reduce": [False, True],
    "prec_w": ["ieee", "tf32x3"],
    "prec_t": ["ieee", "tf32x3"],
    "prec_u": ["ieee", "tf32x3"],
    "prec_g": ["ieee", "tf32x3"],
    "max_n": [1024, 2048],
}
# qrsearch: end space


@triton.jit
def _reflect(P, rows, cols, cr, cc, JOIN: tl.constexpr):
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
def _load_v(h, kv, r0, shr, shc, N: tl.constexpr, NBT: tl.constexpr, RB: tl.constexpr, VALID: tl.constexpr):
    """Rows r0..r0+RB of the unit lower-trapezoidal V whose first column is kv
    (VALID columns, zero-padded to NBT)."""
    rr = r0 + tl.arange(0, RB)
    cc = kv + tl.arange(0, NBT)
    ok = (rr[:, None] > cc[None, :]) & (rr[:, None] < N) & (cc[None, :] < N) & (cc[None, :] < kv + VALID)
    V = tl.load(h + rr[:, None] * shr + cc[None, :] * shc, mask=ok, other=0.0)
    return tl.where((rr[:, None] == cc[None, :]) & (cc[None, :] < kv + VALID), 1.0, V)


@triton.jit
def _build_t(h, tau_ptr, kv, shr, shc, N: tl.constexpr, NBT: tl.constexpr, VALID: tl.constexpr,
             RB: tl.constexpr, STAGES: tl.constexpr, PREC_G: tl.constexpr):
    """Compact-WY T of the reflectors in columns kv..kv+VALID (LAPACK slarft,
    forward/columnwise; tau = 0 gives a zero row and column):
    G = VᵀV, then T[:c, c] = -tau_c T[:c, :c] G[:c, c], T[c, c] = tau_c."""
    ti = tl.arange(0, NBT)
    G = tl.zeros([NBT, NBT], dtype=tl.float32)
    for r0 in tl.range(kv, N, RB, num_stages=STAGES):
        V = _load_v(h, kv, r0, shr, shc, N, NBT, RB, VALID)
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
def _apply_wy(src, h, T, kv, c0, c_lo, c_hi, ssr, ssc, shr, shc, N: tl.constexpr, NBT: tl.constexpr,
              VALID: tl.constexpr, RB: tl.constexpr, WIDTH: tl.constexpr, STAGES: tl.constexpr,
              PREC_W: tl.constexpr, PREC_T: tl.constexpr, PREC_U: tl.constexpr):
    """Columns c0..c0+WIDTH that lie in [c_lo, c_hi), rows kv..N: read from src,
    apply (I - V T Vᵀ)ᵀ of the reflectors at column kv, write to h."""
    cc = c0 + tl.arange(0, WIDTH)
    cm = (cc >= c_lo) & (cc < c_hi) & (cc < N)
    W = tl.zeros([NBT, WIDTH], dtype=tl.float32)
    for r0 in tl.range(kv, N, RB, num_stages=STAGES):
        rr = r0 + tl.arange(0, RB)
        V = _load_v(h, kv, r0, shr, shc, N, NBT, RB, VALID)
        C = tl.load(src + rr[:, None] * ssr + cc[None, :] * ssc, mask=(rr[:, None] < N) & cm[None, :], other=0.0)
        W = tl.dot(tl.trans(V), C, W, input_precision=PREC_W)
    W2 = tl.dot(tl.trans(T), W, input_precision=PREC_T)
    for r0 in tl.range(kv, N, RB, num_stages=STAGES):
        rr = r0 + tl.arange(0, RB)
        V = _load_v(h, kv, r0, shr, shc, N, NBT, RB, VALID)
        m2 = (rr[:, None] < N) & cm[None, :]
        C = tl.load(src + rr[:, None] * ssr + cc[None, :] * ssc, mask=m2, other=0.0)
        C = C - tl.dot(V, W2, input_precision=PREC_U)
        tl.store(h + rr[:, None] * shr + cc[None, :] * shc, C, mask=m2)


@triton.jit
def _step(src, h, tau_ptr, k, ssr, ssc, shr, shc,
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
            X, tau = _reflect(X, rows, lc, l * LEAF + c, c, JOIN)
            taus = tl.where(lc == c, tau, taus)
        tl.store(h + (k + rows)[:, None] * shr + (c0 + lc)[None, :] * shc, X, mask=m2)
        tl.store(tau_ptr + c0 + lc, taus, mask=(c0 + lc) < N)
        tl.debug_barrier()
        if l < NB // LEAF - 1:
            # (loop bounds are passed as expressions, not assigned names: the
            # interpreter turns every assigned int into a tensor)
            TL = _build_t(h, tau_ptr, k + l * LEAF, shr, shc, N, LEAF, LEAF, RB, STAGES, PREC_G)
            if l == 0:
                _apply_wy(src, h, TL, k + l * LEAF, k, c0 + LEAF, k + NB, ssr, ssc, shr, shc, N, LEAF, LEAF,
                          RB, NB, STAGES, PREC_W, PREC_T, PREC_U)
            else:
                _apply_wy(h, h, TL, k + l * LEAF, k, c0 + LEAF, k + NB, shr, shc, shr, shc, N, LEAF, LEAF,
                          RB, NB, STAGES, PREC_W, PREC_T, PREC_U)
            tl.debug_barrier()
    T = _build_t(h, tau_ptr, k, shr, shc, N, NB, NB, RB, STAGES, PREC_G)
    for j0 in range(k + NB, N, BN):
        _apply_wy(src, h, T, k, j0, j0, N, ssr, ssc, shr, shc, N, NB, NB, RB, BN, STAGES, PREC_W, PREC_T, PREC_U)
    tl.debug_barrier()


@triton.jit
def _blocked_qr_kernel(A, H, TAU, sab, sar, sac, shb, shr, shc, stb,
                       N: tl.constexpr, BM: tl.constexpr, NB: tl.constexpr, LEAF: tl.constexpr, RB: tl.constexpr,
                       BN: tl.constexpr, K1: tl.constexpr, K2: tl.constexpr, STAGES: tl.constexpr,
                       JOIN: tl.constexpr, PREC_W: tl.constexpr, PREC_T: tl.constexpr, PREC_U: tl.constexpr,
                       PREC_G: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    a = A + pid * sab
    h = H + pid * shb
    t = TAU + pid * stb
    # The first step reads A and writes every column of H; later steps work in H.
    _step(a, h, t, 0, sar, sac, shr, shc, N, BM, NB, LEAF, RB, BN, STAGES, JOIN, PREC_W, PREC_T, PREC_U, PREC_G)
    for k in range(NB, K1, NB):
        _step(h, h, t, k, shr, shc, shr, shc, N, BM, NB, LEAF, RB, BN, STAGES, JOIN,
              PREC_W, PREC_T, PREC_U, PREC_G)
    if K2 > K1:  # the remaining rows fit in half the panel height
        for k in range(K1, K2, NB):
            _step(h, h, t, k, shr, shc, shr, shc, N, BM // 2, NB, LEAF, RB, BN, STAGES, JOIN,
                  PREC_W, PREC_T, PREC_U, PREC_G)
    if N > K2:  # ... in a quarter
        for k in range(K2, N, NB):
            _step(h, h, t, k, shr, shc, shr, shc, N, BM // 4, NB, LEAF, RB, BN, STAGES, JOIN,
                  PREC_W, PREC_T, PREC_U, PREC_G)


def _size_class(n: int) -> str:
    if n <= 256:
        return "le256"
    if n <= 512:
        return "le512"
    if n <= 1024:
        return "le1024"
    return "gt1024"


def _first_panel_fitting(n: int, nb: int, rows: int) -> int:
    """First panel start k (a multiple of nb, at least nb) with n - k <= rows."""
    k = max(nb, n - rows)
    return min(n, -(-k // nb) * nb)


def _use_triton(A: torch.Tensor) -> bool:
    return A.is_cuda or os.environ.get("TRITON_INTERPRET") == "1"


def custom_kernel(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    batch, n = A.shape[0], A.shape[-1]
    if n > PARAMS["max_n"] or not _use_triton(A):
        return torch.geqrf(A)
    size = _size_class(n)
    nb = PARAMS["nb_" + size]
    bm = max(16, triton.next_power_of_2(n))
    shrink = PARAMS["shrink"] if bm >= 64 else 0
    k1 = _first_panel_fitting(n, nb, bm // 2) if shrink >= 1 else n
    k2 = max(k1, _first_panel_fitting(n, nb, bm // 4)) if shrink >= 2 else n
    H = torch.empty_like(A)
    tau = torch.empty((batch, n), dtype=A.dtype, device=A.device)
    extra = {"maxnreg": PARAMS["maxnreg_" + size]} if PARAMS["maxnreg_" + size] and A.is_cuda else {}
    _blocked_qr_kernel[(batch,)](
        A, H, tau, A.stride(0), A.stride(1), A.stride(2), H.stride(0), H.stride(1), H.stride(2), tau.stride(0),
        N=n, BM=bm, NB=nb, LEAF=min(nb, PARAMS["leaf"]), RB=PARAMS["rb"], BN=PARAMS["bn"], K1=k1, K2=k2,
        STAGES=PARAMS["stages"], JOIN=PARAMS["join_reduce"], PREC_W=PARAMS["prec_w"], PREC_T=PARAMS["prec_t"],
        PREC_U=PARAMS["prec_u"], PREC_G=PARAMS["prec_g"], num_warps=PARAMS["warps_" + size], **extra,
    )
    return H, tau
