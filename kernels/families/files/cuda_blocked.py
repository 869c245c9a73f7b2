"""cuda_blocked: blocked Householder QR whose panels are a CUDA C++ kernel (built with
torch.utils.cpp_extension.load_inline) and whose trailing updates are, per size class of n,
cuBLAS FP32 GEMMs through torch.bmm or a Triton kernel of split tensor-core products
(PARAMS update_*).

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
matrix C = H[:, k:, k+block:], with K = the block width (wider blocks: fewer passes over
the matrix):

    W = Vᵀ C     (torch.bmm)      W = Tᵀ W     (torch.bmm)      C -= V W     (baddbmm_, in place)

in exact FP32 (PARAMS update_* = "fp32"; torch's default keeps TF32 off for matmuls), or one
Triton kernel per update (update_* = "tf32x3" or "bf16x3"), a program per matrix and
apply_bn-column tile of C: W = VᵀC over apply_bm-row blocks of C, then C -= V·(TᵀW) over
them again (bottom up where PARAMS apply_up_* say: the rows read last are the likeliest still in
L2), C's tile read twice and written once; every product on the tensor cores as three
products of split operands (x = hi + lo; hi·hi + hi·lo + lo·hi accumulated in FP32).  With
TF32 halves a product keeps about 2^-21 of relative accuracy, with bf16 halves (twice the
tensor-core rate) about 2^-16; plain TF32 (2^-11) failed the residual gate at n = 512.  The
defaults are bf16 halves for n >= 512: on an H200 every qrv2-tests case passed with at most
0.45 of the gate's 20 at 512 <= n <= 1024, faster than cuBLAS FP32
(kernels/BENCHMARKS.md#tensor-core-block-updates); below n = 512 the gate is tighter (it
scales with n) and CPU-emulated mixed inputs at n = 97 reached 10 of 20, so smaller n keep
FP32.

The first block reads the input and writes H (its panels and the update of the rest of the matrix
cover every element), so H is allocated, not copied from A (0.32 of 6 ms at 640x512).  The panel
kernel loads its columns into shared memory as cp.async copies, all of a thread's in flight at once
(PARAMS panel_async_loads; 640x512 5.05 -> 4.79 ms in one process on an H100).  Panels of at
most 512 rows and 32 columns, when there are more matrices than SMs (a launch in waves), run as 8
warps of four columns with registers capped for two blocks an SM, so one block's per-column latency
overlaps another's (640x512 panels 2.12 -> 1.70 ms on an H200).  The warp that builds the next
reflector works on its slot of the register tile in place (a copy of the step per slot) where
registers allow, instead of selecting the column out and back: at 60x1024 the selects spilled
(panels 2.27 -> 1.63 ms without them), at 640x512 they cost 1.70 -> 1.54 ms
(kernels/BENCHMARKS.md#panels-two-to-an-sm).  A tall leaf's launches after its first Gram, and a split
update's two kernels, are programmatic dependent launches (PARAMS pdl, sm_90): each is scheduled
while the kernel before it still runs and waits on the GPU for that kernel's writes, so the leaf's
chain of short launches does not pay each launch's latency (2x4096 9.99 -> 9.78 ms, 8x2048 5.55 ->
5.46 on an H100).

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
registers hold the panel.  Above n = 1024 (PARAMS panel_gt1024 = "cholqr2", and where
panel_le512 / panel_le1024 ask for it below) a panel is 32 columns of Cholesky QR twice instead: the
Grams in float64 over row chunks of 64 (many blocks a matrix, summed by atomics), the 32x32 Cholesky
factors, their inverses, and the Householder reconstruction (Ballard et al. 2014: Q1 - S = L U with
the signs S chosen per step, V = [L; Q2 U^-1], R_H = S R, T = -U S L^-T) on one block of 1024
threads holding an element each, then V's rows below the top block over the chunks again.  The
inverses come from the factor's own sweep applied to an identity (Gauss-Jordan; PARAMS cholqr_inverse
= "sweep": 96 barrier steps a leaf instead of 192, 2x4096 4.8% faster on an H200), or from triangular
solves after each factor ("solve"); with "warp" the first pass runs on one warp a matrix, the factor
and its inverse in registers and shuffles, no block barrier (27 us a leaf against the sweep's 16 on an
H100: slower); with "blocked" the first pass is blocked: warp 0 factors each diagonal block of
cholqr_block pivots in registers (its lanes also form the block's rows to the right), then every
warp below updates its row, two barriers a block instead of one a pivot (14.8 -> 12.8 us a leaf at
2x4096 on an H100; the second pass's LU blocked the same way was slower).  Q = P R1^-1 is formed in
float64, so where the first pass bounds its loss of orthogonality (about u64 (m w + w^2) κ_F², κ_F
of the column-equilibrated panel from R1 and R1^-1) by PARAMS cholqr_one_pass, that matrix skips
the second pass: its second Gram and Cholesky return at once and R2 = I (2x4096 -18%, 8x2048 -16% on
an H100; kernels/BENCHMARKS.md#one-pass-leaves); with PARAMS cholqr_fold its top block is then built
in the first pass's launch, from R1 and R1^-1 still on chip, and the second kernel returns at once
too.  A matrix whose panel is nearly dependent (a pivot under 1e-12 of its column's square norm, or
Q1ᵀQ1 more than 0.1 from I) is flagged and factored column by column inside the second kernel, so
the path is exact for every input, whatever the rest of the batch holds.  The block merges' V1ᵀV2 over 1024 rows or more
is split over those rows by a CUDA kernel (cuBLAS ran the long, thin product on a few blocks).  Above
n = 1024 the residual gate is 20·n·eps32 (4.9e-3 at 2048) and every stress profile passed at 2048 and
4096 on an H200: the wide updates are the Triton kernel's bf16x3 products by default (PARAMS
update_gt1024), and the narrow ones (at most narrow_cols_gt1024 columns) compute VᵀC split over the
rows and C -= V·(TᵀW) by row chunks, in exact FP32 on the CUDA cores (narrow_gt1024 = "split";
kernels/BENCHMARKS.md#tall-cholesky-qr-leaves), each block of the second forming its own columns of
TᵀW (narrow_fold_t: one launch fewer a narrow update, 2x4096 -1.7% on an H100).  Above n = 1024 the factorisation is a few thousand
launches, so it is replayed as a CUDA graph (PARAMS["graph_gt1024"]).

A leaf can also run as one launch (PARAMS cholqr_fused): each block keeps its chunk of rows in shared
memory from the first Gram to V, meets its matrix's other blocks through a counter in global memory
after each Gram, and the 32x32 factors (both Choleskys, the inverses, the signed LU, T) are computed
by every block, bit for bit alike, with the five launches' element-parallel steps (four elements a
thread, a block barrier a step).
Blocks take their matrix and chunk from a ticket in start order, so a matrix waits only for blocks
that have started; the host takes the five launches where a matrix's chunks could not all be
resident, and a wait of seconds traps instead of hanging.  A split narrow update can run the same way
(PARAMS narrow_fused): each block adds its 64 rows' part of VᵀC into W, meets the others, and applies
V·(TᵀW) to its rows, one launch instead of four; only on the main stream, so that two kernels whose
blocks wait for each other never share the GPU.  The tests run both kernels on CPU threads
(tests/kernels/host_emulation.h).

Inside a captured graph the blocks look one ahead (PARAMS lookahead_*): block j first updates only
the columns of block j+1, then its update of the rest runs on a second stream of the capture beside
the factorisation of block j+1 (the two touch different columns of H, and each block has its own Vᵀ
and T buffer), and the streams join before block j+1 updates anything.  At 60x1024 the 60 panels
leave 72 SMs idle; the side update's Triton grid is capped at one program per idle SM
(lookahead_programs), each walking several tiles, so the next panel kernel is not queued behind a
full grid of update programs (4.71 -> 4.44 ms on an H200; the uncapped grid was slower than no
lookahead).  At 2x4096, with blocks of 64 (block_gt2048), 18.3 -> 16.4 ms; at 640x512, where the
panels fill the GPU, it does not pay (kernels/BENCHMARKS.md#lookahead-in-the-graph); at 8x2048 it did
not either until the one-pass leaves and blocks of 64 (block_gt1024) shortened the chain: then 6.68
-> 6.56 ms on an H100 (kernels/BENCHMARKS.md#one-pass-leaves).  The
call still launches one graph on the caller's stream, and the second stream's branch joins inside
it; without a graph a call stays on the caller's stream and the blocks do not look ahead.

A matrix whose trailing columns are zero (a rank-deficient input) or negligible (PARAMS tail_*: each
such column's 1-norm at most 8·eps32 times the matrix's first column's, as a clustered-scale input's
last half is) is factored over its kept columns only: tau is 0 past them, and R holds there zeros or a
transform of the dropped column.  That changes R - QᵀA by at most 2√n·8·eps32·‖A‖₁ in 1-norm, 16/√n of
the unit the contract's residual gate (20) counts in, whatever the input.  A scan reads each matrix's
first and last 8 columns (all a dense matrix costs), then 32-column chunks leftwards to its first kept
one.  Per matrix on the device (PARAMS tail_scope), the updates skip the tiles past each matrix's count
and the panels past it are identity reflectors, with no host sync; or the factorisation is cut at the
batch's count, read on the host while the GPU factors the first block; or both
(kernels/BENCHMARKS.md#negligible-trailing-columns).

Above PARAMS["max_n"] (or without CUDA) the file calls torch.geqrf.  The build is cached by a hash of
the source and target in TORCH_EXTENSIONS_DIR (first call on a new source: about a minute of nvcc).

Meant for moderate and large n with enough matrices to fill the GPU (640x512, 60x1024) and for
the tall cases (8x2048, 2x4096).  Where a 640x512 call's device time goes: the Triton bf16x3
updates and the panels about equally; publishing reflectors with flags instead of the per-column
barrier, and an update holding C's tile in shared memory (wmma), were measured slower.  Measured
times: kernels/BENCHMARKS.md.
"""
import hashlib
import os

import torch
import triton
import triton.language as tl

# qrsearch: params
PARAMS = {
    'max_n': 4096,
    'nb_le384': 64,
    'block_le384': 64,
    'nb_le512': 32,
    'block_le512': 64,
    'nb_le1024': 32,
    'block_le1024': 64,
    'nb_le2048': 16,
    'block_gt1024': 64,
    'block_gt2048': 64,
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
    'update_gt1024': 'bf16x3',
    'apply_bn': 64,
    'apply_bm': 64,
    'apply_warps_le512': 4,
    'apply_warps_le1024': 4,
    'apply_warps_gt1024': 4,
    'apply_stages': 3,
    'apply_up_le512': True,
    'apply_up_gt512': False,
    'panel_async_loads': True,
    'panel_le512': 'householder',
    'panel_le1024': 'householder',
    'panel_gt1024': 'cholqr2',
    'cholqr_min_rows': 256,
    'cholqr_fused': False,
    'cholqr_inverse': 'blocked',
    'cholqr_one_pass': 1e-07,
    'cholqr_threads': 1024,
    'cholqr_block': 8,
    'cholqr_fold': True,
    'cross_min_rows': 1024,
    'cross_quads': False,
    'pdl': True,
    'narrow_gt1024': 'split',
    'narrow_cols_gt1024': 256,
    'narrow_cols_le1024': 0,
    'narrow_fused': False,
    'narrow_fold_t': True,
    'merge_fused': False,
    'skip_zero_columns': False,
    'lookahead_le512': False,
    'lookahead_le1024': True,
    'lookahead_le2048': True,
    'lookahead_gt2048': True,
    'lookahead_programs': 1,
    'apply_programs_le512': 0,
    'tail_le512': 'negligible',
    'tail_gt512': 'off',
    'tail_scope': 'both',
}
# qrsearch: end params

# What a tuner may give each PARAMS key (the values above are the defaults).  For n ≤ 384, ≤ 512,
# ≤ 1024 and above: the panel width the CUDA kernel factors (nb_*; 8 above 2048 rows) and the block
# width (block_*, a multiple of it: the trailing update's K; a block is split in halves down to
# panels, each half's reflector applied to the other by GEMMs).  The warps of a 32-wide panel (8
# warps of four columns, 16 of two or 32 of one; panels of more than 512 rows always use 16) and
# the blocks per SM its registers are capped for.  Whether one shape's factorisation is captured
# once as a CUDA graph and replayed.  max_n, above which the file calls torch.geqrf.  How the block
# updates run for n < 512, 512 ≤ n ≤ 1024 and above (update_*): cuBLAS FP32, or the Triton kernel
# of split TF32 or bf16 tensor-core products (three per product, FP32 accumulation) whose programs
# own apply_bn columns and walk apply_bm rows at a time, in apply_warps_* warps; above n = 1024,
# where the residual gate is 20·n·eps32 (4.9e-3 at 2048), one plain TF32 product is a choice too,
# which the verifier keeps or rejects.
# qrsearch: space
SPACE = {
    "max_n": [512, 1024, 2048, 4096],
    # n ≤ 384 and 384 < n ≤ 512 apart: at 640x512 panels of 32 in blocks of 64 were 12% faster
    # than 64 in 128 in every process, at 40x352 1.8x slower
    # (kernels/BENCHMARKS.md#ten-minute-search-two-lanes).
    "nb_le384": [16, 32, 64],
    # 64 with the n ≤ 384 graph: 40x352 0.855 -> 0.777 ms, 40x176 0.307 -> 0.281, one process
    # (kernels/BENCHMARKS.md#panels-two-to-an-sm)
    "block_le384": [16, 32, 64, 128, 256],
    "nb_le512": [16, 32, 64],
    "block_le512": [16, 32, 64, 128, 256],
    "nb_le1024": [16, 32],
    "block_le1024": [16, 32, 64, 128, 256],
    "nb_le2048": [8, 16],
    "block_gt1024": [32, 64, 128, 256],
    "block_gt2048": [32, 64, 128],
    # The 32-wide panel kernel of at most 512 rows: its warps and the blocks per SM its registers
    # are capped for when there are more matrices than SMs (a launch in waves: 8 warps, 2 blocks
    # an SM took the 640x512 panels from 2.12 to 1.70 ms), and its warps with fewer.
    "warps_nb32": [8, 16, 32],
    "panel_min_blocks": [1, 2],
    # the same for panels of at most 256 rows (8 warps: up to 4 blocks an SM without spilling)
    "panel_min_blocks_le256": [1, 2, 4],
    "warps_nb32_few": [8, 16, 32],
    # graph: every n; graph_le384, graph_le1024, graph_gt1024: n ≤ 384, 512 < n ≤ 1024, above.
    # n ≤ 384 with few matrices is host-bound (40x352 1.98 ms eager, 0.86 replayed);
    # at 640x512 the replay's copy in and clone out would cost more than the launches.
    "graph": [False, True],
    "graph_le384": [False, True],
    # 60x1024 (175 launches a call) was host-bound in some processes (5.6-6.8 ms); replayed, 5.5-5.6.
    "graph_le1024": [False, True],
    "graph_gt1024": [False, True],
    "update_lt512": ["fp32", "tf32x3", "bf16x3"],
    "update_le1024": ["fp32", "tf32x3", "bf16x3"],
    "update_gt1024": ["fp32", "tf32", "tf32x3", "bf16x3"],
    # 64 after the panel and input changes: 640x512 -4%, 60x1024 -2% against 32, one process
    "apply_bn": [32, 64, 128],
    "apply_bm": [32, 64, 128],
    # Warps of the update kernel for n ≤ 512, 512 < n ≤ 1024 and above: at 640x512 (bf16x3) 4 warps
    # timed 7.05-7.10 ms against 8 warps' 8.0-8.1 (kernels/BENCHMARKS.md#apply-warps-ab), while two
    # 60x1024 cases went 17% slower with 64-wide tiles and 2 stages; with 32-wide tiles and 3 stages
    # 4 warps are faster at 60x1024 too (B/A 0.90-0.92, kernels/BENCHMARKS.md#search-winners-as-defaults).
    "apply_warps_le512": [4, 8],
    "apply_warps_le1024": [4, 8],
    "apply_warps_gt1024": [4, 8],
    "apply_stages": [1, 2, 3],
    # The second pass over C's tile bottom up (the rows the first pass read last, the likeliest still
    # in L2, first) or top down, for n <= 512 and above.  At 640x512 the update is bound by DRAM (89%
    # of it, the second read of C hitting L2 45% of the time): bottom up, 640x512 -1.8%, 60x1024 +4%
    # (H100, kernels/BENCHMARKS.md#update-traffic).
    "apply_up_le512": [False, True],
    "apply_up_gt512": [False, True],
    # The register panel's loads of its columns into shared memory as cp.async copies, all of a
    # thread's in flight at once (64 a thread at 512 and 1024 rows), or through registers in a loop
    # whose trip count the compiler cannot fix (a few at a time).
    "panel_async_loads": [False, True],
    # The panel algorithm per size class (n ≤ 512, ≤ 1024, above); above 1024 with cholqr2 the
    # leaves are 32 wide whatever nb_le2048 says.  Cholesky QR leaves of fewer than cholqr_min_rows
    # rows use the register kernel.  A block merge's V1ᵀV2 over at least cross_min_rows rows is split
    # over those rows by a CUDA kernel instead of one cuBLAS product (40 µs a merge at 2x4096).
    "panel_le512": ["householder", "cholqr2"],
    "panel_le1024": ["householder", "cholqr2"],
    "panel_gt1024": ["householder", "cholqr2"],
    "cholqr_min_rows": [64, 128, 256, 512, 1024],
    # A leaf in one launch (each block keeps its rows from the first Gram to V and meets its matrix's
    # other blocks after each Gram, the 32x32 factors in every block) or in five.
    "cholqr_fused": [False, True],
    # The five launches' 32x32 factors: each Cholesky, then its inverse by a triangular solve, and the
    # signed LU, then both its inverses ("solve": 192 barrier steps a leaf), or each factor with its
    # inverses in one Gauss-Jordan sweep ("sweep": 96 steps, the fused leaf's routines), or that with
    # the first pass on one warp a matrix, the factor in registers and shuffles ("warp": no barrier), or
    # the first pass blocked ("blocked": warp 0 factors a diagonal block of cholqr_block pivots, then
    # every warp below updates its row; 2 w / cholqr_block barriers; the second pass as "sweep").
    "cholqr_inverse": ["solve", "sweep", "warp", "blocked"],
    # The five launches' second pass (its Gram and Cholesky) skipped per matrix where the first pass
    # bounds Q = P R1^-1's loss of orthogonality (Q in float64: about u64 (m w + w^2) κ_F², κ_F of the
    # column-equilibrated panel from R1 and R1^-1) by this tolerance; 0: always two passes.  1e-7:
    # 2x4096 14.86 -> 12.24 ms, 8x2048 8.59 -> 7.19 on an H100 (1e-6 the same; BENCHMARKS
    # #one-pass-leaves).
    "cholqr_one_pass": [0.0, 1e-8, 1e-7, 1e-6],
    # The block of the five launches' single-block 32x32 sweeps (sweep and warp modes): 1024 threads of
    # an element each, a barrier a step across 32 warps, or 256 / 128 of four / eight elements, whose
    # barriers wait for fewer warps but whose steps do more work a thread (2x4096 with one pass: 12.24
    # ms on 1024, 13.74 on 256, 17.55 on 128, H100).
    "cholqr_threads": [1024, 256, 128],
    # The diagonal block of the blocked first pass (cholqr_inverse = "blocked", always 1024 threads):
    # warp 0 factors each block of this many pivots in registers, then every warp below it updates its
    # row; two barriers a block instead of one a pivot, a longer chain on the one warp as it grows
    # (first pass at 2x4096, H100: 12.8 us a leaf with 8, 13.8 with 4, 14.8 as "sweep").
    "cholqr_block": [4, 8],
    # A one-pass matrix's Householder reconstruction (Q1 = P1 R1^-1, the signed LU, T, N) in the first
    # pass's launch, from R1 and R1^-1 still on chip, instead of in the second kernel, which then
    # returns at once (with the sweeps' or the blocked first pass on 1024 threads and cholqr_one_pass
    # > 0; ignored otherwise).
    "cholqr_fold": [False, True],
    "cross_min_rows": [256, 512, 1024, 4096],
    # The split products' sums (VᵀC, V1ᵀV2) added into their output as float4 atomics, four columns a
    # request (a quarter of the requests, where the output's rows allow), or one float at a time.
    "cross_quads": [False, True],
    # The Cholesky QR leaf's launches after its first Gram, and a split update's two kernels, as
    # programmatic dependent launches (sm_90): each may be scheduled while the kernel before it runs
    # and waits for it on the GPU, instead of the launch's latency on the chain each time.
    "pdl": [False, True],
    # Updates of at most narrow_cols_gt1024 columns above n = 1024 (inside a block, and the last
    # ones): "split" computes VᵀC split over the rows and C -= V·(TᵀW) by row chunks in exact FP32 on
    # the CUDA cores (V at most 64 wide; wider ones take cuBLAS FP32), "fp32" is cuBLAS (a few blocks
    # for these long, thin products), "tf32" the Triton kernel (a program per column tile).
    "narrow_gt1024": ["split", "fp32", "tf32"],
    "narrow_cols_gt1024": [0, 128, 256, 512],
    # The same split update for 512 < n <= 1024 (60x1024), for updates of at most this many columns
    # (0: never): there a block's own and the look-ahead updates are one column tile a matrix, so the
    # Triton kernel runs one program a matrix, each walking all the rows twice, while the other SMs
    # wait on the chain; split over the rows they spread over the GPU.
    "narrow_cols_le1024": [0, 32, 64, 128],
    # The split narrow update in one launch (each block owns 64 rows, adds its part of VᵀC, meets its
    # matrix's other blocks and applies V·(TᵀW) to its rows) or in four; on the main stream only.
    "narrow_fused": [False, True],
    # The split narrow update's middle product Tᵀ(VᵀC) formed by each block of its last kernel for its
    # own columns (T and W read from L2, 64 x 64 x 64 more FMAs a block) instead of by a cuBLAS
    # launch between the two: one launch fewer on a tall matrix's chain a narrow update.
    "narrow_fold_t": [False, True],
    # A block merge's T12 = -T1·(V1ᵀV2)·T2 in one launch (the last block to add its rows' part of
    # V1ᵀV2 computes T12) or in four, where the split product would take it (cross_min_rows).
    "merge_fused": [False, True],
    # Per matrix, the columns after its last nonzero one (a rank-deficient input's zero trailing
    # columns) are zero under every reflector: the Triton updates skip their tiles (a scan of the
    # input first, which stops at each row's last nonzero element: a dense matrix costs its last column).
    "skip_zero_columns": [False, True],
    # Inside a captured graph (graph_*), the update of the rest of the matrix by block j runs on a
    # second stream of the capture beside the factorisation of block j+1, which needs only its own
    # columns updated first (one block of lookahead): the panels' serial chain then overlaps the
    # wide updates.  Per size class: n ≤ 512 (where graph_le384 or graph capture), 512 < n ≤ 1024,
    # ≤ 2048, above.  lookahead_programs caps the side update's Triton grid at that many programs
    # per SM the panels leave free (SMs - batch), each walking several tiles, so the next panel
    # kernel is not queued behind a full grid of update programs (0: a program per tile).
    "lookahead_le512": [False, True],
    "lookahead_le1024": [False, True],
    "lookahead_le2048": [False, True],
    "lookahead_gt2048": [False, True],
    "lookahead_programs": [0, 1, 2, 3],
    # For n ≤ 512 without look-ahead, the trailing update's Triton grid capped at this many programs an
    # SM, each walking several tiles (0: a program per tile).  At 640x512 the update is bound by DRAM:
    # a tile is read twice, and with a program per tile the resident programs' tiles (264 x 128 KB)
    # outgrow the L2 between the two reads; fewer at once keep the second read in L2.
    "apply_programs_le512": [0, 1, 2],
    # Per matrix, the trailing columns after the last one whose 1-norm exceeds rel·‖a₀‖₁ are left out
    # of the factorisation (tau 0 there): "zero" (rel = 0) drops exactly zero columns, as geqrf would
    # factor them; "negligible" (rel = 8·eps32) also columns that change R - QᵀA by at most 16/√n of
    # the residual unit n·eps32·‖A‖₁.  A scan of each matrix's first and last 8 columns is the cost
    # where nothing drops.  For n ≤ 512 and above.
    "tail_le512": ["off", "zero", "negligible"],
    "tail_gt512": ["off", "zero", "negligible"],
    # Where tail_* is on: "matrix", per matrix on the device with no host sync (the updates skip the
    # tiles past each matrix's kept columns, its register panels past them are identity reflectors);
    # "batch", the factorisation cut at the batch's most kept columns, read on the host while the GPU
    # factors the first block (before a graph's replay); "both", the cut and, inside it, per matrix
    # (in a replayed graph per matrix only).
    "tail_scope": ["matrix", "batch", "both"],
}
# qrsearch: end space

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
def _dot3_split(a, bh, bl, acc):
    """acc + a·b to about 2^-16 relative per product, b given as its halves: three bf16
    tensor-core products (the small ones first)."""
    ah, al = _split(a)
    acc = tl.dot(al, bh, acc, input_precision="ieee")
    acc = tl.dot(ah, bl, acc, input_precision="ieee")
    return tl.dot(ah, bh, acc, input_precision="ieee")


