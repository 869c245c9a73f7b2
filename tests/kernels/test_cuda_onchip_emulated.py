"""cuda_onchip's group kernel (a column on G lanes, CPT columns a thread) and its panel form (K
columns factored inside one group, one barrier a panel) run on CPU threads
(tests/kernels/host_emulation.h).

What can go wrong in them is logic: the lanes a group's reductions combine, the cyclic map of
columns (or panels) to groups (a slot ≥ 1 opens only past NQ of them), the padding rows and
columns of a class wider than n, the double-buffered reflectors and T, the rescaled norm's
warp-wide branch, shuffles that every lane must reach.  Every instantiation runs here at a width
past its first slot (the 32 class at full width), on inputs that take each path; the float64
verifier judges the factorisation."""

from __future__ import annotations

import ctypes
import importlib.util
import shutil

import pytest
import torch

from kernels.families import FAMILIES_DIR
from kernels.inputs import generate_input
from kernels.verify import verify_qr

from .test_cuda_emulated import _build
from .test_cuda_families import _module

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ (C++20) to build the emulation")


def _driver(module) -> str:
    """run_groups(A, H, tau, batch, n, key): the kernel the host code's switch launches for key, one block
    after the other (their shared arrays made static)."""
    def case(key: int, threads: int, kernel: str) -> str:
        return (f"        case {key}: emu::launch_serial(dim3{{(unsigned)batch, 1, 1}}, {threads}, 0,"
                f" [&] {{ {kernel}(A, H, tau, n); }}); return 0;\n")
    cases = "".join(case(module._group_key(np_, g, cpt), g * -(-np_ // cpt), f"qr_groups_kernel<{np_}, {g}, {cpt}>")
                    for np_, g, cpt in module._GROUP_KERNELS)
    cases += "".join(case(module._panel_key(np_, g, k, cpb), g * -(-(np_ // k) // cpb),
                          f"qr_panels_kernel<{np_}, {g}, {k}, {cpb}>")
                     for np_, g, k, cpb in module._PANEL_KERNELS)
    cases += "".join(f"        case {module._tiled_key(np_, nb, w)}: emu::launch_serial(dim3{{(unsigned)batch, 1, 1}},"
                     f" {32 * w}, tiled_floats(n, {np_}, {nb}, {32 * w}) * sizeof(float),"
                     f" [&] {{ qr_tiled_kernel<{np_}, {nb}, {w}>(A, H, tau, n); }}); return 0;\n"
                     for np_, nb, w in module._TILED_KERNELS)
    # A watchdog: shuffles in divergent code (a real bug on the GPU too) wait forever here, and a hung
    # test would hold CI to its limit; it aborts the process after a minute instead.
    return ("#include <chrono>\n#include <cstdio>\n"
            'static int dispatch(const float* A, float* H, float* tau, int batch, int n, int key) {\n'
            "    switch (key) {\n" + cases + "    }\n    return -1;\n}\n"
            'extern "C" int run_groups(const float* A, float* H, float* tau, int batch, int n, int key) {\n'
            "    std::atomic<bool> done{false};\n"
            "    std::thread dog([&] {\n"
            "        for (int i = 0; i < 600 && !done; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));\n"
            '        if (!done) { std::fprintf(stderr, "emulated kernel %d hung at n = %d\\n", key, n); std::abort(); }\n'
            "    });\n"
            "    const int status = dispatch(A, H, tau, batch, n, key);\n"
            "    done = true;\n    dog.join();\n    return status;\n}\n")


@pytest.fixture(scope="module")
def onchip(tmp_path_factory):
    """(the family module, the group kernels built for the host with run_groups)."""
    folder = tmp_path_factory.mktemp("onchip")
    module = _module("cuda_onchip", folder)
    lib = _build(folder / "groups", "#define QR_HOST_EMULATION\n#define QR_EMULATE_STATIC_SHARED\n"
                 '#include "host_emulation.h"\n' + module._DEVICE_SOURCE
                 + _driver(module))
    lib.run_groups.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int] * 3
    lib.run_groups.restype = ctypes.c_int
    return module, lib


def _factor(onchip, a: torch.Tensor, kernel: tuple) -> tuple[torch.Tensor, torch.Tensor]:
    module, lib = onchip
    a = a.contiguous()
    batch, n = a.shape[0], a.shape[-1]
    h, tau = torch.full_like(a, float("nan")), torch.full((batch, n), float("nan"))
    if kernel[0] == "tiled":
        key = module._tiled_key(*kernel[1:])
    else:
        key = module._group_key(*kernel) if len(kernel) == 3 else module._panel_key(*kernel)
    assert lib.run_groups(a.data_ptr(), h.data_ptr(), tau.data_ptr(), batch, n, key) == 0
    return h, tau


def _inputs(n: int) -> dict[str, torch.Tensor]:
    dense = generate_input(2, n, 2.0, 4242 + n, "dense")
    return {
        "dense": dense,
        "rankdef": generate_input(2, n, 0.0, 4343 + n, "rankdef"),
        "clustered": generate_input(2, n, 0.0, 4444 + n, "clustered"),
        "tiny": dense * 1e-25,   # squares underflow: the rescaled norm
        "huge": dense * 1e25,    # squares overflow
        "zero": torch.zeros(1, n, n),
    }


def _listing():
    """The family file itself (its kernel lists), read when the tests are collected."""
    spec = importlib.util.spec_from_file_location("_onchip_listing", FAMILIES_DIR / "cuda_onchip.py")
    assert spec and spec.loader
    listing = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(listing)
    return listing


def _width(np_: int, cpt: int) -> int:
    """A width past the kernel's first slot of columns (NQ = NP / CPT), with padding below NP."""
    return min(np_, -(-np_ // cpt) + 9)


def _factors_every_profile(onchip, kernel: tuple[int, ...], n: int) -> None:
    """The kernel's factorisation of each input profile at width n passes the verifier; a zero
    matrix comes back as itself with tau zero."""
    for profile, a in _inputs(n).items():
        h, tau = _factor(onchip, a, kernel)
        result = verify_qr(a, (h, tau))
        assert result.ok, f"{kernel} n={n} {profile}: {result.message}"
        if profile == "zero":
            assert torch.equal(tau, torch.zeros_like(tau)) and torch.equal(h, a)


@pytest.mark.parametrize("kernel", _listing()._GROUP_KERNELS, ids=lambda k: "np%d-g%d-c%d" % k)
def test_group_kernel_factors_every_profile(onchip, kernel):
    np_, g, cpt = kernel
    _factors_every_profile(onchip, kernel, _width(np_, cpt))


@pytest.mark.parametrize("kernel", _listing()._PANEL_KERNELS, ids=lambda k: "np%d-g%d-k%d-c%d" % k)
def test_panel_kernel_factors_every_profile(onchip, kernel):
    """K-column panels: every profile at a width past the first slot of panels and not a multiple of K
    (the last panel is partial), and at a width of one panel."""
    np_, g, k, cpb = kernel
    for n in (min(np_, k * -(-(np_ // k) // cpb) + k + 1), k):
        _factors_every_profile(onchip, kernel, n)


@pytest.mark.parametrize("kernel", _listing()._TILED_KERNELS, ids=lambda k: "np%d-nb%d-w%d" % k)
def test_tiled_kernel_factors_every_profile(onchip, kernel):
    """Panels of NB columns: every profile at the class's full width (an even n: rows n + 1 apart in
    shared memory), at an odd width whose last panel is partial, and at a width inside one panel;
    the matrix in shared memory up to 192, in H above."""
    np_, nb, _ = kernel
    # (the classes above 192 keep the matrix in H; their full width takes minutes on CPU threads)
    for n in ((np_, np_ - nb - 3, nb - 1) if np_ <= 192 else (np_ - nb - 3, nb - 1)):
        _factors_every_profile(onchip, ("tiled", *kernel), n)
