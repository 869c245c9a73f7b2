"""lookahead_split: blocked Householder QR for few large matrices, one launch
per NB-column panel, the trailing update split over many programs and the
next panel factored while the rest of the matrix is being updated.

Launch j runs batch × (P + tiles) programs.  Programs 0..P-1 of each matrix
apply the previous panel's compact-WY reflector to panel j's columns, factor
panel j and build T from G = VᵀV (LAPACK slarft recurrence, tau = 0 safe).
With P = 1 one program holds the panel (rows k..n as [BM, SB] register
sub-panels, later sub-panels left-looking).  For tall panels (more than
split_rows rows) P programs split the panel's rows and cooperate through a
flag barrier in global memory (one barrier per column: partial s = x_tailᵀX,
pivot row and scaled partial norms are summed by everyone), so a 4096-row
column costs a barrier instead of one SM's sweep over 4096 rows; P·batch never
exceeds the SM count, so all cooperating programs are resident.  Every other
program applies the previous panel's reflector C -= V·(Tᵀ·(VᵀC)) to one
BN-column tile right of panel j (three tl.dot GEMMs, precision a parameter
each).  The serial panel work overlaps the parallel update (look-ahead of
depth one), and all SMs work even for a batch of 2.  The defaults run W = VᵀC,
Tᵀ·W and the update on tensor cores at FP32 accuracy ("tf32x3"; plain TF32
fails the residual gate).  Panels use LAPACK slarfg conventions with one fused reduction
per column and norms that neither under- nor overflow.

With PARAMS["coop_panel"] = "cholqr2" a split panel takes two barriers
instead of one per column: Cholesky QR twice (G = XᵀX summed over the
programs, R = chol(G), Q = X·R⁻¹, twice), then Householder vectors
reconstructed from Q (Ballard et al. 2014: Q_top - D = L·U with signs D
chosen per step; V = [L; Q_rest·U⁻¹], R_H = D·R, tau_j = -U_jj·d_j,
T = -U·D·L⁻ᵀ).  Every program computes the NB×NB factors itself from the same
sums, so all take the same branch: a panel with a zero, non-finite or nearly
dependent column (a tiny Cholesky pivot, or Q1ᵀQ1 far from I) falls back to
the column-by-column factorisation.  On an H200 it passed qrv2-tests but was
not faster (kernels/BENCHMARKS.md), so the default stays "householder".

Meant for n of 352 and above, best where batches are small (60×1024, 8×2048,
2×4096); correct for every n.  On CPU the Triton kernels run under
TRITON_INTERPRET=1 (one program per panel there: the interpreter runs
programs one after the other); otherwise torch.geqrf.
"""

import os

import torch
import triton
import triton.language as tl

# qrsearch: params
PARAMS = {
    'nb': 32,
    'bn': 64,
    'bn_coop': 64,
    'rb': 64,
    'rb_panel': 64,
    'stages': 3,
    'stages_coop': 3,
    'join_reduce': True,
    'panel_programs': 32,
    'split_rows': 1024,
    'warps_split': 4,
    'warps_n_le512': 4,
    'stages_n_le512': 1,
    'panel_elems': 16384,
    'bm_min': 128,
    'warps_bm_le256': 4,
    'warps_bm_le1024': 4,
    'warps_bm_gt1024': 16,
    'prec_w': 'tf32x3',
    'prec_t': 'tf32x3',
    'prec_u': 'tf32x3',
    'prec_g': 'ieee',
    'coop_panel': 'householder',
}
# qrsearch: end params

