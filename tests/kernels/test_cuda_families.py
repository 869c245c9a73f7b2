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

import itertools
import random
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import torch
from torch.utils import cpp_extension

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


# Headers of CUDA libraries that ATen's CUDA headers include and the CPU wheel of torch lacks.  The
# extensions use none of their handles, so a declaration of each is enough to compile them; headers
# the machine has come first (-idirafter).
_LIBRARY_STUBS = {
    "cusparse.h": "typedef struct cusparseContext* cusparseHandle_t;",
    "cublas_v2.h": "typedef struct cublasContext* cublasHandle_t;\ntypedef int cublasStatus_t;",
    "cublasLt.h": "typedef struct cublasLtContext* cublasLtHandle_t;",
    "cusolverDn.h": "typedef struct cusolverDnContext* cusolverDnHandle_t;",
    "cusolver_common.h": "typedef int cusolverStatus_t;",
    "c10/cuda/impl/cuda_cmake_macros.h": "",
}


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc on this machine: the extension is compiled "
                    "on the GPU machine only")
@pytest.mark.parametrize("name", CUDA_FAMILIES)
def test_extension_source_compiles_with_its_host_code(name, tmp_path):
    """The whole extension source, host code included (the launchers, their checks, the dispatch),
    compiles against ATen's headers: an error there would otherwise show first on the GPU machine,
    in load_inline.  (PTX only: the device code's machine code is the tests above.)"""
    module = _module(name, tmp_path)
    stubs = tmp_path / "stubs"
    for relative, text in _LIBRARY_STUBS.items():
        path = stubs / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("#pragma once\n" + text + "\n")
    source = tmp_path / f"{name}_extension.cu"
    source.write_text(module._CUDA_SOURCE)
    includes = [f"-I{path}" for path in cpp_extension.include_paths()]
    includes += [f"-I{sysconfig.get_paths()['include']}", f"-Xcompiler=-idirafter,{stubs}"]
    result = subprocess.run(["nvcc", "-c", "-std=c++17", "-O0", "-gencode=arch=compute_90,code=compute_90", *includes,
                             str(source), "-o", str(source.with_suffix(".o"))], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-4000:]


def _ptxas_report(module, kernels: list[str], source: Path) -> dict[tuple[int, ...], tuple[int, int]]:
    """Compile the named instantiations of the module's device code for sm_90 (no GPU needed) and
    return, per kernel's template arguments, (registers, bytes of spill loads) as ptxas reports them."""
    bases = {k.split("<")[0] for k in kernels}
    return {tuple(int(x) for x in re.findall(r"Li(\d+)E", name)): usage
            for name, usage in _ptxas_entries(module, kernels, source).items()
            if any(f"{len(base)}{base}" in name for base in bases)}


def _ptxas_entries(module, kernels: list[str], source: Path) -> dict[str, tuple[int, int]]:
    """(registers, bytes of spill loads) per compiled entry function (mangled name) of the module's
    device code, with the named template instantiations taken."""
    # Taking each kernel's address instantiates it, whatever its parameters are.
    addresses = ", ".join(f"(const void*)&{k}" for k in kernels)
    source.write_text("#include <cuda_runtime.h>\n#include <cstddef>\n" + module._DEVICE_SOURCE
                      + f"\nconst void* instantiated[] = {{{addresses}}};")
    result = subprocess.run(["nvcc", "-c", "-std=c++17", "-O3", "-gencode=arch=compute_90,code=sm_90",
                             "-Xptxas", "-v", str(source), "-o", str(source.with_suffix(".o"))],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    entries: dict[str, tuple[int, int]] = {}
    for block in result.stderr.split("Compiling entry function")[1:]:
        name = re.match(r" '(\w+)'", block)
        spills = re.search(r"(\d+) bytes spill loads", block)
        registers = re.search(r"Used (\d+) registers", block)
        assert name and spills and registers, block[:500]
        entries[name.group(1)] = (int(registers.group(1)), int(spills.group(1)))
    return entries


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc on this machine: the device code is compiled "
                    "on the GPU machine only")
def test_blocked_default_panels_at_the_bench_shapes_do_not_spill(tmp_path):
    """The panel kernels the defaults launch at the qrv2-bench shapes on an H200 (132 SMs) keep
    their tile in registers: 200 bytes of spill loads a thread cost 60x1024's panels 28%
    (kernels/BENCHMARKS.md#panels-two-to-an-sm), and a change of defaults or of the kernel that
    brings spills back should fail here."""
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


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc on this machine: the device code is compiled "
                    "on the GPU machine only")
def test_blocked_cholqr_kernels_compile_for_sm90_without_spills(tmp_path):
    """The Cholesky QR leaf's kernels (and the merge's split cross product) keep their tiles in
    shared memory and registers: a spill would put a tall panel's serial chain through local memory."""
    module = _module("cuda_blocked", tmp_path)
    # the solves on 1024 threads, the sweeps on 1024, 256, 128, and the first pass blocked in 4 or 8; on
    # 1024 threads with the one-pass reconstruction folded in as well
    forms = {"cholqr_first_kernel": ("false, 1, 0, false", "true, 1, 0, false", "true, 4, 0, false", "true, 8, 0, false",
                                     "true, 1, 4, false", "true, 1, 8, false", "true, 1, 0, true", "true, 1, 4, true",
                                     "true, 1, 8, true"),
             "cholqr_second_kernel": ("false, 1", "true, 1", "true, 4", "true, 8"), "apply_rows_kernel": ("false", "true")}
    passes = [f"{k}<{form}>" for k, kernel_forms in forms.items() for form in kernel_forms]
    entries = _ptxas_entries(module, passes, tmp_path / "cholqr.cu")
    names = ("cholqr_gram_kernel", "cholqr_first_kernel", "cholqr_second_kernel", "cholqr_rows_kernel", "cross_kernel",
             "apply_rows_kernel", "cholqr_leaf_kernel", "narrow_update_kernel",
             "merge_kernel", "cholqr_first_warp_kernel")
    for name in names:
        found = [usage for entry, usage in entries.items() if f"{len(name)}{name}" in entry]
        assert len(found) == len(forms.get(name, (None,))), (name, sorted(entries))  # one instance per form
        for registers, spill_loads in found:
            # (8 bytes around a float64 division's slow path are no tile: the bound of the panel test)
            assert spill_loads <= 16, f"{name} spills {spill_loads} bytes ({registers} registers)"


def _group_dispatch(module, launcher: str = "launch_groups") -> set[tuple[int, ...]]:
    """The group (or panel) kernels cuda_onchip's host code instantiates (its switch over launcher<...>)."""
    return {tuple(int(x) for x in args.split(","))
            for args in re.findall(launcher + r"<([\d, ]+)>\(", module._HOST_SOURCE)}


def _switch_keys(module) -> dict[int, tuple[int, ...]]:
    """cuda_onchip's switch: the key of each case and the template arguments it launches."""
    return {int(key): tuple(int(x) for x in args.split(","))
            for key, args in re.findall(r"case (\d+): launch(?:_groups|_panels|_tiled)?<([\d, ]+)>\(",
                                        module._HOST_SOURCE)}


def test_onchip_every_assignment_has_a_kernel(tmp_path):
    """Every assignment of the space, at every n the file takes, keys a case of the switch, and that
    case's kernel holds n (its rows: 32 per register slot, or the group, panel or tiled kernel's class);
    above 192 only the tiled kernel's class has a kernel, and without one the file calls torch.geqrf."""
    fam = get_family("cuda_onchip")
    rng = random.Random(3)
    for trial in range(12):
        params = fam.space.sample(rng).as_params()
        module = _module("cuda_onchip", tmp_path / str(trial), params)
        switch = _switch_keys(module)
        for n in range(1, params["max_n"] + 1):
            key = module._key(n)
            tiled = params["tiled_%d" % next(c for c in module._TILED_CLASSES if n <= c)]
            if key < 0:
                assert n > 192 and tiled == "off", (params, n)
                continue
            assert key in switch, (params, n, key)
            args = switch[key]
            holds = 32 * args[0] if len(args) == 2 else args[0]
            assert n <= holds, (params, n, args)
            if tiled != "off":  # "NBxW": the tiled kernel of n's class, whatever the groups say
                nb, warps = (int(x) for x in tiled.split("x"))
                assert key == module._tiled_key(*args) and args[1:] == (nb, warps), (params, n, args)
                continue
            group_class = next(c for c in module._GROUP_CLASSES if n <= c)
            layout = params["groups_%d" % group_class]
            assert len(args) == (2 if layout == "off" else 4 if "k" in layout else 3), (params, n, args)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc on this machine: the device code is compiled "
                    "on the GPU machine only")
