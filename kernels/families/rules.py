"""Cross-field rules of the families' spaces: what a family file's SPACE block, which lists each
knob's values on its own, cannot say.

Every assignment a space accepts is correct for every n (the kernels clamp and mask, and fall back
where a size is out of range); these rules only drop assignments that cannot launch (register or
shared-memory budgets of one H200 SM, kernels/families/resources.py; for lookahead_split at every
shape of the qr_v2 suites) or are known to waste a trial.  Each takes the assignment and
raises ValueError with its reason.
"""

from __future__ import annotations

from typing import Any, Mapping

from kernels.families.resources import (REGISTERS_PER_SM, SHARED_BYTES_PER_BLOCK, gram_bytes, lookahead_worst,
                                        update_bytes)


def _check_maxnreg(maxnreg: int, warps: int, where: str) -> None:
    if maxnreg and maxnreg * warps * 32 > REGISTERS_PER_SM:
        raise ValueError(f"maxnreg_{where}={maxnreg} with {warps} warps needs more than {REGISTERS_PER_SM} registers")


def _check_shared(need: int, what: str) -> None:
    if need > SHARED_BYTES_PER_BLOCK:
        raise ValueError(f"{what} asks for {need} bytes of shared memory; a block may have {SHARED_BYTES_PER_BLOCK}")


def blocked_wy_fits_one_sm(p: Mapping[str, Any]) -> None:
    for where in ("le256", "le512", "le1024", "gt1024"):
        _check_maxnreg(p["maxnreg_" + where], p["warps_" + where], where)
    # The leaf tile (rows padded to a power of two) lives in registers at the largest n.
    if p["max_n"] * min(p["leaf"], p["nb_gt1024"]) > 32768:
        raise ValueError(f"a {p['max_n']}-row leaf of {p['leaf']} columns does not fit in registers")
    classes = ["le256", "le512", "le1024"] + (["gt1024"] if p["max_n"] > 1024 else [])
    split = "tf32x3" in (p["prec_w"], p["prec_u"], p["prec_g"])
    for where in classes:
        nb = p["nb_" + where]
        # The trailing update (bn-column tiles) and, inside the panel, each leaf's update of the
        # rest of the panel.
        need = max(update_bytes(nb, p["rb"], p["bn"], p["stages"], split),
                   update_bytes(min(nb, p["leaf"]), p["rb"], nb, p["stages"], split),
                   gram_bytes(nb, p["rb"], p["stages"], p["prec_g"]))
        _check_shared(need, f"the update of nb_{where}={nb} with rb={p['rb']}, bn={p['bn']}, stages={p['stages']}")


def lookahead_split_fits_one_sm(p: Mapping[str, Any]) -> None:
    # Cooperative panels hold n / panel_programs rows each, so the need grows with n: checked at
    # every shape of the qr_v2 suites (a 1x4096 input asked 256 KB of a 227 KB block).
    need, (batch, n) = lookahead_worst(dict(p))
    _check_shared(need, f"a launch at {batch}x{n}")


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
                                 (p["update_gt1024"], max(p["block_gt1024"], p["block_gt2048"]), "gt1024")):
        staged = p["apply_stages"] * p["apply_bm"] * (block + p["apply_bn"]) + block * block
        if update != "fp32" and staged * 4 > SHARED_BYTES_PER_BLOCK:
            raise ValueError(f"update_{where}={update}: the update kernel's tiles for blocks of {block} "
                             "exceed shared memory")