@triton.jit
def _dot3(a, b, acc):
    bh, bl = _split(b)
    return _dot3_split(a, bh, bl, acc)


@triton.jit
def _mma(a, b, acc, PREC: tl.constexpr):
    if PREC == "bf16x3":
        return _dot3(a, b, acc)
    return tl.dot(a, b, acc, input_precision=PREC)


@triton.jit
def _apply_kernel(S, C, VT, T, m, ncols, width, scb, scr, svb, svr, stb, str_, col_tiles, tiles, LIVE, col0,
                  KP: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, STAGES: tl.constexpr,
                  PREC: tl.constexpr, PERSIST: tl.constexpr, SKIP: tl.constexpr, COPY: tl.constexpr,
                  UP: tl.constexpr):
    """C <- (I - V T Vᵀ)ᵀ S for every matrix: a program per column tile of one matrix, or (PERSIST)
    fewer programs, each taking every grid-th tile of the tiles numbered matrix by matrix."""
    # Tiles of one matrix are neighbours in launch order, so its Vᵀ (read by every tile, twice)
    # stays in L2 between them instead of coming from memory once per tile.
    if PERSIST:
        for tile in range(tl.program_id(0), tiles, tl.num_programs(0)):
            j = tile % col_tiles
            b = (tile // col_tiles).to(tl.int64)
            _apply_tile(S, C, VT, T, m, ncols, width, scb, scr, svb, svr, stb, str_, j, b, LIVE, col0,
                        KP, BM, BN, STAGES, PREC, SKIP, COPY, UP)
    else:
        _apply_tile(S, C, VT, T, m, ncols, width, scb, scr, svb, svr, stb, str_, tl.program_id(0),
                    tl.program_id(1).to(tl.int64), LIVE, col0, KP, BM, BN, STAGES, PREC, SKIP, COPY, UP)


@triton.jit
def _rows_to_touch(m, j, LIVE, b, col0, BN: tl.constexpr, SKIP: tl.constexpr, COPY: tl.constexpr):
    """(rows read, rows written) of matrix b's column tile j: m and m, or for a tile SKIP finds wholly
    past LIVE[b] none read, and m written (as zeros) only with COPY."""
    m_read = m
    m_write = m
    if SKIP:
        dead = col0 + j * BN >= tl.load(LIVE + b)
        m_read = tl.where(dead, 0, m)
        m_write = m if COPY else m_read
    return m_read, m_write


@triton.jit
def _tile_rows(s_ptr, scr, cols, ncols, r0, m_read, BM: tl.constexpr):
    """Rows r0..r0+BM of S's column tile (zeros past m_read and ncols)."""
    rows = r0 + tl.arange(0, BM)
    return tl.load(s_ptr + rows[:, None] * scr + cols[None, :], mask=(rows[:, None] < m_read) & (cols[None, :] < ncols),
                   other=0.0)


@triton.jit
def _gram_rows(v_ptr, svr, ks, kmask, c, W, r0, m_read, BM: tl.constexpr, PREC: tl.constexpr):
    """W + Vᵀ[:, r0..r0+BM] c."""
    rows = r0 + tl.arange(0, BM)
    vt = tl.load(v_ptr + ks[:, None] * svr + rows[None, :], mask=kmask[:, None] & (rows[None, :] < m_read), other=0.0)
    return _mma(vt, c, W, PREC)


@triton.jit
def _minus_tt_w(T, b, stb, str_, ks, kmask, W, KP: tl.constexpr, BN: tl.constexpr, PREC: tl.constexpr):
    """W2 = -(Tᵀ W) and its bf16 halves, split once for every row block the second pass writes (a
    split in each would be a quarter of the conversions a block costs)."""
    tt = tl.load(T + b * stb + ks[None, :] * str_ + ks[:, None], mask=kmask[:, None] & kmask[None, :], other=0.0)
    W2 = -_mma(tt, W, tl.zeros([KP, BN], dtype=tl.float32), PREC)
    w2h, w2l = _split(W2)
    return W2, w2h, w2l


@triton.jit
def _update_rows(c_ptr, v_ptr, scr, svr, ks, kmask, cols, ncols, c, W2, w2h, w2l, r0, m_write, m_read,
                 BM: tl.constexpr, PREC: tl.constexpr):
    """Rows r0..r0+BM of C <- c + V[r0..r0+BM] W2 (V read as zeros past m_read: a skipped tile that
    is written, with COPY, is written as zeros, its rows read from nowhere)."""
    rows = r0 + tl.arange(0, BM)
    v = tl.load(v_ptr + ks[None, :] * svr + rows[:, None], mask=kmask[None, :] & (rows[:, None] < m_read), other=0.0)
    if PREC == "bf16x3":
        c = _dot3_split(v, w2h, w2l, c)
    else:
        c = _mma(v, W2, c, PREC)
    tl.store(c_ptr + rows[:, None] * scr + cols[None, :], c,
             mask=(rows[:, None] < m_write) & (cols[None, :] < ncols))


@triton.jit
def _apply_tile(S, C, VT, T, m, ncols, width, scb, scr, svb, svr, stb, str_, j, b, LIVE, col0,
                KP: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, STAGES: tl.constexpr,
                PREC: tl.constexpr, SKIP: tl.constexpr, COPY: tl.constexpr, UP: tl.constexpr):
    """Matrix b's columns j·BN.. of C (m rows, scr apart, unit column stride) <- (I - V T Vᵀ)ᵀ S,
    with VT = Vᵀ (width x m, rows svr apart) and T (width x width, rows str_ apart); S is C, or the
    input laid out as C where C does not hold it yet (COPY).  With SKIP, a tile whose columns (C's
    column 0 is the matrix's col0) all lie at or past LIVE[b], the matrix's columns that may be
    nonzero (or that its factorisation keeps), is not read, and written only with COPY, as zeros:
    the input's copy where its columns are zero, what a left-out column's R may hold otherwise."""
    cols = j * BN + tl.arange(0, BN)
    ks = tl.arange(0, KP)
    c_ptr = C + b * scb
    s_ptr = S + b * scb
    v_ptr = VT + b * svb
    kmask = ks < width
    m_read, m_write = _rows_to_touch(m, j, LIVE, b, col0, BN, SKIP, COPY)
    W = tl.zeros([KP, BN], dtype=tl.float32)
    for r0 in tl.range(0, m_read, BM, num_stages=STAGES):
        c = _tile_rows(s_ptr, scr, cols, ncols, r0, m_read, BM)
        W = _gram_rows(v_ptr, svr, ks, kmask, c, W, r0, m_read, BM, PREC)
    W2, w2h, w2l = _minus_tt_w(T, b, stb, str_, ks, kmask, W, KP, BN, PREC)
    # UP: bottom up, so that the rows the first pass read last, the likeliest still in L2, come first
    chunks = tl.cdiv(m_write, BM)
    for q in tl.range(0, chunks, num_stages=STAGES):
        r0 = ((chunks - 1 - q) if UP else q) * BM
        c = _tile_rows(s_ptr, scr, cols, ncols, r0, m_read, BM)
        _update_rows(c_ptr, v_ptr, scr, svr, ks, kmask, cols, ncols, c, W2, w2h, w2l, r0, m_write, m_read, BM, PREC)


# Device code (CUDA runtime only: it compiles without torch's headers).
_DEVICE_SOURCE = r"""

constexpr unsigned FULL = 0xffffffffu;

// Programmatic dependent launch (sm_90).  A kernel launched with it (launch_after) may be scheduled
// while the kernel before it on the stream still runs, so the leaf's short launches do not each pay
// the launch's latency on the chain.  pdl_wait() holds the grid until that kernel has finished and
// its writes are visible: every kernel that may be launched so calls it before it reads or writes
// global memory.  pdl_release() lets the stream's next such launch be scheduled now.  Both are
// no-ops for an ordinary launch.
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_release() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

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

// A global-to-shared copy that does not pass through a register (cp.async): a thread's copies are all
// in flight at once, where loads into registers waited in turn for each few (the panel's 64 a thread,
// in a loop whose trip count the compiler cannot fix).  The tests' host emulation copies directly.
__device__ __forceinline__ void copy_to_shared(float* dst, const float* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && !defined(QR_HOST_EMULATION)
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src)
                 : "memory");
#else
    *dst = *src;
#endif
}

// This thread's copy_to_shared copies have landed (a barrier then makes every thread's visible).
__device__ __forceinline__ void copies_to_shared_done() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800 && !defined(QR_HOST_EMULATION)
    asm volatile("cp.async.wait_all;" ::: "memory");
#endif
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

// One block per matrix factors panel columns k..k+w (rows k..n) of H in place (or, with kept, returns
// identity reflectors for a matrix whose kept columns end at or before k) and writes
// tau[k..k+w], VT (w x (n-k) from its pointer, rows n apart, row j = reflector j) and T
// (w x w upper triangular, rows ldt apart); vstride and tstride step from one matrix to the
// next, so both can be windows of a wider block's buffers.
// MINB blocks per SM is a register cap (65536 / (MINB * W * 32) a thread): with 1, a 512-thread
// block takes a whole SM at 640x512 and the SM idles through the block's per-column latency.
template <int RPL, int W, int CPW, int MINB>
__global__ void __launch_bounds__(W * 32, MINB)
panel_kernel(const float* S, float* H, float* __restrict__ TAU, float* __restrict__ VT, float* __restrict__ T,
             int n, int k, int w, long long vstride, long long tstride, int ldt, const int* __restrict__ kept,
             bool async_loads) {
    if (kept != nullptr && k >= kept[blockIdx.x]) {
        // Every column of this panel is left out of this matrix's factorisation (tail_columns_kernel):
        // identity reflectors (V = 0, T = 0, tau = 0), so every update that still runs is a no-op on
        // it; H's columns keep what the updates left, or, read from the input (S is not H: nothing
        // wrote these rows of H yet), zeros (clear_tail_kernel says why either is a valid R).
        const int rows = n - k;
        if (S != H) {
            float* h = H + (size_t)blockIdx.x * n * n + (size_t)k * n + k;
            for (int e = threadIdx.x; e < w * rows; e += W * 32) h[(size_t)(e / w) * n + e % w] = 0.f;
        }
        float* vt = VT + (size_t)blockIdx.x * vstride;
        for (int e = threadIdx.x; e < w * rows; e += W * 32) vt[(size_t)(e / rows) * n + e % rows] = 0.f;
        float* tout = T + (size_t)blockIdx.x * tstride;
        for (int e = threadIdx.x; e < w * w; e += W * 32) tout[(size_t)(e / w) * ldt + e % w] = 0.f;
        for (int c = threadIdx.x; c < w; c += W * 32) TAU[(size_t)blockIdx.x * n + k + c] = 0.f;
        return;
    }
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
    if (async_loads) {
        for (int e = threadIdx.x; e < MP * NBP; e += W * 32) {
            const int r = e / NBP, q = e % NBP;
            if (r < m && q < w)
                copy_to_shared(stage + r * LDS + q, src + (size_t)r * n + q);
            else
                stage[r * LDS + q] = 0.f;
        }
        copies_to_shared_done();
    } else {
        for (int e = threadIdx.x; e < MP * NBP; e += W * 32) {
            const int r = e / NBP, q = e % NBP;
            stage[r * LDS + q] = (r < m && q < w) ? src[(size_t)r * n + q] : 0.f;
        }
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

// ---- Cholesky QR leaves: a panel of up to 32 columns and any number of rows, over many blocks ----
//
// Cholesky QR twice (Grams in float64 over row chunks, summed by atomics; the 32x32 factors on one
// block per matrix), then Householder vectors reconstructed from Q (Ballard et al. 2014: Q1 - S =
// L U, S chosen per step so |U_jj| >= 1; V = [L; Q2 U^-1], R_H = S R, T = -U S L^-T).  A matrix
// whose panel is nearly dependent (a Cholesky pivot under 1e-12 of its column's square norm, or
// Q1ᵀQ1 more than 0.1 from I) is flagged and factored column by column by the fallback kernel.
// The 32x32 work runs on 1024 threads, thread (warp i, lane j) holding element (i, j) in a
// register: a step of a factorisation or a triangular inverse is one barrier, not a lane's sweep
// over a row (one warp sweeping took 111 µs a leaf; kernels/BENCHMARKS.md).

constexpr int QB = 32;        // widest leaf
constexpr int QL = QB + 1;    // odd row stride of the float64 tiles
constexpr int GROWS = 64;     // rows of a Gram or row-kernel chunk
// A leaf's flag per matrix: two passes, the column-by-column fallback, one pass (one_pass_suffices), or
// one pass whose top block the first kernel built (cholqr_first_kernel's FOLD).
constexpr int LEAF_TWO_PASSES = 0, LEAF_FALLBACK = 1, LEAF_ONE_PASS = 2, LEAF_DONE = 3;

// Partial Gram X_cᵀX_c of the panel's rows chunk*GROWS.. (X = P, or P·M with M the first pass's
// R^-1) added into acc (float64, 1024 a matrix, upper triangle; zeroed by its reader); 256 threads,
// each a 2x2 tile of the Gram.  Matrices flagged by the first pass are skipped in the second.
__global__ void __launch_bounds__(256) cholqr_gram_kernel(const float* S, int n, int k, int w, const double* M,
                                                          long long mstride, double* acc, const int* flags) {
    pdl_wait();
    pdl_release();
    const int b = blockIdx.y, r0 = blockIdx.x * GROWS, tid = threadIdx.x;
    if (M != nullptr && flags[b] != LEAF_TWO_PASSES) return;
    __shared__ double x[GROWS][QL];
    __shared__ double mm[QB][QL];
    const int m = n - k;
    const float* src = S + (size_t)b * n * n + (size_t)k * n + k;
#pragma unroll
    for (int it = 0; it < GROWS * QB / 256; ++it) {  // a fixed trip count: every load in flight at once
        const int e = tid + 256 * it, r = e / QB, q = e % QB;
        x[r][q] = (r0 + r < m && q < w) ? (double)src[(size_t)(r0 + r) * n + q] : 0.0;
    }
    if (M != nullptr) {
        const double* mb = M + (size_t)b * mstride;
#pragma unroll
        for (int it = 0; it < QB * QB / 256; ++it) mm[(tid + 256 * it) / QB][(tid + 256 * it) % QB] = mb[tid + 256 * it];
        __syncthreads();
        constexpr int PER = GROWS * QB / 256;
        double y[PER];
#pragma unroll
        for (int u = 0; u < PER; ++u) {
            const int e = tid + 256 * u, r = e / QB, j = e % QB;
            double s = 0.0;
#pragma unroll
            for (int q = 0; q < QB; ++q) s = fma(x[r][q], mm[q][j], s);  // M is zero below its diagonal
            y[u] = s;
        }
        __syncthreads();
#pragma unroll
        for (int u = 0; u < PER; ++u) {
            const int e = tid + 256 * u;
            x[e / QB][e % QB] = y[u];
        }
    }
    __syncthreads();
    // thread (ti, tj) of 16x16 owns Gram entries (ti + 16a, tj + 16c), a, c in {0, 1}
    const int ti = tid >> 4, tj = tid & 15;
    double g00 = 0.0, g01 = 0.0, g10 = 0.0, g11 = 0.0;
#pragma unroll 8
    for (int r = 0; r < GROWS; ++r) {
        const double a0 = x[r][ti], a1 = x[r][ti + 16], c0 = x[r][tj], c1 = x[r][tj + 16];
        g00 = fma(a0, c0, g00);
        g01 = fma(a0, c1, g01);
        g10 = fma(a1, c0, g10);
        g11 = fma(a1, c1, g11);
    }
    double* out = acc + (size_t)b * QB * QB;
    if (ti <= tj) atomicAdd(out + ti * QB + tj, g00);
    atomicAdd(out + ti * QB + tj + 16, g01);
    if (ti + 16 <= tj) atomicAdd(out + (ti + 16) * QB + tj, g10);  // never: kept for a wider tile
    if (ti <= tj) atomicAdd(out + (ti + 16) * QB + tj + 16, g11);
}

// Element-parallel 32x32 steps: thread t holds the E elements (i, j) with j its lane and i its warp
// plus 32/E times 0..E-1 (E = 1 on 1024 threads, 4 on 256).  A step's row goes through shared memory
// (two buffers, so one barrier a step suffices), and only the warp that owns the pivot row divides:
// 1024 float64 divisions a step kept every step at ~0.7 µs.
template <int E>
__device__ __forceinline__ int elem_row(int u) {
    return (int)(threadIdx.x >> 5) + (32 / E) * u;
}

// The pivot row p's element of this thread, held at index p / (32 / E) by warp p % (32 / E): f(x) on
// it, with the index a constant in every unrolled copy so that x stays in registers.
template <int E, typename F>
__device__ __forceinline__ void on_pivot_row(double (&x)[E], int p, F f) {
    if ((int)(threadIdx.x >> 5) != p % (32 / E)) return;
#pragma unroll
    for (int u = 0; u < E; ++u)
        if (u == p / (32 / E)) f(x[u]);
}

// Upper Cholesky of the w x w block whose elements (i, j), i <= j, this thread holds in x: on return
// x holds R's elements.  False (for every thread) where a pivot is not above rel times its column's
// original square norm.  rows: 2 x QB of scratch, diag: QB, ok: 2.
template <int E>
__device__ __forceinline__ bool cholesky_elems(double (&x)[E], int w, double rel, double* rows, double* diag, int* ok) {
    const int j = threadIdx.x & 31;
#pragma unroll
    for (int u = 0; u < E; ++u)
        if (elem_row<E>(u) == j) diag[j] = x[u];
    __syncthreads();
    for (int p = 0; p < w; ++p) {
        double* row = rows + (p & 1) * QB;
        on_pivot_row<E>(x, p, [&](double& xp) {  // R's row p, and whether its pivot holds
            const double d = __shfl_sync(0xffffffffu, xp, p);
            const bool good = d > rel * diag[p] && isfinite(d);
            const double rinv = good ? rsqrt(d) : 0.0;
            if (j >= p) xp *= rinv;
            row[j] = xp;
            if (j == 0) ok[p & 1] = good;
        });
        __syncthreads();
        if (!ok[p & 1]) return false;  // the same for every thread
#pragma unroll
        for (int u = 0; u < E; ++u) {
            const int i = elem_row<E>(u);
            if (i > p && j >= i && j < w) x[u] = fma(-row[i], row[j], x[u]);
        }
    }
    return true;
}

// x = U^-1 for the upper triangular up (w x w, in shared memory), this thread's elements.
template <int E>
__device__ __forceinline__ void upper_inverse_elems(const double (*up)[QL], int w, double* rows, double (&x)[E]) {
    const int j = threadIdx.x & 31;
#pragma unroll
    for (int u = 0; u < E; ++u) x[u] = (elem_row<E>(u) == j && j < w) ? 1.0 : 0.0;
    __syncthreads();  // up is complete, and rows is free
    for (int p = w - 1; p >= 0; --p) {
        double* row = rows + (p & 1) * QB;
        on_pivot_row<E>(x, p, [&](double& xp) {
            xp *= 1.0 / up[p][p];
            row[j] = xp;
        });
        __syncthreads();
#pragma unroll
        for (int u = 0; u < E; ++u) {
            const int i = elem_row<E>(u);
            if (i < p) x[u] = fma(-up[i][p], row[j], x[u]);
        }
    }
}

// U^-1 (up upper triangular) and L^-1 (lo's strictly lower part, unit diagonal) in one sweep: the
// first solved from the last row up, the second from the first row down, a barrier a step for both.
// rows: 4 x QB.
template <int E>
__device__ __forceinline__ void triangular_inverses_elems(const double (*up)[QL], const double (*lo)[QL], int w,
                                                          double* rows, double (&xu)[E], double (&xl)[E]) {
    const int j = threadIdx.x & 31;
#pragma unroll
    for (int u = 0; u < E; ++u) {
        xu[u] = (elem_row<E>(u) == j && j < w) ? 1.0 : 0.0;
        xl[u] = xu[u];
    }
    __syncthreads();
    for (int s = 0; s < w; ++s) {
        const int pu = w - 1 - s, pl = s;
        double* urow = rows + (s & 1) * 2 * QB;
        double* lrow = urow + QB;
        on_pivot_row<E>(xu, pu, [&](double& xp) {
            xp *= 1.0 / up[pu][pu];
            urow[j] = xp;
        });
        on_pivot_row<E>(xl, pl, [&](double& xp) { lrow[j] = xp; });
        __syncthreads();
#pragma unroll
        for (int u = 0; u < E; ++u) {
            const int i = elem_row<E>(u);
            if (i < pu) xu[u] = fma(-up[i][pu], urow[j], xu[u]);
            if (i > pl && i < w) xl[u] = fma(-lo[i][pl], lrow[j], xl[u]);
        }
    }
}

// The signed LU's step p on its pivot: the sign s chosen so that |U_pp| = |a_pp - s| >= 1 (Ballard
// et al.) into sgn[p]; returns 1 / U_pp.
__device__ __forceinline__ double signed_pivot(double ap, int p, double* sgn) {
    const double s = ap >= 0.0 ? -1.0 : 1.0;
    sgn[p] = s;
    return __drcp_rn(ap - s);
}

// The signed LU's step p on element (i, j) of a, the pivot row and column as they were before the step
// in row and col: U_pp, L's multiplier, or the Schur complement's update.
__device__ __forceinline__ void signed_lu_step(double& a, int i, int j, int p, double s, double inv,
                                               const double* row, const double* col) {
    if (i == p && j == p) {
        a -= s;
    } else if (i > p && j == p) {
        a *= inv;
    } else if (i > p && j > p) {
        a = fma(-(col[i] * inv), row[j], a);
    }
}

// Q1 - S = L U in place on the w x w block whose elements this thread holds in a, the signs S chosen
// per step so that |U_pp| >= 1 (Ballard et al.): a then holds U on and above the diagonal and L's
// multipliers below it, sgn the signs.  rows: 4 x QB, invu: 2.
template <int E>
__device__ __forceinline__ void signed_lu_elems(double (&a)[E], int w, double* rows, double* sgn, double* invu) {
    const int j = threadIdx.x & 31;
    for (int p = 0; p < w; ++p) {
        double* row = rows + (p & 1) * QB;
        double* col = rows + 2 * QB + (p & 1) * QB;
#pragma unroll
        for (int u = 0; u < E; ++u) {
            const int i = elem_row<E>(u);
            if (i == p) {
                row[j] = a[u];
                if (j == p) invu[p & 1] = signed_pivot(a[u], p, sgn);
            }
            if (j == p) col[i] = a[u];
        }
        __syncthreads();
        const double inv = invu[p & 1];
#pragma unroll
        for (int u = 0; u < E; ++u) signed_lu_step(a[u], elem_row<E>(u), j, p, sgn[p], inv, row, col);
    }
}

// Sweeps of a factor and its inverses in one pass of w barrier steps (the fused leaf's, and the six
// launches' with PARAMS cholqr_inverse = "sweep"; the routines above take two passes for each): the
// inverses are built by the same row or column operations as the factor, applied to an identity
// (Gauss-Jordan), instead of a triangular solve afterwards.

// Upper Cholesky G = Rᵀ R of the w x w block whose elements (i, j), i <= j, this thread holds in x,
// and R^-1, written into rinv_tile (every element).  Row operations with L's multipliers (G = L D Lᵀ,
// R = D^1/2 Lᵀ) turn an identity a into L^-1, and R^-1 = L^-ᵀ D^-1/2.  False (for every thread) where
// a pivot is not above rel times its column's original square norm.  rows: 4 x QB, diag and rinvs: QB.
template <int E>
__device__ __forceinline__ bool cholesky_inverse_elems(double (&x)[E], double (*rinv_tile)[QL], int w, double rel,
                                                       double* rows, double* diag, double* rinvs, int* ok) {
    const int j = threadIdx.x & 31;
    double a[E];
#pragma unroll
    for (int u = 0; u < E; ++u) {
        const int i = elem_row<E>(u);
        if (i == j) diag[j] = x[u];
        a[u] = (i == j && j < w) ? 1.0 : 0.0;
    }
    __syncthreads();
    for (int p = 0; p < w; ++p) {
        double* row = rows + (p & 1) * 2 * QB;  // R's row p
        double* arow = row + QB;                // L^-1's row p
        on_pivot_row<E>(x, p, [&](double& xp) {
            const double d = __shfl_sync(0xffffffffu, xp, p);
            const bool good = d > rel * diag[p] && isfinite(d);
            const double rinv = good ? rsqrt(d) : 0.0;
            if (j >= p) xp *= rinv;
            row[j] = xp;
            if (j == 0) {
                ok[p & 1] = good;
                rinvs[p] = rinv;
            }
        });
        on_pivot_row<E>(a, p, [&](double& ap) { arow[j] = ap; });
        __syncthreads();
        if (!ok[p & 1]) return false;  // the same for every thread
        const double lmul = rinvs[p];
#pragma unroll
        for (int u = 0; u < E; ++u) {
            const int i = elem_row<E>(u);
            if (i > p && j >= i && j < w) x[u] = fma(-row[i], row[j], x[u]);
            if (i > p && i < w && j <= p) a[u] = fma(-(row[i] * lmul), arow[j], a[u]);
        }
    }
    __syncthreads();  // rinvs is complete
#pragma unroll
    for (int u = 0; u < E; ++u) {
        const int i = elem_row<E>(u);
        rinv_tile[j][i] = (j <= i && i < w) ? a[u] * rinvs[i] : 0.0;
    }
    return true;
}

// Q1 - S = L U on the w x w block whose elements this thread holds in a, the signs S chosen per step
// so that |U_pp| >= 1 (Ballard et al.): a then holds U on and above the diagonal and L's multipliers
// below it, sgn the signs; xu U^-1 and xl L^-1.  Row operations on an identity give L^-1; column
// operations with Ũ = D^-1 U give Ũ^-1, and U^-1 = Ũ^-1 D^-1.  rows: 8 x QB, invs: QB.
template <int E>
__device__ __forceinline__ void signed_lu_inverses_elems(double (&a)[E], double (&xu)[E], double (&xl)[E], int w,
                                                         double* rows, double* sgn, double* invs) {
    const int j = threadIdx.x & 31;
#pragma unroll
    for (int u = 0; u < E; ++u) {
        xu[u] = (elem_row<E>(u) == j && j < w) ? 1.0 : 0.0;
        xl[u] = xu[u];
    }
    for (int p = 0; p < w; ++p) {
        double* row = rows + (p & 1) * 4 * QB;  // the pivot row of a
        double* col = row + QB;                 // the pivot column of a
        double* urow = col + QB;                // Ũ^-1's column p (by row)
        double* lrow = urow + QB;               // L^-1's row p
#pragma unroll
        for (int u = 0; u < E; ++u) {
            const int i = elem_row<E>(u);
            if (i == p) {
                row[j] = a[u];
                lrow[j] = xl[u];
                if (j == p) invs[p] = signed_pivot(a[u], p, sgn);
            }
            if (j == p) {
                col[i] = a[u];
                urow[i] = xu[u];
            }
        }
        __syncthreads();
        const double inv = invs[p];
#pragma unroll
        for (int u = 0; u < E; ++u) {
            const int i = elem_row<E>(u);
            signed_lu_step(a[u], i, j, p, sgn[p], inv, row, col);
            if (i > p && i < w && j <= p) xl[u] = fma(-(col[i] * inv), lrow[j], xl[u]);
            if (i <= p && j > p && j < w) xu[u] = fma(-(row[j] * inv), urow[i], xu[u]);
        }
    }
    __syncthreads();  // invs is complete
#pragma unroll
    for (int u = 0; u < E; ++u) xu[u] *= j < w ? invs[j] : 0.0;
}

// The first pass blocked (PARAMS cholqr_inverse = "blocked", 1024 threads, thread (i, j) warp i and
// lane j): the element sweeps above take a barrier a pivot with all 32 warps issuing every step's
// instructions.  Here warp 0 alone factors each diagonal block of NB pivots, every lane holding its
// column of the block's rows in registers and taking the pivot row's elements by shuffles (so it also
// forms the rows right of the block), and then every warp below the block updates its row at once:
// two barriers a block of NB pivots.  On an H100 it took the first pass from 14.8 to 12.8 us a leaf at
// 2x4096; the same blocking of the second kernel's LU was slower (18.8 -> 21.8 us: a pivot's chain of
// shuffles and a float64 reciprocal on one warp costs about what a barrier step does), so the second
// pass keeps the element sweeps (kernels/BENCHMARKS.md#blocked-sweeps).

// Upper Cholesky G = RᵀR and R^-1, blocked.  x: this thread's element of G's upper triangle (zero
// elsewhere); on return R's.  g is a workspace tile; rinv_tile first holds Z = R^-T (Rᵀ Z = I, built
// row block by row block) and on return R^-1 (each thread writes its own element: a barrier before
// reading another's).  False (every thread) where a pivot is not above rel times its column's
// original square norm.  diag, rinvs: QB, ok: 1.
template <int NB>
__device__ __forceinline__ bool cholesky_inverse_blocked(double& x, double (*g)[QL], double (*rinv_tile)[QL], int w,
                                                         double rel, double* diag, double* rinvs, int* ok) {
    const int i = threadIdx.x >> 5, j = threadIdx.x & 31;
    double (*z)[QL] = rinv_tile;
    if (i == j) diag[j] = x;
    g[i][j] = x;
    z[i][j] = i == j ? 1.0 : 0.0;
    __syncthreads();
    for (int kb = 0; kb < w; kb += NB) {
        const int nb = min(NB, w - kb), next = kb + nb;
        if (i == 0) {
            double xr[NB];  // rows kb + r of G's Schur complement (then R), column j
#pragma unroll
            for (int r = 0; r < NB; ++r) xr[r] = r < nb && j >= kb + r && j < w ? g[kb + r][j] : 0.0;
            bool good = true;
#pragma unroll
            for (int p = 0; p < NB; ++p) {
                if (p >= nb) break;
                const double d = __shfl_sync(FULL, xr[p], kb + p);
                if (!(d > rel * diag[kb + p] && isfinite(d))) {  // the same in every lane
                    good = false;
                    break;
                }
                const double rinv = rsqrt(d);
                if (j >= kb + p) xr[p] *= rinv;
                if (j == 0) rinvs[kb + p] = rinv;
#pragma unroll
                for (int r = p + 1; r < NB; ++r) {
                    const double rpr = __shfl_sync(FULL, xr[p], kb + r);  // R[kb + p][kb + r]
                    if (j >= kb + r) xr[r] = fma(-rpr, xr[p], xr[r]);
                }
            }
#pragma unroll
            for (int r = 0; r < NB; ++r)
                if (r < nb && j >= kb + r && j < w) g[kb + r][j] = xr[r];
            // Z's block rows after the factor, R read back from shared memory, so that the factor's
            // registers are free (both columns in registers took 64 registers, the cap at 1024 threads)
            __syncwarp();
            if (good) {
                double zr[NB];  // rows kb + r of Z, column j
#pragma unroll
                for (int r = 0; r < NB; ++r) zr[r] = r < nb ? z[kb + r][j] : 0.0;
#pragma unroll
                for (int p = 0; p < NB; ++p) {
                    if (p >= nb) break;
                    zr[p] *= rinvs[kb + p];
#pragma unroll
                    for (int r = p + 1; r < NB; ++r)
                        if (r < nb) zr[r] = fma(-g[kb + p][kb + r], zr[p], zr[r]);
                }
#pragma unroll
                for (int r = 0; r < NB; ++r)
                    if (r < nb) z[kb + r][j] = zr[r];
            }
            if (j == 0) ok[0] = good;
        }
        __syncthreads();
        if (!ok[0]) return false;  // the same for every thread
        if (i >= next && i < w) {
            if (j >= i && j < w) {  // the Schur complement
                double s = g[i][j];
#pragma unroll
                for (int q = 0; q < NB; ++q)
                    if (q < nb) s = fma(-g[kb + q][i], g[kb + q][j], s);
                g[i][j] = s;
            } else if (j < next) {  // Z's row i, less what the block's rows of Rᵀ take from it
                double s = z[i][j];
#pragma unroll
                for (int q = 0; q < NB; ++q)
                    if (q < nb) s = fma(-g[kb + q][i], z[kb + q][j], s);
                z[i][j] = s;
            }
        }
        __syncthreads();
    }
    if (i <= j && j < w) x = g[i][j];
    const double rinv = i < w && j < w ? z[j][i] : 0.0;
    __syncthreads();  // every thread has read Z
    rinv_tile[i][j] = rinv;
    return true;
}

// (a b)[i][j] for upper triangular a and b: only q >= i contributes (b is zero below its diagonal),
// and the bound is the same across a warp (i is the warp).
__device__ __forceinline__ double upper_product_elem(const double (*a)[QL], const double (*b)[QL], int i, int j) {
    double s = 0.0;
#pragma unroll 4
    for (int q = i; q < QB; ++q) s = fma(a[i][q], b[q][j], s);
    return s;
}

// (a b)[i][j] over the full 32 (zeros outside the w x w blocks keep it exact).
__device__ __forceinline__ double product_elem(const double (*a)[QL], const double (*b)[QL], int i, int j) {
    double s = 0.0;
#pragma unroll
    for (int q = 0; q < QB; ++q) s = fma(a[i][q], b[q][j], s);
    return s;
}

// The summed Gram's element (i, j) of the upper triangle (0 elsewhere), and acc zeroed for its next use.
__device__ __forceinline__ double take_gram(double* acc, int b, int i, int j, int w) {
    double* g = acc + (size_t)b * QB * QB;
    const double v = (i <= j && j < w) ? g[i * QB + j] : 0.0;
    g[i * QB + j] = 0.0;
    return v;
}

__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Whether the first pass alone gives Q = P R1^-1 orthonormal to within tol, so the second Gram and
// Cholesky may be skipped.  Q is formed in float64, so its loss of orthogonality is bounded by about
// u64 (m w + w^2) κ² for the column-equilibrated panel (Yamamoto et al.'s bound for Cholesky QR).
// κ² is bounded by κ_F² = ‖R1 D^-1‖_F² ‖D R1^-1‖_F² with D² the Gram's diagonal: the first factor is
// w exactly, the second is scaled_inverse = Σ_i G_ii ‖row i of R1^-1‖².  tol 0: never.
__device__ __forceinline__ bool one_pass_suffices(double scaled_inverse, int w, int m, double tol) {
    const double est = 1.1102230246251565e-16 * ((double)m * w + (double)w * w) * (double)w * scaled_inverse;
    return tol > 0.0 && isfinite(est) && est <= tol;
}

// The Householder reconstruction of a leaf from R (rr) and M = R^-1 (mij), this thread's elements
// (Ballard et al.): Q1 = P1 M from the panel's top block P1, Q1 - S = L U with the signs S per step,
// then the top block of H (S R above the diagonal, L's multipliers below), T = -U S L^-T, tau, Vᵀ's top
// rows, and N = M U^-1 into small[b] for the rows below (cholqr_rows_kernel).  a0, a1, a2: 32x32
// tiles; rows: 8 x QB (4 x QB with the solves); sgn, invs: QB.  Every thread of the block calls it.
template <bool SWEEP, int E>
__device__ __forceinline__ void householder_top(const double (&rr)[E], const double (&mij)[E], const float* S, float* H,
                                                float* TAU, float* VT, float* T, int n, int k, int w, long long vstride,
                                                long long tstride, int ldt, double* small, double (*a0)[QL],
                                                double (*a1)[QL], double (*a2)[QL], double* rows, double* sgn,
                                                double* invs) {
    const int b = blockIdx.x, j = threadIdx.x & 31;
    const float* src = S + (size_t)b * n * n + (size_t)k * n + k;
#pragma unroll
    for (int u = 0; u < E; ++u) {
        const int i = elem_row<E>(u);
        a0[i][j] = mij[u];
        a1[i][j] = (i < w && j < w) ? (double)src[(size_t)i * n + j] : 0.0;  // P1
    }
    __syncthreads();
    double lu[E], uinv[E], linv[E];
#pragma unroll
    for (int u = 0; u < E; ++u) lu[u] = product_elem(a1, a0, elem_row<E>(u), j);  // Q1 = P1 M
    if (SWEEP) {
        signed_lu_inverses_elems<E>(lu, uinv, linv, w, rows, sgn, invs);  // Q1 - S = L U, U^-1, L^-1
#pragma unroll
        for (int u = 0; u < E; ++u) {
            const int i = elem_row<E>(u);
            a2[i][j] = (i < w && j < w) ? lu[u] : 0.0;  // U on and above the diagonal, L's multipliers below
            a1[i][j] = uinv[u];
        }
    } else {
        signed_lu_elems<E>(lu, w, rows, sgn, invs);                // Q1 - S = L U, in place
        __syncthreads();
#pragma unroll
        for (int u = 0; u < E; ++u) {
            const int i = elem_row<E>(u);
            a2[i][j] = (i < w && j < w) ? lu[u] : 0.0;  // U on and above the diagonal, L's multipliers below
            a1[i][j] = (i <= j && j < w) ? lu[u] : 0.0; // U alone
        }
        triangular_inverses_elems<E>(a1, a2, w, rows, uinv, linv);
        __syncthreads();
#pragma unroll
        for (int u = 0; u < E; ++u) a1[elem_row<E>(u)][j] = uinv[u];
    }
    __syncthreads();
    double* nout = small + (size_t)b * 4 * QB * QB + 2 * QB * QB;
#pragma unroll
    for (int u = 0; u < E; ++u) {
        const int i = elem_row<E>(u);
        nout[i * QB + j] = upper_product_elem(a0, a1, i, j);     // N = M U^-1
    }
    __syncthreads();
#pragma unroll
    for (int u = 0; u < E; ++u) a0[elem_row<E>(u)][j] = linv[u];
    __syncthreads();
    const size_t mat = (size_t)b * n * n;
#pragma unroll
    for (int u = 0; u < E; ++u) {
        const int i = elem_row<E>(u);
        if (i >= w || j >= w) continue;
        double t = 0.0;                                            // T = -U S L^-T
#pragma unroll 4
        for (int q = i; q < QB; ++q) t = fma(a2[i][q] * sgn[q < w ? q : 0], a0[j][q], t);
        t = i <= j ? -t : 0.0;
        const double a = lu[u];
        H[mat + (size_t)(k + i) * n + k + j] = (float)(i <= j ? sgn[i] * rr[u] : a);
        T[(size_t)b * tstride + (size_t)i * ldt + j] = (float)t;
        VT[(size_t)b * vstride + (size_t)j * n + i] = (float)(i > j ? a : (i == j ? 1.0 : 0.0));
        if (i == j) TAU[(size_t)b * n + k + j] = (float)t;
    }
}

// First pass: R1 = chol(Gram) and R1^-1 into small[b] (R1, R1^-1, N, spare), the flag set where the
// panel is nearly dependent (LEAF_FALLBACK), or where one pass suffices (LEAF_ONE_PASS) for a panel
// of m rows.  1024 / E threads, E elements each (the triangular solves' form on 1024 only); NB > 0:
// blocked, diagonal blocks of NB (SWEEP, E = 1).  FOLD: where one pass suffices, this launch also
// builds the leaf's top block from R1 and R1^-1 (householder_top) and flags the matrix LEAF_DONE, so
// its second Gram and second kernel return at once: otherwise the second kernel reloads R1 and R1^-1
// and pays a 1024-thread block's fixed cost on the chain, for one sweep.
template <bool SWEEP, int E, int NB, bool FOLD>
__global__ void __launch_bounds__(1024 / E) cholqr_first_kernel(double* acc, int w, int m, double one_pass, double* small,
                                                                int* flags, const float* S, float* H, float* TAU,
                                                                float* VT, float* T, int n, int k, long long vstride,
                                                                long long tstride, int ldt) {
    pdl_wait();
    pdl_release();
    static_assert(NB == 0 || (SWEEP && E == 1), "the blocked sweep holds an element a thread");
    static_assert(!FOLD || SWEEP, "the folded reconstruction is the sweeps'");
    const int b = blockIdx.x, j = threadIdx.x & 31;
    constexpr int FT = FOLD ? QB : 1;  // the reconstruction's tiles, where it runs here
    __shared__ double r[QB][QL], g[NB ? QB : 1][QL], f1[FT][QL], f2[FT][QL], f3[FT][QL];
    __shared__ double rows[(FOLD ? 8 : SWEEP ? 4 : 2) * QB], diag[QB], rinvs[QB], part[32 / E], sgn[FT], invs[FT];
    __shared__ int ok[2], fold;
    double x[E];
#pragma unroll
    for (int u = 0; u < E; ++u) x[u] = take_gram(acc, b, elem_row<E>(u), j, w);
    bool good;
    if constexpr (NB > 0)
        good = cholesky_inverse_blocked<NB>(x[0], g, r, w, 1e-12, diag, rinvs, ok);
    else
        good = SWEEP ? cholesky_inverse_elems<E>(x, r, w, 1e-12, rows, diag, rinvs, ok)
                     : cholesky_elems<E>(x, w, 1e-12, rows, diag, ok);
    if (threadIdx.x == 0) flags[b] = good ? LEAF_TWO_PASSES : LEAF_FALLBACK;
    if (!good) return;
    double inv[E];
    if (SWEEP) {
        __syncthreads();  // r holds R^-1
#pragma unroll
        for (int u = 0; u < E; ++u) inv[u] = r[elem_row<E>(u)][j];
    } else {
#pragma unroll
        for (int u = 0; u < E; ++u) {
            const int i = elem_row<E>(u);
            r[i][j] = (i <= j && j < w) ? x[u] : 0.0;
        }
        upper_inverse_elems<E>(r, w, rows, inv);
    }
    double* out = small + (size_t)b * 4 * QB * QB;
    double s = 0.0, rr[E], mij[E];
#pragma unroll
    for (int u = 0; u < E; ++u) {
        const int i = elem_row<E>(u);
        const bool upper = i <= j && j < w;
        rr[u] = upper ? x[u] : 0.0;
        mij[u] = upper ? inv[u] : 0.0;
        out[i * QB + j] = rr[u];
        out[QB * QB + i * QB + j] = mij[u];
        if (upper) s = fma(diag[i] * inv[u], inv[u], s);
    }
    if (one_pass > 0.0) {  // the same for every thread
        s = warp_sum(s);
        if (j == 0) part[threadIdx.x >> 5] = s;
        __syncthreads();
        if (threadIdx.x == 0) {
            double total = 0.0;
            for (int q = 0; q < 32 / E; ++q) total += part[q];
            const bool one = one_pass_suffices(total, w, m, one_pass);
            if (one) flags[b] = FOLD ? LEAF_DONE : LEAF_ONE_PASS;
            fold = FOLD && one;
        }
        if constexpr (FOLD) {
            __syncthreads();
            if (fold)  // the same for every thread
                householder_top<true, E>(rr, mij, S, H, TAU, VT, T, n, k, w, vstride, tstride, ldt, small, f1, f2, f3,
                                         rows, sgn, invs);
        }
    }
}

// One warp factors G = RᵀR (R upper) and inverts R with no block barrier: lane j holds column j of
// G's upper triangle in x (x[i] = G[i][j], i <= j < w; zero elsewhere) and of an identity in a.
// Step p scales the pivot row, then every lane takes R[p][i] from lane i by a shuffle and applies
// the rank-one update to x (the Schur complement) and the same row operation with L's multiplier to
// a (Gauss-Jordan: a becomes L^-1, G = L D Lᵀ).  On return x holds column j of R and a row j of
// R^-1 = L^-ᵀ D^-1/2.  False (every lane) where a pivot is not above rel times its column's
// original square norm.  The two columns in registers (175 in all, sm_90): a kernel of one warp only.
__device__ __forceinline__ bool warp_cholesky_inverse(double (&x)[QB], double (&a)[QB], int w, double rel,
                                                      double& own_diag) {
    const int j = threadIdx.x & 31;
    double own_rinv = 0.0;
    own_diag = 0.0;
#pragma unroll
    for (int i = 0; i < QB; ++i) {
        a[i] = (i == j && j < w) ? 1.0 : 0.0;
        const double d = __shfl_sync(0xffffffffu, x[i], i);
        if (i == j) own_diag = d;
    }
#pragma unroll
    for (int p = 0; p < QB; ++p) {
        if (p >= w) break;  // the same in every lane
        const double d = __shfl_sync(0xffffffffu, x[p], p);
        const double dg = __shfl_sync(0xffffffffu, own_diag, p);
        if (!(d > rel * dg && isfinite(d))) return false;
        const double rinv = rsqrt(d);
        if (j == p) own_rinv = rinv;
        if (j >= p) x[p] *= rinv;
#pragma unroll
        for (int i = p + 1; i < QB; ++i) {
            const double rpi = __shfl_sync(0xffffffffu, x[p], i);  // R[p][i]: lane i's scaled row p
            if (i < w && j >= i) x[i] = fma(-rpi, x[p], x[i]);
            if (i < w && j <= p) a[i] = fma(-(rpi * rinv), a[p], a[i]);
        }
    }
#pragma unroll
    for (int i = 0; i < QB; ++i) {
        const double ri = __shfl_sync(0xffffffffu, own_rinv, i);
        a[i] = (i >= j && i < w) ? a[i] * ri : 0.0;
    }
    return true;
}

// The first pass on one warp a matrix (PARAMS cholqr_inverse = "warp"): what cholqr_first_kernel
// writes, with the factor and its inverse in registers and shuffles instead of 32 block barriers.
__global__ void __launch_bounds__(32) cholqr_first_warp_kernel(double* acc, int w, int m, double one_pass,
                                                                double* small, int* flags) {
    pdl_wait();
    pdl_release();
    const int b = blockIdx.x, j = threadIdx.x & 31;
    double x[QB], a[QB], own_diag;
#pragma unroll
    for (int i = 0; i < QB; ++i) x[i] = take_gram(acc, b, i, j, w);
    const bool good = warp_cholesky_inverse(x, a, w, 1e-12, own_diag);  // own_diag: G[j][j]
    if (j == 0) flags[b] = good ? LEAF_TWO_PASSES : LEAF_FALLBACK;
    if (!good) return;
    double* out = small + (size_t)b * 4 * QB * QB;
    double row_norm = 0.0;
#pragma unroll
    for (int i = 0; i < QB; ++i) {
        out[i * QB + j] = (i <= j && j < w) ? x[i] : 0.0;  // R1, column j
        out[QB * QB + j * QB + i] = a[i];                  // R1^-1, row j
        row_norm = fma(a[i], a[i], row_norm);
    }
    if (one_pass > 0.0) {
        const double total = warp_sum(j < w ? own_diag * row_norm : 0.0);
        if (j == 0 && one_pass_suffices(total, w, m, one_pass)) flags[b] = LEAF_ONE_PASS;
    }
}

// Matrix b's panel factored column by column (LAPACK conventions, float64 sums) by the NT threads of
// one block, in H through the L2: the path of a panel Cholesky QR cannot take.  Not inlined: the
// fused leaf's registers are capped for two blocks an SM, and this cold path inlined there spilled
// 40 bytes on its hot path (16 at the call).
// scratch: the block's shared ColumnScratch.
struct ColumnScratch {
    double g[QB][QL];
    double part[32];
    float taus[QB];
    float coef[2];  // tau, 1 / (alpha - beta)
};

template <int NT>
__device__ __noinline__ void column_panel(const float* S, float* H, float* TAU, float* VT, float* T, int n, int k, int w,
                             long long vstride, long long tstride, int ldt, int b, ColumnScratch& scratch) {
    constexpr int NW = NT / 32;
    const int tid = threadIdx.x, lane = tid & 31, wid = tid >> 5;
    double* part = scratch.part;
    float* taus = scratch.taus;
    float* coef = scratch.coef;
    double(*g)[QL] = scratch.g;
    const int m = n - k;
    const size_t mat = (size_t)b * n * n;
    float* p = H + mat + (size_t)k * n + k;
    if (S != H) {
        const float* src = S + mat + (size_t)k * n + k;
        for (int e = tid; e < m * w; e += NT) p[(size_t)(e / w) * n + e % w] = src[(size_t)(e / w) * n + e % w];
        __syncthreads();
    }
    for (int c = 0; c < w; ++c) {
        double s = 0.0;
        for (int i = c + 1 + tid; i < m; i += NT) {
            const double y = p[(size_t)i * n + c];
            s = fma(y, y, s);
        }
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        if (lane == 0) part[wid] = s;
        __syncthreads();
        if (tid == 0) {
            double tail2 = 0.0;
            for (int q = 0; q < NW; ++q) tail2 += part[q];
            const double alpha = p[(size_t)c * n + c];
            if (tail2 > 0.0) {
                const double nrm = sqrt(alpha * alpha + tail2);
                const double beta = alpha >= 0.0 ? -nrm : nrm;
                coef[0] = (float)((beta - alpha) / beta);
                coef[1] = (float)(1.0 / (alpha - beta));
                p[(size_t)c * n + c] = (float)beta;
            } else {
                coef[0] = 0.f;
                coef[1] = 0.f;
            }
            taus[c] = coef[0];
        }
        __syncthreads();
        const float tau = coef[0], scale = coef[1];
        if (tau != 0.f)
            for (int i = c + 1 + tid; i < m; i += NT) p[(size_t)i * n + c] *= scale;
        __syncthreads();
        for (int j = c + 1 + wid; j < w && tau != 0.f; j += NW) {
            double d = 0.0;
            for (int i = c + 1 + lane; i < m; i += 32) d = fma((double)p[(size_t)i * n + c], (double)p[(size_t)i * n + j], d);
            for (int o = 16; o > 0; o >>= 1) d += __shfl_xor_sync(0xffffffffu, d, o);
            const float f = tau * (float)(d + (double)p[(size_t)c * n + j]);
            __syncwarp();
            if (lane == 0) p[(size_t)c * n + j] -= f;
            for (int i = c + 1 + lane; i < m; i += 32) p[(size_t)i * n + j] = fmaf(-f, p[(size_t)i * n + c], p[(size_t)i * n + j]);
        }
        __syncthreads();
    }
    // Vᵀ, tau, then T from G = VᵀV by slarft's recurrence
    float* vt = VT + (size_t)b * vstride;
    for (int e = tid; e < w * m; e += NT) {
        const int j = e / m, i = e % m;
        vt[(size_t)j * n + i] = i > j ? p[(size_t)i * n + j] : (i == j ? 1.f : 0.f);
    }
    if (tid < w) TAU[(size_t)b * n + k + tid] = taus[tid];
    __syncthreads();
    for (int e = wid; e < w * w; e += NW) {
        const int i = e / w, j = e % w;
        if (i >= j) continue;
        double d = 0.0;
        for (int r = j + lane; r < m; r += 32) {
            const double vi = r == i ? 1.0 : (r > i ? (double)p[(size_t)r * n + i] : 0.0);
            const double vj = r == j ? 1.0 : (double)p[(size_t)r * n + j];
            d = fma(vi, vj, d);
        }
        for (int o = 16; o > 0; o >>= 1) d += __shfl_xor_sync(0xffffffffu, d, o);
        if (lane == 0) g[i][j] = d;
    }
    __syncthreads();
    float* t = T + (size_t)b * tstride;
    if (tid < w) {
        const int r = tid;
        double row[QB];
#pragma unroll
        for (int c = 0; c < QB; ++c) row[c] = 0.0;
        for (int c = 0; c < w; ++c) {
            double value = 0.0;
            if (c == r) {
                value = taus[r];
            } else if (c > r) {
                double acc = 0.0;
                for (int q = r; q < c; ++q) acc = fma(row[q], g[q][c], acc);
                value = -(double)taus[c] * acc;
            }
            row[c] = value;
            t[(size_t)r * ldt + c] = (float)value;
        }
    }
}

// Second pass and the reconstruction: R2 = chol(Q1ᵀQ1), R = R2 R1, M = R1^-1 R2^-1, Q's top block
// P1 M = L U + S, and the top block's outputs: H (S R on and above the diagonal, L below), tau,
// T = -U S L^-T and Vᵀ's top rows; N = M U^-1 (V2 = P2 N) into small[b] for the rows below.  A matrix
// the first pass left in one pass has R2 = I.  1024 / E threads, E elements each.  A matrix flagged
// nearly dependent by either pass is factored column by column here (column_panel) before the rows
// kernel, which leaves it alone: a launch of its own would put an empty block a matrix on every leaf's
// chain.
// (With SWEEP on 1024 threads, ptxas left to itself gave the kernel 32 registers and 20 bytes of spill
// loads; a minimum of one block an SM lets it take 48.)
template <bool SWEEP, int E>
__global__ void __launch_bounds__(1024 / E, SWEEP ? 1 : 0) cholqr_second_kernel(const float* S, float* H, float* TAU, float* VT, float* T,
                                                             int n, int k, int w, long long vstride, long long tstride,
                                                             int ldt, double* acc, double* small, int* flags) {
    pdl_wait();
    pdl_release();
    const int b = blockIdx.x, j = threadIdx.x & 31;
    const int flag = flags[b];
    if (flag == LEAF_DONE) return;
    __shared__ ColumnScratch scratch;
    if (flag == LEAF_FALLBACK) {
        column_panel<1024 / E>(S, H, TAU, VT, T, n, k, w, vstride, tstride, ldt, b, scratch);
        return;
    }
    const bool one = flag == LEAF_ONE_PASS;  // R2 = I: no second Gram was taken (the same for every thread)
    __shared__ double a0[QB][QL], a1[QB][QL], a2[QB][QL];
    __shared__ double rows[(SWEEP ? 8 : 4) * QB], diag[QB], sgn[QB], invs[QB], rinvs[QB];
    __shared__ int ok[2];
    double x[E];
    bool far = false;  // Q1 must be nearly orthonormal for the second pass to finish the job
#pragma unroll
    for (int u = 0; u < E; ++u) {
        const int i = elem_row<E>(u);
        x[u] = one ? 0.0 : take_gram(acc, b, i, j, w);
        far = far || (i <= j && j < w && !(fabs(x[u] - (i == j ? 1.0 : 0.0)) <= 0.1));
    }
    const bool good = one || (!__syncthreads_or(far) && (SWEEP ? cholesky_inverse_elems<E>(x, a2, w, 0.5, rows, diag, rinvs, ok)
                                                               : cholesky_elems<E>(x, w, 0.5, rows, diag, ok)));
    if (!good) {
        if (threadIdx.x == 0) flags[b] = LEAF_FALLBACK;
        column_panel<1024 / E>(S, H, TAU, VT, T, n, k, w, vstride, tstride, ldt, b, scratch);
        return;
    }
    const double* sm = small + (size_t)b * 4 * QB * QB;
#pragma unroll
    for (int u = 0; u < E; ++u) {
        const int i = elem_row<E>(u);
        a0[i][j] = (i <= j && j < w) ? x[u] : 0.0;  // R2 (with SWEEP, R2^-1 is in a2)
        a1[i][j] = sm[i * QB + j];                  // R1
    }
    __syncthreads();
    double rr[E];  // R = R2 R1
#pragma unroll
    for (int u = 0; u < E; ++u) {
        const int i = elem_row<E>(u);
        rr[u] = one ? a1[i][j] : upper_product_elem(a0, a1, i, j);
    }
    if (SWEEP || one) {
        __syncthreads();
    } else {
        double r2inv[E];
        upper_inverse_elems<E>(a0, w, rows, r2inv);                // (its first barrier orders the reads above)
#pragma unroll
        for (int u = 0; u < E; ++u) a2[elem_row<E>(u)][j] = r2inv[u];
    }
#pragma unroll
    for (int u = 0; u < E; ++u) {
        const int i = elem_row<E>(u);
        a1[i][j] = sm[QB * QB + i * QB + j];    // R1^-1
    }
    __syncthreads();
    double mij[E];  // M = R1^-1 R2^-1
#pragma unroll
    for (int u = 0; u < E; ++u) {
        const int i = elem_row<E>(u);
        mij[u] = one ? a1[i][j] : upper_product_elem(a1, a2, i, j);
    }
    __syncthreads();
    householder_top<SWEEP, E>(rr, mij, S, H, TAU, VT, T, n, k, w, vstride, tstride, ldt, small, a0, a1, a2, rows, sgn, invs);
}

// The rows below the top block: V = P2 N, into H and Vᵀ.
__global__ void __launch_bounds__(256) cholqr_rows_kernel(const float* S, float* H, float* VT, int n, int k, int w,
                                                          long long vstride, const double* small, const int* flags) {
    pdl_wait();
    pdl_release();
    const int b = blockIdx.y, r0 = blockIdx.x * GROWS, tid = threadIdx.x;
    if (flags[b] == LEAF_FALLBACK) return;
    __shared__ double x[GROWS][QL];
    __shared__ double nn[QB][QL];
    const int m = n - k;
    const size_t mat = (size_t)b * n * n;
    const float* src = S + mat + (size_t)k * n + k;
    const double* nsrc = small + (size_t)b * 4 * QB * QB + 2 * QB * QB;
#pragma unroll
    for (int it = 0; it < QB * QB / 256; ++it) nn[(tid + 256 * it) / QB][(tid + 256 * it) % QB] = nsrc[tid + 256 * it];
#pragma unroll
    for (int it = 0; it < GROWS * QB / 256; ++it) {  // a fixed trip count: every load in flight at once
        const int e = tid + 256 * it, r = e / QB, q = e % QB, row = r0 + r;
        x[r][q] = (row >= w && row < m && q < w) ? (double)src[(size_t)row * n + q] : 0.0;
    }
    __syncthreads();
    constexpr int PER = GROWS * QB / 256;
    double y[PER];
#pragma unroll
    for (int u = 0; u < PER; ++u) {
        const int e = tid + 256 * u, r = e / QB, j = e % QB;
        double s = 0.0;
#pragma unroll
        for (int q = 0; q < QB; ++q) s = fma(x[r][q], nn[q][j], s);  // N is zero below its diagonal
        y[u] = s;
    }
    __syncthreads();
#pragma unroll
    for (int u = 0; u < PER; ++u) {
        const int e = tid + 256 * u;
        x[e / QB][e % QB] = y[u];
    }
    __syncthreads();
    float* h = H + mat + (size_t)k * n + k;
    for (int e = tid; e < GROWS * QB; e += 256) {
        const int r = e / QB, j = e % QB, row = r0 + r;
        if (row >= w && row < m && j < w) h[(size_t)row * n + j] = (float)x[r][j];
    }
    float* vt = VT + (size_t)b * vstride;
    for (int e = tid; e < GROWS * QB; e += 256) {
        const int j = e / GROWS, r = e % GROWS, row = r0 + r;
        if (row >= w && row < m && j < w) vt[(size_t)j * n + row] = (float)x[r][j];
    }
}

// acc[u][x] += Σ_k A(ti + 16u, k)·B(k, tj + 16x) over k < kn (at most 64), k in order, (ti, tj) = this
// thread of 256 as 16x16: a 4x4 register tile a thread of a 64x64 product, the operands read through
// the accessors.
template <class FA, class FB>
__device__ __forceinline__ void product_4x4(float (&acc)[4][4], FA a_at, FB b_at, int kn = 64) {
    const int ti = threadIdx.x >> 4, tj = threadIdx.x & 15;
#pragma unroll 4
    for (int k = 0; k < kn; ++k) {
        float a[4], b[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            a[u] = a_at(ti + 16 * u, k);
            b[u] = b_at(k, tj + 16 * u);
        }
#pragma unroll
        for (int u = 0; u < 4; ++u)
#pragma unroll
            for (int x = 0; x < 4; ++x) acc[u][x] = fmaf(a[u], b[x], acc[u][x]);
    }
}

// out[b] += A[b] B[b]ᵀ over one chunk of 64 positions of the long dimension: A is p x len, B q x len
// (element (r, c) at r * row + c * pos, either stride 1), p <= 64 and q <= 64 a block (grid.z steps
// q in tiles of 64).  A block merge's V1ᵀV2 (Vᵀ rows) and a narrow update's VᵀC (C's columns as B's
// rows) split over their long dimension: cuBLAS ran these long, thin products on a few blocks (40 µs
// a merge at 2x4096).  out (rows ldo apart) is zeroed by the caller.
__global__ void __launch_bounds__(256) cross_kernel(const float* A, const float* B, float* out, int p, int q, int len,
                                                    long long sa, long long sb, long long so, long long a_row,
                                                    long long a_pos, long long b_row, long long b_pos, int ldo,
                                                    bool quads) {
    pdl_wait();
    pdl_release();
    const int b = blockIdx.y, c0 = blockIdx.x * 64, q0 = blockIdx.z * 64, tid = threadIdx.x;
    __shared__ float a[64][65], bb[64][65];
    const float* ab = A + (size_t)b * sa;
    const float* bbase = B + (size_t)b * sb + (size_t)q0 * b_row;
    const int qn = min(64, q - q0);
    // A fixed trip count, unrolled: all of a thread's loads are in flight before its first store to
    // shared memory (a loop over e = tid, tid + 256, ... waited for each load in turn).
#pragma unroll
    for (int it = 0; it < 16; ++it) {
        const int e = tid + 256 * it;
        // consecutive threads take consecutive addresses: along the position where it is contiguous
        const int r = a_pos == 1 ? e / 64 : e % 64, c = a_pos == 1 ? e % 64 : e / 64;
        a[r][c] = (r < p && c0 + c < len) ? ab[r * a_row + (c0 + c) * a_pos] : 0.f;
        const int rb = b_pos == 1 ? e / 64 : e % 64, cb = b_pos == 1 ? e % 64 : e / 64;
        bb[rb][cb] = (rb < qn && c0 + cb < len) ? bbase[rb * b_row + (c0 + cb) * b_pos] : 0.f;
    }
    __syncthreads();
    const int ti = tid >> 4, tj = tid & 15;  // a 4x4 tile: rows ti + 16 u, columns tj + 16 v
    float acc[4][4] = {};
    product_4x4(acc, [&](int i, int c) { return a[i][c]; }, [&](int c, int j) { return bb[j][c]; });
    float* ob = out + (size_t)b * so + q0;
    if (!quads) {
#pragma unroll
        for (int u = 0; u < 4; ++u)
#pragma unroll
            for (int v = 0; v < 4; ++v) {
                const int r = ti + 16 * u, c = tj + 16 * v;
                if (r < p && c < qn) atomicAdd(ob + (size_t)r * ldo + c, acc[u][v]);
            }
        return;
    }
    // quads: the sums go out as float4 atomics, four columns a request (every block adds into the same
    // p x q sums, 64 deep at 4096 rows, so the atomics' count may set the kernel's time).  A thread's
    // tile columns are 16 apart, so the tile goes through shared memory first.
    __syncthreads();  // every thread is done reading a
#pragma unroll
    for (int u = 0; u < 4; ++u)
#pragma unroll
        for (int v = 0; v < 4; ++v) a[ti + 16 * u][tj + 16 * v] = acc[u][v];
    __syncthreads();
    const bool aligned = ldo % 4 == 0 && reinterpret_cast<unsigned long long>(ob) % 16 == 0;
#pragma unroll
    for (int it = 0; it < 4; ++it) {
        const int e = tid + 256 * it, r = e >> 4, c = 4 * (e & 15);
        if (r >= p || c >= qn) continue;
        float* o = ob + (size_t)r * ldo + c;
        if (aligned && c + 4 <= qn) {
            atomicAdd(reinterpret_cast<float4*>(o), make_float4(a[r][c], a[r][c + 1], a[r][c + 2], a[r][c + 3]));
        } else {
            for (int x = 0; x < 4 && c + x < qn; ++x) atomicAdd(o + x, a[r][c + x]);
        }
    }
}

// C[b] = S[b] - V W over one chunk of 64 rows and 64 columns (grid.z): V given as Vᵀ (p x m, rows
// vrow apart, p <= 64), W p x ncols (rows ldw apart), C and S m x ncols with rows ldc apart (S is C,
// or the input laid out as C).  Exact FP32 on the CUDA cores: a narrow update's last product, where
// cuBLAS took 23 µs a call on a few blocks.  Each thread holds a 4x4 tile of C (rows ti + 16 u,
// columns tj + 16 v): its 16 loads of S are issued together and its 16 sums are independent chains,
// where an element at a time put a load's latency and a p-long FMA chain in series 16 times a thread.
// Each element is still S minus its products in order of q.  WITH_T: W is VᵀS itself and the block
// first forms its columns of Tᵀ W (T p x p, rows ldt apart), instead of a product launched between.
template <bool WITH_T>
__global__ void __launch_bounds__(256) apply_rows_kernel(const float* S, float* C, const float* VT, const float* W,
                                                         const float* T, int m, int ncols, int p, long long sc,
                                                         long long sv, long long sw, long long st, int ldc, int vrow,
                                                         int ldw, int ldt) {
    pdl_wait();
    pdl_release();
    const int b = blockIdx.y, r0 = blockIdx.x * 64, j0 = blockIdx.z * 64, tid = threadIdx.x;
    const int ti = tid >> 4, tj = tid & 15;
    __shared__ float v[64][65], w[64][65];
    const float* vb = VT + (size_t)b * sv;
    const float* wb = W + (size_t)b * sw;
    if constexpr (WITH_T) {  // T in v's place first: v[r][q] = T[r][q]
        const float* tb = T + (size_t)b * st;
#pragma unroll
        for (int it = 0; it < 16; ++it) {
            const int e = tid + 256 * it, q = e / 64, x = e % 64;
            v[q][x] = (q < p && x < p) ? tb[(size_t)q * ldt + x] : 0.f;
            w[q][x] = (q < p && j0 + x < ncols) ? wb[(size_t)q * ldw + j0 + x] : 0.f;
        }
        __syncthreads();
        float y[4][4] = {};  // (Tᵀ W)[ti + 16 u][tj + 16 c]
        product_4x4(y, [&](int i, int r) { return v[r][i]; }, [&](int r, int c) { return w[r][c]; }, p);
        __syncthreads();
#pragma unroll
        for (int u = 0; u < 4; ++u)
#pragma unroll
            for (int c = 0; c < 4; ++c) w[ti + 16 * u][tj + 16 * c] = y[u][c];
    }
#pragma unroll
    for (int it = 0; it < 16; ++it) {
        const int e = tid + 256 * it, q = e / 64, x = e % 64;
        v[q][x] = (q < p && r0 + x < m) ? vb[(size_t)q * vrow + r0 + x] : 0.f;      // v[q][row]
        if constexpr (!WITH_T) w[q][x] = (q < p && j0 + x < ncols) ? wb[(size_t)q * ldw + j0 + x] : 0.f;
    }
    const size_t base = (size_t)b * sc;
    float acc[4][4];
#pragma unroll
    for (int u = 0; u < 4; ++u)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            const int row = r0 + ti + 16 * u, col = j0 + tj + 16 * c;
            acc[u][c] = (row < m && col < ncols) ? S[base + (size_t)row * ldc + col] : 0.f;
        }
    __syncthreads();
    product_4x4(acc, [&](int i, int q) { return -v[q][i]; }, [&](int q, int c) { return w[q][c]; }, p);
#pragma unroll
    for (int u = 0; u < 4; ++u)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            const int row = r0 + ti + 16 * u, col = j0 + tj + 16 * c;
            if (row < m && col < ncols) C[base + (size_t)row * ldc + col] = acc[u][c];
        }
}

// ---- The fused leaf: the whole Cholesky QR twice of a panel in one launch ----
// Each block owns a chunk of GROWS rows of one matrix for the whole leaf and meets the matrix's other
// blocks twice, after each Gram (a counter in global memory).  The 32x32 factors are then computed
// by every block, redundantly and bit for bit alike (the element-parallel steps above, four elements
// a thread, on the same summed Gram), so no block waits for another's small factors: the six
// launches of a leaf, with two single-block kernels on its critical path, become one.  One warp a
// block computing them took 198 µs a leaf at 2x4096 on an H100 (a serial chain of shared-memory
// loads per lane), against 85 µs for the five launches.  Blocks take their (matrix, chunk) from a
// ticket in start order, so the blocks a matrix waits for have all started, whatever the hardware's
// block order: only a matrix's chunks need to be resident at once, which the host checks.

// The two hardware hooks of the fused leaf; the tests' host emulation (QR_HOST_EMULATION: CPU threads
// for GPU threads) brings its own.
#ifndef QR_HOST_EMULATION
__device__ __forceinline__ int load_acquire(const int* p) {
    int v;
    asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ double* dynamic_shared() {
    extern __shared__ double dynamic_smem[];
    return dynamic_smem;
}
#endif

// Every thread of the block has issued its part (atomics to a Gram); the block then counts itself
// in and waits until all `expected` blocks of its matrix have.  A wait of seconds means a broken
// launch (not all of a matrix's chunks resident): trap rather than hang the GPU.
__device__ void arrive_and_wait(int* counter, int expected) {
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        atomicAdd(counter, 1);
        for (long long spins = 0;; ++spins) {
            if (load_acquire(counter) >= expected) break;
            if (spins > (1LL << 24)) __trap();
            __nanosleep(32);
        }
        __threadfence();
    }
    __syncthreads();
}

// The partial Gram x_cᵀx_c of a chunk (GROWS x QB in shared memory) added into acc's upper
// triangle; 256 threads, each a 2x2 tile.
__device__ void add_chunk_gram(const double (*x)[QL], double* acc) {
    const int tid = threadIdx.x, ti = tid >> 4, tj = tid & 15;
    double g00 = 0.0, g01 = 0.0, g11 = 0.0;
#pragma unroll 8
    for (int r = 0; r < GROWS; ++r) {
        const double a0 = x[r][ti], a1 = x[r][ti + 16], c0 = x[r][tj], c1 = x[r][tj + 16];
        g00 = fma(a0, c0, g00);
        g01 = fma(a0, c1, g01);
        g11 = fma(a1, c1, g11);
    }
    if (ti <= tj) atomicAdd(acc + ti * QB + tj, g00);
    atomicAdd(acc + ti * QB + tj + 16, g01);
    if (ti <= tj) atomicAdd(acc + (ti + 16) * QB + tj + 16, g11);
}

// x = x f for the chunk in shared memory and f upper triangular (QB x QB); 256 threads.
__device__ void chunk_times_upper(double (*x)[QL], const double (*f)[QL]) {
    constexpr int PER = GROWS * QB / 256;
    double y[PER];
#pragma unroll
    for (int u = 0; u < PER; ++u) {
        const int e = threadIdx.x + 256 * u, r = e / QB, j = e % QB;
        double s = 0.0;
#pragma unroll 8
        for (int q = 0; q < QB; ++q) s = fma(x[r][q], f[q][j], s);
        y[u] = s;
    }
    __syncthreads();
#pragma unroll
    for (int u = 0; u < PER; ++u) {
        const int e = threadIdx.x + 256 * u;
        x[e / QB][e % QB] = y[u];
    }
    __syncthreads();
}

// This thread's elements of a summed Gram's upper w x w triangle (zero elsewhere), through the L2.
template <int E>
__device__ __forceinline__ void load_gram_elems(const double* acc, int w, double (&x)[E]) {
    const int j = threadIdx.x & 31;
#pragma unroll
    for (int u = 0; u < E; ++u) {
        const int i = elem_row<E>(u);
        x[u] = (i <= j && j < w) ? __ldcg(acc + i * QB + j) : 0.0;
    }
}

constexpr int LEAF_THREADS = 256;
constexpr int LEAF_TILES = 8;  // 32x32 float64 tiles besides the chunk
constexpr int LEAF_SMALL = 13 * QB;  // float64 scratch of the sweeps: rows 8 QB, diag, sgn, invs, rinvs, ok

// The fused leaf's shared memory past its float64 tiles and the steps' scratch: the fallback's
// scratch, then the ticket and a flag the block shares.
__host__ __device__ constexpr size_t leaf_tiles_bytes() {
    return (size_t)(GROWS + LEAF_TILES * QB) * QL * sizeof(double) + LEAF_SMALL * sizeof(double);
}

__host__ __device__ constexpr size_t leaf_smem_bytes() {
    return leaf_tiles_bytes() + sizeof(ColumnScratch) + 2 * sizeof(double);
}

// acc: 2 x 1024 float64 a matrix (the two Grams), ctrl: [ticket, blocks done, then per matrix three
// counters], all zero at the start and left zero at the end (the last block to finish resets them).
__global__ void __launch_bounds__(LEAF_THREADS, 2) cholqr_leaf_kernel(const float* S, float* H, float* TAU, float* VT,
                                                                   float* T, int n, int k, int w, long long vstride,
                                                                   long long tstride, int ldt, int chunks,
                                                                   double* acc, int* ctrl) {
    double* smem = dynamic_shared();
    double(*x)[QL] = reinterpret_cast<double(*)[QL]>(smem);  // the chunk: P, then P R1^-1, then V
    double(*r1)[QL] = x + GROWS;      // R1
    double(*r1i)[QL] = r1 + QB;       // R1^-1, then N' = R2^-1 U^-1
    double(*r2)[QL] = r1i + QB;       // R2
    double(*r2i)[QL] = r2 + QB;       // R2^-1
    double(*mm)[QL] = r2i + QB;       // M = R1^-1 R2^-1, then L^-1
    double(*p1)[QL] = mm + QB;        // P's top block
    double(*lu)[QL] = p1 + QB;        // L's multipliers and U
    double(*ui)[QL] = lu + QB;        // U^-1
    double* rows = reinterpret_cast<double*>(ui + QB);
    double* diag = rows + 8 * QB;
    double* sgn = diag + QB;
    double* invs = sgn + QB;
    double* rinvs = invs + QB;
    int* ok = reinterpret_cast<int*>(rinvs + QB);
    ColumnScratch& scratch = *reinterpret_cast<ColumnScratch*>(smem + leaf_tiles_bytes() / sizeof(double));
    volatile int* shared_ints = reinterpret_cast<int*>(smem + (leaf_tiles_bytes() + sizeof(ColumnScratch)) / sizeof(double));
    volatile int& ticket = shared_ints[0];
    volatile int& state = shared_ints[1];
    const int tid = threadIdx.x, j = tid & 31;
    if (tid == 0) ticket = atomicAdd(ctrl, 1);
    __syncthreads();
    const int b = ticket / chunks, r0 = (ticket % chunks) * GROWS, m = n - k;
    int* count = ctrl + 2 + 3 * b;
    double* gram1 = acc + (size_t)b * 2 * QB * QB;
    double* gram2 = gram1 + QB * QB;
    const size_t mat = (size_t)b * n * n;
    const float* src = S + mat + (size_t)k * n + k;
    // P1 is read now: block 0 of the matrix writes H's top rows once every block has passed the second Gram
    for (int e = tid; e < GROWS * QB; e += LEAF_THREADS) {
        const int r = e / QB, q = e % QB;
        x[r][q] = (r0 + r < m && q < w) ? (double)src[(size_t)(r0 + r) * n + q] : 0.0;
        if (r < QB) p1[r][q] = (r < w && q < w) ? (double)src[(size_t)r * n + q] : 0.0;
    }
    __syncthreads();
    add_chunk_gram(x, gram1);
    arrive_and_wait(count, chunks);
    constexpr int E = QB * QB / LEAF_THREADS;  // elements (i, j) a thread: i = warp + 8 u, j = lane
    double e1[E], e2[E], e3[E];
    load_gram_elems<E>(gram1, w, e1);
    bool good = cholesky_inverse_elems<E>(e1, r1i, w, 1e-12, rows, diag, rinvs, ok);
    if (good) {
#pragma unroll
        for (int u = 0; u < E; ++u) r1[elem_row<E>(u)][j] = e1[u];  // zero off R's triangle
        __syncthreads();
        chunk_times_upper(x, r1i);  // Q1's rows of the first pass
        add_chunk_gram(x, gram2);
        arrive_and_wait(count + 1, chunks);
        load_gram_elems<E>(gram2, w, e1);
        // Q1 must be nearly orthonormal for the second pass to finish the job
        bool far = false;
#pragma unroll
        for (int u = 0; u < E; ++u) {
            const int i = elem_row<E>(u);
            far |= i <= j && j < w && !(fabs(e1[u] - (i == j ? 1.0 : 0.0)) <= 0.1);
        }
        good = !__syncthreads_or(far) && cholesky_inverse_elems<E>(e1, r2i, w, 0.5, rows, diag, rinvs, ok);
    }
    if (good) {
#pragma unroll
        for (int u = 0; u < E; ++u) r2[elem_row<E>(u)][j] = e1[u];
        __syncthreads();
#pragma unroll
        for (int u = 0; u < E; ++u) mm[elem_row<E>(u)][j] = upper_product_elem(r1i, r2i, elem_row<E>(u), j);
        __syncthreads();
#pragma unroll
        for (int u = 0; u < E; ++u) e3[u] = product_elem(p1, mm, elem_row<E>(u), j);  // Q1 = P1 M
        signed_lu_inverses_elems<E>(e3, e1, e2, w, rows, sgn, invs);  // Q1 - S = L U, U^-1, L^-1
#pragma unroll
        for (int u = 0; u < E; ++u) {
            const int i = elem_row<E>(u);
            lu[i][j] = i < w && j < w ? e3[u] : 0.0;
            ui[i][j] = e1[u];
            mm[i][j] = e2[u];
        }
        __syncthreads();
#pragma unroll
        for (int u = 0; u < E; ++u) e1[u] = upper_product_elem(r2i, ui, elem_row<E>(u), j);  // N' = R2^-1 U^-1
        __syncthreads();
#pragma unroll
        for (int u = 0; u < E; ++u) r1i[elem_row<E>(u)][j] = e1[u];
        __syncthreads();
        chunk_times_upper(x, r1i);  // V2 = (P2 R1^-1) N'
        float* h = H + mat + (size_t)k * n + k;
        for (int e = tid; e < GROWS * QB; e += LEAF_THREADS) {
            const int r = e / QB, q = e % QB, row = r0 + r;
            if (row >= w && row < m && q < w) h[(size_t)row * n + q] = (float)x[r][q];
        }
        float* vt = VT + (size_t)b * vstride;
        for (int e = tid; e < GROWS * QB; e += LEAF_THREADS) {
            const int q = e / GROWS, r = e % GROWS, row = r0 + r;
            if (row >= w && row < m && q < w) vt[(size_t)q * n + row] = (float)x[r][q];
        }
        if (r0 == 0) {  // the top block: H (S R on and above the diagonal, L below), tau, T, Vᵀ
            float* t = T + (size_t)b * tstride;
#pragma unroll
            for (int u = 0; u < E; ++u) {
                const int i = elem_row<E>(u);
                if (i >= w || j >= w) continue;
                double tij = 0.0;  // T = -U S L^-T
                for (int q = i; q < QB; ++q) tij = fma(lu[i][q] * sgn[q < w ? q : 0], mm[j][q], tij);
                tij = i <= j ? -tij : 0.0;
                const double rr = upper_product_elem(r2, r1, i, j);  // R = R2 R1
                h[(size_t)i * n + j] = (float)(i <= j ? sgn[i] * rr : e3[u]);
                t[(size_t)i * ldt + j] = (float)tij;
                vt[(size_t)j * n + i] = (float)(i > j ? e3[u] : (i == j ? 1.0 : 0.0));
                if (i == j) TAU[(size_t)b * n + k + j] = (float)tij;
            }
        }
    } else if (r0 == 0) {
        column_panel<LEAF_THREADS>(S, H, TAU, VT, T, n, k, w, vstride, tstride, ldt, b, scratch);
    }
    // The matrix's last block to finish zeroes its Grams and counters, the grid's last the tickets.
    __threadfence();
    __syncthreads();
    if (tid == 0) state = atomicAdd(count + 2, 1) == chunks - 1;
    __syncthreads();
    if (state) {
        for (int e = tid; e < 2 * QB * QB; e += LEAF_THREADS) gram1[e] = 0.0;
        if (tid < 3) count[tid] = 0;
    }
    if (tid == 0) {
        __threadfence();
        if (atomicAdd(ctrl + 1, 1) == (int)gridDim.x - 1) {
            ctrl[0] = 0;
            ctrl[1] = 0;
        }
    }
}

// ---- A narrow update in one launch ----
// C = S - V·(Tᵀ·(Vᵀ S)) for the few columns of a tall matrix, V at most 64 wide: each block owns 64
// rows of one matrix, adds its part of W = Vᵀ S into a float32 accumulator (atomics), meets the
// matrix's other blocks as the fused leaf does, then applies V·(TᵀW) to its rows.  One launch where
// the split path takes four (W zeroed, the split product, TᵀW, the row update), in the same exact
// FP32 on the CUDA cores.  Tickets, the resident check and the trap as in the fused leaf.
constexpr int NARROW_THREADS = 256;
constexpr int NARROW_LD = 65;  // odd row stride of the 64x64 float tiles

__host__ __device__ constexpr size_t narrow_smem_bytes() {
    return (size_t)4 * 64 * NARROW_LD * sizeof(float) + 2 * sizeof(int);
}

// W: float32, batch x 64 x ldw (ldw >= ncols), zero, left zero; ctrl: 2 + 3 batch int32, zero, left zero.
__global__ void __launch_bounds__(NARROW_THREADS) narrow_update_kernel(
    const float* S, float* C, const float* VT, const float* T, int m, int ncols, int p, long long sc, int ldc,
    long long sv, int vrow, long long st, int ldt, int chunks, float* W, int ldw, int* ctrl) {
    float* smem = reinterpret_cast<float*>(dynamic_shared());
    float(*v)[NARROW_LD] = reinterpret_cast<float(*)[NARROW_LD]>(smem);  // v[q][r]: V's row r0 + r, column q
    float(*tile)[NARROW_LD] = v + 64;   // S's rows (first pass), then W's columns
    float(*tt)[NARROW_LD] = tile + 64;  // T
    float(*y)[NARROW_LD] = tt + 64;     // TᵀW
    volatile int* shared_ints = reinterpret_cast<int*>(y + 64);
    const int tid = threadIdx.x, ti = tid >> 4, tj = tid & 15;
    if (tid == 0) shared_ints[0] = atomicAdd(ctrl, 1);
    __syncthreads();
    const int ticket = shared_ints[0];
    const int b = ticket / chunks, r0 = (ticket % chunks) * 64;
    int* count = ctrl + 2 + 3 * b;
    float* wb = W + (size_t)b * 64 * ldw;
    const float* sb = S + (size_t)b * sc;
    float* cb = C + (size_t)b * sc;
    const float* vb = VT + (size_t)b * sv;
    for (int e = tid; e < 64 * 64; e += NARROW_THREADS) {
        const int q = e / 64, r = e % 64;
        v[q][r] = (q < p && r0 + r < m) ? vb[(size_t)q * vrow + r0 + r] : 0.f;
    }
    for (int c0 = 0; c0 < ncols; c0 += 64) {  // W += V_rowsᵀ S_rows, a 4x4 tile a thread
        __syncthreads();
        for (int e = tid; e < 64 * 64; e += NARROW_THREADS) {
            const int r = e / 64, j = e % 64;
            tile[r][j] = (r0 + r < m && c0 + j < ncols) ? sb[(size_t)(r0 + r) * ldc + c0 + j] : 0.f;
        }
        __syncthreads();
        float acc[4][4] = {};
        product_4x4(acc, [&](int q, int r) { return v[q][r]; }, [&](int r, int j) { return tile[r][j]; });
#pragma unroll
        for (int u = 0; u < 4; ++u)
#pragma unroll
            for (int x = 0; x < 4; ++x) {
                const int q = ti + 16 * u, j = c0 + tj + 16 * x;
                if (q < p && j < ncols) atomicAdd(wb + (size_t)q * ldw + j, acc[u][x]);
            }
    }
    arrive_and_wait(count, chunks);
    for (int e = tid; e < 64 * 64; e += NARROW_THREADS) {
        const int q = e / 64, i = e % 64;
        tt[q][i] = (q < p && i < p) ? T[(size_t)b * st + (size_t)q * ldt + i] : 0.f;
    }
    for (int c0 = 0; c0 < ncols; c0 += 64) {
        __syncthreads();
        for (int e = tid; e < 64 * 64; e += NARROW_THREADS) {
            const int q = e / 64, j = e % 64;
            tile[q][j] = (q < p && c0 + j < ncols) ? __ldcg(wb + (size_t)q * ldw + c0 + j) : 0.f;
        }
        __syncthreads();
        float acc[4][4] = {};  // Y = Tᵀ W
        product_4x4(acc, [&](int i, int q) { return tt[q][i]; }, [&](int q, int j) { return tile[q][j]; });
#pragma unroll
        for (int u = 0; u < 4; ++u)
#pragma unroll
            for (int x = 0; x < 4; ++x) y[ti + 16 * u][tj + 16 * x] = acc[u][x];
        __syncthreads();
        for (int e = tid; e < 64 * 64; e += NARROW_THREADS) {  // C = S - V Y on this block's rows
            const int r = e / 64, j = e % 64, row = r0 + r, col = c0 + j;
            if (row >= m || col >= ncols) continue;
            float x = sb[(size_t)row * ldc + col];
            for (int q = 0; q < p; ++q) x = fmaf(-v[q][r], y[q][j], x);
            cb[(size_t)row * ldc + col] = x;
        }
    }
    // The matrix's last block zeroes its W and counters, the grid's last the tickets.
    __threadfence();
    __syncthreads();
    if (tid == 0) shared_ints[1] = atomicAdd(count + 2, 1) == chunks - 1;
    __syncthreads();
    if (shared_ints[1]) {
        for (int e = tid; e < 64 * ldw; e += NARROW_THREADS) wb[e] = 0.f;
        if (tid < 3) count[tid] = 0;
    }
    if (tid == 0) {
        __threadfence();
        if (atomicAdd(ctrl + 1, 1) == (int)gridDim.x - 1) {
            ctrl[0] = 0;
            ctrl[1] = 0;
        }
    }
}

// ---- A block merge's T in one launch ----
// T12 = -T1·(V1ᵀV2)·T2 for the two halves of a block (V1 w1 and V2 w2 rows of Vᵀ, at most 64 each,
// over the positions both cover): each block adds its 64 positions' part of X = V1ᵀV2 into a float32
// accumulator, and the last block of a matrix to finish (a counter, as CUDA's threadfence reduction)
// computes T12 from the sum and zeroes X and its counter.  No block waits for another, so any
// stream may launch it.  One launch where the split path takes four (X zeroed, the split product,
// T1·X and ·T2 by cuBLAS), in the same FP32.
constexpr int MERGE_THREADS = 256;

__host__ __device__ constexpr size_t merge_smem_bytes() { return (size_t)3 * 64 * NARROW_LD * sizeof(float) + sizeof(int); }

// v1: w1 rows (vrow apart) of len positions, v2: w2 rows; t1: T's top-left w1 x w1 block, t2 its
// bottom-right, t12 its top-right (all rows ldt apart); X: float32 batch x 64 x 64, count: int32 batch,
// both zero and left zero.
__global__ void __launch_bounds__(MERGE_THREADS) merge_kernel(const float* V1, const float* V2, int w1, int w2,
                                                              int len, long long sv, int vrow, const float* T1,
                                                              const float* T2, float* T12, long long st, int ldt,
                                                              int chunks, float* X, int* count) {
    float* smem = reinterpret_cast<float*>(dynamic_shared());
    float(*a)[NARROW_LD] = reinterpret_cast<float(*)[NARROW_LD]>(smem);  // a[q][c]: V1's row q, position c0 + c
    float(*c2)[NARROW_LD] = a + 64;
    float(*z)[NARROW_LD] = c2 + 64;
    volatile int& last = *reinterpret_cast<int*>(z + 64);
    const int tid = threadIdx.x, ti = tid >> 4, tj = tid & 15;
    const int b = blockIdx.x / chunks, c0 = (blockIdx.x % chunks) * 64;
    const float* v1 = V1 + (size_t)b * sv;
    const float* v2 = V2 + (size_t)b * sv;
    float* xb = X + (size_t)b * 64 * 64;
    for (int e = tid; e < 64 * 64; e += MERGE_THREADS) {
        const int q = e / 64, c = e % 64;
        a[q][c] = (q < w1 && c0 + c < len) ? v1[(size_t)q * vrow + c0 + c] : 0.f;
        c2[q][c] = (q < w2 && c0 + c < len) ? v2[(size_t)q * vrow + c0 + c] : 0.f;
    }
    __syncthreads();
    float acc[4][4] = {};  // X = V1 V2ᵀ over this block's positions
    product_4x4(acc, [&](int i, int c) { return a[i][c]; }, [&](int c, int j) { return c2[j][c]; });
#pragma unroll
    for (int u = 0; u < 4; ++u)
#pragma unroll
        for (int v = 0; v < 4; ++v) {
            const int i = ti + 16 * u, j = tj + 16 * v;
            if (i < w1 && j < w2) atomicAdd(xb + i * 64 + j, acc[u][v]);
        }
    __threadfence();
    __syncthreads();
    if (tid == 0) last = atomicAdd(count + b, 1) == chunks - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    for (int e = tid; e < 64 * 64; e += MERGE_THREADS) {  // X, T1 and T2 of this matrix
        const int i = e / 64, j = e % 64;
        z[i][j] = (i < w1 && j < w2) ? __ldcg(xb + i * 64 + j) : 0.f;
        a[i][j] = (i < w1 && j < w1) ? T1[(size_t)b * st + (size_t)i * ldt + j] : 0.f;
        c2[i][j] = (i < w2 && j < w2) ? T2[(size_t)b * st + (size_t)i * ldt + j] : 0.f;
    }
    __syncthreads();
    float y[4][4] = {};  // Y = T1 X
    product_4x4(y, [&](int i, int q) { return a[i][q]; }, [&](int q, int j) { return z[q][j]; });
    __syncthreads();
#pragma unroll
    for (int u = 0; u < 4; ++u)
#pragma unroll
        for (int v = 0; v < 4; ++v) z[ti + 16 * u][tj + 16 * v] = y[u][v];
    __syncthreads();
    float* t12 = T12 + (size_t)b * st;
#pragma unroll
    for (int u = 0; u < 4; ++u)
#pragma unroll
        for (int v = 0; v < 4; ++v) {
            const int i = ti + 16 * u, j = tj + 16 * v;
            float s = 0.f;  // -(Y T2)
            for (int q = 0; q < w2; ++q) s = fmaf(z[i][q], c2[q][j], s);
            if (i < w1 && j < w2) t12[(size_t)i * ldt + j] = -s;
        }
    for (int e = tid; e < 64 * 64; e += MERGE_THREADS) xb[e] = 0.f;
    if (tid == 0) count[b] = 0;
}

// ---- The columns a matrix may need ----
// live[b] = 1 + the last column of matrix b with a nonzero element (0 for a zero matrix): columns from
// there on are zero, stay zero under every reflector, and their updates can be skipped (a
// rank-deficient input with zero trailing columns).  Each thread scans its rows from the end and stops
// at a nonzero element, or where the block already knows of a later one: a dense matrix costs its
// last column.
__global__ void __launch_bounds__(256) live_columns_kernel(const float* A, int n, int* live) {
    const int b = blockIdx.x;
    const float* a = A + (size_t)b * n * n;
    int* best = reinterpret_cast<int*>(dynamic_shared());
    if (threadIdx.x == 0) *best = 0;
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const float* row = a + (size_t)i * n;
        for (int c = n - 1; c >= 0; --c) {
            if (c < *reinterpret_cast<volatile int*>(best)) break;
            if (row[c] != 0.f) {
                atomicMax(best, c + 1);
                break;
            }
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) live[b] = *best;
}

// kept[b] = 1 + the last column of matrix b whose 1-norm exceeds rel·‖a₀‖₁ (its first column's 1-norm,
// a lower bound of ‖A‖₁; 0 for none): the factorisation leaves the columns after it out (tau 0 there),
// which changes R - QᵀA by at most 2√n·rel·‖A‖₁ in 1-norm (a dropped column a: R holds at most a
// transform of it, and Qᵀa is dropped) — with rel = 8·eps32, 16/√n of the n·eps32·‖A‖₁ the contract's
// residual is measured in.  rel = 0 keeps every column with a nonzero element (exact).  A NaN norm, or a
// first column that is not finite, keeps the column.  First one 32-byte sector a row: column 0 and the
// last 8 columns (a warp reads 4 rows of 8 columns an instruction), which ends the scan of a matrix
// that keeps its last column (a dense one); then 32-column chunks from there to the left (each warp a
// stripe of rows, lane = column: coalesced), stopping at the first chunk with a kept column.  Loads are
// issued eight at a time (one at a time, a chunk was 64 dependent DRAM latencies).  Shared: 256
// doubles, one double and one int.
__global__ void __launch_bounds__(256) tail_columns_kernel(const float* A, int n, double rel, int* kept) {
    const int b = blockIdx.x, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const float* a = A + (size_t)b * n * n;
    double* part = dynamic_shared();
    double* bound = part + 256;
    int* found = reinterpret_cast<int*>(bound + 1);
    const int last0 = n > 8 ? n - 8 : 0, c8 = lane & 7;
    const bool mine = last0 + c8 < n;
    double first = 0.0, tail = 0.0;
    for (int i0 = warp * 4 + (lane >> 3); i0 < n; i0 += 8 * 32) {
        float x[8], y[8];
#pragma unroll
        for (int u = 0; u < 8; ++u) {
            const int i = i0 + 32 * u;
            x[u] = i < n && mine ? a[(size_t)i * n + last0 + c8] : 0.f;
            y[u] = i < n && c8 == 0 ? a[(size_t)i * n] : 0.f;
        }
#pragma unroll
        for (int u = 0; u < 8; ++u) {
            tail += fabs((double)x[u]);
            first += fabs((double)y[u]);
        }
    }
#pragma unroll
    for (int o = 16; o >= 8; o >>= 1) tail += __shfl_xor_sync(FULL, tail, o);  // lanes of one column
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) first += __shfl_xor_sync(FULL, first, o);
    if (lane < 8) part[warp * 8 + lane] = tail;
    if (lane == 0) part[64 + warp] = first;
    __syncthreads();
    if (threadIdx.x == 0) {
        double norm = 0.0;
        for (int w = 0; w < 8; ++w) norm += part[64 + w];
        const double limit = isfinite(norm) ? rel * norm : 0.0;
        *bound = limit;
        int last = -1;
        for (int c = n - last0 - 1; c >= 0 && last < 0; --c) {
            double s = 0.0;
            for (int w = 0; w < 8; ++w) s += part[w * 8 + c];
            if (!(s <= limit)) last = last0 + c;
        }
        *found = last;
    }
    __syncthreads();
    const double limit = *bound;
    for (int end = last0; end > 0 && *found < 0; end -= 32) {
        const int col = end - 32 + lane;
        double sum = 0.0;
        if (col >= 0)
            for (int i0 = warp; i0 < n; i0 += 8 * 8) {
                float x[8];
#pragma unroll
                for (int u = 0; u < 8; ++u) x[u] = i0 + 8 * u < n ? a[(size_t)(i0 + 8 * u) * n + col] : 0.f;
#pragma unroll
                for (int u = 0; u < 8; ++u) sum += fabs((double)x[u]);
            }
        __syncthreads();  // every thread has read found before warp 0 may set it
        part[warp * 32 + lane] = sum;
        __syncthreads();
        if (warp == 0) {
            double norm = 0.0;
            for (int w = 0; w < 8; ++w) norm += part[w * 32 + lane];
            if (col >= 0 && !(norm <= limit)) atomicMax(found, col);
        }
        __syncthreads();  // found is final for this chunk
    }
    if (threadIdx.x == 0) kept[b] = *found + 1;
}

// The columns left out, after the factorisation: tau[b, c] = 0 from c = kept[b] (every c ≥ cut without
// kept), and H[b, :, cut:] = 0 (the batch's cut: no launch wrote those columns).  Columns of H between
// kept[b] and cut keep what the factorisation left there (a transform of the dropped column, or the
// factor of one in the panel that straddles kept[b]): with tau 0 they are no reflector, and R's part of
// them is bounded as tail_columns_kernel says.  Block (chunk, b) covers 64 rows; the writes are float4
// where the cut and n allow.
__global__ void __launch_bounds__(256) clear_tail_kernel(float* H, float* TAU, int n, int cut, const int* kept) {
    const int b = blockIdx.y, from = kept != nullptr ? min(kept[b], cut) : cut;
    if (blockIdx.x == 0)
        for (int c = from + threadIdx.x; c < n; c += 256) TAU[(size_t)b * n + c] = 0.f;
    const int cols = n - cut;
    if (cols <= 0) return;
    float* h = H + (size_t)b * n * n;
    const int r0 = blockIdx.x * 64, rows = min(64, n - r0);
    if (cols % 4 == 0 && cut % 4 == 0 && n % 4 == 0) {
        const int quads = cols / 4;
        for (int e = threadIdx.x; e < rows * quads; e += 256)
            *reinterpret_cast<float4*>(h + (size_t)(r0 + e / quads) * n + cut + 4 * (e % quads)) =
                make_float4(0.f, 0.f, 0.f, 0.f);
    } else {
        for (int e = threadIdx.x; e < rows * cols; e += 256) h[(size_t)(r0 + e / cols) * n + cut + e % cols] = 0.f;
    }
}

"""

# The panel kernel's instantiations, (rows per lane, warps, columns per warp, blocks per SM): every
# shape _shape() can ask for.  The host code's dispatch over them is generated from this list.
_PANEL_KERNELS = (
    (4, 16, 4, 1), (8, 16, 4, 1), (16, 16, 4, 1), (4, 16, 2, 1), (8, 16, 2, 1), (16, 16, 2, 1),
    (32, 16, 2, 1), (4, 32, 1, 1), (8, 32, 1, 1), (16, 32, 1, 1), (4, 16, 1, 1), (8, 16, 1, 1),
    (16, 16, 1, 1), (32, 16, 1, 1), (64, 16, 1, 1), (4, 8, 1, 1), (8, 8, 1, 1), (16, 8, 1, 1),
    (32, 8, 1, 1), (64, 8, 1, 1), (128, 8, 1, 1), (4, 8, 4, 1), (8, 8, 4, 1), (16, 8, 4, 1),
    (4, 16, 2, 2), (8, 16, 2, 2), (16, 16, 2, 2), (4, 8, 4, 2), (8, 8, 4, 2), (16, 8, 4, 2),
    (4, 8, 4, 4), (8, 8, 4, 4),
)


def _panel_dispatch() -> str:
    """The cases of the host code's switch over _PANEL_KERNELS, keyed as panel() keys them."""
    return "".join(
        "        case %dLL: launch<%d, %d, %d, %d>(S, H, tau, vt, t, n, kk, ww, keep, async_loads, stream); break;\n"
        % (((minb * 1000 + rpl) * 100 + warps) * 100 + cpw, rpl, warps, cpw, minb)
        for rpl, warps, cpw, minb in _PANEL_KERNELS)


# The host side: the launchers and the function Python calls.
_HOST_SOURCE = r"""
template <int RPL, int W, int CPW, int MINB>
void launch(const at::Tensor& S, at::Tensor& H, at::Tensor& tau, at::Tensor& vt, at::Tensor& t, int n, int k, int w,
            const int* kept, bool async_loads, cudaStream_t stream) {
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
        (long long)vt.stride(0), (long long)t.stride(0), (int)t.stride(1), kept, async_loads);
}

// kernel<<<grid, block, smem, stream>>>(args...), with pdl a programmatic dependent launch: it may be
// scheduled before the stream's previous kernel has finished (the kernel waits for it in pdl_wait).
// Only for kernels that call pdl_wait before touching global memory; an ordinary launch below sm_90,
// which has no such launches.
template <typename... Params, typename... Args>
void launch_after(bool pdl, void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                  Args... args) {
    cudaLaunchConfig_t config = {};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = smem;
    config.stream = stream;
    cudaLaunchAttribute attribute[1];
    attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute[0].val.programmaticStreamSerializationAllowed = 1;
    config.attrs = attribute;
    config.numAttrs = pdl && at::cuda::getCurrentDeviceProperties()->major >= 9 ? 1 : 0;
    C10_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...));
}


}  // namespace

// Factor panel columns k..k+w of S into H (batch x n x n, contiguous; S is H to factor in place, or
// the input while H does not hold those columns yet); rows per lane
// rpl (n - k <= 32 rpl), warps and columns per warp (w <= warps * cpw).  vt (rows n apart)
// and t (contiguous rows) may be windows of wider buffers: the kernel writes vt[:, :w, :n-k]
// and t[:, :w, :w] only.
void panel(at::Tensor S, at::Tensor H, at::Tensor tau, at::Tensor vt, at::Tensor t, int64_t k, int64_t w, int64_t rpl,
           int64_t warps, int64_t cpw, int64_t minb, at::Tensor kept, bool async_loads) {
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
    TORCH_CHECK(kept.numel() == 0 || (kept.is_cuda() && kept.is_contiguous() && kept.scalar_type() == at::kInt &&
                                      kept.numel() >= H.size(0)),
                "panel: kept must be empty or hold batch int32 on the device");
    const int* keep = kept.numel() ? kept.data_ptr<int>() : nullptr;
    const int kk = (int)k, ww = (int)w;
    switch (key) {
        // cases: _PANEL_KERNELS
        default: TORCH_CHECK(false, "panel: no kernel for rpl=", rpl, " warps=", warps, " cpw=", cpw, " minb=", minb);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// The arguments every Cholesky QR leaf takes, checked.
void check_leaf(const at::Tensor& S, const at::Tensor& H, const at::Tensor& tau, const at::Tensor& vt,
                const at::Tensor& t, const at::Tensor& acc, const at::Tensor& small, const at::Tensor& flags, int64_t k,
                int64_t w) {
    TORCH_CHECK(H.is_cuda() && H.is_contiguous() && H.scalar_type() == at::kFloat && H.dim() == 3,
                "cholqr_panel: H must be a contiguous batch x n x n float32 CUDA tensor");
    TORCH_CHECK(S.is_cuda() && S.is_contiguous() && S.scalar_type() == at::kFloat && S.sizes() == H.sizes(),
                "cholqr_panel: S must be a contiguous float32 CUDA tensor shaped as H");
    const int n = (int)H.size(2);
    const long long batch = H.size(0);
    TORCH_CHECK(k >= 0 && w >= 1 && w <= QB && k + w <= n, "cholqr_panel: bad panel k=", k, " w=", w, " for n=", n);
    TORCH_CHECK(acc.is_cuda() && acc.is_contiguous() && acc.scalar_type() == at::kDouble && acc.numel() >= batch * QB * QB,
                "cholqr_panel: acc must hold batch x 1024 doubles");
    TORCH_CHECK(small.is_cuda() && small.is_contiguous() && small.scalar_type() == at::kDouble &&
                small.numel() >= batch * 4 * QB * QB, "cholqr_panel: small must hold batch x 4096 doubles");
    TORCH_CHECK(flags.is_cuda() && flags.is_contiguous() && flags.scalar_type() == at::kInt && flags.numel() >= batch,
                "cholqr_panel: flags must hold batch int32");
    TORCH_CHECK(vt.is_cuda() && vt.scalar_type() == at::kFloat && vt.dim() == 3 && vt.stride(2) == 1 &&
                vt.stride(1) == n && vt.size(0) == batch && vt.size(1) >= w && vt.size(2) >= n - k,
                "cholqr_panel: vt must be a float32 CUDA window of rows n apart holding w x (n - k)");
    TORCH_CHECK(t.is_cuda() && t.scalar_type() == at::kFloat && t.dim() == 3 && t.stride(2) == 1 &&
                t.size(0) == batch && t.size(1) >= w && t.size(2) >= w, "cholqr_panel: t must be a float32 CUDA window holding w x w");
    TORCH_CHECK(tau.is_cuda() && tau.is_contiguous() && tau.size(0) == batch && tau.size(1) == n,
                "cholqr_panel: tau must be a contiguous batch x n float32 CUDA tensor");
}

// A Cholesky QR leaf in five launches: panel columns k..k+w (w <= 32) of S into H, tau, vt and t as
// panel() writes them; acc (float64, batch x 1024, zero), small (float64, batch x 4096) and flags
// (int32, batch) are workspaces (acc is left zero).  Flagged matrices take the column-by-column kernel;
// where one_pass > 0, a matrix whose first pass bounds Q's loss of orthogonality by one_pass skips the
// second pass (its second Gram and Cholesky return at once).  threads: the 32x32 sweeps' block (1024,
// 256 or 128 threads; the triangular solves, inverse 0, and the blocked first pass, inverse 3 (its
// second pass the sweeps'), always take 1024); block: the blocked first pass's diagonal block (4 or 8;
// ignored unless inverse is 3); fold: a one-pass matrix's top block built in the first kernel's launch
// (ignored unless the first pass is the sweeps' or blocked on 1024 threads and one_pass > 0).
void cholqr_panel(at::Tensor S, at::Tensor H, at::Tensor tau, at::Tensor vt, at::Tensor t, at::Tensor acc,
                  at::Tensor small, at::Tensor flags, int64_t k, int64_t w, int64_t inverse, double one_pass,
                  int64_t threads, int64_t block, bool fold, bool pdl) {
    check_leaf(S, H, tau, vt, t, acc, small, flags, k, w);
    TORCH_CHECK(inverse >= 0 && inverse <= 3, "cholqr_panel: inverse must be 0 (solve), 1 (sweep), 2 (warp) or 3 (blocked)");
    TORCH_CHECK(one_pass >= 0.0 && one_pass < 1e-3, "cholqr_panel: one_pass must be in [0, 1e-3), not ", one_pass);
    TORCH_CHECK(threads == 1024 || threads == 256 || threads == 128, "cholqr_panel: threads must be 1024, 256 or 128");
    TORCH_CHECK(inverse != 3 || block == 4 || block == 8, "cholqr_panel: block must be 4 or 8");
    const bool sweep = inverse != 0;
    const int n = (int)H.size(2);
    const long long batch = H.size(0);
    if (batch == 0) return;
    const c10::cuda::CUDAGuard guard(H.device());
    const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const float* s = S.data_ptr<float>();
    float* h = H.data_ptr<float>();
    double* g = acc.data_ptr<double>();
    double* sm = small.data_ptr<double>();
    int* f = flags.data_ptr<int>();
    float *vtp = vt.data_ptr<float>(), *tp = t.data_ptr<float>(), *taup = tau.data_ptr<float>();
    const long long vs = vt.stride(0), ts = t.stride(0);
    const int ldt = (int)t.stride(1), kk = (int)k, ww = (int)w;
    const dim3 grid((unsigned)((n - k + GROWS - 1) / GROWS), (unsigned)batch);
    cholqr_gram_kernel<<<grid, 256, 0, stream>>>(s, n, kk, ww, nullptr, 0, g, f);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    const int m = n - kk;
    const unsigned threads_ = sweep && inverse != 3 ? (unsigned)threads : 1024u;
    const bool fold_ = fold && sweep && inverse != 2 && threads_ == 1024 && one_pass > 0.0;
    auto first = inverse == 3 ? (block == 4 ? (fold_ ? cholqr_first_kernel<true, 1, 4, true> : cholqr_first_kernel<true, 1, 4, false>)
                                            : (fold_ ? cholqr_first_kernel<true, 1, 8, true> : cholqr_first_kernel<true, 1, 8, false>))
                 : !sweep ? cholqr_first_kernel<false, 1, 0, false>
                 : threads_ == 1024 ? (fold_ ? cholqr_first_kernel<true, 1, 0, true> : cholqr_first_kernel<true, 1, 0, false>)
                 : threads_ == 256 ? cholqr_first_kernel<true, 4, 0, false> : cholqr_first_kernel<true, 8, 0, false>;
    // The four launches after the first Gram follow one of this leaf's own kernels: with pdl each may be
    // scheduled while the one before it runs.
    if (inverse == 2)
        launch_after(pdl, cholqr_first_warp_kernel, dim3((unsigned)batch), dim3(32), 0, stream, g, ww, m, one_pass, sm, f);
    else
        launch_after(pdl, first, dim3((unsigned)batch), dim3(threads_), 0, stream, g, ww, m, one_pass, sm, f, s, h, taup,
                     vtp, tp, n, kk, vs, ts, ldt);
    launch_after(pdl, cholqr_gram_kernel, grid, dim3(256), 0, stream, s, n, kk, ww, (const double*)(sm + QB * QB),
                 (long long)(4 * QB * QB), g, (const int*)f);
    auto second = !sweep ? cholqr_second_kernel<false, 1> : threads_ == 1024 ? cholqr_second_kernel<true, 1>
                  : threads_ == 256 ? cholqr_second_kernel<true, 4> : cholqr_second_kernel<true, 8>;
    launch_after(pdl, second, dim3((unsigned)batch), dim3(threads_), 0, stream, s, h, taup, vtp, tp, n, kk, ww, vs, ts, ldt,
                 g, sm, f);
    launch_after(pdl, cholqr_rows_kernel, grid, dim3(256), 0, stream, s, h, vtp, n, kk, ww, vs, (const double*)sm,
                 (const int*)f);
}

// The same leaf in one launch (cholqr_leaf_kernel) where every chunk of a matrix can be resident at
// once, else the five launches.  gram (float64, batch x 2048) and ctrl (int32, 2 + 3 batch) are zero
// and are left zero.
void cholqr_leaf(at::Tensor S, at::Tensor H, at::Tensor tau, at::Tensor vt, at::Tensor t, at::Tensor acc,
                 at::Tensor small, at::Tensor flags, at::Tensor gram, at::Tensor ctrl, int64_t k, int64_t w) {
    check_leaf(S, H, tau, vt, t, acc, small, flags, k, w);
    const int n = (int)H.size(2);
    const long long batch = H.size(0);
    TORCH_CHECK(gram.is_cuda() && gram.is_contiguous() && gram.scalar_type() == at::kDouble &&
                gram.numel() >= batch * 2 * QB * QB, "cholqr_leaf: gram must hold batch x 2048 doubles");
    TORCH_CHECK(ctrl.is_cuda() && ctrl.is_contiguous() && ctrl.scalar_type() == at::kInt && ctrl.numel() >= 2 + 3 * batch,
                "cholqr_leaf: ctrl must hold 2 + 3 batch int32");
    if (batch == 0) return;
    const c10::cuda::CUDAGuard guard(H.device());
    constexpr size_t bytes = leaf_smem_bytes();
    static int per_sm = -1;  // resident blocks an SM, once per process
    if (per_sm < 0) {
        C10_CUDA_CHECK(cudaFuncSetAttribute(cholqr_leaf_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
        C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, cholqr_leaf_kernel, LEAF_THREADS, bytes));
    }
    const int chunks = (n - (int)k + GROWS - 1) / GROWS;
    const long long resident = (long long)per_sm * at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
    if (chunks > resident || batch * chunks > (1LL << 31) - 1) {
        cholqr_panel(S, H, tau, vt, t, acc, small, flags, k, w, 0, 0.0, 1024, 0, false, false);
        return;
    }
    cholqr_leaf_kernel<<<(unsigned)(batch * chunks), LEAF_THREADS, bytes, at::cuda::getCurrentCUDAStream()>>>(
        S.data_ptr<float>(), H.data_ptr<float>(), tau.data_ptr<float>(), vt.data_ptr<float>(), t.data_ptr<float>(), n,
        (int)k, (int)w, (long long)vt.stride(0), (long long)t.stride(0), (int)t.stride(1), chunks,
        gram.data_ptr<double>(), ctrl.data_ptr<int>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// out += A Bᵀ for float32 CUDA tensors A (batch x p x len), B (batch x q x len) with any strides
// whose rows or positions are contiguous, p <= 64; out batch x p x q with unit column stride.  quads:
// the sums added as float4 atomics where out's rows are 16-byte aligned.
void cross(at::Tensor A, at::Tensor B, at::Tensor out, bool quads, bool pdl) {
    TORCH_CHECK(A.is_cuda() && B.is_cuda() && out.is_cuda() && A.scalar_type() == at::kFloat &&
                B.scalar_type() == at::kFloat && out.scalar_type() == at::kFloat && A.dim() == 3 && B.dim() == 3 &&
                out.dim() == 3, "cross: float32 CUDA batch x rows x len tensors");
    TORCH_CHECK((A.stride(2) == 1 || A.stride(1) == 1) && (B.stride(2) == 1 || B.stride(1) == 1) &&
                out.stride(2) == 1 && A.size(2) == B.size(2) && A.size(0) == B.size(0) &&
                out.size(0) == A.size(0) && out.size(1) == A.size(1) && out.size(2) == B.size(1) &&
                A.size(1) <= 64, "cross: shapes or strides do not fit");
    const long long batch = A.size(0), len = A.size(2);
    if (batch == 0 || len == 0 || A.size(1) == 0 || B.size(1) == 0) return;
    const c10::cuda::CUDAGuard guard(A.device());
    const dim3 grid((unsigned)((len + 63) / 64), (unsigned)batch, (unsigned)((B.size(1) + 63) / 64));
    launch_after(pdl, cross_kernel, grid, dim3(256), 0, at::cuda::getCurrentCUDAStream(),
        (const float*)A.data_ptr<float>(), (const float*)B.data_ptr<float>(), out.data_ptr<float>(), (int)A.size(1),
        (int)B.size(1), (int)len, (long long)A.stride(0), (long long)B.stride(0), (long long)out.stride(0),
        (long long)A.stride(1), (long long)A.stride(2), (long long)B.stride(1), (long long)B.stride(2),
        (int)out.stride(1), quads);
}

// C = S - V W with V given as vt (batch x p x m, unit column stride, p <= 64), W batch x p x ncols
// and C, S batch x m x ncols (unit column stride, the same strides); with t not empty (batch x p x p,
// unit column stride), C = S - V Tᵀ W.
void apply_rows(at::Tensor S, at::Tensor C, at::Tensor vt, at::Tensor W, at::Tensor t, bool pdl) {
    TORCH_CHECK(S.is_cuda() && C.is_cuda() && vt.is_cuda() && W.is_cuda() && C.scalar_type() == at::kFloat &&
                S.scalar_type() == at::kFloat && vt.scalar_type() == at::kFloat && W.scalar_type() == at::kFloat,
                "apply_rows: float32 CUDA tensors");
    TORCH_CHECK(C.dim() == 3 && S.sizes() == C.sizes() && S.strides() == C.strides() && C.stride(2) == 1 &&
                vt.stride(2) == 1 && W.stride(2) == 1 && vt.size(1) == W.size(1) && vt.size(2) == C.size(1) &&
                W.size(2) == C.size(2) && vt.size(1) <= 64 && vt.size(0) == C.size(0) && W.size(0) == C.size(0),
                "apply_rows: shapes or strides do not fit");
    const bool with_t = t.defined() && t.numel() > 0;
    TORCH_CHECK(!with_t || (t.is_cuda() && t.scalar_type() == at::kFloat && t.dim() == 3 && t.stride(2) == 1 &&
                            t.size(0) == C.size(0) && t.size(1) == vt.size(1) && t.size(2) == vt.size(1)),
                "apply_rows: t must be a float32 CUDA batch x p x p window with unit column stride");
    const long long batch = C.size(0), m = C.size(1), ncols = C.size(2);
    if (batch == 0 || m == 0 || ncols == 0) return;
    const c10::cuda::CUDAGuard guard(C.device());
    const dim3 grid((unsigned)((m + 63) / 64), (unsigned)batch, (unsigned)((ncols + 63) / 64));
    auto kernel = with_t ? apply_rows_kernel<true> : apply_rows_kernel<false>;
    launch_after(pdl, kernel, grid, dim3(256), 0, at::cuda::getCurrentCUDAStream(),
        (const float*)S.data_ptr<float>(), C.data_ptr<float>(), (const float*)vt.data_ptr<float>(),
        (const float*)W.data_ptr<float>(), with_t ? (const float*)t.data_ptr<float>() : nullptr, (int)m, (int)ncols,
        (int)vt.size(1), (long long)C.stride(0), (long long)vt.stride(0), (long long)W.stride(0),
        with_t ? (long long)t.stride(0) : 0LL, (int)C.stride(1), (int)vt.stride(1), (int)W.stride(1),
        with_t ? (int)t.stride(1) : 0);
}

// C = S - V·(Tᵀ·(Vᵀ S)) in one launch (narrow_update_kernel), or false where a matrix's chunks could not
// all be resident (the caller then takes the split path).  vt: batch x p x m (unit column stride, p <=
// 64), t: batch x p x p (unit column stride), C and S: batch x m x ncols (unit column stride, the same
// strides); W: float32, contiguous batch x 64 x ldw (ldw >= ncols), and ctrl: int32, 2 + 3 batch, both
// zero and left zero.
bool narrow_update(at::Tensor S, at::Tensor C, at::Tensor vt, at::Tensor t, at::Tensor W, at::Tensor ctrl) {
    TORCH_CHECK(S.is_cuda() && C.is_cuda() && vt.is_cuda() && t.is_cuda() && W.is_cuda() && ctrl.is_cuda() &&
                C.scalar_type() == at::kFloat && S.scalar_type() == at::kFloat && vt.scalar_type() == at::kFloat &&
                t.scalar_type() == at::kFloat && W.scalar_type() == at::kFloat && ctrl.scalar_type() == at::kInt,
                "narrow_update: float32 CUDA tensors and int32 counters");
    TORCH_CHECK(C.dim() == 3 && S.sizes() == C.sizes() && S.strides() == C.strides() && C.stride(2) == 1 &&
                vt.dim() == 3 && vt.stride(2) == 1 && t.dim() == 3 && t.stride(2) == 1 && vt.size(1) <= 64 &&
                vt.size(2) == C.size(1) && t.size(1) == vt.size(1) && t.size(2) == vt.size(1) &&
                vt.size(0) == C.size(0) && t.size(0) == C.size(0), "narrow_update: shapes or strides do not fit");
    const long long batch = C.size(0), m = C.size(1), ncols = C.size(2);
    TORCH_CHECK(W.is_contiguous() && W.dim() == 3 && W.size(0) >= batch && W.size(1) == 64 && W.size(2) >= ncols &&
                ctrl.is_contiguous() && ctrl.numel() >= 2 + 3 * batch,
                "narrow_update: W must be batch x 64 x (at least ncols), ctrl 2 + 3 batch");
    if (batch == 0 || m == 0 || ncols == 0) return true;
    const c10::cuda::CUDAGuard guard(C.device());
    constexpr size_t bytes = narrow_smem_bytes();
    static int per_sm = -1;  // resident blocks an SM, once per process
    if (per_sm < 0) {
        C10_CUDA_CHECK(cudaFuncSetAttribute(narrow_update_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
        C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, narrow_update_kernel, NARROW_THREADS, bytes));
    }
    const long long chunks = (m + 63) / 64;
    if (chunks > (long long)per_sm * at::cuda::getCurrentDeviceProperties()->multiProcessorCount ||
        batch * chunks > (1LL << 31) - 1)
        return false;
    narrow_update_kernel<<<(unsigned)(batch * chunks), NARROW_THREADS, bytes, at::cuda::getCurrentCUDAStream()>>>(
        S.data_ptr<float>(), C.data_ptr<float>(), vt.data_ptr<float>(), t.data_ptr<float>(), (int)m, (int)ncols,
        (int)vt.size(1), (long long)C.stride(0), (int)C.stride(1), (long long)vt.stride(0), (int)vt.stride(1),
        (long long)t.stride(0), (int)t.stride(1), (int)chunks, W.data_ptr<float>(), (int)W.size(2), ctrl.data_ptr<int>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return true;
}

// T12 = -T1·(V1ᵀV2)·T2 in one launch (merge_kernel).  v1 (w1 x len) and v2 (w2 x len): windows of one
// Vᵀ buffer (the same strides, unit position stride, w1, w2 <= 64); t1 (w1 x w1), t2 (w2 x w2) and t12
// (w1 x w2): windows of one T buffer (the same strides, unit column stride); X: float32, contiguous,
// batch x 64 x 64, and count: int32, batch, both zero and left zero.
void merge(at::Tensor v1, at::Tensor v2, at::Tensor t1, at::Tensor t2, at::Tensor t12, at::Tensor X, at::Tensor count) {
    for (const at::Tensor* x : {&v1, &v2, &t1, &t2, &t12, &X})
        TORCH_CHECK(x->is_cuda() && x->scalar_type() == at::kFloat && x->dim() == 3 && x->stride(2) == 1,
                    "merge: float32 CUDA batch x rows x columns windows with unit column stride");
    const long long batch = v1.size(0), w1 = v1.size(1), w2 = v2.size(1), len = v1.size(2);
    TORCH_CHECK(v2.strides() == v1.strides() && v2.size(0) == batch && v2.size(2) == len && w1 <= 64 && w2 <= 64 &&
                t2.strides() == t1.strides() && t12.strides() == t1.strides() && t1.size(1) == w1 &&
                t1.size(2) == w1 && t2.size(1) == w2 && t2.size(2) == w2 && t12.size(1) == w1 && t12.size(2) == w2 &&
                t1.size(0) == batch && t2.size(0) == batch && t12.size(0) == batch, "merge: shapes or strides do not fit");
    TORCH_CHECK(X.is_contiguous() && X.size(0) >= batch && X.size(1) == 64 && X.size(2) == 64 && count.is_cuda() &&
                count.scalar_type() == at::kInt && count.is_contiguous() && count.numel() >= batch,
                "merge: X must be batch x 64 x 64 float32, count batch int32");
    if (batch == 0 || w1 == 0 || w2 == 0) return;
    const c10::cuda::CUDAGuard guard(v1.device());
    constexpr size_t bytes = merge_smem_bytes();
    static bool ready = false;
    if (!ready) {
        C10_CUDA_CHECK(cudaFuncSetAttribute(merge_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
        ready = true;
    }
    const long long chunks = len > 0 ? (len + 63) / 64 : 1;
    TORCH_CHECK(batch * chunks <= (1LL << 31) - 1, "merge: too many blocks");
    merge_kernel<<<(unsigned)(batch * chunks), MERGE_THREADS, bytes, at::cuda::getCurrentCUDAStream()>>>(
        v1.data_ptr<float>(), v2.data_ptr<float>(), (int)w1, (int)w2, (int)len, (long long)v1.stride(0),
        (int)v1.stride(1), t1.data_ptr<float>(), t2.data_ptr<float>(), t12.data_ptr<float>(), (long long)t1.stride(0),
        (int)t1.stride(1), (int)chunks, X.data_ptr<float>(), count.data_ptr<int>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// kept[b] = the columns of matrix b up to its last one whose 1-norm exceeds rel times its first
// column's (tail_columns_kernel); A contiguous batch x n x n float32, kept int32 batch.
void tail_columns(at::Tensor A, at::Tensor kept, double rel) {
    TORCH_CHECK(A.is_cuda() && A.is_contiguous() && A.scalar_type() == at::kFloat && A.dim() == 3 &&
                A.size(1) == A.size(2), "tail_columns: A must be a contiguous batch x n x n float32 CUDA tensor");
    TORCH_CHECK(kept.is_cuda() && kept.is_contiguous() && kept.scalar_type() == at::kInt && kept.numel() >= A.size(0),
                "tail_columns: kept must hold batch int32");
    TORCH_CHECK(rel >= 0.0 && rel < 1.0, "tail_columns: rel must be in [0, 1)");
    if (A.size(0) == 0) return;
    const c10::cuda::CUDAGuard guard(A.device());
    tail_columns_kernel<<<(unsigned)A.size(0), 256, 257 * sizeof(double) + sizeof(int),
                          at::cuda::getCurrentCUDAStream()>>>(A.data_ptr<float>(), (int)A.size(2), rel,
                                                             kept.data_ptr<int>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// tau[b, min(kept[b], cut):] = 0 and H[:, :, cut:] = 0 (clear_tail_kernel; kept empty: tau from cut);
// H contiguous batch x n x n float32, tau batch x n, kept empty or int32 batch.
void clear_tail(at::Tensor H, at::Tensor tau, int64_t cut, at::Tensor kept) {
    TORCH_CHECK(H.is_cuda() && H.is_contiguous() && H.scalar_type() == at::kFloat && H.dim() == 3 &&
                H.size(1) == H.size(2), "clear_tail: H must be a contiguous batch x n x n float32 CUDA tensor");
    TORCH_CHECK(tau.is_cuda() && tau.is_contiguous() && tau.scalar_type() == at::kFloat && tau.size(0) == H.size(0) &&
                tau.size(1) == H.size(2), "clear_tail: tau must be a contiguous batch x n float32 CUDA tensor");
    TORCH_CHECK(kept.numel() == 0 || (kept.is_cuda() && kept.is_contiguous() && kept.scalar_type() == at::kInt &&
                                      kept.numel() >= H.size(0)),
                "clear_tail: kept must be empty or hold batch int32 on the device");
    TORCH_CHECK(cut >= 0 && cut <= H.size(2), "clear_tail: cut must be in [0, n]");
    if (H.size(0) == 0) return;
    const c10::cuda::CUDAGuard guard(H.device());
    const int n = (int)H.size(2);
    clear_tail_kernel<<<dim3((unsigned)((n + 63) / 64), (unsigned)H.size(0)), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        H.data_ptr<float>(), tau.data_ptr<float>(), n, (int)cut, kept.numel() ? kept.data_ptr<int>() : nullptr);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// live[b] = the columns of matrix b up to its last nonzero one (live_columns_kernel); A contiguous
// batch x n x n float32, live int32 batch.
void live_columns(at::Tensor A, at::Tensor live) {
    TORCH_CHECK(A.is_cuda() && A.is_contiguous() && A.scalar_type() == at::kFloat && A.dim() == 3 &&
                A.size(1) == A.size(2), "live_columns: A must be a contiguous batch x n x n float32 CUDA tensor");
    TORCH_CHECK(live.is_cuda() && live.is_contiguous() && live.scalar_type() == at::kInt && live.numel() >= A.size(0),
                "live_columns: live must hold batch int32");
    if (A.size(0) == 0) return;
    const c10::cuda::CUDAGuard guard(A.device());
    live_columns_kernel<<<(unsigned)A.size(0), 256, sizeof(int), at::cuda::getCurrentCUDAStream()>>>(
        A.data_ptr<float>(), (int)A.size(2), live.data_ptr<int>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}

""".replace("        // cases: _PANEL_KERNELS\n", _panel_dispatch())

_CUDA_SOURCE = r"""
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

namespace {
""" + _DEVICE_SOURCE + "\n" + _HOST_SOURCE

_CPP_SOURCE = ("void panel(at::Tensor S, at::Tensor H, at::Tensor tau, at::Tensor vt, at::Tensor t, int64_t k, int64_t w, "
               "int64_t rpl, int64_t warps, int64_t cpw, int64_t minb, at::Tensor kept, bool async_loads);\n"
               "void cholqr_panel(at::Tensor S, at::Tensor H, at::Tensor tau, at::Tensor vt, at::Tensor t, at::Tensor acc, "
               "at::Tensor small, at::Tensor flags, int64_t k, int64_t w, int64_t inverse, double one_pass, "
               "int64_t threads, int64_t block, bool fold, bool pdl);\n"
               "void cholqr_leaf(at::Tensor S, at::Tensor H, at::Tensor tau, at::Tensor vt, at::Tensor t, at::Tensor acc, "
               "at::Tensor small, at::Tensor flags, at::Tensor gram, at::Tensor ctrl, int64_t k, int64_t w);\n"
               "void cross(at::Tensor A, at::Tensor B, at::Tensor out, bool quads, bool pdl);\n"
               "bool narrow_update(at::Tensor S, at::Tensor C, at::Tensor vt, at::Tensor t, at::Tensor W, at::Tensor ctrl);\n"
               "void merge(at::Tensor v1, at::Tensor v2, at::Tensor t1, at::Tensor t2, at::Tensor t12, at::Tensor X, "
               "at::Tensor count);\n"
               "void live_columns(at::Tensor A, at::Tensor live);\n"
               "void tail_columns(at::Tensor A, at::Tensor kept, double rel);\n"
               "void clear_tail(at::Tensor H, at::Tensor tau, int64_t cut, at::Tensor kept);\n"
               "void apply_rows(at::Tensor S, at::Tensor C, at::Tensor vt, at::Tensor W, at::Tensor t, bool pdl);")

_EXTENSIONS = {}
_GRAPHS = {}
_INVERSE_MODES = {"solve": 0, "sweep": 1, "warp": 2, "blocked": 3}  # cholqr_panel's inverse argument
_TAIL_REL = {"zero": 0.0, "negligible": 8 * 2.0 ** -23}  # tail_columns' rel per PARAMS tail_*
_NO_KEPT = torch.empty((0,), dtype=torch.int32)  # panel's kept argument where every column is factored
_NO_T = torch.empty((0,))  # apply_rows' t where W is the product to apply already


def _extension(device: torch.device):
    """The built extension for this device's architecture (built once, cached on disk by hash)."""
    major, minor = torch.cuda.get_device_capability(device)
    arch = "%d%d" % (major, minor)
    if arch not in _EXTENSIONS:
        from torch.utils.cpp_extension import load_inline

        digest = hashlib.sha256((_CUDA_SOURCE + _CPP_SOURCE + arch).encode()).hexdigest()[:16]
        _EXTENSIONS[arch] = load_inline(
            name="qr_blocked_" + digest, cpp_sources=_CPP_SOURCE, cuda_sources=_CUDA_SOURCE,
            functions=["panel", "cholqr_panel", "cholqr_leaf", "cross", "apply_rows", "narrow_update", "merge",
                       "live_columns", "tail_columns", "clear_tail"],
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
    elif PARAMS["panel_gt1024"] == "cholqr2":
        nb, block = 32, PARAMS["block_gt1024" if n <= 2048 else "block_gt2048"]
    elif n <= 2048:
        nb, block = PARAMS["nb_le2048"], PARAMS["block_gt1024"]
    else:
        nb, block = 8, PARAMS["block_gt2048"]
    return nb, max(nb, block)


def _panel_algorithm(n: int) -> str:
    return PARAMS["panel_le512" if n <= 512 else "panel_le1024" if n <= 1024 else "panel_gt1024"]


def _cholqr_leaf(n: int, m: int, width: int) -> bool:
    """Whether a leaf of `width` columns and m rows is factored by Cholesky QR twice over row chunks
    (many blocks a matrix) rather than by the one-block register kernel (which holds at most 1024
    rows of a 32-wide panel)."""
    return _panel_algorithm(n) == "cholqr2" and width <= 32 and (m > 1024 or m >= PARAMS["cholqr_min_rows"])


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


def _apply(c: torch.Tensor, v_t: torch.Tensor, t: torch.Tensor, src: torch.Tensor | None = None, ext=None,
           programs: int = 0, narrow: tuple | None = None, live: torch.Tensor | None = None, col0: int = 0) -> None:
    """c <- (I - V T Vᵀ)ᵀ src (src defaults to c; else a view of the input laid out as c) with
    v_t = Vᵀ: three cuBLAS FP32 GEMMs, the Triton kernel's tensor-core products (PARAMS update_*:
    "tf32", one TF32 product, or "tf32x3" / "bf16x3", three split ones), or, for a narrow update of
    a tall matrix (PARAMS narrow_gt1024 = "split"), VᵀC split over the rows and C -= V·(TᵀW) by
    row chunks, both in exact FP32 on the CUDA cores (in one launch with narrow, the fused kernel's
    (W, counters), where its blocks fit the GPU).  With programs > 0 the Triton kernel runs at most
    that many programs, each walking several tiles.  With live (per matrix, its columns up to the last
    nonzero one; c's column 0 is the matrix's col0) the Triton kernel skips the tiles past it."""
    n = c.stride(1)  # c is a view of H
    mode = PARAMS["update_lt512" if n < 512 else "update_le1024" if n <= 1024 else "update_gt1024"]
    width = v_t.shape[1]
    source = c if src is None else src
    narrow_cols = PARAMS["narrow_cols_gt1024"] if n > 1024 else PARAMS["narrow_cols_le1024"] if n > 512 else 0
    if (n > 1024 or narrow_cols > 0) and c.shape[2] <= narrow_cols:
        # A few columns of a tall matrix: a Triton program per column tile would leave the GPU idle.
        narrow_mode = PARAMS["narrow_gt1024"] if n > 1024 else "split"
        if narrow_mode == "split" and width <= 64 and ext is not None and c.numel():
            if narrow is not None and c.shape[2] <= narrow[0].shape[2] and ext.narrow_update(source, c, v_t, t, *narrow):
                return
            w = torch.zeros((c.shape[0], width, c.shape[2]), dtype=c.dtype, device=c.device)
            # each launch follows the kernel before it on this stream (W's fill, then cross_kernel)
            ext.cross(v_t, source.transpose(1, 2), w, PARAMS["cross_quads"], PARAMS["pdl"])
            if PARAMS["narrow_fold_t"]:
                ext.apply_rows(source, c, v_t, w, t, PARAMS["pdl"])
            else:
                ext.apply_rows(source, c, v_t, torch.bmm(t.transpose(1, 2), w), _NO_T, False)
            return
        if n > 1024:  # where the split path cannot take it, cuBLAS; below, the size class's update
            mode = "fp32" if narrow_mode == "split" else narrow_mode
    warps = PARAMS["apply_warps_le512" if n <= 512 else "apply_warps_le1024" if n <= 1024 else "apply_warps_gt1024"]
    if mode != "fp32" and c.stride(2) == 1 and c.numel() and c.shape[0] < 65536:  # grid's y limit
        assert source.stride() == c.stride()
        m = c.shape[1]
        bn, bm = PARAMS["apply_bn"], PARAMS["apply_bm"]
        col_tiles = triton.cdiv(c.shape[2], bn)
        tiles = col_tiles * c.shape[0]
        persist = 0 < programs < tiles
        _apply_kernel[(programs, 1) if persist else (col_tiles, c.shape[0])](
            source, c, v_t, t, m, c.shape[2], width, c.stride(0), c.stride(1), v_t.stride(0),
            v_t.stride(1), t.stride(0), t.stride(1), col_tiles, tiles, t if live is None else live, col0,
            KP=max(16, triton.next_power_of_2(width)), BM=bm, BN=bn, STAGES=PARAMS["apply_stages"],
            PREC=mode, PERSIST=persist, SKIP=live is not None, COPY=src is not None,
            UP=PARAMS["apply_up_le512" if n <= 512 else "apply_up_gt512"], num_warps=warps)
        return
    if src is not None:
        c.copy_(src)
    update = torch.bmm(v_t, c)
    update = torch.bmm(t.transpose(1, 2), update)
    c.baddbmm_(v_t.transpose(1, 2), update, alpha=-1.0)


def _block(ext, S: torch.Tensor, H: torch.Tensor, tau: torch.Tensor, vt: torch.Tensor, t: torch.Tensor, k: int,
           width: int, nb: int, sms: int, work: tuple, scratch: "_MainScratch | None" = None,
           live: torch.Tensor | None = None, kept: torch.Tensor | None = None) -> None:
    """Factor columns k..k+width of S into H (rows k..n; S is H, or the input while H does not
    hold these columns yet): on return vt[:, :width, :n-k] holds Vᵀ (rows relative to k) and
    t[:, :width, :width] the block's T.  Wider than a panel: the left part, its reflector applied
    to the right part, the right part, then T = [[T1, -T1 V1ᵀV2 T2], [0, T2]].  Vᵀ left of each
    part's rows and T below its diagonal blocks are zero on entry (_block_buffers) and nothing here
    writes them, so no launch a block re-zeroes them.  scratch: the fused kernels' workspaces,
    given only where these launches are on the main stream; live: as _apply takes it; kept: per matrix,
    the columns its factorisation keeps (the register panels return identity reflectors past it)."""
    n = H.shape[-1]
    m = n - k
    if width <= nb:
        if _cholqr_leaf(n, m, width) and PARAMS["cholqr_fused"]:
            ext.cholqr_leaf(S, H, tau, vt, t, *work, k, width)
        elif _cholqr_leaf(n, m, width):
            ext.cholqr_panel(S, H, tau, vt, t, *work[:3], k, width, _INVERSE_MODES[PARAMS["cholqr_inverse"]],
                             float(PARAMS["cholqr_one_pass"]), PARAMS["cholqr_threads"], PARAMS["cholqr_block"],
                             PARAMS["cholqr_fold"], PARAMS["pdl"])
        else:
            rpl = _rows_per_lane(m)
            ext.panel(S, H, tau, vt, t, k, width, rpl, *_shape(nb, rpl, H.shape[0], sms),
                      _NO_KEPT if kept is None else kept, PARAMS["panel_async_loads"])
        return
    w1 = nb * -(-width // (2 * nb))  # half, rounded up to whole panels
    _block(ext, S, H, tau, vt, t, k, w1, nb, sms, work, scratch, live, kept)
    right = slice(k + w1, k + width)
    narrow = scratch.narrow if scratch else None
    _apply(H[:, k:, right], vt[:, :w1, :m], t[:, :w1, :w1], None if S is H else S[:, k:, right], ext, narrow=narrow,
           live=live, col0=k + w1)
    _block(ext, H, H, tau, vt[:, w1:, w1:], t[:, w1:, w1:], k + w1, width - w1, nb, sms, work, scratch, live, kept)
    if m >= PARAMS["cross_min_rows"] and w1 <= 64 and width - w1 <= 64 and scratch and scratch.merge:
        ext.merge(vt[:, :w1, w1:m], vt[:, w1:width, w1:m], t[:, :w1, :w1], t[:, w1:width, w1:width],
                  t[:, :w1, w1:width], *scratch.merge)
        return
    if m >= PARAMS["cross_min_rows"] and w1 <= 64:
        # V1ᵀV2 split over its m rows (the kernel takes V1 of up to 64 columns): cuBLAS ran this
        # long, thin product on a few blocks
        cross = torch.zeros((H.shape[0], w1, width - w1), dtype=H.dtype, device=H.device)
        ext.cross(vt[:, :w1, w1:m], vt[:, w1:width, w1:m], cross, PARAMS["cross_quads"], PARAMS["pdl"])
    else:
        cross = torch.bmm(vt[:, :w1, w1:m], vt[:, w1:width, w1:m].transpose(1, 2))
    t[:, :w1, w1:width].baddbmm_(torch.bmm(t[:, :w1, :w1], cross), t[:, w1:width, w1:width], beta=0.0, alpha=-1.0)


def _workspace(batch: int, n: int, device: torch.device) -> tuple:
    """The Cholesky QR leaves' scratch: the five-launch leaf's Gram accumulator (zero between uses), small
    factors and flags, then the fused leaf's two Grams and its counters (zero between uses)."""
    if _panel_algorithm(n) != "cholqr2":
        return ()
    return (torch.zeros((batch, 1024), dtype=torch.float64, device=device),
            torch.empty((batch, 4096), dtype=torch.float64, device=device),
            torch.empty((batch,), dtype=torch.int32, device=device),
            torch.zeros((batch, 2048), dtype=torch.float64, device=device),
            torch.zeros((2 + 3 * batch,), dtype=torch.int32, device=device))


def _block_buffers(batch: int, n: int, block: int, H: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A block's Vᵀ (block x n) and T (block x block) buffers.  What no panel writes is zeroed once
    here, so _block never re-zeroes it: Vᵀ left of each part's first row (within its first block
    columns: every part's window starts at or left of its own rows) and T below its diagonal blocks."""
    vt = torch.empty((batch, block, n), dtype=H.dtype, device=H.device)
    vt[:, :, :block].zero_()
    return vt, torch.zeros((batch, block, block), dtype=H.dtype, device=H.device)


class _MainScratch:
    """The fused narrow update's W and counters and the fused merge's X and counters (each zero
    between uses), where PARAMS ask for them: one set, so only the main stream's launches take them."""

    def __init__(self, batch: int, n: int, device: torch.device) -> None:
        self.narrow = None
        if n > 1024 and PARAMS["narrow_fused"] and PARAMS["narrow_gt1024"] == "split":
            self.narrow = (torch.zeros((batch, 64, max(1, PARAMS["narrow_cols_gt1024"])), dtype=torch.float32,
                                       device=device),
                           torch.zeros((2 + 3 * batch,), dtype=torch.int32, device=device))
        self.merge = None
        if PARAMS["merge_fused"]:
            self.merge = (torch.zeros((batch, 64, 64), dtype=torch.float32, device=device),
                          torch.zeros((batch,), dtype=torch.int32, device=device))


class _Streams:
    """The capture's stream and a second one forked from it: work put beside() the main stream
    starts after everything queued on it so far, and join() makes the main stream wait for it."""

    def __init__(self, device: torch.device) -> None:
        self.side = torch.cuda.Stream(device)
        self.device = device

    def beside(self, work) -> None:
        main = torch.cuda.current_stream(self.device)
        self.side.wait_stream(main)
        with torch.cuda.stream(self.side):
            work()

    def join(self) -> None:
        torch.cuda.current_stream(self.device).wait_stream(self.side)


def _lookahead(n: int) -> bool:
    return PARAMS["lookahead_le512" if n <= 512 else "lookahead_le1024" if n <= 1024 else
                  "lookahead_le2048" if n <= 2048 else "lookahead_gt2048"]


def _factor(H: torch.Tensor, tau: torch.Tensor, A: torch.Tensor | None = None, streams=None,
            cols: int | None = None, kept: torch.Tensor | None = None, cut=None) -> int:
    """Factor A's first cols columns (default all) into H (batch x n x n, both contiguous; A defaults to
    H, in place), tau written there; H's and tau's other columns are not touched.  Returns the columns
    factored.
    The first block reads A and every element of H is written by it (its panels and the update
    of the rest), so H needs no copy of A first: at 640x512 that copy was 0.32 of 6 ms.
    With streams (beside(work), join()) and PARAMS lookahead_*, block j's update of the columns
    right of block j+1 runs beside block j+1's factorisation: they touch different columns of H,
    and the two blocks' Vᵀ and T live in different buffers.
    kept (per matrix on the device, tail_columns): the updates skip the tiles past each matrix's kept
    columns (the first block's writes them as zeros) and the register panels past them are identity
    reflectors.  cut: called once the first block is queued, the columns the batch needs (at most
    cols): a host read of the device's count then waits while the GPU factors the first block."""
    batch, n = H.shape[0], H.shape[-1]
    cols = n if cols is None else cols
    nb, block = _widths(n)
    ext = _extension(H.device)
    sms = torch.cuda.get_device_properties(H.device).multi_processor_count if H.is_cuda else 1
    ahead = streams is not None and _lookahead(n)
    buffers = [_block_buffers(batch, n, block, H) for _ in range(1 + ahead)]
    programs = max(8, PARAMS["lookahead_programs"] * (sms - batch)) if ahead and PARAMS["lookahead_programs"] else 0
    source = H if A is None else A
    work = _workspace(batch, n, H.device)
    scratch = _MainScratch(batch, n, H.device)  # a side update never takes a fused kernel
    narrow = scratch.narrow
    live = kept
    if live is None and PARAMS["skip_zero_columns"]:
        live = torch.empty((batch,), dtype=torch.int32, device=H.device)
        ext.live_columns(source, live)
    for i, k in enumerate(range(0, cols, block)):
        width = min(block, cols - k)
        vt, t = buffers[i % len(buffers)]
        if not ahead or i == 0:
            _block(ext, source, H, tau, vt, t, k, width, nb, sms, work, scratch, live, kept)
        if cut is not None:
            cols = min(cols, cut())
            cut = None
        if k + width >= cols:
            return max(cols, k + width)
        v_k, t_k = vt[:, :width, :n - k], t[:, :width, :width]
        after = k + width
        if not ahead:
            _apply(H[:, k:, after:cols], v_k, t_k, None if source is H else source[:, k:, after:cols], ext,
                   PARAMS["apply_programs_le512"] * sms if n <= 512 else 0, narrow=narrow, live=live, col0=after)
        else:
            nxt = min(block, cols - after)
            following = slice(after, after + nxt)
            _apply(H[:, k:, following], v_k, t_k, None if source is H else source[:, k:, following], ext,
                   narrow=narrow, live=live, col0=after)
            if after + nxt < cols:
                rest = slice(after + nxt, cols)
                src = None if source is H else source[:, k:, rest]
                streams.beside(lambda c=H[:, k:, rest], v=v_k, tt=t_k, s=src, c0=rest.start:
                               _apply(c, v, tt, s, ext, programs, live=live, col0=c0))
            vt2, t2 = buffers[(i + 1) % len(buffers)]
            _block(ext, H, H, tau, vt2, t2, after, nxt, nb, sms, work, scratch, live, kept)
            streams.join()
        source = H
    return cols


def _tail_rel(n: int) -> float | None:
    """tail_columns' rel for matrices of size n (PARAMS tail_*), None where the knob is off."""
    mode = PARAMS["tail_le512" if n <= 512 else "tail_gt512"]
    return None if mode == "off" else _TAIL_REL[mode]


def _scan_tail(A: torch.Tensor, rel: float) -> torch.Tensor:
    """Per matrix, the columns its factorisation keeps (tail_columns_kernel), on the device."""
    kept = torch.empty((A.shape[0],), dtype=torch.int32, device=A.device)
    _extension(A.device).tail_columns(A, kept, rel)
    return kept


def _panels(n: int, cols: int) -> int:
    """cols rounded up to whole panels (at most n)."""
    nb = _widths(n)[0]
    return min(n, nb * -(-cols // nb))


class _BatchCount:
    """The most columns any matrix of the batch keeps, copied to pinned host memory behind the scan;
    cols() waits for it (a host sync) and rounds it up to whole panels."""

    def __init__(self, kept: torch.Tensor, n: int) -> None:
        self.n = n
        self.host = torch.empty((1,), dtype=torch.int32, pin_memory=kept.is_cuda)
        self.host.copy_(torch.amax(kept, dim=0, keepdim=True), non_blocking=True)
        self.done = torch.cuda.Event() if kept.is_cuda else None
        if self.done is not None:
            self.done.record()

    def cols(self) -> int:
        if self.done is not None:
            self.done.synchronize()
        return _panels(self.n, int(self.host[0]))


def _kept_columns(A: torch.Tensor) -> int:
    """The columns of A's batch the factorisation needs where it is cut at the batch's count (PARAMS
    tail_*, tail_scope "batch" or "both"): the most any matrix keeps, rounded up to whole panels, read
    on the host; n where the size class's knob is off or the tail is left out per matrix only."""
    n = A.shape[-1]
    rel = _tail_rel(n)
    if rel is None or PARAMS["tail_scope"] == "matrix" or A.shape[0] == 0:
        return n
    return _panels(n, int(_scan_tail(A, rel).max()))


def _factor_tail(H: torch.Tensor, tau: torch.Tensor, A: torch.Tensor, streams=None, cols: int | None = None,
                 cut: "_BatchCount | None" = None, kept: torch.Tensor | None = None) -> None:
    """_factor with the tail left out as PARAMS tail_* say: per matrix (tail_scope "matrix" or "both"),
    at the batch's count (cols given, or read through cut once the first block is queued), or not at
    all; then tau of the columns left out, and H past the batch's count, cleared."""
    n = H.shape[-1]
    rel = _tail_rel(n)
    if rel is None:
        _factor(H, tau, A, streams)
        return
    per_matrix = PARAMS["tail_scope"] != "batch"
    if kept is None and per_matrix:
        kept = _scan_tail(A, rel)
    cols = _factor(H, tau, A, streams, cols, kept if per_matrix else None, None if cut is None else cut.cols)
    if cols < n or per_matrix:
        _extension(H.device).clear_tail(H, tau, cols, kept if per_matrix else _NO_KEPT)


def _solve(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A (contiguous) factored into a fresh H and tau on the caller's stream, without a graph.  Where
    the factorisation is cut at the batch's count, the count is read while the first block runs."""
    H = torch.empty_like(A)
    tau = torch.empty((A.shape[0], A.shape[-1]), dtype=A.dtype, device=A.device)
    rel = _tail_rel(A.shape[-1])
    if rel is None or PARAMS["tail_scope"] == "matrix":
        _factor_tail(H, tau, A)
        return H, tau
    kept = _scan_tail(A, rel)
    _factor_tail(H, tau, A, cut=_BatchCount(kept, A.shape[-1]), kept=kept)
    return H, tau


def _replay(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The factorisation of A's shape as a captured CUDA graph, captured on the first call of each shape
    and, with tail_scope "batch", count of kept columns, read on the host before the replay ("both"
    leaves the tail out per matrix only here: a read would hold every replay behind a sync)."""
    cols = _kept_columns(A) if PARAMS["tail_scope"] == "batch" else A.shape[-1]
    if cols == 0:
        return torch.zeros_like(A), torch.zeros((A.shape[0], A.shape[-1]), dtype=A.dtype, device=A.device)
    key = (A.shape[0], A.shape[-1], cols, A.device)
    entry = _GRAPHS.get(key)
    if entry is None:
        a_in = torch.empty_like(A)
        h_out = torch.empty_like(A)
        tau_out = torch.empty((A.shape[0], A.shape[-1]), dtype=A.dtype, device=A.device)
        a_in.copy_(A)
        side = torch.cuda.Stream(A.device)
        streams = _Streams(A.device)
        side.wait_stream(torch.cuda.current_stream(A.device))
        with torch.cuda.stream(side):  # one eager run first: workspaces, kernel attributes
            _factor_tail(h_out, tau_out, a_in, streams, cols)
        torch.cuda.current_stream(A.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            _factor_tail(h_out, tau_out, a_in, streams, cols)
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
    return _solve(A.contiguous())
