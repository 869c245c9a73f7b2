"""householder_unblocked: one Triton program per matrix, the whole matrix held
on chip as one [NP, NP] register tile (NP = the next power of two ≥ max(n, 16)),
column-by-column Householder in FP32.

Each column costs one fused cross-warp reduction: the tail x of column c and
row c of the tile give, in a single two-operand reduction, s = x_tailᵀA and
p = A[c, :], from which the reflector (LAPACK slarfg conventions: beta =
-sign(alpha)·‖x‖, tau = (beta - alpha)/beta, tau = 0 for a zero tail) and
w = vᵀA = p + s/(alpha - beta) follow without a second reduction.  Tails whose
squared norm leaves [1e-30, 1e30] are rescaled by their max-abs before the
norm is taken.  No tl.dot, no TF32: exact FP32 arithmetic.

Meant for small n (about 8 to 128, e.g. 20×32), where launch latency and the
serial chain of n reflectors dominate and a blocked algorithm has nothing to
block; at 20×32 its time on an H200 is mostly launch and host overhead
(measurements: kernels/BENCHMARKS.md).  PARAMS["warps_<NP>"] picks the warps
per tile size.  For n above PARAMS["max_n"] the tile would not fit in registers;
the file then calls torch.geqrf (and that time counts as its own).  On CPU the Triton kernel
runs under TRITON_INTERPRET=1; without it, torch.geqrf.
"""

import os

import torch
import triton
import triton.language as tl

# qrsearch: params
PARAMS = {
    'max_n': 128,
    'join_reduce': True,
    'warps_16': 1,
    'warps_32': 1,
    'warps_64': 4,
    'warps_128': 8,
    'warps_256': 16,
}
# qrsearch: end params

# What a tuner may give each PARAMS key (the values above are the defaults).
# qrsearch: space
SPACE = {
    "max_n": [32, 64, 128, 256],
    "join_reduce": [False, True],
    "warps_16": [1, 2, 4],
    "warps_32": [1, 2, 4],
    "warps_64": [1, 2, 4, 8],
    "warps_128": [4, 8, 16],
    "warps_256": [8, 16, 32],
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
def _qr_tile_kernel(A, H, TAU, sab, sar, sac, shb, shr, shc, stb, n: tl.constexpr, NP: tl.constexpr,
                    JOIN: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    rows = tl.arange(0, NP)
    cols = tl.arange(0, NP)
    mask = (rows[:, None] < n) & (cols[None, :] < n)
    P = tl.load(A + pid * sab + rows[:, None] * sar + cols[None, :] * sac, mask=mask, other=0.0)
    taus = tl.zeros([NP], dtype=tl.float32)
    for c in range(0, n):
        P, tau = _reflect(P, rows, cols, c, c, JOIN)
        taus = tl.where(cols == c, tau, taus)
    tl.store(H + pid * shb + rows[:, None] * shr + cols[None, :] * shc, P, mask=mask)
    tl.store(TAU + pid * stb + cols, taus, mask=cols < n)


def _use_triton(A: torch.Tensor) -> bool:
    return A.is_cuda or os.environ.get("TRITON_INTERPRET") == "1"


def custom_kernel(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    batch, n = A.shape[0], A.shape[-1]
    if n > PARAMS["max_n"] or not _use_triton(A):
        return torch.geqrf(A)
    np2 = max(16, triton.next_power_of_2(n))
    H = torch.empty_like(A)
    tau = torch.empty((batch, n), dtype=A.dtype, device=A.device)
    warps = PARAMS["warps_%d" % np2]
    _qr_tile_kernel[(batch,)](
        A, H, tau, A.stride(0), A.stride(1), A.stride(2), H.stride(0), H.stride(1), H.stride(2),
        tau.stride(0), n=n, NP=np2, JOIN=PARAMS["join_reduce"], num_warps=warps,
    )
    return H, tau
