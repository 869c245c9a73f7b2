"""Registered QR families: candidate files with typed parameter spaces.

A family is a line of descent: one standalone candidate file in this folder
(``custom_kernel(A) -> (H, tau)``, torch and triton only, its knobs in a
PARAMS block) plus a :class:`~kernels.params.ParamSpace` in
:mod:`kernels.families.spaces` that declares those knobs as data.  The
search tunes a family inside its space and mutates its file; ``description``
is shown verbatim to the LLM that mutates it.

    >>> fam = get_family("blocked_wy")
    >>> fam.default_params()                      # a BlockedWYSpace
    >>> fam.render({"bn": 128, **...})            # validated, then rendered
    >>> fam.source()                              # the file as committed

Measured numbers quoted in the descriptions are from kernels/BENCHMARKS.md
(H200, qrv2-bench, torch.geqrf timed in the same run).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from kernels.params import ParamSpace, render_params
from kernels.families.spaces import (
    BlockedWYSpace,
    CudaBlockedSpace,
    CudaOnchipSpace,
    EmptySpace,
    HouseholderUnblockedSpace,
    LookaheadSplitSpace,
)

FAMILIES_DIR = Path(__file__).resolve().parent
BASELINE_PATH = FAMILIES_DIR / "torch_geqrf.py"


@dataclass(frozen=True)
class RegisteredFamily:
    """One registered family: its file and typed space (``population.family.Family`` is something
    else, a family's islands and champion in a search; class names are unique across the packages).

    ``n_range`` is a hint of the sizes where the family is meant to win
    (inclusive); the file itself is correct for every n.  ``language`` is what its kernels
    are written in: ``"triton"`` and ``"torch"`` files run anywhere (Triton in the interpreter on
    CPU), ``"cuda"`` files
    build CUDA C++ with ``torch.utils.cpp_extension.load_inline`` and need nvcc and a GPU
    (without CUDA they call torch.geqrf, so a CPU-only search leaves them out).
    """

    name: str
    filename: str
    space: type[ParamSpace]
    description: str
    n_range: tuple[int, int]
    baseline: bool = False
    language: str = "triton"

    @property
    def needs_cuda(self) -> bool:
        return self.language == "cuda"

    @property
    def path(self) -> Path:
        return FAMILIES_DIR / self.filename

    def source(self) -> str:
        return self.path.read_text(encoding="utf-8")

    def default_params(self) -> ParamSpace:
        return self.space()

    def validate(self, params: ParamSpace | Mapping[str, Any]) -> ParamSpace:
        """The assignment as this family's space (raises pydantic's ValidationError)."""
        if isinstance(params, ParamSpace):
            if not isinstance(params, self.space):
                raise TypeError(f"{self.name} takes {self.space.__name__}, got {type(params).__name__}")
            return params
        return self.space.model_validate(dict(params))

    def render(self, params: ParamSpace | Mapping[str, Any], source: str | None = None) -> str:
        """The family's file (or ``source``, e.g. a mutated descendant that kept
        the PARAMS block) with its PARAMS block set to a validated assignment."""
        return render_params(self.source() if source is None else source, self.validate(params).as_params())


_FAMILY_LIST = (
    RegisteredFamily(
        name="torch_geqrf",
        filename="torch_geqrf.py",
        space=EmptySpace,
        description=(
            "The reference: torch.geqrf (cuSOLVER on CUDA; it loops over the batch one matrix at a time "
            "for n > 256). Every speedup is measured against it in the same run. It has no knobs and is "
            "never mutated."
        ),
        n_range=(1, 1 << 30),
        baseline=True,
        language="torch",
    ),
    RegisteredFamily(
        name="householder_unblocked",
        filename="householder_unblocked.py",
        space=HouseholderUnblockedSpace,
        description=(
            "One Triton program per matrix holds the whole n×n matrix as a single register tile "
            "(NP = next power of two ≥ n) and runs column-by-column Householder in exact FP32, no tl.dot. "
            "Each column costs one fused cross-warp reduction: the column's tail x and the pivot row p give "
            "s = x_tailᵀA and p together (tl.join), the LAPACK slarfg reflector (beta = -sign(alpha)·‖x‖, "
            "tau = (beta-alpha)/beta, tau = 0 for a zero tail, max-abs rescaling when squares under- or "
            "overflow) follows from alpha and ‖x_tail‖², and w = vᵀA = p + s/(alpha-beta) needs no second "
            "reduction; then a rank-1 update. It should win for small n (about 8 to 128, e.g. 20×32) where "
            "launch latency and the serial chain of n reflectors dominate and a blocked algorithm has "
            "nothing to block; above max_n the tile would spill and the file calls torch.geqrf. Measured on "
            "an H200: 20×32 in 0.09 ms vs 0.34 ms for torch.geqrf (3.7x, mostly launch and host overhead)."
        ),
        n_range=(1, 128),
    ),
    RegisteredFamily(
        name="blocked_wy",
        filename="blocked_wy.py",
        space=BlockedWYSpace,
        description=(
            "Blocked Householder QR fused into one launch, one Triton program per matrix. For each panel of "
            "nb columns (rows k..n padded to a power of two, halved once the remaining rows fit), leaves of "
            "'leaf' columns are factored in registers with the same one-reduction-per-column slarfg step as "
            "householder_unblocked; a leaf's compact WY reaches the rest of its panel, then T for the panel "
            "comes from G = VᵀV (tl.dot) and the LAPACK slarft recurrence (tau = 0 safe), and the trailing "
            "matrix is updated as C -= V·(Tᵀ·(VᵀC)) in bn-column tiles and rb-row chunks, three tl.dot "
            "GEMMs whose input precision is a parameter each ('ieee' exact FP32; plain tf32 fails the "
            "residual gate at n=512). The first step reads A and writes H, so A is read once. It should win "
            "where the batch alone fills the GPU and n is moderate (n from about 128 to 512, large batches: "
            "640×512 is the most important shape); on an H200 it ran 40×176 in 0.40 ms (39x) and 640×512 "
            "in 11.4 ms (88x). Profiling by ablation at 640×512: the panels take about 2.9 ms, the trailing "
            "FP32 GEMMs about 10 ms, so the update GEMMs (Triton's FMA dot at ~12 TFLOP/s) are where time goes."
        ),
        n_range=(128, 512),
    ),
    RegisteredFamily(
        name="lookahead_split",
        filename="lookahead_split.py",
        space=LookaheadSplitSpace,
        description=(
            "Blocked Householder QR with one launch per nb-column panel and look-ahead of depth one: in "
            "launch j, the panel programs of each matrix apply panel j-1's compact-WY reflector to panel j "
            "and factor it, while batch × tiles other programs apply panel j-1's reflector to one bn-column "
            "tile each of the columns right of panel j (tl.dot GEMMs, precision per GEMM), so the serial "
            "panel work overlaps the parallel update and all SMs work even for a batch of 2. A panel taller "
            "than split_rows is split by rows over panel_programs cooperating programs (all resident: "
            "programs × batch ≤ SMs) that meet at a flag barrier in global memory once per column, exchanging "
            "partial x_tailᵀX, the pivot row and scaled partial norms (coop_panel=householder), or factor "
            "it by Cholesky QR twice with Householder reconstruction (coop_panel=cholqr2: two barriers per "
            "panel, every program computing the nb×nb Cholesky, LU and triangular inverses itself; a zero, "
            "non-finite or nearly dependent panel falls back to the columns); shorter panels are one program "
            "with [BM, SB] register sub-panels. T comes from G = VᵀV and the slarft recurrence. The defaults "
            "run W = VᵀC, Tᵀ·W and the update on tensor cores at FP32 accuracy (tf32x3; plain tf32 fails the "
            "residual gate). It should win for large n and small batches (n ≥ 352; 8×2048, 2×4096). With the "
            "defaults on an H200 (GPU MODE's timed regions): 40×352 in 0.70-0.98 ms, 8×2048 in 10.9 ms, "
            "2×4096 in 23.5 ms. cholqr2 passed qrv2-tests but was not faster (2×4096 +1.5%, 8×2048 +7.5%): "
            "cutting 34 barriers per panel to 3 did not shorten the tall cases, so the barriers are not "
            "what bounds them."
        ),
        n_range=(352, 1 << 30),
    ),
    RegisteredFamily(
        name="cuda_onchip",
        filename="cuda_onchip.py",
        space=CudaOnchipSpace,
        description=(
            "CUDA C++ (torch.utils.cpp_extension.load_inline): one thread block per matrix holds the whole "
            "matrix in registers, row i on lane i%32 of every warp and a block of CPW consecutive columns on "
            "each warp, and runs column-by-column Householder in exact FP32. Every reduction a column needs "
            "(its norm; vᵀA_j for each column the reflector touches) is a warp shuffle, and a warp reduces all "
            "its columns in one straight-line butterfly (each level's shuffles back to back, so their "
            "latencies overlap); the only block-wide step per column is one __syncthreads that publishes v in "
            "shared memory (double buffered); warps whose columns are finished skip the rest; the warp owning "
            "column c+1 applies reflector c to it first and builds reflector c+1 while the other warps still "
            "apply reflector c (look-ahead of one column). LAPACK slarfg reflectors with max-abs rescaling when "
            "squares under- or overflow. The host does one pybind call that allocates H and tau and launches "
            "one kernel, so a call costs a few microseconds of host time where a Triton launch's Python path "
            "costs tens: it should win at small n (20x32, 40x176) where launch overhead and the serial chain "
            "of n reflectors dominate. Register tiles bound it to n <= 192 (32 rows per register slot, at most "
            "6 slots); warps per size class are the knobs; above max_n the file calls torch.geqrf. Measured on "
            "an H200 with GPU MODE's timed regions: 20x32 in 0.024 ms, 40x176 in 0.266 ms with 16 warps "
            "(0.314 with 32)."
        ),
        n_range=(1, 192),
        language="cuda",
    ),
    RegisteredFamily(
        name="cuda_blocked",
        filename="cuda_blocked.py",
        space=CudaBlockedSpace,
        description=(
            "Blocked Householder QR: each nb-column panel (rows k..n) is factored by a CUDA C++ kernel "
            "(load_inline), one thread block per matrix, the panel loaded coalesced through shared memory "
            "into registers with row i on lane i%32 and column j on warp j%W, so each column costs warp "
            "shuffles (all of a warp's columns in one straight-line butterfly) and one __syncthreads (v "
            "published in shared memory, look-ahead of one column); the same dots give G = VᵀV, each thread "
            "builds one row of T (LAPACK slarft), and the kernel writes the panel of H, tau, explicit Vᵀ and T "
            "into windows of its block's buffers. Panels are grouped into blocks of block_* columns: a block "
            "is split in halves down to panels, each left half's reflector applied to its right half and the "
            "halves' T merged ([[T1, -T1·V1ᵀV2·T2], [0, T2]]); then the rest of the matrix gets the block's "
            "update C -= V·(Tᵀ·(VᵀC)) on the view H[:, k:, k+block:] (K = block width, so wider blocks mean "
            "fewer passes over the matrix), per size class (update_lt512, update_le1024, update_gt1024) either "
            "three cuBLAS FP32 GEMMs through torch.bmm / baddbmm_ (exact FP32), or one Triton kernel (a "
            "program per matrix and apply_bn-column tile: W = VᵀC over apply_bm-row blocks, then C -= V·(TᵀW)) "
            "whose products run on the tensor cores as three products of split operands, x = hi + lo: bf16 "
            "halves (about 2^-16 per product, the default for 512 <= n <= 1024: every qrv2-tests case passed "
            "at <= 0.45 of the gate's 20) or TF32 halves (2^-21, slower than cuBLAS FP32 at these shapes). "
            "Optionally the whole factorisation of a shape is captured once as a CUDA graph and replayed "
            "(graph), removing per-panel host launches. Register panels hold at most 1024 rows (nb 64 up to "
            "512 rows, 32 or 16 up to 1024). Taller panels (n > 1024, panel_gt1024 = cholqr2) are Cholesky QR "
            "twice over row chunks of many blocks a matrix (float64 Grams, the 32x32 factors on one block of "
            "1024 threads), Householder vectors reconstructed from Q (Ballard et al.), and a per-matrix guard "
            "(a tiny pivot, or Q1ᵀQ1 far from I) that sends a nearly dependent panel to a column-by-column "
            "kernel; with plain TF32 updates above n = 1024 (update_gt1024, narrow_gt1024; the gate is "
            "20·n·eps32 there) 8x2048 runs in 8.3 ms and 2x4096 in 16.0 ms on an H200 (lookahead_split 10.8 "
            "and 23.4); the same leaves at n <= 1024 (panel_le512, panel_le1024) were measured slower. "
            "It should win at moderate and large n with enough matrices to fill the GPU "
            "(640x512, 60x1024) and at the tall cases; above max_n the file calls torch.geqrf. "
            "Measured on an H200 (GPU MODE's timed regions, session 15 defaults: panels of 32 in blocks of 64 "
            "at 384 < n <= 512 as 8 warps with two blocks an SM when matrices outnumber SMs, the first block "
            "read from the input instead of a copy, update tiles of 64 columns, CUDA graphs for n <= 384 and "
            "512 < n <= 1024): 640x512 in 4.9-5.0 ms (6.1-6.2 with session 14's, 8.1 with session 9's), "
            "60x1024 in 4.7 ms (5.2-9.7 before: eager launches made it host-bound in some processes), 40x352 "
            "in 0.78 ms, 40x176 in 0.28 ms. Where a 640x512 call's 4.7 ms of device time goes: the Triton "
            "bf16x3 updates 2.07 ms, the panels 2.25 ms; publishing reflectors with flags instead of the "
            "per-column barrier, and an update holding C's tile in shared memory (wmma), were measured slower."
        ),
        n_range=(256, 4096),
        language="cuda",
    ),
)

FAMILIES: dict[str, RegisteredFamily] = {f.name: f for f in _FAMILY_LIST}


def get_family(name: str) -> RegisteredFamily:
    try:
        return FAMILIES[name]
    except KeyError:
        raise KeyError(f"unknown family {name!r}; registered families: {', '.join(FAMILIES)}") from None
