"""lookahead_split: blocked Householder QR for few large matrices, one launch
per NB-column panel, the trailing update split over many programs and the
next panel factored while the rest of the matrix is being updated.

Launch j runs batch × (1 + tiles) programs.  Program 0 of each matrix applies
the previous panel's compact-WY reflector to panel j's columns, then factors
panel j (rows k..n held in registers as [BM, SB] sub-panels; later
sub-panels first get this panel's earlier reflectors applied one at a time,
left-looking, so that tall panels fit), then builds T from G = VᵀV (LAPACK
slarft recurrence, tau = 0 safe).  Every other program applies the previous
panel's reflector C -= V·(Tᵀ·(VᵀC)) to one BN-column tile of the columns
right of panel j (three tl.dot GEMMs, precision a parameter each).  So the
serial panel work overlaps the parallel update (look-ahead of depth one) and
all SMs work even for a batch of 2.  Panels use LAPACK slarfg conventions with
one fused reduction per column and rescaled norms when squares under- or
overflow.

Meant for n of 1024 and above with small batches (8×2048, 2×4096); correct
for every n.  On CPU the Triton kernels run under TRITON_INTERPRET=1;
otherwise torch.geqrf.
"""

import os

import torch
import triton
import triton.language as tl

# qrsearch: params
PARAMS = {
    'nb': 16,
    'bn': 64,
    'rb': 64,
    'panel_elems': 32768,
    'bm_min': 64,
    'warps_bm_le256': 4,
    'warps_bm_le1024': 8,
    'warps_bm_gt1024': 16,
    'prec_w': 'ieee',
    'prec_t': 'ieee',
    'prec_u': 'ieee',
    'prec_g': 'ieee',
}
# qrsearch: end params


@triton.jit
def _reflect(P, rows, cols, cr, cc):
    """Annihilate tile column cc below tile row cr (its diagonal element).

    Returns the tile and tau; columns < cc and rows < cr are left untouched.
    """
    x = tl.sum(tl.where(cols[None, :] == cc, P, 0.0), axis=1)
    xt = tl.where(rows > cr, x, 0.0)
    sp = tl.sum(tl.join(xt[:, None] * P, tl.where(rows[:, None] == cr, P, 0.0)), axis=0)
    s, p = tl.split(sp)
    alpha = tl.sum(tl.where(cols == cc, p, 0.0), axis=0)
    tail2 = tl.sum(tl.where(cols == cc, s, 0.0), axis=0)
    nrm = tl.sqrt(alpha * alpha + tail2)
    has = tail2 > 0.0
    if (tail2 < 1e-30) | (tail2 > 1e30) | (tl.abs(alpha) > 1e15):
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
def _load_v(h, kp, r0, shr, shc, N, NB: tl.constexpr, RB: tl.constexpr):
    """Rows r0..r0+RB of the unit lower-trapezoidal V of the panel at column kp."""
    rr = r0 + tl.arange(0, RB)
    cc = kp + tl.arange(0, NB)
    V = tl.load(h + rr[:, None] * shr + cc[None, :] * shc,
                mask=(rr[:, None] > cc[None, :]) & (rr[:, None] < N) & (cc[None, :] < N), other=0.0)
    return tl.where(rr[:, None] == cc[None, :], 1.0, V)


@triton.jit
def _apply_wy(h, tw, kp, c0, shr, shc, N, NB: tl.constexpr, RB: tl.constexpr,
              WIDTH: tl.constexpr, PREC_W: tl.constexpr, PREC_T: tl.constexpr, PREC_U: tl.constexpr):
    """Columns c0..c0+WIDTH, rows kp..N  <-  (I - V T Vᵀ)ᵀ times themselves (panel at kp)."""
    cc = c0 + tl.arange(0, WIDTH)
    ti = tl.arange(0, NB)
    T = tl.load(tw + ti[:, None] * NB + ti[None, :])
    W = tl.zeros([NB, WIDTH], dtype=tl.float32)
    r0 = kp
    while r0 < N:
        rr = r0 + tl.arange(0, RB)
        V = _load_v(h, kp, r0, shr, shc, N, NB, RB)
        C = tl.load(h + rr[:, None] * shr + cc[None, :] * shc, mask=(rr[:, None] < N) & (cc[None, :] < N), other=0.0)
        W = tl.dot(tl.trans(V), C, W, input_precision=PREC_W)
        r0 += RB
    W2 = tl.dot(tl.trans(T), W, input_precision=PREC_T)
    r0 = kp
    while r0 < N:
        rr = r0 + tl.arange(0, RB)
        V = _load_v(h, kp, r0, shr, shc, N, NB, RB)
        cm = (rr[:, None] < N) & (cc[None, :] < N)
        C = tl.load(h + rr[:, None] * shr + cc[None, :] * shc, mask=cm, other=0.0)
        C = C - tl.dot(V, W2, input_precision=PREC_U)
        tl.store(h + rr[:, None] * shr + cc[None, :] * shc, C, mask=cm)
        r0 += RB


