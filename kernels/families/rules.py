"""Cross-field rules of the families' spaces: what a family file's SPACE block, which lists each
knob's values on its own, cannot say.

Every assignment a space accepts is correct for every n (the kernels clamp and mask, and fall back
where a size is out of range); these rules only drop assignments that cannot launch (register or
shared-memory budgets of one H200 SM) or are known to waste a trial.  Each takes the assignment and
raises ValueError with its reason.
"""

from __future__ import annotations

from typing import Any, Mapping

# One H200 SM: 64K 32-bit registers, up to 227 KB shared memory per block.
REGISTERS_PER_SM = 65536
SHARED_BYTES_PER_BLOCK = 227 * 1024


def _check_maxnreg(maxnreg: int, warps: int, where: str) -> None:
    if maxnreg and maxnreg * warps * 32 > REGISTERS_PER_SM:
        raise ValueError(f"maxnreg_{where}={maxnreg} with {warps} warps needs more than {REGISTERS_PER_SM} registers")


def blocked_wy_fits_one_sm(p: Mapping[str, Any]) -> None:
    for where in ("le256", "le512", "le1024", "gt1024"):
        _check_maxnreg(p["maxnreg_" + where], p["warps_" + where], where)
    # The leaf tile (rows padded to a power of two) lives in registers at the largest n.
    if p["max_n"] * min(p["leaf"], p["nb_gt1024"]) > 32768:
        raise ValueError(f"a {p['max_n']}-row leaf of {p['leaf']} columns does not fit in registers")
    widest = max(p["nb_le256"], p["nb_le512"], p["nb_le1024"], p["nb_gt1024"])
    if p["stages"] * p["rb"] * (p["bn"] + widest) * 4 > SHARED_BYTES_PER_BLOCK * 3 // 4:
        raise ValueError("GEMM tiles × pipeline stages exceed shared memory")


def lookahead_split_fits_one_sm(p: Mapping[str, Any]) -> None:
    stages = max(p["stages"], p["stages_coop"], p["stages_n_le512"])
    if stages * p["rb"] * (max(p["bn"], p["bn_coop"]) + p["nb"]) * 4 > SHARED_BYTES_PER_BLOCK * 3 // 4:
        raise ValueError("update tiles × pipeline stages exceed shared memory")
    if stages * p["rb_panel"] * 2 * p["nb"] * 4 > SHARED_BYTES_PER_BLOCK * 3 // 4:
        raise ValueError("panel row chunks × pipeline stages exceed shared memory")


def cuda_blocked_blocks_hold_whole_panels(p: Mapping[str, Any]) -> None:
    for where in ("le384", "le512", "le1024"):
        nb, block = p["nb_" + where], p["block_" + where]
        if block < nb or block % nb:
            raise ValueError(f"block_{where}={block} is not a multiple of nb_{where}={nb}")
    # The update kernel keeps Tᵀ (block × block) and, per pipeline stage, tiles of Vᵀ
    # (block × apply_bm) and C (apply_bm × apply_bn) in shared memory: blocks of 256
    # asked Triton for 256 KB on an H200, where a block may have 227 KB.
    for update, block, where in ((p["update_lt512"], max(p["block_le384"], p["block_le512"]), "lt512"),
                                 (p["update_le1024"], max(p["block_le512"], p["block_le1024"]), "le1024"),
                                 (p["update_gt1024"], p["block_gt1024"], "gt1024")):
        staged = p["apply_stages"] * p["apply_bm"] * (block + p["apply_bn"]) + block * block
        if update != "fp32" and staged * 4 > SHARED_BYTES_PER_BLOCK:
            raise ValueError(f"update_{where}={update}: the update kernel's tiles for blocks of {block} "
                             "exceed shared memory")