def test_onchip_group_kernels_compile_for_sm90_and_the_defaults_do_not_spill(tmp_path):
    """Every group and panel kernel the switch launches compiles for sm_90; the ones the defaults
    launch keep their columns in registers (a spill puts every step's dot products through local
    memory)."""
    module = _module("cuda_onchip", tmp_path)
    groups, panels = sorted(_group_dispatch(module)), sorted(_group_dispatch(module, "launch_panels"))
    assert set(groups) == set(module._GROUP_KERNELS) and set(panels) == set(module._PANEL_KERNELS)
    report = _ptxas_report(module, [f"qr_groups_kernel<{', '.join(map(str, k))}>" for k in groups]
                           + [f"qr_panels_kernel<{', '.join(map(str, k))}>" for k in panels], tmp_path / "groups.cu")
    assert set(report) == set(groups) | set(panels)
    switch = _switch_keys(module)
    for n in range(1, module.PARAMS["max_n"] + 1):
        args = switch[module._key(n)]
        if len(args) >= 3:
            registers, spill_loads = report[args]
            assert spill_loads == 0, f"kernel <{args}> spills {spill_loads} bytes ({registers} registers)"


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc on this machine: the device code is compiled "
                    "on the GPU machine only")
def test_onchip_tiled_kernels_compile_for_sm90_and_the_defaults_do_not_spill(tmp_path):
    """Every tiled kernel the switch launches compiles for sm_90; the one the defaults launch for each
    class keeps its panel in registers (warp 0's panel is NB x NP / 32 floats a lane)."""
    module = _module("cuda_onchip", tmp_path)
    report = _ptxas_report(module, [f"qr_tiled_kernel<{', '.join(map(str, k))}>" for k in module._TILED_KERNELS],
                           tmp_path / "tiled.cu")
    assert set(report) == set(module._TILED_KERNELS)
    switch = _switch_keys(module)
    for np_ in module._TILED_CLASSES:
        key = module._key(np_)
        if module.PARAMS["tiled_%d" % np_] != "off":
            registers, spill_loads = report[switch[key]]
            assert spill_loads == 0, f"tiled kernel <{switch[key]}> spills {spill_loads} bytes ({registers} registers)"


@pytest.mark.parametrize("name, listed, key", [("cuda_blocked", "_PANEL_KERNELS", r"case (\d+)LL"),
                                               ("cuda_onchip", "_KERNELS", r"case (\d+):")])
def test_the_host_dispatch_is_generated_from_the_files_kernel_list(tmp_path, name, listed, key):
    """One list in the file names the kernels the host code instantiates: its switch has a case
    for each entry, once, and no other."""
    module = _module(name, tmp_path)
    kernels = getattr(module, listed)
    # cuda_onchip's switch also launches its group, panel and tiled kernels, from three more lists
    groups, panels, tiled = ((module._GROUP_KERNELS, module._PANEL_KERNELS, module._TILED_KERNELS)
                             if name == "cuda_onchip" else ((), (), ()))
    assert all(len(set(x)) == len(x) for x in (kernels, groups, panels, tiled))
    assert _dispatch(module) == set(kernels)
    assert _group_dispatch(module) == set(groups) and _group_dispatch(module, "launch_panels") == set(panels)
    assert _group_dispatch(module, "launch_tiled") == set(tiled)
    cases = re.findall(key, module._HOST_SOURCE)
    assert len(set(cases)) == len(cases) == len(kernels) + len(groups) + len(panels) + len(tiled)


