"""The CUDA C++ families (cuda_onchip, cuda_blocked) on a machine without a GPU.

Their kernels cannot run here, so these tests check what can go wrong outside the kernel:
- the device code compiles for sm_90 (with nvcc, where the machine has one);
- every assignment of a family's space, at every n of its range, asks the host code for a
  kernel that its dispatch table instantiates (a missing case is a runtime error on the GPU);
- cuda_blocked's host side (the blocked loop, the three GEMMs on views of H, the workspaces)
  factors correctly on CPU tensors when its panel kernel is replaced by a reference panel
  that honours the kernel's contract (H's panel, tau, explicit Vᵀ, upper-triangular T).
On a GPU (marked ``gpu``): the real panel kernel against that reference, and the qrv2-tests
suite through the harness (tests/kernels/test_families.py).
"""

from __future__ import annotations

import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kernels.candidate import load_candidate, materialize
from kernels.families import FAMILIES, get_family
from kernels.inputs import generate_input
from kernels.verify import verify_qr

CUDA_FAMILIES = [name for name, fam in FAMILIES.items() if fam.needs_cuda]


@pytest.fixture(autouse=True)
def interpret(request, monkeypatch):
    """Every load of a family file here is in Triton's interpreter (except on the GPU): it runs
    cuda_blocked's Triton update kernel on CPU tensors, and one file loaded without it first
    would break the interpreter for the rest of the process (a @triton.jit file loaded in both
    modes mixes them up; kernels/BENCHMARKS.md, "Notes on the code")."""
    if "gpu" not in request.keywords:
        monkeypatch.setenv("TRITON_INTERPRET", "1")


def _module(name: str, tmp_path: Path, params: dict | None = None):
    fam = get_family(name)
    source = fam.render({**fam.default_params().as_params(), **(params or {})})
    kernel = load_candidate(materialize(source, tmp_path))
    return sys.modules[kernel.__module__]


def _dispatch(module) -> set[tuple[int, ...]]:
    """The template arguments the host code instantiates (its switch over launch<...>)."""
    found = {tuple(int(x) for x in args.split(","))
             for args in re.findall(r"launch<([\d, ]+)>\(", module._HOST_SOURCE)}
    assert found, "no launch<...> instantiations found in the host code"
    return found


def test_both_cuda_families_are_registered_as_cuda():
    assert set(CUDA_FAMILIES) == {"cuda_onchip", "cuda_blocked"}
    for name in CUDA_FAMILIES:
        source = get_family(name).source()
        assert "load_inline" in source and "custom_kernel" in source


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc on this machine: the device code is compiled "
                    "on the GPU machine only")
@pytest.mark.parametrize("name", CUDA_FAMILIES)
def test_device_code_compiles_for_sm90(name, tmp_path):
    module = _module(name, tmp_path)
    kernel = {"cuda_onchip": "qr_onchip_kernel", "cuda_blocked": "panel_kernel"}[name]
    kernels = [f"{kernel}<{', '.join(map(str, args))}>" for args in sorted(_dispatch(module))]
    report = _ptxas_report(module, kernels, tmp_path / f"{name}.cu")
    assert len(report) == len(kernels)


def _ptxas_report(module, kernels: list[str], source: Path) -> dict[tuple[int, ...], tuple[int, int]]:
    """Compile the named instantiations of the module's device code for sm_90 (no GPU needed) and
    return, per kernel's template arguments, (registers, bytes of spill loads) as ptxas reports them."""
    # Taking each kernel's address instantiates it, whatever its parameters are.
    addresses = ", ".join(f"(const void*)&{k}" for k in kernels)
    source.write_text("#include <cuda_runtime.h>\n#include <cstddef>\n" + module._DEVICE_SOURCE
                      + f"\nconst void* instantiated[] = {{{addresses}}};")
    result = subprocess.run(["nvcc", "-c", "-std=c++17", "-O3", "-gencode=arch=compute_90,code=sm_90",
                             "-Xptxas", "-v", str(source), "-o", str(source.with_suffix(".o"))],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    report: dict[tuple[int, ...], tuple[int, int]] = {}
    for block in result.stderr.split("Compiling entry function")[1:]:
        name = re.match(r" '(\w+)'", block)
        spills = re.search(r"(\d+) bytes spill loads", block)
        registers = re.search(r"Used (\d+) registers", block)
        assert name and spills and registers, block[:500]
        args = tuple(int(x) for x in re.findall(r"Li(\d+)E", name.group(1)))
        report[args] = (int(registers.group(1)), int(spills.group(1)))
    return report


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc on this machine: the device code is compiled "
                    "on the GPU machine only")
