"""lookahead_split's cooperative-panel steps compile for an H200 (sm_90) on a CPU machine.

The interpreter runs a kernel's Python, not Triton's code generator: a step that ran on the CPU
failed to compile on the GPU (a branch on a Python int that Triton generated both ways;
kernels/BENCHMARKS.md#search-winners-as-defaults).  Compiling the split steps for the GPU target here (Triton's own ptxas, no device) catches
that class of error before a device call does.
"""

from __future__ import annotations

import importlib.util

import pytest

from kernels.families import get_family
from tests.kernels.test_precompile import clean_env, isolated, needs_ptxas  # noqa: F401 (fixture)

ARRAYS = {"A": "*fp32", "H": "*fp32", "TAU": "*fp32", "TW": "*fp32", "PART": "*fp32", "PARTW": "*fp32",
          "FLAGS": "*i32"}


@needs_ptxas
@isolated
@pytest.mark.parametrize("first", [True, False], ids=["first", "later"])
@pytest.mark.parametrize("cholqr", [False, True], ids=["householder", "cholqr2"])
def test_split_panel_steps_compile_for_sm90(clean_env, cholqr, first):  # noqa: F811
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    spec = importlib.util.spec_from_file_location("lookahead_compile", get_family("lookahead_split").path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn = module._lookahead_kernel
    assert isinstance(fn, triton.runtime.jit.JITFunction)  # not the interpreter's
    constants = dict(K_CONST=-1, N_CONST=-1, BM=16, NB=32, SB=1, RB=64, RBP=16, BN=64, FIRST=first, STAGES=3,
                     JOIN=True, SPLIT=True, P=32, R=128, PW=128, MAXSPIN=1 << 20, CHOLQR=cholqr,
                     PREC_W="tf32x3", PREC_T="tf32x3", PREC_U="tf32x3", PREC_G="ieee")
    names = fn.arg_names
    signature = {n: "constexpr" if n in constants else ARRAYS.get(n, "i32") for n in names}
    source = ASTSource(fn, signature, constexprs={(names.index(k),): v for k, v in constants.items()})
    compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32))
    assert compiled.asm["cubin"]