def test_blocked_every_panel_shape_has_a_kernel(tmp_path, monkeypatch):
    """Whatever the panel-kernel knobs say, every shape _shape() gives a panel of each width, at
    every height that width is used for (a block's registers hold the panel: 64 columns up to 512
    rows, 32 up to 1024, 16 up to 2048, 8 up to 4096), is one of _PANEL_KERNELS."""
    module = _module("cuda_blocked", tmp_path)
    dims = get_family("cuda_blocked").space.dimensions()
    knobs = ("warps_nb32", "warps_nb32_few", "panel_min_blocks", "panel_min_blocks_le256")
    listed = set(module._PANEL_KERNELS)
    for values in itertools.product(*(dims[k].values for k in knobs)):
        for knob, value in zip(knobs, values):
            monkeypatch.setitem(module.PARAMS, knob, value)
        for nb, rows in ((64, 512), (32, 1024), (16, 2048), (8, 4096)):
            for rpl in {module._rows_per_lane(m) for m in range(1, rows + 1)}:
                for batch in (1, 132, 640):
                    assert (rpl, *module._shape(nb, rpl, batch, 132)) in listed, (dict(zip(knobs, values)), nb, rpl)


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
        self.cholqr_calls = 0
        self.leaf_calls = 0
        self.narrow_calls = 0
        self.merge_calls = 0
        self.live_calls = 0
        self.tail_calls = 0
        self.skipped = 0
        self.clear_tail_calls = 0
        self.cross_calls = 0
        self.apply_rows_calls = 0
        self.pdl = {"cholqr_panel": set(), "cross": set(), "apply_rows": set()}  # the pdl flags each was given

    def panel(self, S, H, tau, vt, t, k, w, rpl, warps, cpw, minb, kept=None, async_loads=False) -> None:
        """With kept (per matrix, the columns its factorisation keeps; empty: all), a matrix whose kept
        columns end at or before k gets identity reflectors (V, T, tau zero) and its H is not touched,
        or, read from the input (S is not H), is zero in the panel's rows."""
        self.calls += 1
        n = H.shape[-1]
        assert (rpl, warps, cpw, minb) in self.table
        assert 0 <= k and 1 <= w and k + w <= n and n - k <= 32 * rpl and w <= warps * cpw
        skip = torch.zeros(H.shape[0], dtype=torch.bool) if kept is None or not kept.numel() else kept.long() <= k
        before = H[skip, k:, k:k + w].clone()
        self._factor_panel(S, H, tau, vt, t, k, w)
        self.skipped += int(skip.sum())
        H[skip, k:, k:k + w] = before if S is H else 0.0
        vt[skip, :w, :n - k] = 0.0
        t[skip, :w, :w] = 0.0
        tau[skip, k:k + w] = 0.0

    def clear_tail(self, H, tau, cut, kept) -> None:
        """tau[b, min(kept[b], cut):] = 0 (kept empty: from cut) and H[:, :, cut:] = 0."""
        self.clear_tail_calls += 1
        assert 0 <= cut <= H.shape[-1]
        H[:, :, cut:] = 0.0
        for b in range(H.shape[0]):
            tau[b, cut if not kept.numel() else min(cut, int(kept[b])):] = 0.0

    def cholqr_panel(self, S, H, tau, vt, t, acc, small, flags, k, w, sweep=0, one_pass=0.0, threads=1024,
                     block=0, fold=False, pdl=False) -> None:
        """The Cholesky QR leaf promises what panel() does (its inverses by triangular solves or in
        the factors' sweeps alike), from workspaces sized as its host code checks, and leaves its
        Gram accumulator zero for the next leaf."""
        self.cholqr_calls += 1
        batch, n = H.shape[0], H.shape[-1]
        assert 0 <= k and 1 <= w <= 32 and k + w <= n
        assert acc.dtype == small.dtype == torch.float64 and flags.dtype == torch.int32
        assert acc.numel() >= batch * 1024 and small.numel() >= batch * 4096 and flags.numel() >= batch
        assert not acc.any(), "the Gram accumulator must be zero when a leaf starts"
        assert sweep in (0, 1, 2, 3) and 0.0 <= one_pass < 1e-3 and threads in (1024, 256, 128), (sweep, one_pass, threads)
        assert sweep != 3 or block in (4, 8), block
        assert isinstance(fold, bool) and isinstance(pdl, bool), (fold, pdl)
        self.pdl["cholqr_panel"].add(pdl)
        self._factor_panel(S, H, tau, vt, t, k, w)

    def cholqr_leaf(self, S, H, tau, vt, t, acc, small, flags, gram, ctrl, k, w) -> None:
        """The fused leaf promises what cholqr_panel does, and leaves its Grams and counters zero."""
        batch = H.shape[0]
        assert gram.dtype == torch.float64 and gram.numel() >= batch * 2048 and not gram.any()
        assert ctrl.dtype == torch.int32 and ctrl.numel() >= 2 + 3 * batch and not ctrl.any()
        self.leaf_calls += 1
        self.cholqr_panel(S, H, tau, vt, t, acc, small, flags, k, w)

    def narrow_update(self, S, C, vt, t, W, ctrl) -> bool:
        """C = S - V·(Tᵀ·(Vᵀ S)) in one launch, from workspaces that are zero and stay zero."""
        self.narrow_calls += 1
        batch = C.shape[0]
        assert S.shape == C.shape and S.stride() == C.stride() and C.stride(2) == 1 and vt.shape[1] <= 64
        assert vt.shape[2] == C.shape[1] and t.shape[1] == t.shape[2] == vt.shape[1]
        assert W.dtype == torch.float32 and W.shape[1] == 64 and W.shape[2] >= C.shape[2] and not W.any()
        assert ctrl.dtype == torch.int32 and ctrl.numel() >= 2 + 3 * batch and not ctrl.any()
        C.copy_(S - vt.transpose(1, 2) @ (t.transpose(1, 2) @ (vt @ S)))
        return True

    def merge(self, v1, v2, t1, t2, t12, X, count) -> None:
        """T12 = -T1·(V1ᵀV2)·T2 (a block merge) in one launch, from workspaces that are zero and stay zero."""
        self.merge_calls += 1
        assert v1.stride() == v2.stride() and t1.stride() == t2.stride() == t12.stride()
        assert v1.shape[1] <= 64 and v2.shape[1] <= 64 and v1.shape[2] == v2.shape[2]
        assert X.dtype == torch.float32 and X.shape[1:] == (64, 64) and not X.any() and not count.any()
        t12.copy_(-(t1 @ (v1 @ v2.transpose(1, 2)) @ t2))

    def live_columns(self, A, live) -> None:
        """live[b] = 1 + matrix b's last column with a nonzero element (0 for a zero matrix)."""
        self.live_calls += 1
        nonzero = (A != 0).any(dim=1)  # per column
        last = torch.where(nonzero, torch.arange(A.shape[-1]) + 1, 0).amax(dim=1)
        live.copy_(last.to(torch.int32))

    def tail_columns(self, A, kept, rel) -> None:
        """kept[b] = 1 + matrix b's last column whose 1-norm exceeds rel·‖a₀‖₁ (0 for none; a NaN norm
        is kept, and a first column that is not finite keeps every nonzero column)."""
        self.tail_calls += 1
        assert 0.0 <= rel < 1.0 and kept.dtype == torch.int32
        norms = A.double().abs().sum(dim=1)  # per matrix, per column
        first = norms[:, :1]
        limit = torch.where(torch.isfinite(first), rel * first, torch.zeros_like(first))
        keep = ~(norms <= limit)
        kept.copy_(torch.where(keep, torch.arange(A.shape[-1]) + 1, 0).amax(dim=1).to(torch.int32))

    def cross(self, A, B, out, quads=False, pdl=False) -> None:
        """out += A Bᵀ (a block merge's V1ᵀV2, or a narrow update's VᵀC with C's columns as B's rows)."""
        self.cross_calls += 1
        self.pdl["cross"].add(pdl)
        assert 1 in (A.stride(1), A.stride(2)) and 1 in (B.stride(1), B.stride(2)) and out.stride(2) == 1
        assert A.shape[1] <= 64 and A.shape[0] == B.shape[0] == out.shape[0] and A.shape[2] == B.shape[2]
        out += A @ B.transpose(1, 2)

    def apply_rows(self, S, C, vt, W, t, pdl=False) -> None:
        """C = S - V W with V given as Vᵀ (at most 64 rows); C = S - V Tᵀ W where t is not empty."""
        self.apply_rows_calls += 1
        self.pdl["apply_rows"].add(pdl and t.numel() > 0)
        assert S.shape == C.shape and S.stride() == C.stride() and vt.shape[1] <= 64 and vt.shape[2] == C.shape[1]
        if t.numel():
            assert t.shape == (vt.shape[0], vt.shape[1], vt.shape[1]) and t.stride(2) == 1
            W = t.transpose(1, 2) @ W
        C.copy_(S - vt.transpose(1, 2) @ W)

    def _factor_panel(self, S, H, tau, vt, t, k, w) -> None:
        n = H.shape[-1]
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


class DeferredSide:
    """Streams for _factor's lookahead on CPU: work put beside the main stream runs only at the
    join (or, with first=True, at once), so each order a second stream allows is run and a
    dependency the schedule forgot changes the result."""

    def __init__(self, first: bool) -> None:
        self.first = first
        self.pending: list = []
        self.beside_calls = 0
        self.inside = False  # while side work runs

    def beside(self, work) -> None:
        self.beside_calls += 1
        if self.first:
            self._run(work)
        else:
            self.pending.append(work)

    def join(self) -> None:
        while self.pending:
            self._run(self.pending.pop(0))

    def _run(self, work) -> None:
        self.inside = True
        try:
            work()
        finally:
            self.inside = False


@pytest.mark.parametrize("params, n", [
    ({"lookahead_le512": True, "nb_le384": 16, "block_le384": 32}, 130),
    ({"lookahead_le512": True, "nb_le384": 32, "block_le384": 64, "update_lt512": "bf16x3",
      "lookahead_programs": 1, "apply_bn": 32}, 200),
    ({"lookahead_le1024": True, "nb_le1024": 16, "block_le1024": 32, "update_le1024": "fp32"}, 530),
    pytest.param({"lookahead_le2048": True, "max_n": 2048, "block_gt1024": 64}, 1100, marks=pytest.mark.slow),
])
def test_blocked_lookahead_factors_correctly_in_either_order(tmp_path, monkeypatch, params, n):
    """With lookahead, block j's update of the rest runs beside block j+1's factorisation: from the
    input into a fresh H, the side work run first or last gives the same bits (neither reads what the
    other writes), and the factorisation is right."""
    module = _module("cuda_blocked", tmp_path, params)
    reference = ReferencePanel(_dispatch(module))
    monkeypatch.setattr(module, "_extension", lambda device: reference)
    batch = 1 if n > 1024 else 2
    a = generate_input(batch, n, 2.0, 11, "mixed")
    kept = a.clone()
    outputs = []
    for first in (False, True):
        streams = DeferredSide(first)
        h, tau = torch.full_like(a, float("nan")), torch.full((batch, n), float("nan"))
        module._factor(h, tau, a, streams)
        assert streams.beside_calls >= 2 and not streams.pending
        outputs.append((h, tau))
    assert torch.equal(a, kept)
    assert torch.equal(outputs[0][0], outputs[1][0]) and torch.equal(outputs[0][1], outputs[1][1])
    result = verify_qr(a, outputs[0], None)
    assert result.ok, f"{params}: {result.message}"


def test_blocked_side_updates_never_take_the_fused_narrow_kernel(tmp_path, monkeypatch):
    """The fused narrow update's blocks wait for each other, so only the main stream, whose kernels run
    one at a time, may launch it: a side update's waiting blocks and a main-stream kernel's could
    otherwise hold the GPU's slots waiting for each other.  Side work takes the split path."""
    module = _module("cuda_blocked", tmp_path, {"lookahead_le2048": True, "max_n": 2048, "block_gt1024": 64,
                                                "narrow_fused": True, "cholqr_fused": True,
                                                "narrow_cols_gt1024": 512})
    reference = ReferencePanel(_dispatch(module))
    monkeypatch.setattr(module, "_extension", lambda device: reference)
    streams = DeferredSide(first=False)
    launched_inside: list[bool] = []
    fused = reference.narrow_update

    def narrow_update(*args) -> bool:
        launched_inside.append(streams.inside)
        return fused(*args)

    reference.narrow_update = narrow_update
    a = generate_input(1, 1100, 2.0, 5, "dense")
    h, tau = torch.full_like(a, float("nan")), torch.full((1, 1100), float("nan"))
    module._factor(h, tau, a, streams)
    assert launched_inside and not any(launched_inside)
    assert reference.apply_rows_calls > 0  # the side's narrow updates, split
    assert verify_qr(a, (h, tau), None).ok


