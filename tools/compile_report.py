"""Compile a family's Triton kernels for sm_90 on any machine (no GPU needed)
and report compile time, registers, spills and shared memory from ptxas.

    python tools/compile_report.py blocked_wy N [key=value ...]

Used to size tiles before spending device time: the numbers come from the
same ptxas that Triton bundles and runs on the GPU machine.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.pop("TRITON_INTERPRET", None)

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernels.candidate import load_candidate, materialize  # noqa: E402
from kernels.params import read_params, render_params  # noqa: E402

PTXAS = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
TARGET = GPUTarget("cuda", 90, 32)


def ptxas_report(ptx: str) -> dict:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "k.ptx"
        path.write_text(ptx)
        out = subprocess.run([str(PTXAS), "-arch=sm_90a", "-v", str(path), "-o", str(Path(d) / "k.o")],
                             capture_output=True, text=True).stderr
    regs = re.search(r"Used (\d+) registers", out)
    spill_st = re.search(r"(\d+) bytes spill stores", out)
    spill_ld = re.search(r"(\d+) bytes spill loads", out)
    stack = re.search(r"(\d+) bytes stack frame", out)
    return {
        "regs": int(regs.group(1)) if regs else None,
        "spill_st": int(spill_st.group(1)) if spill_st else None,
        "spill_ld": int(spill_ld.group(1)) if spill_ld else None,
        "stack": int(stack.group(1)) if stack else None,
    }


def compile_one(fn, signature: dict, constexprs: dict, num_warps: int, num_stages: int = 3,
                values: dict | None = None, maxnreg: int | None = None) -> dict:
    """Compile like a launch would: ``values`` are the runtime ints (pointers are
    16-byte aligned); ints equal to 1 become constants, multiples of 16 get the
    divisibility attribute, as Triton's launcher specialises them."""
    sig = dict(signature)
    constexprs = dict(constexprs)
    values = values or {}
    attrs = {}
    names = fn.arg_names
    for name, ty in signature.items():
        if ty.startswith("*"):
            attrs[(names.index(name),)] = [["tt.divisibility", 16]]
        elif name in values and values[name] == 1:
            constexprs[name] = 1
        elif name in values and values[name] % 16 == 0:
            attrs[(names.index(name),)] = [["tt.divisibility", 16]]
    for name in constexprs:
        sig[name] = "constexpr"
    src = ASTSource(fn, sig, constexprs=constexprs, attrs=attrs)
    t0 = time.time()
    options = {"num_warps": num_warps, "num_stages": num_stages}
    if maxnreg:
        options["maxnreg"] = maxnreg
    ck = triton.compile(src, target=TARGET, options=options)
    elapsed = time.time() - t0
    rep = ptxas_report(ck.asm["ptx"])
    rep.update(compile_s=round(elapsed, 1), shared=ck.metadata.shared, num_warps=num_warps)
    return rep


def family_module(name: str, overrides: dict):
    path = ROOT / "kernels" / "families" / "files" / f"{name}.py"
    source = path.read_text()
    params = read_params(source)
    params.update(overrides)
    cand = materialize(render_params(source, params), tempfile.gettempdir() + "/qrsearch-compile")
    load_candidate(cand)
    mod = [m for k, m in sys.modules.items() if k.startswith("qrsearch_candidate_")][-1]
    return mod, params


def _strides(n: int) -> dict:
    return {"sab": n * n, "sar": n, "sac": 1, "shb": n * n, "shr": n, "shc": 1, "stb": n}