def test_blocked_default_panels_at_the_bench_shapes_do_not_spill(tmp_path):
    """The panel kernels the defaults launch at the qrv2-bench shapes on an H200 (132 SMs) keep
    their tile in registers: 200 bytes of spill loads a thread cost 60x1024's panels 28% (session
    15), and a change of defaults or of the kernel that brings spills back should fail here."""
    module = _module("cuda_blocked", tmp_path)
    launched = set()
    for batch, n in ((40, 176), (40, 352), (640, 512), (60, 1024)):
        nb, _ = module._widths(n)
        for k in range(0, n, nb):  # blocks are whole panels, so every panel starts at a multiple of nb
            rpl = module._rows_per_lane(n - k)
            launched.add((rpl, *module._shape(nb, rpl, batch, 132)))
    assert launched <= _dispatch(module)
    report = _ptxas_report(module, [f"panel_kernel<{', '.join(map(str, args))}>" for args in sorted(launched)],
                           tmp_path / "defaults.cu")
    assert set(report) == launched
    for args, (registers, spill_loads) in report.items():
        assert spill_loads <= 16, f"panel_kernel<{args}> spills {spill_loads} bytes of loads ({registers} registers)"


def test_onchip_every_assignment_has_a_kernel(tmp_path):
    fam = get_family("cuda_onchip")
    rng = random.Random(3)
    for trial in range(12):
        params = fam.space.sample(rng).as_params()
        module = _module("cuda_onchip", tmp_path / str(trial), params)
        table = _dispatch(module)
        for n in range(1, params["max_n"] + 1):
            rpl = (n + 31) // 32
            assert (rpl, module._WARPS[rpl]) in table, (params, n)


def test_blocked_every_assignment_and_panel_has_a_kernel(tmp_path, monkeypatch):
    """Random assignments at sizes that end in partial panels and partial blocks: every panel
    the recursion asks for has a kernel, and the factorisation is right (reference panels)."""
    fam = get_family("cuda_blocked")
    rng = random.Random(4)
    for trial in range(6):
        params = fam.space.sample(rng).as_params()
        module = _module("cuda_blocked", tmp_path / str(trial), params)
        reference = ReferencePanel(_dispatch(module))
        monkeypatch.setattr(module, "_extension", lambda device: reference)
        for n in (33, 97, 200, 352, 520, 1000):
            if n > params["max_n"]:
                continue
            a = generate_input(1, n, 1.0, trial, "dense")
            h, tau = torch.full_like(a, float("nan")), torch.empty((1, n))
            module._factor(h, tau, a)  # from the input: every element of h must be written
            result = verify_qr(a, (h, tau), None)
            assert result.ok, f"{params} n={n}: {result.message}"
        assert reference.calls > 0


class ReferencePanel:
    """What the CUDA panel kernel promises, computed with torch on CPU: the panel of H
    factored in place (LAPACK conventions), tau, Vᵀ with zeros above the diagonal and ones
    on it, and T (upper triangular, zero elsewhere) with I - V T Vᵀ = H_k ... H_{k+w-1}.
    It also checks every call against the kernel's own argument rules."""

    def __init__(self, table: set[tuple[int, ...]]) -> None:
        self.table = table
        self.calls = 0

    def panel(self, S, H, tau, vt, t, k, w, rpl, warps, cpw, minb) -> None:
        self.calls += 1
        n = H.shape[-1]
        assert (rpl, warps, cpw, minb) in self.table
        assert 0 <= k and 1 <= w and k + w <= n and n - k <= 32 * rpl and w <= warps * cpw
        # windows: rows of vt n apart, rows of t contiguous, room for what the kernel writes
        assert vt.stride(2) == 1 and vt.stride(1) == n and vt.shape[1] >= w and vt.shape[2] >= n - k
        assert t.stride(2) == 1 and t.shape[1] >= w and t.shape[2] >= w
        m = n - k
        assert S.shape == H.shape and S.is_contiguous()
        hp, tp = torch.geqrf(S[:, k:, k:k + w])
        H[:, k:, k:k + w] = hp
        tau[:, k:k + w] = tp
        v = torch.tril(hp, diagonal=-1)
        v[:, torch.arange(w), torch.arange(w)] = 1.0
        vt[:, :w, :m] = v.transpose(1, 2)
        g = v.transpose(1, 2) @ v
        tt = torch.zeros((H.shape[0], w, w), dtype=H.dtype)
        for c in range(w):
            tt[:, c, c] = tp[:, c]
            if c:
                tt[:, :c, c] = -tp[:, c, None] * (tt[:, :c, :c] @ g[:, :c, c, None]).squeeze(-1)
        t[:, :w, :w] = tt