def test_blocked_lookahead_needs_streams_and_its_size_class(tmp_path, monkeypatch):
    """Lookahead runs only with streams (inside a capture) and in the size class that asks for it."""
    module = _module("cuda_blocked", tmp_path, {"lookahead_le1024": True, "lookahead_le2048": False, "nb_le384": 16,
                                                "block_le384": 32})
    reference = ReferencePanel(_dispatch(module))
    monkeypatch.setattr(module, "_extension", lambda device: reference)
    a = generate_input(1, 100, 1.0, 3, "dense")
    streams = DeferredSide(False)
    module._factor(torch.empty_like(a), torch.empty((1, 100)), a, streams)
    assert streams.beside_calls == 0
    assert module._lookahead(600) and not module._lookahead(512) and not module._lookahead(1100)
    module.PARAMS["lookahead_gt2048"] = True
    assert module._lookahead(4096) and not module._lookahead(2048)


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


@pytest.mark.parametrize("params, n", [
    ({"panel_le512": "cholqr2", "cholqr_min_rows": 64, "nb_le512": 32, "block_le512": 128}, 480),
    ({"panel_le1024": "cholqr2", "cholqr_min_rows": 256, "cross_min_rows": 256, "nb_le1024": 16,
      "block_le1024": 64}, 600),
    ({"max_n": 2048, "panel_gt1024": "cholqr2", "block_gt1024": 64, "narrow_cols_gt1024": 0}, 1100),
    ({}, 1100),  # the defaults above 1024: narrow updates split over the rows
    ({"cholqr_fused": True}, 1100),  # leaves in one launch each
    ({"cholqr_fused": True, "narrow_fused": True, "merge_fused": True}, 1100),  # and the narrow updates, merges
    ({"pdl": True}, 1100),  # the leaves' and split updates' launches after their first as programmatic ones
    ({"pdl": True, "narrow_fold_t": False}, 1100),  # cuBLAS's Tᵀ product between: apply_rows launched plainly
])
def test_blocked_cholqr_leaves_with_a_reference_panel(tmp_path, monkeypatch, params, n):
    """Where a size class asks for Cholesky QR leaves, the leaves of enough rows take them (tall ones
    always: the register kernel holds at most 1024 rows of a 32-wide panel), the rest the register
    kernel, and the factorisation is right."""
    module = _module("cuda_blocked", tmp_path, params)
    reference = ReferencePanel(_dispatch(module))
    monkeypatch.setattr(module, "_extension", lambda device: reference)
    a = generate_input(2, n, 1.0, 12, "mixed")
    h, tau = torch.full_like(a, float("nan")), torch.empty((2, n))
    module._factor(h, tau, a)
    assert verify_qr(a, (h, tau), None).ok
    nb, _ = module._widths(n)
    leaves = [k for k in range(0, n, nb)]
    want = sum(module._cholqr_leaf(n, n - k, min(nb, n - k)) for k in leaves)
    assert reference.cholqr_calls == want > 0
    assert reference.leaf_calls == (want if module.PARAMS["cholqr_fused"] else 0)
    if n > 1024 and module.PARAMS["narrow_fused"]:
        assert reference.narrow_calls > 0 and reference.apply_rows_calls == 0
    else:
        assert reference.narrow_calls == 0
    assert reference.calls == len(leaves) - want
    if module.PARAMS["cross_min_rows"] <= n - nb:
        assert reference.merge_calls > 0 if module.PARAMS["merge_fused"] else reference.cross_calls > 0
    if (n > 1024 and module.PARAMS["narrow_gt1024"] == "split" and module.PARAMS["narrow_cols_gt1024"]
            and not module.PARAMS["narrow_fused"]):
        assert reference.apply_rows_calls > 0
    if n > 1024:
        assert module._cholqr_leaf(n, 1025, 32) and not module._cholqr_leaf(n, 1025, 33)
        assert nb == 32
    # pdl reaches the launches that follow one of the family's own kernels (a leaf's after its first Gram,
    # cross_kernel after W's fill, apply_rows_kernel after cross_kernel), and only where asked
    direct = {"cholqr_panel": reference.cholqr_calls - reference.leaf_calls, "cross": reference.cross_calls,
              "apply_rows": reference.apply_rows_calls}  # a fused leaf's own cholqr_panel call is not a launch
    for kind, calls in direct.items():
        if calls:
            want_pdl = module.PARAMS["pdl"] and (kind != "apply_rows" or module.PARAMS["narrow_fold_t"])
            assert reference.pdl[kind] == {want_pdl}, (kind, reference.pdl[kind])


@pytest.mark.parametrize("cols", [0, 32, 64])
def test_blocked_narrow_updates_split_over_the_rows_at_1024_where_asked(tmp_path, monkeypatch, cols):
    """For 512 < n <= 1024, updates of at most narrow_cols_le1024 columns (a block's own: 32, the
    look-ahead's: 64) take the split path (VᵀC over the rows, then C -= V·(TᵀW) by row chunks), the
    rest the size class's update; 0 never splits; the factorisation is right either way."""
    module = _module("cuda_blocked", tmp_path, {"narrow_cols_le1024": cols, "nb_le1024": 32, "block_le1024": 64,
                                                "lookahead_le1024": True, "update_le1024": "fp32"})
    reference = ReferencePanel(_dispatch(module))
    monkeypatch.setattr(module, "_extension", lambda device: reference)
    widths: list[int] = []
    apply = module._apply

    def recording(c, *args, **kwargs):
        widths.append(c.shape[2])
        return apply(c, *args, **kwargs)

    monkeypatch.setattr(module, "_apply", recording)
    a = generate_input(2, 600, 1.0, 4, "mixed")
    h, tau = torch.full_like(a, float("nan")), torch.empty((2, 600))
    module._factor(h, tau, a, DeferredSide(False))
    assert verify_qr(a, (h, tau), None).ok
    narrow = sum(w <= cols for w in widths)
    assert reference.apply_rows_calls == reference.cross_calls == narrow
    # 32: each block's own update (and the last ones); 64: the look-ahead updates of 64 columns too
    assert (narrow > 9) if cols else (narrow == 0)
    assert (64 in widths) and (cols < 64 or widths.count(64) + widths.count(32) <= narrow)


def test_blocked_trailing_update_walks_tiles_on_capped_programs_at_512(tmp_path, monkeypatch):
    """apply_programs_le512 caps the trailing update's Triton grid at that many programs an SM (each
    walking tiles) for n <= 512 without look-ahead; a block's own updates and larger n keep a program
    a tile; the capped update's result is right (the Triton kernel's persistent loop)."""
    module = _module("cuda_blocked", tmp_path, {"apply_programs_le512": 2, "update_lt512": "bf16x3",
                                                "nb_le384": 16, "block_le384": 32, "tail_le512": "off"})
    reference = ReferencePanel(_dispatch(module))
    monkeypatch.setattr(module, "_extension", lambda device: reference)
    seen: list[tuple[int, int]] = []  # (the update's last column + 1, programs)
    apply = module._apply

    def recording(c, v_t, t, src=None, ext=None, programs=0, **kwargs):
        seen.append((c.storage_offset() % c.stride(1) + c.shape[2], programs))
        return apply(c, v_t, t, src, ext, programs, **kwargs)

    monkeypatch.setattr(module, "_apply", recording)
    a = generate_input(2, 100, 1.0, 8, "dense")
    h, tau = torch.full_like(a, float("nan")), torch.empty((2, 100))
    module._factor(h, tau, a)
    assert verify_qr(a, (h, tau), None).ok
    trailing = [p for end, p in seen if end == 100]
    assert len(trailing) == 3 and all(p == 2 for p in trailing)  # 2 an SM, one "SM" off the GPU
    assert all(p == 0 for end, p in seen if end < 100)  # the blocks' own right halves
    seen.clear()
    module.PARAMS["apply_programs_le512"] = 0
    module._factor(torch.empty_like(a), torch.empty((2, 100)), a)
    assert seen and all(p == 0 for _, p in seen)


