"""Typed parameter spaces of the registered families.

One :class:`~kernels.params.ParamSpace` per family, kept out of the candidate
files so that a candidate stays a plain GPU MODE submission (torch and triton
only).  Field names are exactly the keys of the family file's PARAMS block and
the field defaults are exactly its values (the conformance suite checks both),
so ``render_params(source, space.as_params())`` always fits the file.

Every assignment a space accepts is correct for every n (the kernels clamp
and mask, and fall back where a size is out of range); the cross-field rules
only drop assignments that cannot launch (register or shared-memory budgets
of one H200 SM, kernels/families/resources.py; for lookahead_split at every
shape of the qr_v2 suites) or are known to waste a trial.  Plain ``"tf32"`` is a
choice only above n = 1024, where the residual gate (20·n·eps32) is wide enough:
it failed (scaled residual 47-102 > 20) on the rankdef, clustered, band, rowscale
and mixed n=512 cases on an H200 (docs/device-runs/run1); above 1024 the
verifier decides (one Triton TF32 product failed band at 2048 by a hair,
kernels/BENCHMARKS.md).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import model_validator

from kernels.families.resources import (REGISTERS_PER_SM, SHARED_BYTES_PER_BLOCK, gram_bytes, lookahead_worst,
                                        update_bytes)
from kernels.params import Choice, ParamSpace

Precision = Literal["ieee", "tf32x3"]
# A trailing update through cuBLAS in exact FP32, or the family's Triton kernel with split
# TF32 or bf16 tensor-core products (three per product, FP32 accumulation).
Update = Literal["fp32", "tf32x3", "bf16x3"]
# Above n = 1024 the residual gate is 20·n·eps32 (4.9e-3 at 2048): one plain TF32 product in the
# Triton kernel is a choice there, which the verifier keeps or rejects.
TallUpdate = Literal["fp32", "tf32", "tf32x3", "bf16x3"]
# A panel factored column by column in one block's registers, or by Cholesky QR twice over row
# chunks with Householder vectors reconstructed (a nearly dependent panel falls back per matrix).
PanelAlgorithm = Literal["householder", "cholqr2"]


def _check_maxnreg(maxnreg: int, warps: int, where: str) -> None:
    if maxnreg and maxnreg * warps * 32 > REGISTERS_PER_SM:
        raise ValueError(f"maxnreg_{where}={maxnreg} with {warps} warps needs more than {REGISTERS_PER_SM} registers")


def _check_shared(need: int, what: str) -> None:
    if need > SHARED_BYTES_PER_BLOCK:
        raise ValueError(f"{what} asks for {need} bytes of shared memory; a block may have {SHARED_BYTES_PER_BLOCK}")


class EmptySpace(ParamSpace):
    """No knobs (the torch.geqrf reference)."""


class HouseholderUnblockedSpace(ParamSpace):
    """householder_unblocked: the whole n×n matrix is one [NP, NP] register tile
    (NP = next power of two ≥ max(n, 16)); ``warps_<NP>`` picks num_warps per
    tile size; above ``max_n`` the file calls torch.geqrf."""

    max_n: Annotated[int, Choice(32, 64, 128, 256)] = 128
    join_reduce: bool = True
    warps_16: Annotated[int, Choice(1, 2, 4)] = 1
    warps_32: Annotated[int, Choice(1, 2, 4)] = 1
    warps_64: Annotated[int, Choice(1, 2, 4, 8)] = 4
    warps_128: Annotated[int, Choice(4, 8, 16)] = 8
    warps_256: Annotated[int, Choice(8, 16, 32)] = 16


class BlockedWYSpace(ParamSpace):
    """blocked_wy: per size class (n ≤ 256, ≤ 512, ≤ 1024, > 1024) a panel width
    ``nb_*``, ``warps_*`` and an optional register cap ``maxnreg_*`` (0 = none);
    ``leaf`` columns of a panel are factored in registers at a time; trailing
    GEMM tiles are ``bn`` columns × ``rb`` rows with ``stages`` software-pipeline
    stages; ``shrink`` halves the panel height once (twice) when the remaining
    rows fit; one precision per GEMM (W = VᵀC, Tᵀ·W, C -= V·W2, G = VᵀV)."""

    nb_le256: Annotated[int, Choice(16, 32, 64)] = 16
    nb_le512: Annotated[int, Choice(16, 32, 64)] = 32
    nb_le1024: Annotated[int, Choice(16, 32, 64)] = 32
    nb_gt1024: Annotated[int, Choice(16, 32)] = 16
    warps_le256: Annotated[int, Choice(2, 4, 8)] = 4
    warps_le512: Annotated[int, Choice(4, 8, 16)] = 8
    warps_le1024: Annotated[int, Choice(8, 16, 32)] = 16
    warps_gt1024: Annotated[int, Choice(8, 16, 32)] = 16
    maxnreg_le256: Annotated[int, Choice(0, 96, 128, 168, 255)] = 168
    maxnreg_le512: Annotated[int, Choice(0, 96, 128, 168, 255)] = 128
    maxnreg_le1024: Annotated[int, Choice(0, 64, 96, 128)] = 0
    maxnreg_gt1024: Annotated[int, Choice(0, 64, 96, 128)] = 128
    leaf: Annotated[int, Choice(16, 32, 64)] = 64
    bn: Annotated[int, Choice(16, 32, 64, 128)] = 64
    rb: Annotated[int, Choice(16, 32, 64, 128)] = 64
    stages: Annotated[int, Choice(1, 2, 3)] = 1
    shrink: Annotated[int, Choice(0, 1, 2)] = 1
    join_reduce: bool = False
    prec_w: Precision = "ieee"
    prec_t: Precision = "ieee"
    prec_u: Precision = "ieee"
    prec_g: Precision = "ieee"
    max_n: Annotated[int, Choice(1024, 2048)] = 1024

    @model_validator(mode="after")
    def _fits_one_sm(self) -> "BlockedWYSpace":
        for where in ("le256", "le512", "le1024", "gt1024"):
            _check_maxnreg(getattr(self, "maxnreg_" + where), getattr(self, "warps_" + where), where)
        # The leaf tile (rows padded to a power of two) lives in registers at the largest n.
        if self.max_n * min(self.leaf, self.nb_gt1024) > 32768:
            raise ValueError(f"a {self.max_n}-row leaf of {self.leaf} columns does not fit in registers")
        classes = ["le256", "le512", "le1024"] + (["gt1024"] if self.max_n > 1024 else [])
        for where in classes:
            nb = getattr(self, "nb_" + where)
            # The trailing update (bn-column tiles) and, inside the panel, each leaf's update of the
            # rest of the panel.
            split = "tf32x3" in (self.prec_w, self.prec_u, self.prec_g)
            need = max(update_bytes(nb, self.rb, self.bn, self.stages, split),
                       update_bytes(min(nb, self.leaf), self.rb, nb, self.stages, split),
                       gram_bytes(nb, self.rb, self.stages, self.prec_g))
            _check_shared(need, f"the update of nb_{where}={nb} with rb={self.rb}, bn={self.bn}, "
                          f"stages={self.stages}")
        return self


class LookaheadSplitSpace(ParamSpace):
    """lookahead_split: panel width ``nb``; update tiles of ``bn`` columns × ``rb``
    rows (``bn_coop``/``stages_coop`` when panels are split, small n uses
    ``warps_n_le512``/``stages_n_le512``); the panel program's row chunk
    ``rb_panel``; single-program panels keep ``panel_elems`` floats in registers
    ([BM, SB] with BM ≥ ``bm_min``) and use ``warps_bm_*`` by panel height;
    panels taller than ``split_rows`` are split over ``panel_programs``
    cooperating programs (1 = never; reduced so that programs × batch ≤ SMs, and
    off below 4 programs) with ``warps_split`` warps; one precision per GEMM."""

    nb: Annotated[int, Choice(16, 32)] = 32
    bn: Annotated[int, Choice(32, 64, 128)] = 64
    bn_coop: Annotated[int, Choice(32, 64, 128)] = 64
    rb: Annotated[int, Choice(32, 64, 128)] = 64
    rb_panel: Annotated[int, Choice(32, 64, 128, 256)] = 64
    stages: Annotated[int, Choice(1, 2, 3)] = 3
    stages_coop: Annotated[int, Choice(1, 2, 3)] = 3
    join_reduce: bool = True
    panel_programs: Annotated[int, Choice(1, 8, 16, 32, 64)] = 32
    split_rows: Annotated[int, Choice(512, 1024, 2048)] = 1024
    warps_split: Annotated[int, Choice(2, 4, 8)] = 4
    warps_n_le512: Annotated[int, Choice(0, 4, 8)] = 4
    stages_n_le512: Annotated[int, Choice(1, 2, 3)] = 1
    panel_elems: Annotated[int, Choice(16384, 32768)] = 16384
    bm_min: Annotated[int, Choice(32, 64, 128)] = 128
    warps_bm_le256: Annotated[int, Choice(2, 4, 8)] = 4
    warps_bm_le1024: Annotated[int, Choice(4, 8, 16)] = 4
    warps_bm_gt1024: Annotated[int, Choice(8, 16, 32)] = 16
    prec_w: Precision = "tf32x3"
    prec_t: Precision = "tf32x3"
    prec_u: Precision = "tf32x3"
    prec_g: Precision = "ieee"
    # How a split panel is factored: a barrier per column, or Cholesky QR twice with Householder
    # reconstruction (two barriers; a nearly dependent panel falls back to the columns).
    coop_panel: Literal["householder", "cholqr2"] = "householder"

    @model_validator(mode="after")
    def _fits_one_sm(self) -> "LookaheadSplitSpace":
        # Cooperative panels hold n / panel_programs rows each, so the need grows with n: checked
        # at every shape of the qr_v2 suites (a 1x4096 input asked 256 KB of a 227 KB block).
        need, (batch, n) = lookahead_worst(self.as_params())
        _check_shared(need, f"a launch at {batch}x{n}")
        return self


class CudaOnchipSpace(ParamSpace):
    """cuda_onchip: warps per block for each size class of n (n ≤ 32, 64, ..., 192: 32·RPL rows,
    RPL register slots per lane); each class offers the warp counts whose register tile fits
    (warps × 32 threads × the tile's registers within one SM's 64K); above ``max_n`` the file
    calls torch.geqrf."""

    max_n: Annotated[int, Choice(32, 64, 128, 192)] = 192
    warps_32: Annotated[int, Choice(1, 2, 4)] = 4
    warps_64: Annotated[int, Choice(2, 4, 8)] = 4
    warps_96: Annotated[int, Choice(4, 8, 16)] = 4
    warps_128: Annotated[int, Choice(8, 16, 32)] = 8
    warps_160: Annotated[int, Choice(16, 32)] = 32
    warps_192: Annotated[int, Choice(16, 32)] = 16


class CudaBlockedSpace(ParamSpace):
    """cuda_blocked: for n ≤ 384, ≤ 512, ≤ 1024 and above, the panel width the CUDA kernel factors
    (``nb_*``; 8 above 2048 rows) and the block width (``block_*``, a multiple of it: the
    trailing update's K; a block is split in halves down to panels, each half's reflector
    applied to the other by GEMMs); the warps of a 32-wide panel (8 warps of four columns, 16 of
    two or 32 of one; panels of more than 512 rows always use 16) and the blocks per SM its
    registers are capped for; whether one shape's factorisation is captured once as a CUDA graph
    and replayed (always, or per size class: n ≤ 384, 512 < n ≤ 1024, above);
    ``max_n`` above which the file calls torch.geqrf; and how the block updates run for n < 512,
    512 ≤ n ≤ 1024 and above (``update_*``: cuBLAS FP32, or a Triton kernel of split TF32 or bf16
    tensor-core products whose programs own ``apply_bn`` columns and walk ``apply_bm`` rows at
    a time, in ``apply_warps_*`` warps)."""

    max_n: Annotated[int, Choice(512, 1024, 2048, 4096)] = 4096
    # n ≤ 384 and 384 < n ≤ 512 apart: at 640x512 panels of 32 in blocks of 64 were 12% faster
    # than 64 in 128 in every process, at 40x352 1.8x slower (run m's A/B, kernels/BENCHMARKS.md).
    nb_le384: Annotated[int, Choice(16, 32, 64)] = 64
    # 64 with the n ≤ 384 graph: 40x352 0.855 -> 0.777 ms, 40x176 0.307 -> 0.281 (session 15, one process)
    block_le384: Annotated[int, Choice(16, 32, 64, 128, 256)] = 64
    nb_le512: Annotated[int, Choice(16, 32, 64)] = 32
    block_le512: Annotated[int, Choice(16, 32, 64, 128, 256)] = 64
    nb_le1024: Annotated[int, Choice(16, 32)] = 32
    block_le1024: Annotated[int, Choice(16, 32, 64, 128, 256)] = 64
    nb_le2048: Annotated[int, Choice(8, 16)] = 16
    block_gt1024: Annotated[int, Choice(32, 64, 128, 256)] = 128
    # The 32-wide panel kernel of at most 512 rows: its warps and the blocks per SM its registers
    # are capped for when there are more matrices than SMs (a launch in waves: 8 warps, 2 blocks
    # an SM took the 640x512 panels from 2.12 to 1.70 ms, session 15), and its warps with fewer.
    warps_nb32: Annotated[int, Choice(8, 16, 32)] = 8
    panel_min_blocks: Annotated[int, Choice(1, 2)] = 2
    # the same for panels of at most 256 rows (8 warps: up to 4 blocks an SM without spilling)
    panel_min_blocks_le256: Annotated[int, Choice(1, 2, 4)] = 2
    warps_nb32_few: Annotated[int, Choice(8, 16, 32)] = 16
    # graph: every n; graph_le384, graph_le1024, graph_gt1024: n ≤ 384, 512 < n ≤ 1024, above.
    # n ≤ 384 with few matrices is host-bound (40x352 1.98 ms eager, 0.86 replayed, session 15);
    # at 640x512 the replay's copy in and clone out would cost more than the launches.
    graph: bool = False
    graph_le384: bool = True
    # 60x1024 (175 launches a call) was host-bound in some processes (5.6-6.8 ms); replayed, 5.5-5.6.
    graph_le1024: bool = True
    graph_gt1024: bool = True
    update_lt512: Update = "fp32"
    update_le1024: Update = "bf16x3"
    update_gt1024: TallUpdate = "bf16x3"
    # 64 after session 15's panel and input changes: 640x512 -4%, 60x1024 -2% against 32, one process
    apply_bn: Annotated[int, Choice(32, 64, 128)] = 64
    apply_bm: Annotated[int, Choice(32, 64, 128)] = 64
    # Warps of the update kernel for n ≤ 512, 512 < n ≤ 1024 and above: at 640x512 (bf16x3) 4 warps
    # timed 7.05-7.10 ms against 8 warps' 8.0-8.1, while two 60x1024 cases went 17% slower with
    # 64-wide tiles and 2 stages (run k); with 32-wide tiles and 3 stages 4 warps are faster at
    # 60x1024 too (run m, session 14's A/B: B/A 0.90-0.92; kernels/BENCHMARKS.md).
    apply_warps_le512: Annotated[int, Choice(4, 8)] = 4
    apply_warps_le1024: Annotated[int, Choice(4, 8)] = 4
    apply_warps_gt1024: Annotated[int, Choice(4, 8)] = 8
    apply_stages: Annotated[int, Choice(1, 2, 3)] = 3
    # The panel algorithm per size class (n ≤ 512, ≤ 1024, above); above 1024 with cholqr2 the
    # leaves are 32 wide whatever nb_le2048 says.  Cholesky QR leaves of fewer than cholqr_min_rows
    # rows use the register kernel.  A block merge's V1ᵀV2 over at least cross_min_rows rows is split
    # over those rows by a CUDA kernel instead of one cuBLAS product (40 µs a merge at 2x4096).
    panel_le512: PanelAlgorithm = "householder"
    panel_le1024: PanelAlgorithm = "householder"
    panel_gt1024: PanelAlgorithm = "cholqr2"
    cholqr_min_rows: Annotated[int, Choice(64, 128, 256, 512, 1024)] = 256
    cross_min_rows: Annotated[int, Choice(256, 512, 1024, 4096)] = 1024
    # Updates of at most narrow_cols_gt1024 columns above n = 1024 (inside a block, and the last
    # ones): "split" computes VᵀC split over the rows and C -= V·(TᵀW) by row chunks in exact FP32 on
    # the CUDA cores (V at most 64 wide; wider ones take cuBLAS FP32), "fp32" is cuBLAS (a few blocks
    # for these long, thin products), "tf32" the Triton kernel (a program per column tile).
    narrow_gt1024: Literal["split", "fp32", "tf32"] = "split"
    narrow_cols_gt1024: Annotated[int, Choice(0, 128, 256, 512)] = 256

    @model_validator(mode="after")
    def _blocks_hold_whole_panels(self) -> "CudaBlockedSpace":
        for nb, block, where in ((self.nb_le384, self.block_le384, "le384"),
                                 (self.nb_le512, self.block_le512, "le512"),
                                 (self.nb_le1024, self.block_le1024, "le1024")):
            if block < nb or block % nb:
                raise ValueError(f"block_{where}={block} is not a multiple of nb_{where}={nb}")
        # The update kernel keeps Tᵀ (block × block) and, per pipeline stage, tiles of Vᵀ
        # (block × apply_bm) and C (apply_bm × apply_bn) in shared memory: blocks of 256
        # asked Triton for 256 KB on an H200 (r7), where a block may have 227 KB.
        for update, block, where in ((self.update_lt512, max(self.block_le384, self.block_le512), "lt512"),
                                     (self.update_le1024, max(self.block_le512, self.block_le1024), "le1024"),
                                     (self.update_gt1024, self.block_gt1024, "gt1024")):
            staged = self.apply_stages * self.apply_bm * (block + self.apply_bn) + block * block
            if update != "fp32" and staged * 4 > SHARED_BYTES_PER_BLOCK:
                raise ValueError(f"update_{where}={update}: the update kernel's tiles for blocks of {block} "
                                 "exceed shared memory")
        return self
