"""blocked_wy: blocked Householder QR, one Triton program per matrix, all
panels and trailing updates fused in a single launch.

For each panel of NB columns: the panel (rows k..n, padded to BM rows) is
factored column by column in registers (one fused cross-warp reduction per
column, LAPACK slarfg conventions, rescaled norms when squares under- or
overflow); the same reduction yields VᵀV column by column, so the compact-WY
factor T (LAPACK slarft recurrence, tau = 0 safe) is built on the fly.  The
trailing matrix is then updated as C -= V·(Tᵀ·(VᵀC)) in BN-column tiles and
RB-row chunks with three tl.dot GEMMs whose input precision is a parameter
each ("ieee" exact FP32, "tf32x3" near-FP32 on tensor cores).  The input is
read once (the first panel step reads A and writes H), never modified.

Meant for n from about 128 to 1024 and batches large enough to fill the GPU
(640×512 above all).  For n above PARAMS["max_n"] the file calls torch.geqrf.
On CPU the Triton kernel runs under TRITON_INTERPRET=1; otherwise torch.geqrf.
"""

import os

import torch
import triton
import triton.language as tl

# qrsearch: params
PARAMS = {
    'nb_le256': 32,
    'nb_le512': 32,
    'nb_le1024': 32,
    'nb_gt1024': 16,
    'warps_le256': 4,
    'warps_le512': 8,
    'warps_le1024': 16,
    'warps_gt1024': 16,
    'bn': 32,
    'rb': 64,
    'stages': 1,
    'shrink': 1,
    'prec_w': 'ieee',
    'prec_t': 'ieee',
    'prec_u': 'ieee',
    'max_n': 2048,
}
# qrsearch: end params


@triton.jit
def _reflect(P, rows, cols, c):
    """Annihilate column c of the tile below row c (diagonal at tile (c, c)).

    Returns the tile, tau and w = vᵀP (whose entries left of c are VᵀV's
    column c, used for T).  Columns < c and rows < c are left untouched.
    """
    x = tl.sum(tl.where(cols[None, :] == c, P, 0.0), axis=1)
    xt = tl.where(rows > c, x, 0.0)
    sp = tl.sum(tl.join(xt[:, None] * P, tl.where(rows[:, None] == c, P, 0.0)), axis=0)
    s, p = tl.split(sp)
    alpha = tl.sum(tl.where(cols == c, p, 0.0), axis=0)
    tail2 = tl.sum(tl.where(cols == c, s, 0.0), axis=0)
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
    wu = tl.where(cols > c, w, 0.0) * tau
    v = tl.where(rows > c, x * inv, 0.0) + tl.where(rows == c, 1.0, 0.0)
    P = P - v[:, None] * wu[None, :]
    newcol = tl.where(rows == c, tl.where(has, beta, alpha), tl.where(rows > c, tl.where(has, x * inv, x), x))
    P = tl.where(cols[None, :] == c, newcol[:, None], P)
    return P, tau, w


@triton.jit
def _load_v(h, k, r0, shr, shc, N: tl.constexpr, NB: tl.constexpr, RB: tl.constexpr):
    """Rows r0..r0+RB of the unit lower-trapezoidal V of the panel at column k."""
    rr = r0 + tl.arange(0, RB)
    cc = k + tl.arange(0, NB)
    V = tl.load(h + rr[:, None] * shr + cc[None, :] * shc,
                mask=(rr[:, None] > cc[None, :]) & (rr[:, None] < N) & (cc[None, :] < N), other=0.0)
    return tl.where(rr[:, None] == cc[None, :], 1.0, V)