def test_blocked_workspace_only_where_cholqr_leaves_run(tmp_path):
    module = _module("cuda_blocked", tmp_path, {"panel_gt1024": "householder", "panel_le1024": "householder",
                                                "panel_le512": "householder"})
    assert module._workspace(3, 100, torch.device("cpu")) == ()
    module.PARAMS["panel_le1024"] = "cholqr2"
    assert module._workspace(3, 500, torch.device("cpu")) == ()  # another size class
    acc, small, flags, gram, ctrl = module._workspace(3, 1000, torch.device("cpu"))
    assert acc.shape == (3, 1024) and not acc.any() and small.shape == (3, 4096)
    assert flags.shape == (3,) and flags.dtype == torch.int32
    assert gram.shape == (3, 2048) and not gram.any() and ctrl.shape == (2 + 3 * 3,) and not ctrl.any()


@pytest.mark.parametrize("up", [False, True])
@pytest.mark.parametrize("mode, bound, programs", [("tf32x3", 1e-5, 0), ("bf16x3", 2e-3, 0), ("bf16x3", 2e-3, 4)])
def test_blocked_update_kernel_applies_the_block_reflector(tmp_path, mode, bound, programs, up):
    """The Triton update on windows like the factorisation's (C a view of H with row stride n,
    Vᵀ rows n apart, a width that is not a power of two, partial row and column tiles) against
    (I - V T Vᵀ)ᵀ C in float64.  On the CPU a split product is computed exactly (the interpreter
    multiplies the halves in float32), so the error is the split's own: about 2^-16 relative per
    product for bf16 halves, none for TF32 halves (which only a GPU rounds).  With programs > 0,
    fewer persistent programs than tiles (6 column tiles x 3 matrices) must still cover every tile.
    The second pass top down or bottom up (up)."""
    module = _module("cuda_blocked", tmp_path, {"update_lt512": mode, "apply_bn": 32, "apply_bm": 32,
                                                "apply_up_le512": up})
    gen = torch.Generator().manual_seed(5)
    batch, n, k, width = 3, 220, 20, 24
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
    module._apply(c, vt, t, programs=programs)
    got = h[:, k:, k + width:].double()
    scale = (v64.abs().transpose(1, 2) @ (t64.abs().transpose(1, 2) @ (v64.abs() @ c64.abs()))).amax(dim=(1, 2))
    err = ((got - want).abs().amax(dim=(1, 2)) / scale).max().item()
    assert err < bound, f"{mode}: relative error {err:.3g}"
    outside = torch.ones_like(h, dtype=torch.bool)
    outside[:, k:, k + width:] = False
    assert torch.equal(h[outside], before[outside]), "the update wrote outside its window"


def test_blocked_update_kernel_gives_the_same_bits_in_either_order(tmp_path):
    """The second pass bottom up or top down changes only the order of the row blocks: each block's
    products are the same, so is every bit of the result."""
    gen = torch.Generator().manual_seed(11)
    batch, n, k, width = 2, 220, 20, 24
    h = torch.randn((batch, n, n), generator=gen)
    vt = torch.randn((batch, 32, n), generator=gen)[:, :width, :n - k]
    t = torch.randn((batch, 32, 32), generator=gen)[:, :width, :width]
    results = []
    for up in (False, True):
        module = _module("cuda_blocked", tmp_path / f"{up}", {"update_lt512": "bf16x3", "apply_bn": 32,
                                                              "apply_bm": 64, "apply_up_le512": up})
        out = h.clone()
        module._apply(out[:, k:, k + width:], vt, t)
        results.append(out)
    assert not torch.equal(results[0], h)
    assert torch.equal(results[0], results[1])


@pytest.mark.parametrize("programs", [0, 4])
def test_blocked_update_kernel_skips_the_tiles_past_a_matrixs_live_columns(tmp_path, programs):
    """With live (per matrix, its columns up to the last nonzero one) a tile wholly past it is neither
    read nor written in place (its NaNs survive: the kernel did not touch it), and written as zeros,
    read from nowhere, where the update writes a fresh H (the input's copy where those columns are
    zero; what a left-out column's R may hold otherwise); every other tile is updated as without it."""
    module = _module("cuda_blocked", tmp_path, {"update_lt512": "bf16x3", "apply_bn": 32, "apply_bm": 32})
    gen = torch.Generator().manual_seed(8)
    batch, n, k, width = 3, 150, 20, 24
    m, col0 = n - k, k + width
    live = torch.tensor([150, 97, 44], dtype=torch.int32)  # all live; tiles from 108 dead; all dead
    vt = torch.randn((batch, 32, n), generator=gen)[:, :width, :m]
    t = torch.randn((batch, 32, 32), generator=gen)[:, :width, :width]
    h = torch.randn((batch, n, n), generator=gen)
    full = h.clone()
    module._apply(full[:, k:, col0:], vt, t)
    tiles = torch.arange(n - col0) // 32  # C's column tiles
    dead = [col0 + tiles * 32 >= int(live[b]) for b in range(batch)]
    in_place = h.clone()
    for b in range(batch):
        in_place[b, :, col0:][:, dead[b]] = float("nan")
    module._apply(in_place[:, k:, col0:], vt, t, live=live, col0=col0, programs=programs)
    fresh = torch.full_like(h, float("nan"))
    module._apply(fresh[:, k:, col0:], vt, t, src=h[:, k:, col0:], live=live, col0=col0, programs=programs)
    for b in range(batch):
        alive = ~dead[b]
        assert torch.equal(in_place[b, k:, col0:][:, alive], full[b, k:, col0:][:, alive])
        assert torch.isnan(in_place[b, :, col0:][:, dead[b]]).all(), "a dead tile was written in place"
        assert torch.equal(fresh[b, k:, col0:][:, alive], full[b, k:, col0:][:, alive])
        assert not fresh[b, k:, col0:][:, dead[b]].any(), "a dead tile of a fresh H was not written as zeros"
    assert dead[1].any() and not dead[1].all() and dead[2].all() and not dead[0].any()


@pytest.mark.parametrize("n, block", [(200, 64), (600, 64)])
def test_blocked_skipping_zero_columns_gives_the_same_factorisation(tmp_path, monkeypatch, n, block):
    """A rank-deficient batch (its last quarter of columns zero) and a mixed one, factored with and
    without skipping the zero columns' updates: the same bits, and a right factorisation."""
    size = {200: ("nb_le384", "block_le384"), 600: ("nb_le1024", "block_le1024")}[n]
    params = {size[0]: 32, size[1]: block, "update_lt512": "bf16x3", "update_le1024": "bf16x3"}
    module = _module("cuda_blocked", tmp_path, params)
    reference = ReferencePanel(_dispatch(module))
    monkeypatch.setattr(module, "_extension", lambda device: reference)
    for profile, seed in (("rankdef", 3), ("mixed", 4)):
        a = generate_input(2, n, 1.0, seed, profile)
        outputs = []
        for skip in (False, True):
            module.PARAMS["skip_zero_columns"] = skip
            h, tau = torch.full_like(a, float("nan")), torch.full((2, n), float("nan"))
            module._factor(h, tau, a)
            outputs.append((h, tau))
        assert torch.equal(outputs[0][0], outputs[1][0]) and torch.equal(outputs[0][1], outputs[1][1]), profile
        assert verify_qr(a, outputs[1], None).ok, profile
    assert reference.live_calls == 2