@pytest.mark.parametrize("params", [{"nb_le384": 16, "block_le384": 16}, {"nb_le384": 32, "block_le384": 64},
                                    {"nb_le384": 64, "block_le384": 128}, {"nb_le384": 16, "block_le384": 256, "update_le1024": "fp32"},
                                    {"nb_le384": 32, "block_le384": 64, "update_lt512": "bf16x3"},
                                    {"nb_le384": 16, "block_le384": 128, "update_lt512": "tf32x3", "apply_bn": 32,
                                     "apply_bm": 32, "apply_stages": 1}])
def test_blocked_host_side_factors_correctly_with_a_reference_panel(tmp_path, monkeypatch, params):
    module = _module("cuda_blocked", tmp_path, params)
    reference = ReferencePanel(_dispatch(module))
    monkeypatch.setattr(module, "_extension", lambda device: reference)
    for n, profile, seed in ((40, "dense", 1), (70, "rankdef", 2), (130, "clustered", 3), (97, "mixed", 4)):
        a = generate_input(3, n, 2.0, seed, profile)
        kept = a.clone()
        h = a.clone()
        tau = torch.empty((3, n), dtype=a.dtype)
        module._factor(h, tau)  # in place
        result = verify_qr(a, (h, tau), None)
        assert result.ok, f"n={n} {profile} {params}: {result.message}"
        # from the input into a fresh H: the same factorisation, every element written, input untouched
        h2, tau2 = torch.full_like(a, float("nan")), torch.full((3, n), float("nan"))
        module._factor(h2, tau2, a)
        assert torch.equal(a, kept)
        torch.testing.assert_close(h2, h, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(tau2, tau, rtol=1e-5, atol=1e-5)
    assert reference.calls > 0


def test_blocked_size_classes_pick_their_own_widths(tmp_path, monkeypatch):
    """n ≤ 384 and 384 < n ≤ 512 take their own panel and block widths (a 640x512 winner's
    narrow panels made 40x352 1.8x slower when one knob held both), and both factor correctly."""
    params = {"nb_le384": 64, "block_le384": 128, "nb_le512": 16, "block_le512": 32}
    module = _module("cuda_blocked", tmp_path, params)
    assert module._widths(352) == (64, 128) and module._widths(385) == (16, 32) and module._widths(512) == (16, 32)
    reference = ReferencePanel(_dispatch(module))
    monkeypatch.setattr(module, "_extension", lambda device: reference)
    a = generate_input(2, 400, 1.0, 6, "clustered")
    h, tau = a.clone(), torch.empty((2, 400))
    module._factor(h, tau)
    assert verify_qr(a, (h, tau), None).ok


@pytest.mark.slow
@pytest.mark.parametrize("params", [{"max_n": 2048, "nb_le2048": 8, "block_gt1024": 32},
                                    {"max_n": 4096, "nb_le2048": 16, "block_gt1024": 64, "update_gt1024": "tf32x3"}])
def test_blocked_tall_panels_with_a_reference_panel(tmp_path, monkeypatch, params):
    """Above n = 1024 panels are 16 or 8 columns of up to 4096 rows (64 and 128 rows per lane)."""
    module = _module("cuda_blocked", tmp_path, params)
    reference = ReferencePanel(_dispatch(module))
    monkeypatch.setattr(module, "_extension", lambda device: reference)
    n = 2100 if params["max_n"] == 4096 else 1100
    a = generate_input(1, n, 1.0, 9, "rankdef")
    h, tau = a.clone(), torch.empty((1, n))
    module._factor(h, tau)
    assert verify_qr(a, (h, tau), None).ok


@pytest.mark.parametrize("mode, bound", [("tf32x3", 1e-5), ("bf16x3", 2e-3)])
def test_blocked_update_kernel_applies_the_block_reflector(tmp_path, mode, bound):
    """The Triton update on windows like the factorisation's (C a view of H with row stride n,
    Vᵀ rows n apart, a width that is not a power of two, partial row and column tiles) against
    (I - V T Vᵀ)ᵀ C in float64.  On the CPU a split product is computed exactly (the interpreter
    multiplies the halves in float32), so the error is the split's own: about 2^-16 relative per
    product for bf16 halves, none for TF32 halves (which only a GPU rounds)."""
    module = _module("cuda_blocked", tmp_path, {"update_lt512": mode, "apply_bn": 32, "apply_bm": 32})
    gen = torch.Generator().manual_seed(5)
    batch, n, k, width = 3, 150, 20, 24
    m = n - k
    h = torch.randn((batch, n, n), generator=gen)
    h[1] *= 1e6  # scale does not matter to a split product
    vt_buf = torch.randn((batch, 32, n), generator=gen)
    vt = vt_buf[:, :width, :m]
    t_buf = torch.randn((batch, 32, 32), generator=gen)
    t = t_buf[:, :width, :width]
    c = h[:, k:, k + width:]
    v64, t64, c64 = vt.double(), t.double(), c.double()
    want = c64 - v64.transpose(1, 2) @ (t64.transpose(1, 2) @ (v64 @ c64))
    before = h.clone()
    module._apply(c, vt, t)
    got = h[:, k:, k + width:].double()
    scale = (v64.abs().transpose(1, 2) @ (t64.abs().transpose(1, 2) @ (v64.abs() @ c64.abs()))).amax(dim=(1, 2))
    err = ((got - want).abs().amax(dim=(1, 2)) / scale).max().item()
    assert err < bound, f"{mode}: relative error {err:.3g}"
    outside = torch.ones_like(h, dtype=torch.bool)
    outside[:, k:, k + width:] = False
    assert torch.equal(h[outside], before[outside]), "the update wrote outside its window"


def test_blocked_falls_back_to_geqrf_without_cuda(tmp_path):
    module = _module("cuda_blocked", tmp_path)
    a = generate_input(2, 12, 1.0, 5, "dense")
    h, tau = module.custom_kernel(a.clone())
    assert verify_qr(a, (h, tau), None).ok


@pytest.mark.gpu
@pytest.mark.parametrize("params", [{}, {"warps_nb32": 16, "panel_min_blocks": 1},
                                    {"warps_nb32": 16, "panel_min_blocks": 2}, {"warps_nb32": 8, "panel_min_blocks": 1},
                                    {"panel_min_blocks_le256": 4}, {"warps_nb32_few": 8}])
def test_panel_kernel_matches_the_reference_panel_on_gpu(tmp_path, params):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    module = _module("cuda_blocked", tmp_path, params)
    ext = module._extension(torch.device("cuda"))
    table = _dispatch(module)
    for n, nb in ((512, 64), (512, 32), (352, 32), (1024, 32), (200, 16), (100, 32)):
        a = generate_input(4, n, 1.0, 7, "dense", device="cuda")
        for k in (0, nb, n - nb):
            rpl = module._rows_per_lane(n - k)
            # sms = 1 (more matrices than SMs) takes warps_nb32 and panel_min_blocks, 4 the few-matrix shape
            warps, cpw, minb = module._shape(nb, rpl, 4, 1 if "warps_nb32_few" not in params else 4)
            # at k = 0 the panel is read from the input into an H that holds nothing yet
            h = a.clone() if k else torch.full_like(a, float("nan"))
            got = [a, h, torch.zeros((4, n), device="cuda"), torch.zeros((4, nb, n), device="cuda"),
                   torch.zeros((4, nb, nb), device="cuda")]
            want = [x.cpu() for x in got]
            ext.panel(*got, k, nb, rpl, warps, cpw, minb)
            ReferencePanel(table).panel(*want, k, nb, rpl, warps, cpw, minb)
            for label, g, w in zip(("H", "tau", "VT", "T"), got[1:], want[1:]):
                torch.testing.assert_close(g.cpu(), w, rtol=2e-3, atol=2e-4, equal_nan=True,
                                           msg=f"{label} at n={n} k={k}")