@triton.jit
def _step(src, h, tau_ptr, k, ssr, ssc, shr, shc,
          N: tl.constexpr, BM: tl.constexpr, NB: tl.constexpr, RB: tl.constexpr, BN: tl.constexpr,
          STAGES: tl.constexpr, PREC_W: tl.constexpr, PREC_T: tl.constexpr, PREC_U: tl.constexpr):
    """Factor the panel at column k (rows k..N) and update the trailing columns."""
    rows = tl.arange(0, BM)
    cols = tl.arange(0, NB)
    m2 = ((k + rows)[:, None] < N) & ((k + cols)[None, :] < N)
    P = tl.load(src + (k + rows)[:, None] * ssr + (k + cols)[None, :] * ssc, mask=m2, other=0.0)
    T = tl.zeros([NB, NB], dtype=tl.float32)
    taus = tl.zeros([NB], dtype=tl.float32)
    for c in range(0, NB):
        P, tau, w = _reflect(P, rows, cols, c)
        taus = tl.where(cols == c, tau, taus)
        g = tl.where(cols < c, w, 0.0)
        tcol = -tau * tl.sum(T * g[None, :], axis=1)
        tcol = tl.where(cols == c, tau, tcol)
        T = tl.where(cols[None, :] == c, tcol[:, None], T)
    tl.store(h + (k + rows)[:, None] * shr + (k + cols)[None, :] * shc, P, mask=m2)
    tl.store(tau_ptr + k + cols, taus, mask=(k + cols) < N)
    tl.debug_barrier()
    for j0 in range(k + NB, N, BN):
        cc = j0 + tl.arange(0, BN)
        W = tl.zeros([NB, BN], dtype=tl.float32)
        for r0 in tl.range(k, N, RB, num_stages=STAGES):
            rr = r0 + tl.arange(0, RB)
            V = _load_v(h, k, r0, shr, shc, N, NB, RB)
            C = tl.load(src + rr[:, None] * ssr + cc[None, :] * ssc,
                        mask=(rr[:, None] < N) & (cc[None, :] < N), other=0.0)
            W = tl.dot(tl.trans(V), C, W, input_precision=PREC_W)
        W2 = tl.dot(tl.trans(T), W, input_precision=PREC_T)
        for r0 in tl.range(k, N, RB, num_stages=STAGES):
            rr = r0 + tl.arange(0, RB)
            V = _load_v(h, k, r0, shr, shc, N, NB, RB)
            cm = (rr[:, None] < N) & (cc[None, :] < N)
            C = tl.load(src + rr[:, None] * ssr + cc[None, :] * ssc, mask=cm, other=0.0)
            C = C - tl.dot(V, W2, input_precision=PREC_U)
            tl.store(h + rr[:, None] * shr + cc[None, :] * shc, C, mask=cm)
    tl.debug_barrier()


@triton.jit
def _blocked_qr_kernel(A, H, TAU, sab, sar, sac, shb, shr, shc, stb,
                       N: tl.constexpr, BM: tl.constexpr, NB: tl.constexpr, RB: tl.constexpr,
                       BN: tl.constexpr, K1: tl.constexpr, K2: tl.constexpr, STAGES: tl.constexpr,
                       PREC_W: tl.constexpr, PREC_T: tl.constexpr, PREC_U: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    a = A + pid * sab
    h = H + pid * shb
    t = TAU + pid * stb
    # The first step reads A and writes every column of H; later steps work in H.
    _step(a, h, t, 0, sar, sac, shr, shc, N, BM, NB, RB, BN, STAGES, PREC_W, PREC_T, PREC_U)
    for k in range(NB, K1, NB):
        _step(h, h, t, k, shr, shc, shr, shc, N, BM, NB, RB, BN, STAGES, PREC_W, PREC_T, PREC_U)
    if K2 > K1:  # the remaining rows fit in half the panel height
        for k in range(K1, K2, NB):
            _step(h, h, t, k, shr, shc, shr, shc, N, BM // 2, NB, RB, BN, STAGES, PREC_W, PREC_T, PREC_U)
    if N > K2:  # ... in a quarter
        for k in range(K2, N, NB):
            _step(h, h, t, k, shr, shc, shr, shc, N, BM // 4, NB, RB, BN, STAGES, PREC_W, PREC_T, PREC_U)


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
    _blocked_qr_kernel[(batch,)](
        A, H, tau, A.stride(0), A.stride(1), A.stride(2), H.stride(0), H.stride(1), H.stride(2), tau.stride(0),
        N=n, BM=bm, NB=nb, RB=PARAMS["rb"], BN=PARAMS["bn"], K1=k1, K2=k2, STAGES=PARAMS["stages"],
        PREC_W=PARAMS["prec_w"], PREC_T=PARAMS["prec_t"], PREC_U=PARAMS["prec_u"],
        num_warps=PARAMS["warps_" + size],
    )
    return H, tau