def _tail_input(profile: str, n: int, seed: int) -> torch.Tensor:
    """Three matrices of one profile; "scaled" has trailing columns 1e-3 of the others (not negligible)."""
    if profile != "scaled":
        return generate_input(3, n, 1.0, seed, profile)
    a = generate_input(3, n, 0.0, seed, "dense")
    a[:, :, n // 2:] *= 1e-3
    return a


@pytest.mark.parametrize("mode, profile, want", [
    ("negligible", "clustered", lambda n: n // 2 + 2), ("zero", "clustered", lambda n: n),
    ("negligible", "rankdef", lambda n: 3 * n // 4), ("zero", "rankdef", lambda n: 3 * n // 4),
    ("off", "rankdef", lambda n: n), ("negligible", "scaled", lambda n: n), ("negligible", "mixed", lambda n: n),
    ("negligible", "dense", lambda n: n),
])
@pytest.mark.parametrize("n, lookahead", [(200, False), (200, True)])
def test_blocked_leaves_out_only_the_columns_the_bound_allows(tmp_path, monkeypatch, mode, profile, want, n,
                                                             lookahead):
    """PARAMS tail_le512: the batch is factored over the columns its matrices keep (rounded up to whole
    panels), the rest of H and tau is zero, and the factorisation passes the contract's properties;
    trailing columns that are small but not negligible, or a batch with a dense matrix, keep them all."""
    params = {"tail_le512": mode, "nb_le384": 32, "block_le384": 64, "lookahead_le512": lookahead,
              "tail_scope": "batch"}
    module = _module("cuda_blocked", tmp_path, params)
    reference = ReferencePanel(_dispatch(module))
    monkeypatch.setattr(module, "_extension", lambda device: reference)
    a = _tail_input(profile, n, 7)
    kept = a.clone()
    cols = module._kept_columns(a)
    assert cols == min(n, 32 * -(-want(n) // 32)), (mode, profile, cols)
    assert reference.tail_calls == (mode != "off")
    if lookahead:
        streams = DeferredSide(False)
        h, tau = torch.full_like(a, float("nan")), torch.full((3, n), float("nan"))
        module._factor_tail(h, tau, a, streams, cols)
    else:
        h, tau = module._solve(a)
    assert torch.equal(a, kept)
    assert not h[:, :, cols:].any() and not tau[:, cols:].any()
    assert torch.isfinite(h).all() and torch.isfinite(tau).all(), "a column the factorisation needs was left out"
    assert reference.calls == -(-cols // 32), "one panel for each kept 32 columns"
    result = verify_qr(a, (h, tau), None)
    assert result.ok, f"{mode} {profile}: {result.message}"


def test_blocked_reads_the_batchs_count_once_the_first_block_is_queued(tmp_path, monkeypatch):
    """tail_scope "batch" without a graph: the host waits for the batch's count only after the first
    block's panels are queued (the GPU factors them meanwhile), and the factorisation stops there;
    where the count is inside the first block, the block is whole and the columns past it cleared."""
    module = _module("cuda_blocked", tmp_path, {"tail_le512": "negligible", "tail_scope": "batch",
                                               "nb_le384": 32, "block_le384": 64})
    reference = ReferencePanel(_dispatch(module))
    monkeypatch.setattr(module, "_extension", lambda device: reference)
    order = []
    panel, count = reference.panel, module._BatchCount.cols
    monkeypatch.setattr(reference, "panel", lambda *args: (order.append("panel"), panel(*args))[1])
    monkeypatch.setattr(module._BatchCount, "cols", lambda self: (order.append("count"), count(self))[1])
    a = generate_input(3, 200, 1.0, 2, "clustered")
    h, tau = module._solve(a)
    assert order == ["panel", "panel", "count", "panel", "panel"], order  # 102 columns kept: 128
    assert not h[:, :, 128:].any() and not tau[:, 128:].any() and verify_qr(a, (h, tau), None).ok
    order.clear()
    a[:, :, 40:] = 0.0
    h, tau = module._solve(a)
    assert order == ["panel", "panel", "count"], order
    assert not h[:, :, 64:].any() and not tau[:, 64:].any() and verify_qr(a, (h, tau), None).ok


@pytest.mark.parametrize("profile", ["clustered", "rankdef", "mixed", "dense"])
@pytest.mark.parametrize("scope, lookahead, update", [("matrix", False, "bf16x3"), ("matrix", True, "bf16x3"),
                                                      ("matrix", False, "fp32"), ("both", False, "bf16x3"),
                                                      ("both", True, "bf16x3")])
def test_blocked_leaves_out_each_matrixs_own_tail_on_the_device(tmp_path, monkeypatch, profile, scope, lookahead,
                                                               update):
    """tail_scope "matrix" (no host count) and "both" (inside the batch's cut): each matrix keeps its own
    columns (a mixed batch's clustered and rankdef members drop theirs beside dense ones that keep
    all), its panels past them are identity reflectors, tau is zero past them and R's part of a dropped
    column is no larger than the column, and the factorisation passes the contract's properties,
    whether the updates skip the tiles past them (Triton: those are zero) or apply the identity
    reflectors (cuBLAS)."""
    n = 200
    params = {"tail_le512": "negligible", "tail_scope": scope, "nb_le384": 32, "block_le384": 64,
              "lookahead_le512": lookahead, "update_lt512": update}
    module = _module("cuda_blocked", tmp_path, params)
    reference = ReferencePanel(_dispatch(module))
    monkeypatch.setattr(module, "_extension", lambda device: reference)
    a = generate_input(6, n, 1.0, 5, profile)
    kept = torch.empty(6, dtype=torch.int32)
    reference.tail_columns(a, kept, module._TAIL_REL["negligible"])
    cut = min(n, 32 * -(-int(kept.max()) // 32))
    assert module._kept_columns(a) == (n if scope == "matrix" else cut)
    h, tau = torch.full_like(a, float("nan")), torch.full((6, n), float("nan"))
    if lookahead:
        module._factor_tail(h, tau, a, DeferredSide(False), module._kept_columns(a))
    else:
        h, tau = module._solve(a)
    assert reference.clear_tail_calls == 1
    assert torch.isfinite(h).all() and torch.isfinite(tau).all()
    r = torch.triu(h)
    for b, c in enumerate(kept.tolist()):
        assert not tau[b, c:].any(), b
        assert (r[b, :, c:].norm(dim=0) <= 1.001 * a[b, :, c:].norm(dim=0) + 1e-30).all(), b
        if update == "bf16x3":  # the first block's update writes the tiles past c as zeros
            assert not h[b, :, 64 * -(-max(c, 64) // 64) + 64:].any(), b
    assert not h[:, :, cut:].any() or scope == "matrix"
    want_skipped = sum(sum(1 for k in range(0, n if scope == "matrix" else cut, 32) if k >= c) for c in kept.tolist())
    assert reference.skipped == want_skipped
    if profile in ("clustered", "rankdef") and scope == "matrix":
        assert want_skipped > 0
    result = verify_qr(a, (h, tau), None)
    assert result.ok, f"{profile}: {result.message}"
    # what a matrix keeps is factored as the host-cut path factors it: the same kept columns' R, to
    # within the split products' rounding (2^-16 a product) of the largest column: another set of kept
    # columns or another reflector would differ by a column's norm
    module.PARAMS["tail_scope"] = "batch"
    for b, c in enumerate(kept.tolist()):
        h_b, tau_b = module._solve(a[b:b + 1].clone())
        atol = 2.0 ** -12 * float(a[b].norm(dim=0).max())
        torch.testing.assert_close(torch.triu(h_b[0, :, :c]), torch.triu(h[b, :, :c]), rtol=1e-4, atol=atol)


@pytest.mark.parametrize("scope", ["batch", "both"])
def test_blocked_leaves_out_every_column_of_a_zero_batch(tmp_path, monkeypatch, scope):
    """A batch that keeps nothing: H and tau zero (the first block, queued before the count is read, is
    factored or, per matrix, identity reflectors)."""
    module = _module("cuda_blocked", tmp_path, {"tail_le512": "zero", "tail_scope": scope})
    reference = ReferencePanel(_dispatch(module))
    monkeypatch.setattr(module, "_extension", lambda device: reference)
    assert module._kept_columns(torch.zeros((2, 40, 40))) == 0
    h, tau = module._solve(torch.zeros((2, 40, 40)))
    assert not h.any() and not tau.any()
    assert reference.skipped == (2 * reference.calls if scope == "both" else 0)


@pytest.mark.gpu
def test_tail_columns_matches_the_reference_on_gpu(tmp_path):
    """The scan on the GPU keeps what the host's reference keeps, for every profile and both bounds."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    module = _module("cuda_blocked", tmp_path)
    ext = module._extension(torch.device("cuda"))
    for profile in ("dense", "rankdef", "clustered", "mixed", "nearrank", "band", "rowscale", "upper"):
        a = generate_input(16, 200, 1.0, 9, profile).cuda()
        for rel in module._TAIL_REL.values():
            got = torch.full((16,), -1, dtype=torch.int32, device="cuda")
            ext.tail_columns(a, got, rel)
            want = torch.full((16,), -1, dtype=torch.int32)
            ReferencePanel(set()).tail_columns(a.cpu(), want, rel)
            assert got.cpu().tolist() == want.tolist(), (profile, rel)


@pytest.mark.gpu
@pytest.mark.parametrize("scope", ["matrix", "batch", "both"])
@pytest.mark.parametrize("profile", ["clustered", "rankdef", "mixed", "dense"])
def test_blocked_tail_factors_every_profile_on_gpu(tmp_path, profile, scope):
    """custom_kernel with the tail left out (per matrix, cut at the batch's count, or both) at 512 and
    200 (a replayed graph, where "both" is per matrix only): the contract's properties, tau zero past
    each matrix's kept columns and H past the cut."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    module = _module("cuda_blocked", tmp_path, {"tail_le512": "negligible", "tail_scope": scope})
    ext = module._extension(torch.device("cuda"))
    for batch, n in ((64, 512), (16, 200)):
        a = generate_input(batch, n, 1.0, 13, profile, device="cuda")
        h, tau = module.custom_kernel(a)
        result = verify_qr(a, (h, tau), None)
        assert result.ok, f"{profile} {n}: {result.message}"
        kept = torch.empty(batch, dtype=torch.int32, device="cuda")
        ext.tail_columns(a, kept, module._TAIL_REL["negligible"])
        cut = module._panels(n, int(kept.max()))
        cuts = scope == "batch" or (scope == "both" and n > 384)
        assert not cuts or not h[:, :, cut:].any()
        for b, c in enumerate(kept.tolist()):
            assert not tau[b, c if scope != "batch" else cut:].any(), (profile, n, b)
            dropped = torch.triu(h[b])[:, c:].norm(dim=0)
            assert (dropped <= 1.001 * a[b, :, c:].norm(dim=0) + 1e-30).all(), (profile, n, b)


def test_blocked_falls_back_to_geqrf_without_cuda(tmp_path):
    module = _module("cuda_blocked", tmp_path)
    a = generate_input(2, 12, 1.0, 5, "dense")
    h, tau = module.custom_kernel(a.clone())
    assert verify_qr(a, (h, tau), None).ok


@pytest.mark.gpu
@pytest.mark.parametrize("params", [{}, {"warps_nb32": 16, "panel_min_blocks": 1},
                                    {"warps_nb32": 16, "panel_min_blocks": 2}, {"warps_nb32": 8, "panel_min_blocks": 1},
                                    {"panel_min_blocks_le256": 4}, {"warps_nb32_few": 8},
                                    {"panel_async_loads": False}, {"panel_async_loads": False, "warps_nb32_few": 8}])
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
            # matrix 2 keeps its columns only up to k (identity reflectors here); the others all
            kept = torch.tensor([n, n, k, n], dtype=torch.int32)
            ext.panel(*got, k, nb, rpl, warps, cpw, minb, kept.cuda() if k else module._NO_KEPT,
                      module.PARAMS["panel_async_loads"])
            ReferencePanel(table).panel(*want, k, nb, rpl, warps, cpw, minb, kept if k else None)
            for label, g, w in zip(("H", "tau", "VT", "T"), got[1:], want[1:]):
                torch.testing.assert_close(g.cpu(), w, rtol=2e-3, atol=2e-4, equal_nan=True,
                                           msg=f"{label} at n={n} k={k}")



@pytest.mark.gpu
@pytest.mark.parametrize("fused, sweep, one_pass, threads, block, fold, pdl", [
    (False, 0, 0.0, 1024, 0, False, False), (False, 1, 0.0, 1024, 0, False, False),
    (False, 2, 0.0, 1024, 0, False, True), (True, 0, 0.0, 1024, 0, False, False),
    (False, 1, 1e-7, 1024, 0, False, False), (False, 2, 1e-7, 128, 0, False, False),
    (False, 0, 1e-6, 1024, 0, False, True), (False, 1, 0.0, 256, 0, False, False),
    (False, 1, 1e-7, 128, 0, False, False), (False, 3, 0.0, 1024, 8, False, False),
    (False, 3, 1e-7, 1024, 8, False, False), (False, 3, 1e-7, 1024, 4, False, False),
    (False, 1, 1e-7, 1024, 0, True, False), (False, 3, 1e-7, 1024, 8, True, False),
    (False, 3, 1e-7, 1024, 8, True, True), (False, 3, 1e-7, 1024, 4, True, False)])
def test_cholqr_leaf_matches_the_reference_panel_on_gpu(tmp_path, fused, sweep, one_pass, threads, block, fold, pdl):
    """The Cholesky QR leaf on the GPU: tall and short panels, partial widths, read from the input or
    in place.  Ordinary matrices match the reference panel (with one_pass, in one pass: the dense
    ones' first pass bounds Q's loss well under 1e-7); matrices whose panel is nearly dependent
    (a zero column, two equal columns) are flagged, factored by the fallback and checked by the
    panel's properties (their trailing columns are rounding noise, so no two factorisations agree
    element by element)."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    module = _module("cuda_blocked", tmp_path, {"panel_gt1024": "cholqr2"})
    ext = module._extension(torch.device("cuda"))
    for batch, n, k, w, profile in ((3, 4096, 0, 32, "dense"), (3, 2100, 1000, 32, "dense"),
                                    (4, 1024, 512, 32, "mixed"), (4, 300, 0, 20, "dense"),
                                    (5, 700, 64, 32, "clustered"), (4, 512, 448, 32, "dense")):
        # (a square leaf, m = w, is valid too but ends in a reflector geqrf leaves out: its last tau is
        # 2 where geqrf's is 0, so the comparison below would not hold; the family never asks for one)
        a = generate_input(batch, n, 1.0, 8, profile, device="cuda")
        a[1, :, k + 3] = 0.0                        # a zero column: the first Cholesky breaks down
        a[2, :, k + 5] = a[2, :, k + 4]             # two equal columns
        h = a.clone() if k else torch.full_like(a, float("nan"))
        acc = torch.zeros((batch, 1024), dtype=torch.float64, device="cuda")
        small = torch.empty((batch, 4096), dtype=torch.float64, device="cuda")
        flags = torch.full((batch,), -1, dtype=torch.int32, device="cuda")
        gram = torch.zeros((batch, 2048), dtype=torch.float64, device="cuda")
        ctrl = torch.zeros((2 + 3 * batch,), dtype=torch.int32, device="cuda")
        got = [a, h, torch.zeros((batch, n), device="cuda"), torch.zeros((batch, w, n), device="cuda"),
               torch.zeros((batch, w, w), device="cuda")]
        want = [x.cpu() for x in got]
        if fused:
            ext.cholqr_leaf(*got, acc, small, flags, gram, ctrl, k, w)
            assert not gram.any() and not ctrl.any(), "the fused leaf must leave its Grams and counters zero"
        else:
            ext.cholqr_panel(*got, acc, small, flags, k, w, sweep, one_pass, threads, block, fold, pdl)
        assert not acc.any(), "the leaf must leave its Gram accumulator zero"
        ReferencePanel(set()).cholqr_panel(*want, acc.cpu(), small.cpu(), flags.cpu(), k, w)
        where = (f"batch={batch} n={n} k={k} w={w} {profile} fused={fused} sweep={sweep} one_pass={one_pass} "
                 f"threads={threads} block={block} fold={fold} pdl={pdl}")
        if one_pass and profile == "dense":
            assert flags[0].item() == (3 if fold else 2), (where, flags.tolist())  # one pass (built in the first kernel)
        # the fused leaf decides per matrix inside the launch: what it flagged shows in the properties
        flagged = [1, 2] if fused else [i for i in range(batch) if flags[i].item() == 1]
        assert {1, 2} <= set(flagged), (where, flags.tolist())
        ordinary = [i for i in range(batch) if i not in flagged]
        assert 0 in ordinary, (where, flags.tolist())
        for label, g, wnt in zip(("H", "tau", "VT", "T"), got[1:], want[1:]):
            torch.testing.assert_close(g[ordinary].cpu(), wnt[ordinary], rtol=2e-3, atol=2e-4, equal_nan=True,
                                       msg=lambda text: f"{label} at {where}: {text}")
        for i in range(batch):
            _check_panel_properties(a[i, k:, k:k + w], h[i, k:, k:k + w], got[2][i, k:k + w], got[3][i, :w, :n - k],
                                    got[4][i, :w, :w], f"{where} matrix {i}")


def _check_panel_properties(p, h, tau, vt, t, where: str) -> None:
    """(h, tau, vt, t) is a QR of the panel p in float64: P = (I - V T Vᵀ)[:, :w] R with that factor
    orthonormal, T upper triangular with tau on its diagonal, and Vᵀ the unit lower trapezoid of h."""
    p, h, tau, vt, t = (x.double() for x in (p, h, tau, vt, t))
    m, w = h.shape
    v = torch.tril(h, diagonal=-1)
    v[torch.arange(w), torch.arange(w)] = 1.0
    torch.testing.assert_close(vt, v.T, rtol=0, atol=0, msg=lambda text: f"Vᵀ at {where}: {text}")
    assert torch.equal(t, torch.triu(t)) and torch.allclose(torch.diagonal(t), tau), where
    q = torch.eye(m, w, dtype=torch.float64, device=h.device) - v @ (t @ v[:w].T)
    scale = p.abs().max().item() or 1.0
    assert (q @ torch.triu(h[:w]) - p).abs().max().item() <= 1e-4 * scale * max(1.0, m / 256), where
    assert (q.T @ q - torch.eye(w, dtype=torch.float64, device=h.device)).abs().max().item() <= 1e-4, where


@pytest.mark.gpu
@pytest.mark.parametrize("quads, cols, pdl", [(False, 150, False), (True, 150, False), (True, 132, False),
                                             (False, 150, True)])
def test_split_products_match_torch_on_gpu(tmp_path, quads, cols, pdl):
    """The merge's and the narrow update's split products on windows like the factorisation's: Vᵀ rows
    n apart, C a view of H (its columns as the second operand's rows), partial chunks and tiles; the
    sums added a float or (quads, where W's rows allow) four at a time; launched as programmatic
    dependent launches (pdl), each right after the kernel whose output it reads."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    module = _module("cuda_blocked", tmp_path)
    ext = module._extension(torch.device("cuda"))
    gen = torch.Generator(device="cuda").manual_seed(3)
    batch, n, k, width = 3, 1500, 100, 48
    m = n - k
    h = torch.randn((batch, n, n), device="cuda", generator=gen)
    vt = torch.randn((batch, 64, n), device="cuda", generator=gen)[:, :width, :m]
    c = h[:, k:, k + width:k + width + cols]
    out = torch.zeros((batch, width, cols), device="cuda")
    ext.cross(vt, c.transpose(1, 2), out, quads, pdl)
    want = vt.double() @ c.double()
    assert ((out.double() - want).abs().max() / want.abs().max()).item() < 1e-5
    cross = torch.zeros((batch, width, 40), device="cuda")
    ext.cross(vt, vt[:, :40], cross, quads, pdl)
    torch.testing.assert_close(cross.double(), vt.double() @ vt[:, :40].double().transpose(1, 2), rtol=1e-5, atol=1e-3)
    w = torch.randn((batch, width, cols), device="cuda", generator=gen)
    before = h.clone()
    ext.apply_rows(c, c, vt, w, torch.empty((0,), device="cuda"), pdl)
    want_c = before[:, k:, k + width:k + width + cols].double() - vt.double().transpose(1, 2) @ w.double()
    torch.testing.assert_close(c.double(), want_c, rtol=1e-5, atol=1e-3)
    t = torch.triu(torch.randn((batch, 64, 64), device="cuda", generator=gen))[:, :width, :width] / 8
    again = c.clone()
    ext.apply_rows(c, c, vt, w, t, pdl)
    want_c = again.double() - vt.double().transpose(1, 2) @ (t.double().transpose(1, 2) @ w.double())
    torch.testing.assert_close(c.double(), want_c, rtol=1e-5, atol=1e-3)
    outside = torch.ones_like(h, dtype=torch.bool)
    outside[:, k:, k + width:k + width + cols] = False
    assert torch.equal(h[outside], before[outside]), "apply_rows wrote outside its window"


@pytest.mark.gpu
def test_fused_narrow_update_matches_float64_on_gpu(tmp_path):
    """The fused narrow update on the factorisation's windows (C a few columns of H, Vᵀ rows n apart,
    T a window of its block's buffer), twice on the same workspaces, which it leaves zero."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    module = _module("cuda_blocked", tmp_path)
    ext = module._extension(torch.device("cuda"))
    gen = torch.Generator(device="cuda").manual_seed(5)
    batch, n, k, width, cols = 3, 2100, 100, 64, 200
    m = n - k
    w_buf = torch.zeros((batch, 64, 256), device="cuda")
    ctrl = torch.zeros((2 + 3 * batch,), dtype=torch.int32, device="cuda")
    for call in range(2):
        h = torch.randn((batch, n, n), device="cuda", generator=gen)
        vt = torch.randn((batch, 64, n), device="cuda", generator=gen)[:, :width - 16 * call, :m] / 32
        t = torch.triu(torch.randn((batch, 64, 64), device="cuda", generator=gen))[:, :vt.shape[1], :vt.shape[1]] / 8
        c = h[:, k:, k + width:k + width + cols]
        before = h.clone()
        assert ext.narrow_update(c, c, vt, t, w_buf, ctrl)
        s = before[:, k:, k + width:k + width + cols].double()
        want = s - vt.double().transpose(1, 2) @ (t.double().transpose(1, 2) @ (vt.double() @ s))
        torch.testing.assert_close(c.double(), want, rtol=1e-5, atol=1e-3, msg=lambda text: f"call {call}: {text}")
        outside = torch.ones_like(h, dtype=torch.bool)
        outside[:, k:, k + width:k + width + cols] = False
        assert torch.equal(h[outside], before[outside]), "narrow_update wrote outside its window"
        assert not w_buf.any() and not ctrl.any(), "W and the counters must be left zero"


@pytest.mark.gpu
def test_fused_merge_matches_float64_on_gpu(tmp_path):
    """The fused merge on a block's buffers (halves of 32 and 64 columns, V over 1500 positions),
    twice on the same workspaces, which it leaves zero; T's other blocks untouched."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    module = _module("cuda_blocked", tmp_path)
    ext = module._extension(torch.device("cuda"))
    gen = torch.Generator(device="cuda").manual_seed(6)
    batch, n, m = 3, 1600, 1500
    x = torch.zeros((batch, 64, 64), device="cuda")
    count = torch.zeros((batch,), dtype=torch.int32, device="cuda")
    for w1, width in ((32, 64), (64, 128)):
        vt = torch.randn((batch, width, n), device="cuda", generator=gen) / 16
        t = torch.triu(torch.randn((batch, width, width), device="cuda", generator=gen)) / 8
        before = t.clone()
        ext.merge(vt[:, :w1, w1:m], vt[:, w1:width, w1:m], t[:, :w1, :w1], t[:, w1:, w1:], t[:, :w1, w1:], x, count)
        v1, v2 = vt[:, :w1, w1:m].double(), vt[:, w1:width, w1:m].double()
        want = -(before[:, :w1, :w1].double() @ (v1 @ v2.transpose(1, 2)) @ before[:, w1:, w1:].double())
        torch.testing.assert_close(t[:, :w1, w1:].double(), want, rtol=1e-5, atol=1e-4)
        kept = torch.ones_like(t, dtype=torch.bool)
        kept[:, :w1, w1:] = False
        assert torch.equal(t[kept], before[kept]), "merge wrote outside T12"
        assert not x.any() and not count.any(), "X and the counters must be left zero"