@triton.jit
def _factor_panel(src, h, tau_ptr, tw, k, ssr, ssc, shr, shc, N, BM: tl.constexpr,
                  NB: tl.constexpr, SB: tl.constexpr, RB: tl.constexpr, PREC_G: tl.constexpr):
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
            X, tau = _reflect(X, rows, cols, s * SB + c, c)
            taus = tl.where(cols == c, tau, taus)
        tl.store(h + (k + rows)[:, None] * shr + (c0 + cols)[None, :] * shc, X, mask=m2)
        tl.store(tau_ptr + c0 + cols, taus, mask=(c0 + cols) < N)
        tl.debug_barrier()
    # T from G = VᵀV:  T[:c, c] = -tau_c T[:c, :c] G[:c, c],  T[c, c] = tau_c
    ti = tl.arange(0, NB)
    G = tl.zeros([NB, NB], dtype=tl.float32)
    r0 = k
    while r0 < N:
        V = _load_v(h, k, r0, shr, shc, N, NB, RB)
        G = tl.dot(tl.trans(V), V, G, input_precision=PREC_G)
        r0 += RB
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
def _lookahead_kernel(A, H, TAU, TW, k, N, sab, sar, sac, shb, shr, shc, stb,
                      BM: tl.constexpr, NB: tl.constexpr, SB: tl.constexpr,
                      RB: tl.constexpr, BN: tl.constexpr, FIRST: tl.constexpr,
                      PREC_W: tl.constexpr, PREC_T: tl.constexpr, PREC_U: tl.constexpr, PREC_G: tl.constexpr):
    """Step for the panel at column k: factor it (program 0) after applying the
    previous panel's reflector to it; apply that reflector to one tile of the
    columns right of it (programs 1..)."""
    pid = tl.program_id(0).to(tl.int64)
    t = tl.program_id(1)
    a = A + pid * sab
    h = H + pid * shb
    tp = TAU + pid * stb
    slot = (k // NB) % 2
    tw_new = TW + (pid * 2 + slot) * NB * NB
    tw_old = TW + (pid * 2 + 1 - slot) * NB * NB
    if t == 0:
        if FIRST:
            _factor_panel(a, h, tp, tw_new, k, sar, sac, shr, shc, N, BM, NB, SB, RB, PREC_G)
        else:
            _apply_wy(h, tw_old, k - NB, k, shr, shc, N, NB, RB, NB, PREC_W, PREC_T, PREC_U)
            tl.debug_barrier()
            _factor_panel(h, h, tp, tw_new, k, shr, shc, shr, shc, N, BM, NB, SB, RB, PREC_G)
    else:
        c0 = k + NB + (t - 1) * BN
        if FIRST:
            cc = c0 + tl.arange(0, BN)
            r0 = 0
            while r0 < N:
                rr = r0 + tl.arange(0, RB)
                cm = (rr[:, None] < N) & (cc[None, :] < N)
                C = tl.load(a + rr[:, None] * sar + cc[None, :] * sac, mask=cm, other=0.0)
                tl.store(h + rr[:, None] * shr + cc[None, :] * shc, C, mask=cm)
                r0 += RB
        else:
            _apply_wy(h, tw_old, k - NB, c0, shr, shc, N, NB, RB, BN, PREC_W, PREC_T, PREC_U)


def _use_triton(A: torch.Tensor) -> bool:
    return A.is_cuda or os.environ.get("TRITON_INTERPRET") == "1"


def _warps(bm: int) -> int:
    if bm <= 256:
        return PARAMS["warps_bm_le256"]
    if bm <= 1024:
        return PARAMS["warps_bm_le1024"]
    return PARAMS["warps_bm_gt1024"]


def custom_kernel(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    batch, n = A.shape[0], A.shape[-1]
    if not _use_triton(A):
        return torch.geqrf(A)
    nb, bn, rb = PARAMS["nb"], PARAMS["bn"], PARAMS["rb"]
    H = torch.empty_like(A)
    tau = torch.empty((batch, n), dtype=A.dtype, device=A.device)
    tw = torch.empty((batch, 2, nb, nb), dtype=A.dtype, device=A.device)
    strides = (A.stride(0), A.stride(1), A.stride(2), H.stride(0), H.stride(1), H.stride(2), tau.stride(0))
    for k in range(0, n, nb):
        bm = max(PARAMS["bm_min"], triton.next_power_of_2(n - k))
        sb = max(1, min(nb, PARAMS["panel_elems"] // bm))
        tiles = triton.cdiv(n - k - nb, bn) if n - k > nb else 0
        _lookahead_kernel[(batch, 1 + tiles)](
            A, H, tau, tw, k, n, *strides,
            BM=bm, NB=nb, SB=sb, RB=rb, BN=bn, FIRST=(k == 0),
            PREC_W=PARAMS["prec_w"], PREC_T=PARAMS["prec_t"], PREC_U=PARAMS["prec_u"], PREC_G=PARAMS["prec_g"],
            num_warps=_warps(bm),
        )
    return H, tau
