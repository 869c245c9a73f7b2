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
from kernels.families.spaces import BlockedWYSpace, EmptySpace, HouseholderUnblockedSpace, LookaheadSplitSpace

FAMILIES_DIR = Path(__file__).resolve().parent
BASELINE_PATH = FAMILIES_DIR / "torch_geqrf.py"


@dataclass(frozen=True)
class RegisteredFamily:
    """One registered family: its file and typed space (``population.family.Family`` is something
    else, a family's islands and champion in a search; class names are unique across the packages).

    ``n_range`` is a hint of the sizes where the family is meant to win
    (inclusive); the file itself is correct for every n.
    """

    name: str
    filename: str
    space: type[ParamSpace]
    description: str
    n_range: tuple[int, int]
    baseline: bool = False

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
            "partial x_tailᵀX, the pivot row and scaled partial norms; shorter panels are one program with "
            "[BM, SB] register sub-panels. T comes from G = VᵀV and the slarft recurrence. It should win for "
            "large n and small batches (n ≥ 352; 60×1024, 8×2048, 2×4096) and also leads at 640×512 on an "
            "H200: 40×352 in 0.81 ms (49x), 640×512 in 10.2 ms (98x), 60×1024 in 6.7 ms (34x), 8×2048 in "
            "11.3 ms (6.4x), 2×4096 in 26.5 ms (1.7x, was 46 ms with one program per panel). At 2×4096 the "
            "cooperative panel chain (~14.6 ms) and the updates now share the time."
        ),
        n_range=(352, 1 << 30),
    ),
)

FAMILIES: dict[str, RegisteredFamily] = {f.name: f for f in _FAMILY_LIST}


def get_family(name: str) -> RegisteredFamily:
    try:
        return FAMILIES[name]
    except KeyError:
        raise KeyError(f"unknown family {name!r}; registered families: {', '.join(FAMILIES)}") from None