def report(name: str, n: int, overrides: dict) -> list[dict]:
    mod, P = family_module(name, overrides)
    ptr = "*fp32"
    rows = []
    if name == "householder_unblocked":
        np2 = max(16, triton.next_power_of_2(n))
        sig = {k: ptr for k in ("A", "H", "TAU")} | {k: "i32" for k in ("sab", "sar", "sac", "shb", "shr", "shc", "stb")}
        rows.append(compile_one(mod._qr_tile_kernel, sig, {"n": n, "NP": np2, "JOIN": P["join_reduce"]}, P["warps_%d" % np2], values=_strides(n)))
    elif name == "blocked_wy":
        size = mod._size_class(n)
        nb = P["nb_" + size]
        bm = max(16, triton.next_power_of_2(n))
        shrink = P["shrink"] if bm >= 64 else 0
        k1 = mod._first_panel_fitting(n, nb, bm // 2) if shrink >= 1 else n
        k2 = max(k1, mod._first_panel_fitting(n, nb, bm // 4)) if shrink >= 2 else n
        sig = {k: ptr for k in ("A", "H", "TAU")} | {k: "i32" for k in ("sab", "sar", "sac", "shb", "shr", "shc", "stb")}
        const = dict(N=n, BM=bm, NB=nb, LEAF=min(nb, P["leaf"]), RB=P["rb"], BN=P["bn"], K1=k1, K2=k2, STAGES=P["stages"], JOIN=P["join_reduce"], PREC_G=P["prec_g"],
                     PREC_W=P["prec_w"], PREC_T=P["prec_t"], PREC_U=P["prec_u"])
        rows.append(compile_one(mod._blocked_qr_kernel, sig, const, P["warps_" + size], values=_strides(n),
                                maxnreg=P.get("maxnreg_" + size)))
    elif name == "lookahead_split":
        nb = P["nb"]
        seen = set()
        pp = P["panel_programs"]
        batch = int(os.environ.get("QR_BATCH", "2"))
        while pp > 1 and pp * batch > 132:
            pp //= 2
        coop = P["panel_programs"] > 1
        if pp < 4:
            coop = False
        split_from = n - P["split_rows"] if coop else -1
        bn = P.get("bn_coop", P["bn"]) if coop else P["bn"]
        stages = P.get("stages_coop", P["stages"]) if coop else P["stages"]
        small = P.get("warps_n_le512", 0) if n <= 512 else 0
        stages = P.get("stages_n_le512", stages) if n <= 512 else stages
        pw = triton.next_power_of_2(2 * nb + 2)
        for k in range(0, n, nb):
            split = k < split_from
            rws = n - k + (nb if k else 0)
            r = max(16, triton.next_power_of_2(triton.cdiv(rws, pp))) if split else 16
            bm = max(P["bm_min"], triton.next_power_of_2(n - k))
            sb = max(1, min(nb, P["panel_elems"] // bm))
            key = (bm, sb, k == 0, split, r)
            if key in seen:
                continue
            seen.add(key)
            sig = {k_: ptr for k_ in ("A", "H", "TAU", "TW", "PART", "PARTW")} | {"FLAGS": "*i32"} | {
                k_: "i32" for k_ in ("k_rt", "n_rt", "e0", "sab", "sar", "sac", "shb", "shr", "shc", "stb")}
            const = dict(K_CONST=-1, N_CONST=-1, BM=bm, NB=nb, SB=sb, RB=P["rb"], RBP=P["rb_panel"], BN=bn,
                         FIRST=(k == 0), STAGES=stages, JOIN=P["join_reduce"], SPLIT=split,
                         P=pp if split else 1, R=r, PW=pw, MAXSPIN=1 << 20, PREC_W=P["prec_w"],
                         PREC_T=P["prec_t"], PREC_U=P["prec_u"], PREC_G=P["prec_g"])
            warps = P["warps_split"] if split else (small or mod._warps(bm))
            rr = compile_one(mod._lookahead_kernel, sig, const, warps,
                             values=_strides(n) | {"k_rt": max(k, nb), "n_rt": n, "e0": 7})
            rr.update(BM=bm, SB=sb, first=k == 0, split=split, R=r)
            rows.append(rr)
    return rows


def main() -> None:
    name, n = sys.argv[1], int(sys.argv[2])
    overrides = {}
    for item in sys.argv[3:]:
        key, value = item.split("=", 1)
        try:
            overrides[key] = json.loads(value)
        except json.JSONDecodeError:
            overrides[key] = value
    for row in report(name, n, overrides):
        print(json.dumps({"family": name, "n": n, **overrides, **row}))


if __name__ == "__main__":
    main()