# What a tuner may give each PARAMS key (the values above are the defaults): panel width nb; update
# tiles of bn columns × rb rows (bn_coop and stages_coop when panels are split; small n uses
# warps_n_le512 and stages_n_le512); the panel program's row chunk rb_panel; single-program panels
# keep panel_elems floats in registers ([BM, SB] with BM ≥ bm_min) and use warps_bm_* by panel
# height; panels taller than split_rows are split over panel_programs cooperating programs (1 = never;
# reduced so that programs × batch ≤ SMs, and off below 4 programs) with warps_split warps, and
# factored with a barrier per column or by Cholesky QR twice (coop_panel); one precision per GEMM.
# qrsearch: space
SPACE = {
    "nb": [16, 32],
    "bn": [32, 64, 128],
    "bn_coop": [32, 64, 128],
    "rb": [32, 64, 128],
    "rb_panel": [32, 64, 128, 256],
    "stages": [1, 2, 3],
    "stages_coop": [1, 2, 3],
    "join_reduce": [False, True],
    "panel_programs": [1, 8, 16, 32, 64],
    "split_rows": [512, 1024, 2048],
    "warps_split": [2, 4, 8],
    "warps_n_le512": [0, 4, 8],
    "stages_n_le512": [1, 2, 3],
    "panel_elems": [16384, 32768],
    "bm_min": [32, 64, 128],
    "warps_bm_le256": [2, 4, 8],
    "warps_bm_le1024": [4, 8, 16],
    "warps_bm_gt1024": [8, 16, 32],
    "prec_w": ["ieee", "tf32x3"],
    "prec_t": ["ieee", "tf32x3"],
    "prec_u": ["ieee", "tf32x3"],
    "prec_g": ["ieee", "tf32x3"],
    "coop_panel": ["householder", "cholqr2"],
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
def _load_v(h, kp, r0, shr, shc, N, NB: tl.constexpr, RB: tl.constexpr):
    """Rows r0..r0+RB of the unit lower-trapezoidal V of the panel at column kp."""
    rr = r0 + tl.arange(0, RB)
    cc = kp + tl.arange(0, NB)
    V = tl.load(h + rr[:, None] * shr + cc[None, :] * shc,
                mask=(rr[:, None] > cc[None, :]) & (rr[:, None] < N) & (cc[None, :] < N), other=0.0)
    return tl.where(rr[:, None] == cc[None, :], 1.0, V)


@triton.jit
def _apply_wy(h, tw, kp, c0, shr, shc, N, NB: tl.constexpr, RB: tl.constexpr, WIDTH: tl.constexpr,
              STAGES: tl.constexpr, PREC_W: tl.constexpr, PREC_T: tl.constexpr, PREC_U: tl.constexpr):
    """Columns c0..c0+WIDTH, rows kp..N  <-  (I - V T Vᵀ)ᵀ times themselves (panel at kp)."""
    cc = c0 + tl.arange(0, WIDTH)
    ti = tl.arange(0, NB)
    T = tl.load(tw + ti[:, None] * NB + ti[None, :])
    W = tl.zeros([NB, WIDTH], dtype=tl.float32)
    for r0 in tl.range(kp, N, RB, num_stages=STAGES):
        rr = r0 + tl.arange(0, RB)
        V = _load_v(h, kp, r0, shr, shc, N, NB, RB)
        C = tl.load(h + rr[:, None] * shr + cc[None, :] * shc, mask=(rr[:, None] < N) & (cc[None, :] < N), other=0.0)
        W = tl.dot(tl.trans(V), C, W, input_precision=PREC_W)
    W2 = tl.dot(tl.trans(T), W, input_precision=PREC_T)
    for r0 in tl.range(kp, N, RB, num_stages=STAGES):
        rr = r0 + tl.arange(0, RB)
        V = _load_v(h, kp, r0, shr, shc, N, NB, RB)
        cm = (rr[:, None] < N) & (cc[None, :] < N)
        C = tl.load(h + rr[:, None] * shr + cc[None, :] * shc, mask=cm, other=0.0)
        C = C - tl.dot(V, W2, input_precision=PREC_U)
        tl.store(h + rr[:, None] * shr + cc[None, :] * shc, C, mask=cm)


@triton.jit
def _factor_panel(src, h, tau_ptr, tw, k, ssr, ssc, shr, shc, N, BM: tl.constexpr, NB: tl.constexpr,
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
            X, tau = _reflect(X, rows, cols, s * SB + c, c, JOIN)
            taus = tl.where(cols == c, tau, taus)
        tl.store(h + (k + rows)[:, None] * shr + (c0 + cols)[None, :] * shc, X, mask=m2)
        tl.store(tau_ptr + c0 + cols, taus, mask=(c0 + cols) < N)
        tl.debug_barrier()
    # T from G = VᵀV:  T[:c, c] = -tau_c T[:c, :c] G[:c, c],  T[c, c] = tau_c
    ti = tl.arange(0, NB)
    G = tl.zeros([NB, NB], dtype=tl.float32)
    for r0 in tl.range(k, N, RB, num_stages=STAGES):
        V = _load_v(h, k, r0, shr, shc, N, NB, RB)
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
def _sync(flags, me, epoch, alive, P: tl.constexpr, WAIT, MAXSPIN: tl.constexpr):
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
def _upper_inv(U, NB: tl.constexpr):
    """U⁻¹ of an upper-triangular NB×NB tile, a column per step."""
    i = tl.arange(0, NB)
    Ui = tl.zeros([NB, NB], dtype=tl.float32)
    for j in range(0, NB):
        ucol = tl.sum(tl.where(i[None, :] == j, U, 0.0), axis=1)
        ujj = tl.sum(tl.where(i == j, ucol, 0.0), axis=0)
        c = tl.where(i == j, 1.0, 0.0) - tl.sum(Ui * tl.where(i < j, ucol, 0.0)[None, :], axis=1)
        Ui = tl.where(i[None, :] == j, (c / ujj)[:, None], Ui)
    return Ui


@triton.jit
def _chol_inv(G, NB: tl.constexpr):
    """R (upper, G = RᵀR) and R⁻¹, a row of R and a column of R⁻¹ per step.  ok is 1 only if
    every pivot is finite and above 1e-6 of its column's squared norm: a zero, non-finite or
    nearly dependent column sends the panel to Householder columns instead."""
    i = tl.arange(0, NB)
    R = tl.zeros([NB, NB], dtype=tl.float32)
    Ri = tl.zeros([NB, NB], dtype=tl.float32)
    diag = tl.sum(tl.where(i[:, None] == i[None, :], G, 0.0), axis=1)
    bad = tl.zeros([NB], dtype=tl.int32)
    S = G
    for j in range(0, NB):
        row = tl.sum(tl.where(i[:, None] == j, S, 0.0), axis=0)
        piv = tl.sum(tl.where(i == j, row, 0.0), axis=0)
        dj = tl.sum(tl.where(i == j, diag, 0.0), axis=0)
        good = (piv > 1e-6 * dj) & (piv < float("inf"))
        bad = tl.where(i == j, tl.where(good, 0, 1), bad)
        r = tl.sqrt(tl.where(good, piv, 1.0))
        rrow = tl.where(i >= j, row / r, 0.0)
        R = tl.where(i[:, None] == j, rrow[None, :], R)
        S = S - rrow[:, None] * rrow[None, :]
        rcol = tl.where(i < j, tl.sum(tl.where(i[None, :] == j, R, 0.0), axis=1), 0.0)
        c = tl.where(i == j, 1.0, 0.0) - tl.sum(Ri * rcol[None, :], axis=1)
        Ri = tl.where(i[None, :] == j, (c / r)[:, None], Ri)
    return R, Ri, 1 - tl.max(bad, axis=0)


@triton.jit
def _lu_signs(M, NB: tl.constexpr):
    """M - D = L·U without pivoting, D = diag(±1) chosen per step as minus the pivot's sign, so
    that |U_jj| = 1 + |pivot| (Householder reconstruction, Ballard et al. 2014).  Returns L
    below the diagonal and U on and above it in one tile, and D's diagonal."""
    i = tl.arange(0, NB)
    d = tl.zeros([NB], dtype=tl.float32)
    for j in range(0, NB):
        row = tl.sum(tl.where(i[:, None] == j, M, 0.0), axis=0)
        col = tl.sum(tl.where(i[None, :] == j, M, 0.0), axis=1)
        piv = tl.sum(tl.where(i == j, row, 0.0), axis=0)
        s = tl.where(piv < 0.0, 1.0, -1.0)
        piv = piv - s
        lcol = tl.where(i > j, col / piv, 0.0)
        M = M - lcol[:, None] * tl.where(i > j, row, 0.0)[None, :]
        M = tl.where(i[None, :] == j, tl.where(i > j, lcol, tl.where(i == j, piv, col))[:, None], M)
        d = tl.where(i == j, s, d)
    return M, d


@triton.jit
def _cholqr2(X, grow, rmask, cols, k, flags, partw, me, alive, e0, P: tl.constexpr, NB: tl.constexpr,
             MAXSPIN: tl.constexpr):
    """The panel (rows k.. of X's NB columns, split over the P programs) by Cholesky QR twice,
    then Householder vectors reconstructed from its Q: two barriers instead of one per column.

    G1 = XᵀX (summed over the programs), R1 = chol(G1), Q1 = X·R1⁻¹; G2 = Q1ᵀQ1 with Q1's rows
    k..k+NB published at the same barrier, R2 = chol(G2), Q = Q1·R2⁻¹, R = R2·R1.  Then
    Q_top - D = L·U (signs D chosen per step) gives V = [L; Q_rest·U⁻¹], R_H = D·R, tau = -U_jj·d_j
    and T = -U·D·L⁻ᵀ, so that Q_H = I - V·T·Vᵀ has Q·D as its first NB columns.  Every program
    computes the NB×NB factors itself from the same sums in the same order, so all agree on ok:
    0 when a Cholesky pivot is tiny or not finite, or Q1 is far from orthonormal
    (‖Q1ᵀQ1 - I‖_F ≥ 0.5): the caller then factors the panel column by column.  partw has three
    slots of P NB×NB tiles: 0 (W, then G2), 1 (G1) and 2 (Q1's top rows), so no slot is written
    while another program may still read it.  Epochs e0+2 and e0+3."""
    sl = NB * NB
    tile = cols[:, None] * NB + cols[None, :]
    eye = cols[:, None] == cols[None, :]
    Xp = tl.where((rmask & (grow >= k))[:, None], X, 0.0)
    tl.store(partw + (P + me) * sl + tile, tl.dot(tl.trans(Xp), Xp, input_precision="ieee"))
    alive = _sync(flags, me, e0 + 2, alive, P, True, MAXSPIN)
    G = tl.zeros([NB, NB], dtype=tl.float32)
    for q in range(0, P):
        G += tl.load(partw + (P + q) * sl + tile, volatile=True)
    R1, R1i, ok1 = _chol_inv(G, NB)
    Q = tl.dot(Xp, R1i, input_precision="ieee")
    E = tl.where(grow[:, None] == (k + cols)[None, :], 1.0, 0.0)  # picks this program's rows k..k+NB
    tl.store(partw + me * sl + tile, tl.dot(tl.trans(Q), Q, input_precision="ieee"))
    tl.store(partw + (2 * P + me) * sl + tile, tl.dot(tl.trans(E), Q, input_precision="ieee"))
    alive = _sync(flags, me, e0 + 3, alive, P, True, MAXSPIN)
    G = tl.zeros([NB, NB], dtype=tl.float32)
    Qt = tl.zeros([NB, NB], dtype=tl.float32)
    for q in range(0, P):
        G += tl.load(partw + q * sl + tile, volatile=True)
        Qt += tl.load(partw + (2 * P + q) * sl + tile, volatile=True)
    off = G - tl.where(eye, 1.0, 0.0)
    dev = tl.sum(tl.sum(off * off, axis=1), axis=0)
    R2, R2i, ok2 = _chol_inv(G, NB)
    ok = ok1 * ok2 * (dev < 0.25).to(tl.int32)
    Q = tl.dot(Q, R2i, input_precision="ieee")
    Qt = tl.dot(Qt, R2i, input_precision="ieee")
    R = tl.dot(R2, R1, input_precision="ieee")
    M, d = _lu_signs(Qt, NB)
    U = tl.where(cols[:, None] <= cols[None, :], M, 0.0)
    V = tl.dot(Q, _upper_inv(U, NB), input_precision="ieee")
    top = tl.where(cols[:, None] > cols[None, :], M, d[:, None] * R)  # L below, D·R on and above
    Xn = tl.where((grow >= k + NB)[:, None], V,
                  tl.where((grow >= k)[:, None], tl.dot(E, top, input_precision="ieee"), X))
    taus = -tl.sum(tl.where(eye, M, 0.0), axis=1) * d
    Lt = tl.where(cols[:, None] < cols[None, :], tl.trans(M), tl.where(eye, 1.0, 0.0))
    T = -tl.dot(U * d[None, :], _upper_inv(Lt, NB), input_precision="ieee")
    return ok, Xn, taus, T, alive


@triton.jit
def _coop_columns(X, grow, cols, pr, k, flags, part, me, alive, e, P: tl.constexpr, NB: tl.constexpr,
                  PW: tl.constexpr, MAXSPIN: tl.constexpr):
    """The panel's NB columns one after another, one barrier each (epochs e .. e+NB-1): each
    program publishes s = x_tailᵀX, the pivot row p, and (max|x|, Σ(x/max)²) of its rows; after
    the barrier all programs sum them (the norm is combined from scaled partial sums, so it
    neither under- nor overflows) and update their own rows."""
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
        alive = _sync(flags, me, e + c, alive, P, True, MAXSPIN)
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
    return X, taus, alive


@triton.jit
def _gram_t(X, grow, rmask, cols, k, N, taus, flags, partw, me, alive, e, P: tl.constexpr, NB: tl.constexpr,
            PREC_G: tl.constexpr, MAXSPIN: tl.constexpr):
    """T (valid in program 0) from G = VᵀV summed over the programs (slot 0 of partw, epoch e)
    and the taus: LAPACK slarft's recurrence T[:c, c] = -tau_c T[:c, :c] G[:c, c]."""
    Vl = tl.where(grow[:, None] > (k + cols)[None, :], X, 0.0)
    Vl = tl.where((grow[:, None] == (k + cols)[None, :]) & rmask[:, None], 1.0, Vl)
    Gp = tl.dot(tl.trans(Vl), Vl, input_precision=PREC_G)
    tl.store(partw + me * NB * NB + cols[:, None] * NB + cols[None, :], Gp)
    alive = _sync(flags, me, e, alive, P, me == 0, MAXSPIN)
    T = tl.zeros([NB, NB], dtype=tl.float32)
    if me == 0:
        G = tl.zeros([NB, NB], dtype=tl.float32)
        for q in range(0, P):
            G += tl.load(partw + q * NB * NB + cols[:, None] * NB + cols[None, :], volatile=True)
        tv = tl.where((k + cols) < N, taus, 0.0)
        for c in range(0, NB):
            g = tl.sum(tl.where(cols[None, :] == c, G, 0.0), axis=1)
            g = tl.where(cols < c, g, 0.0)
            tc = tl.sum(tl.where(cols == c, tv, 0.0), axis=0)
            tcol = -tc * tl.sum(T * g[None, :], axis=1)
            tcol = tl.where(cols == c, tc, tcol)
            T = tl.where(cols[None, :] == c, tcol[:, None], T)
    return T, alive


@triton.jit
def _coop_panel(src, h, tau_ptr, tw_old, tw_new, flags, part, partw, me, k, N, ssr, ssc, shr, shc, e0,
                NB: tl.constexpr, P: tl.constexpr, R: tl.constexpr, PW: tl.constexpr, FIRST: tl.constexpr,
                CHOLQR: tl.constexpr, PREC_W: tl.constexpr, PREC_T: tl.constexpr, PREC_U: tl.constexpr,
                PREC_G: tl.constexpr, MAXSPIN: tl.constexpr):
    """Panel at column k split by rows over P cooperating programs (me = 0..P-1).

    Program ``me`` holds rows base + me*R .. +R (base = k - NB, or 0 at the
    first panel) of the panel's NB columns in registers.  It applies the
    previous panel's reflector (one barrier to sum W = VᵀC), then factors the
    NB columns: with CHOLQR by Cholesky QR twice and Householder reconstruction
    (two barriers), falling back to the column-by-column factorisation (one
    barrier per column, then G = VᵀV summed for T) when that panel is too close
    to rank-deficient for it.  Epochs e0+1 .. e0+NB+4.
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
        alive = _sync(flags, me, e0 + 1, alive, P, True, MAXSPIN)
        W = tl.zeros([NB, NB], dtype=tl.float32)
        for q in range(0, P):
            W += tl.load(partw + q * NB * NB + cols[:, None] * NB + cols[None, :], volatile=True)
        T = tl.load(tw_old + cols[:, None] * NB + cols[None, :])
        W2 = tl.dot(tl.trans(T), W, input_precision=PREC_T)
        X = X - tl.dot(V, W2, input_precision=PREC_U)
    if CHOLQR:
        ok, Xc, tc, Tc, alive = _cholqr2(X, grow, rmask, cols, k, flags, partw, me, alive, e0, P, NB, MAXSPIN)
        if ok == 0:
            X, taus, alive = _coop_columns(X, grow, cols, pr, k, flags, part, me, alive, e0 + 4, P, NB, PW, MAXSPIN)
            T, alive = _gram_t(X, grow, rmask, cols, k, N, taus, flags, partw, me, alive, e0 + NB + 4, P, NB,
                               PREC_G, MAXSPIN)
        else:
            X = Xc
            taus = tc
            T = Tc
    else:
        X, taus, alive = _coop_columns(X, grow, cols, pr, k, flags, part, me, alive, e0 + 4, P, NB, PW, MAXSPIN)
        T, alive = _gram_t(X, grow, rmask, cols, k, N, taus, flags, partw, me, alive, e0 + NB + 4, P, NB,
                           PREC_G, MAXSPIN)
    tl.store(h + grow[:, None] * shr + (k + cols)[None, :] * shc, X, mask=m2)
    if me == 0:
        tl.store(tau_ptr + k + cols, taus, mask=(k + cols) < N)
        tl.store(tw_new + cols[:, None] * NB + cols[None, :], T)


@triton.jit
def _step(a, h, tp, tw_new, tw_old, t, k, N, sar, sac, shr, shc, flags, part, partw, e0,
          BM: tl.constexpr, NB: tl.constexpr, SB: tl.constexpr, RB: tl.constexpr, RBP: tl.constexpr,
          BN: tl.constexpr, FIRST: tl.constexpr, STAGES: tl.constexpr, JOIN: tl.constexpr,
          SPLIT: tl.constexpr, P: tl.constexpr, R: tl.constexpr, PW: tl.constexpr, MAXSPIN: tl.constexpr,
          CHOLQR: tl.constexpr, PREC_W: tl.constexpr, PREC_T: tl.constexpr, PREC_U: tl.constexpr,
          PREC_G: tl.constexpr):
    # k and N arrive as arguments (never assigned here): the interpreter turns
    # assigned ints into tensors, which cannot bound a loop.
    if SPLIT:
        if t < P:
            if FIRST:
                _coop_panel(a, h, tp, tw_old, tw_new, flags, part, partw, t, k, N, sar, sac, shr, shc, e0,
                            NB, P, R, PW, FIRST, CHOLQR, PREC_W, PREC_T, PREC_U, PREC_G, MAXSPIN)
            else:
                _coop_panel(h, h, tp, tw_old, tw_new, flags, part, partw, t, k, N, shr, shc, shr, shc, e0,
                            NB, P, R, PW, FIRST, CHOLQR, PREC_W, PREC_T, PREC_U, PREC_G, MAXSPIN)
    else:
        if t == 0:
            if FIRST:
                _factor_panel(a, h, tp, tw_new, k, sar, sac, shr, shc, N, BM, NB, SB, RBP, STAGES, JOIN, PREC_G)
            else:
                _apply_wy(h, tw_old, k - NB, k, shr, shc, N, NB, RBP, NB, STAGES, PREC_W, PREC_T, PREC_U)
                tl.debug_barrier()
                _factor_panel(h, h, tp, tw_new, k, shr, shc, shr, shc, N, BM, NB, SB, RBP, STAGES, JOIN, PREC_G)
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
            _apply_wy(h, tw_old, k - NB, c0, shr, shc, N, NB, RB, BN, STAGES, PREC_W, PREC_T, PREC_U)


# e0 (the barrier epoch) only numbers flags: specialising on its divisibility by 16 would
# compile a second variant of every step for nothing.
@triton.jit(do_not_specialize=["e0"])
def _lookahead_kernel(A, H, TAU, TW, FLAGS, PART, PARTW, k_rt, n_rt, e0, sab, sar, sac, shb, shr, shc, stb,
                      K_CONST: tl.constexpr, N_CONST: tl.constexpr, BM: tl.constexpr, NB: tl.constexpr,
                      SB: tl.constexpr, RB: tl.constexpr, RBP: tl.constexpr, BN: tl.constexpr,
                      FIRST: tl.constexpr, STAGES: tl.constexpr, JOIN: tl.constexpr, SPLIT: tl.constexpr,
                      P: tl.constexpr, R: tl.constexpr, PW: tl.constexpr, MAXSPIN: tl.constexpr,
                      CHOLQR: tl.constexpr, PREC_W: tl.constexpr, PREC_T: tl.constexpr, PREC_U: tl.constexpr, PREC_G: tl.constexpr):
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
    partw = PARTW + pid * (3 * P * NB * NB)
    if K_CONST >= 0:
        _step(a, h, tp, tw_new, tw_old, t, K_CONST, N_CONST, sar, sac, shr, shc, flags, part, partw, e0,
              BM, NB, SB, RB, RBP, BN, FIRST, STAGES, JOIN, SPLIT, P, R, PW, MAXSPIN, CHOLQR, PREC_W, PREC_T, PREC_U, PREC_G)
    else:
        _step(a, h, tp, tw_new, tw_old, t, k_rt, n_rt, sar, sac, shr, shc, flags, part, partw, e0,
              BM, NB, SB, RB, RBP, BN, FIRST, STAGES, JOIN, SPLIT, P, R, PW, MAXSPIN, CHOLQR, PREC_W, PREC_T, PREC_U, PREC_G)


def _use_triton(A: torch.Tensor) -> bool:
    return A.is_cuda or os.environ.get("TRITON_INTERPRET") == "1"


def _warps(bm: int) -> int:
    if bm <= 256:
        return PARAMS["warps_bm_le256"]
    if bm <= 1024:
        return PARAMS["warps_bm_le1024"]
    return PARAMS["warps_bm_gt1024"]


_SM_COUNT = {}


def _sm_count(device: torch.device) -> int:
    if device.type != "cuda":
        return 1 << 30
    if device not in _SM_COUNT:
        _SM_COUNT[device] = torch.cuda.get_device_properties(device).multi_processor_count
    return _SM_COUNT[device]


def custom_kernel(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    batch, n = A.shape[0], A.shape[-1]
    if not _use_triton(A):
        return torch.geqrf(A)
    nb, bn, rb = PARAMS["nb"], PARAMS["bn"], PARAMS["rb"]
    H = torch.empty_like(A)
    tau = torch.empty((batch, n), dtype=A.dtype, device=A.device)
    tw = torch.empty((batch, 2, nb, nb), dtype=A.dtype, device=A.device)
    interp = os.environ.get("TRITON_INTERPRET") == "1"
    # Cooperative panels: every panel program must be resident at once (they
    # wait for each other), so P * batch may not exceed the SM count.
    # (The interpreter runs programs one after the other: there P is 1, which
    # still runs the cooperative code path.)
    coop = PARAMS["panel_programs"] > 1
    p = 1 if interp else PARAMS["panel_programs"]
    while p > 1 and p * batch > _sm_count(A.device):
        p //= 2
    if not interp and p < 4:  # too few programs per matrix to pay for the barriers
        coop = False
    split_from = n - PARAMS["split_rows"] if coop else -1  # panels k < split_from are split
    # Few large matrices (cooperative panels) want more, narrower update tiles.
    bn = PARAMS["bn_coop"] if coop else bn
    stages = PARAMS["stages_coop"] if coop else PARAMS["stages"]
    small_warps = PARAMS["warps_n_le512"] if n <= 512 else 0  # 0: by panel height
    stages = PARAMS["stages_n_le512"] if n <= 512 else stages
    pw = triton.next_power_of_2(2 * nb + 2)
    flags = torch.zeros((batch, max(p, 1)), dtype=torch.int32, device=A.device)
    part = torch.empty((batch, 2, max(p, 1), pw), dtype=A.dtype, device=A.device)
    partw = torch.empty((batch, 3, max(p, 1), nb, nb), dtype=A.dtype, device=A.device)
    strides = (A.stride(0), A.stride(1), A.stride(2), H.stride(0), H.stride(1), H.stride(2), tau.stride(0))
    for k in range(0, n, nb):
        split = k < split_from
        rows = n - k + (nb if k else 0)  # rows a split panel's programs cover
        r = max(16, triton.next_power_of_2(triton.cdiv(rows, p))) if split else 16
        bm = max(PARAMS["bm_min"], triton.next_power_of_2(n - k))
        sb = max(1, min(nb, PARAMS["panel_elems"] // bm))
        npan = p if split else 1
        if split:
            # A split step never reads the one-program panel's settings: fixed values, so that
            # neither the panel height nor a child's panel parameters make new variants of it.
            bm, sb, rbp = 16, 1, 16
        else:
            rbp = PARAMS["rb_panel"]
        tiles = triton.cdiv(n - k - nb, bn) if n - k > nb else 0
        _lookahead_kernel[(batch, npan + tiles)](
            A, H, tau, tw, flags, part, partw, k, n, (k // nb) * (nb + 5), *strides,
            K_CONST=k if interp else -1, N_CONST=n if interp else -1,
            BM=bm, NB=nb, SB=sb, RB=rb, RBP=rbp, BN=bn, FIRST=(k == 0), STAGES=stages,
            JOIN=PARAMS["join_reduce"], SPLIT=split, P=npan, R=r, PW=pw, MAXSPIN=1 << 20,
            CHOLQR=split and PARAMS["coop_panel"] == "cholqr2",
            PREC_W=PARAMS["prec_w"], PREC_T=PARAMS["prec_t"], PREC_U=PARAMS["prec_u"],
            PREC_G=PARAMS["prec_g"], num_warps=PARAMS["warps_split"] if split else (small_warps or _warps(bm)),
        )
    return H, tau
