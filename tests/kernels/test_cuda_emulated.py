"""cuda_blocked's fused Cholesky QR leaf, run on CPU threads (tests/kernels/host_emulation.h).

The leaf's blocks meet twice in global memory and every block computes the 32x32 factors, so
what can go wrong is logic: indices, barriers, the tickets and counters between blocks, the
reconstruction's arithmetic, the fallback for nearly dependent panels.  The emulation runs the file's
own device source with an OS thread for every GPU thread and real barriers, all blocks at once, so
those are tested here without a GPU; what it cannot show (speed, the GPU's memory model, register
limits) is for the GPU tests and kernels/BENCHMARKS.md.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from kernels.inputs import generate_input

from .test_cuda_families import ReferencePanel, _check_panel_properties, _module

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ (C++20) to build the emulation")

_DRIVER = r"""
extern "C" int run_leaf(const float* S, float* H, float* tau, float* vt, float* t, int batch, int n, int k, int w,
                        long long vstride, long long tstride, int ldt, double* gram, int* ctrl) {
    const int chunks = (n - k + GROWS - 1) / GROWS;
    emu::launch((unsigned)(batch * chunks), LEAF_THREADS, leaf_smem_bytes(), [&] {
        cholqr_leaf_kernel(S, H, tau, vt, t, n, k, w, vstride, tstride, ldt, chunks, gram, ctrl);
    });
    return chunks;
}
"""

_NARROW_DRIVER = r"""
extern "C" int run_narrow(const float* S, float* C, const float* VT, const float* T, int batch, int m, int ncols,
                          int p, long long sc, int ldc, long long sv, int vrow, long long st, int ldt, float* W,
                          int ldw, int* ctrl) {
    const int chunks = (m + 63) / 64;
    emu::launch((unsigned)(batch * chunks), NARROW_THREADS, narrow_smem_bytes(), [&] {
        narrow_update_kernel(S, C, VT, T, m, ncols, p, sc, ldc, sv, vrow, st, ldt, chunks, W, ldw, ctrl);
    });
    return chunks;
}
"""

_MERGE_DRIVER = r"""
extern "C" int run_merge(const float* V1, const float* V2, int batch, int w1, int w2, int len, long long sv, int vrow,
                         const float* T1, const float* T2, float* T12, long long st, int ldt, float* X, int* count) {
    const int chunks = (len + 63) / 64;
    emu::launch((unsigned)(batch * chunks), MERGE_THREADS, merge_smem_bytes(), [&] {
        merge_kernel(V1, V2, w1, w2, len, sv, vrow, T1, T2, T12, st, ldt, chunks, X, count);
    });
    return chunks;
}
"""

_LIVE_DRIVER = r"""
extern "C" void run_live(const float* A, int batch, int n, int* live) {
    emu::launch((unsigned)batch, 256, sizeof(int), [&] { live_columns_kernel(A, n, live); });
}
extern "C" void run_clear_tail(float* H, float* tau, int batch, int n, int cut, const int* kept) {
    emu::launch_serial(dim3{(unsigned)((n + 63) / 64), (unsigned)batch, 1}, 256, 0, [&] {
        clear_tail_kernel(H, tau, n, cut, kept);
    });
}
extern "C" void run_tail(const float* A, int batch, int n, double rel, int* kept) {
    emu::launch((unsigned)batch, 256, 257 * sizeof(double) + sizeof(int), [&] { tail_columns_kernel(A, n, rel, kept); });
}
"""


def _build(stem: Path, text: str) -> ctypes.CDLL:
    """The C++ text built with g++ for the host (host_emulation.h beside this file) and loaded."""
    source, library = stem.with_suffix(".cpp"), stem.with_suffix(".so")
    source.write_text(text)
    result = subprocess.run(["g++", "-std=c++20", "-O1", "-pthread", "-shared", "-fPIC", "-I",
                             str(Path(__file__).parent), str(source), "-o", str(library)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-4000:]
    return ctypes.CDLL(str(library))


@pytest.fixture(scope="module")
def emulated(tmp_path_factory):
    """cuda_blocked's device source built for the host, with run_leaf, run_narrow, run_merge and run_live."""
    folder = tmp_path_factory.mktemp("emulated")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRITON_INTERPRET", "1")  # the family file's Triton kernel, loaded as the other CPU tests load it
        module = _module("cuda_blocked", folder)
    lib = _build(folder / "leaf", '#define QR_HOST_EMULATION\n#include "host_emulation.h"\n' + module._DEVICE_SOURCE
                 + _DRIVER + _NARROW_DRIVER + _MERGE_DRIVER + _LIVE_DRIVER)
    pointer, i32, i64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong
    lib.run_leaf.argtypes = [pointer] * 5 + [i32] * 4 + [i64, i64, i32, pointer, pointer]
    lib.run_leaf.restype = i32
    lib.run_narrow.argtypes = [pointer] * 4 + [i32] * 4 + [i64, i32, i64, i32, i64, i32, pointer, i32, pointer]
    lib.run_narrow.restype = i32
    lib.run_merge.argtypes = [pointer] * 2 + [i32] * 4 + [i64, i32] + [pointer] * 3 + [i64, i32, pointer, pointer]
    lib.run_merge.restype = i32
    lib.run_live.argtypes = [pointer, i32, i32, pointer]
    lib.run_tail.argtypes = [pointer, i32, i32, ctypes.c_double, pointer]
    lib.run_clear_tail.argtypes = [pointer, pointer, i32, i32, i32, pointer]
    return lib


_PANEL_DRIVER = r"""
extern "C" void run_panel(const float* S, float* H, float* tau, float* vt, float* t, int batch, int n, int k, int w,
                          long long vstride, long long tstride, int ldt, double* acc, double* small, int* flags,
                          int sweep, double one_pass, int threads, int nb, int fold) {
    const dim3 chunks{(unsigned)((n - k + GROWS - 1) / GROWS), (unsigned)batch, 1};
    const dim3 matrices{(unsigned)batch, 1, 1};
    emu::launch_serial(chunks, 256, 0, [&] { cholqr_gram_kernel(S, n, k, w, nullptr, 0, acc, flags); });
    const int m = n - k;
    const unsigned block = sweep && sweep != 3 ? (unsigned)threads : 1024u;
    auto first = [&](auto kernel) { kernel(acc, w, m, one_pass, small, flags, S, H, tau, vt, t, n, k, vstride, tstride, ldt); };
    if (sweep == 2) emu::launch_serial(matrices, 32, 0, [&] { cholqr_first_warp_kernel(acc, w, m, one_pass, small, flags); });
    else emu::launch_serial(matrices, block, 0, [&] {
        if (sweep == 3 && nb == 4) first(fold ? cholqr_first_kernel<true, 1, 4, true> : cholqr_first_kernel<true, 1, 4, false>);
        else if (sweep == 3) first(fold ? cholqr_first_kernel<true, 1, 8, true> : cholqr_first_kernel<true, 1, 8, false>);
        else if (!sweep) first(cholqr_first_kernel<false, 1, 0, false>);
        else if (block == 1024) first(fold ? cholqr_first_kernel<true, 1, 0, true> : cholqr_first_kernel<true, 1, 0, false>);
        else if (block == 256) first(cholqr_first_kernel<true, 4, 0, false>);
        else first(cholqr_first_kernel<true, 8, 0, false>);
    });
    emu::launch_serial(chunks, 256, 0, [&] { cholqr_gram_kernel(S, n, k, w, small + QB * QB, 4 * QB * QB, acc, flags); });
    emu::launch_serial(matrices, block, 0, [&] {
        if (!sweep) cholqr_second_kernel<false, 1>(S, H, tau, vt, t, n, k, w, vstride, tstride, ldt, acc, small, flags);
        else if (block == 1024) cholqr_second_kernel<true, 1>(S, H, tau, vt, t, n, k, w, vstride, tstride, ldt, acc, small, flags);
        else if (block == 256) cholqr_second_kernel<true, 4>(S, H, tau, vt, t, n, k, w, vstride, tstride, ldt, acc, small, flags);
        else cholqr_second_kernel<true, 8>(S, H, tau, vt, t, n, k, w, vstride, tstride, ldt, acc, small, flags);
    });
    emu::launch_serial(chunks, 256, 0, [&] { cholqr_rows_kernel(S, H, vt, n, k, w, vstride, small, flags); });
}
"""


_ROWS_DRIVER = r"""
extern "C" void run_cross(const float* A, const float* B, float* out, int batch, int p, int q, int len, long long sa,
                          long long sb, long long so, long long a_row, long long a_pos, long long b_row,
                          long long b_pos, int ldo, int quads) {
    const dim3 grid{(unsigned)((len + 63) / 64), (unsigned)batch, (unsigned)((q + 63) / 64)};
    emu::launch_serial(grid, 256, 0, [&] {
        cross_kernel(A, B, out, p, q, len, sa, sb, so, a_row, a_pos, b_row, b_pos, ldo, quads != 0);
    });
}
extern "C" void run_apply_rows(const float* S, float* C, const float* VT, const float* W, const float* T, int batch,
                               int m, int ncols, int p, long long sc, long long sv, long long sw, long long st, int ldc,
                               int vrow, int ldw, int ldt) {
    const dim3 grid{(unsigned)((m + 63) / 64), (unsigned)batch, (unsigned)((ncols + 63) / 64)};
    emu::launch_serial(grid, 256, 0, [&] {
        if (T) apply_rows_kernel<true>(S, C, VT, W, T, m, ncols, p, sc, sv, sw, st, ldc, vrow, ldw, ldt);
        else apply_rows_kernel<false>(S, C, VT, W, T, m, ncols, p, sc, sv, sw, st, ldc, vrow, ldw, ldt);
    });
}
"""


@pytest.fixture(scope="module")
def five_library(tmp_path_factory):
    """cuda_blocked's five launches of a Cholesky QR leaf built for the host: their static shared arrays
    made static (QR_EMULATE_STATIC_SHARED), their blocks run one at a time.  The Householder panel
    kernel's dynamic shared array (not run here) is declared as a plain pointer."""
    folder = tmp_path_factory.mktemp("five")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRITON_INTERPRET", "1")
        module = _module("cuda_blocked", folder)
    device = module._DEVICE_SOURCE
    assert device.count("extern __shared__ float smem[];") == 1
    device = device.replace("extern __shared__ float smem[];", "float* smem = nullptr;")
    lib = _build(folder / "five", "#define QR_HOST_EMULATION\n#define QR_EMULATE_STATIC_SHARED\n"
                 '#include "host_emulation.h"\n' + device + _PANEL_DRIVER + _ROWS_DRIVER)
    pointer, i32, i64 = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong
    lib.run_panel.argtypes = [pointer] * 5 + [i32] * 4 + [i64, i64, i32] + [pointer] * 3 + [i32, ctypes.c_double, i32, i32, i32]
    lib.run_cross.argtypes = [pointer] * 3 + [i32] * 4 + [i64] * 7 + [i32, i32]
    lib.run_apply_rows.argtypes = [pointer] * 5 + [i32] * 4 + [i64] * 4 + [i32] * 3
    return lib


@pytest.fixture(scope="module")
def five_launches(five_library):
    return five_library.run_panel


@pytest.fixture
def leaf(emulated):
    return emulated.run_leaf


@pytest.fixture
def narrow(emulated):
    return emulated.run_narrow


@pytest.fixture
def merge(emulated):
    return emulated.run_merge


class Leaf:
    """One matrix batch's buffers, factored leaf by leaf in place as cuda_blocked's loop does, the
    workspaces shared by every leaf."""

    def __init__(self, a: torch.Tensor, w: int) -> None:
        self.a, self.w = a, w
        batch, n = a.shape[0], a.shape[-1]
        self.h = torch.full_like(a, float("nan"))
        self.tau = torch.zeros((batch, n))
        self.vt = torch.zeros((batch, w, n))
        self.t = torch.zeros((batch, w, w))
        self.gram = torch.zeros((batch, 2048), dtype=torch.float64)
        self.ctrl = torch.zeros((2 + 3 * batch,), dtype=torch.int32)

    def run(self, run_leaf, source: torch.Tensor, k: int, w: int) -> int:
        batch, n = self.a.shape[0], self.a.shape[-1]
        return run_leaf(source.data_ptr(), self.h.data_ptr(), self.tau.data_ptr(), self.vt.data_ptr(),
                        self.t.data_ptr(), batch, n, k, w, self.vt.stride(0), self.t.stride(0), self.t.stride(1),
                        self.gram.data_ptr(), self.ctrl.data_ptr())


def _reference(source: torch.Tensor, k: int, w: int) -> tuple[torch.Tensor, ...]:
    batch, n = source.shape[0], source.shape[-1]
    out = (source.clone(), torch.zeros((batch, n)), torch.zeros((batch, w, n)), torch.zeros((batch, w, w)))
    ReferencePanel(set())._factor_panel(source, *out, k, w)
    return out


def _compare(leaf_run: Leaf, source: torch.Tensor, k: int, w: int, degenerate: set[int], where: str) -> int:
    """Well-conditioned panels match the reference panel element by element (an ill-conditioned one's
    reflectors differ from float32 geqrf's by about cond·eps32 either way); every matrix has the
    panel's properties."""
    h_want, tau_want, vt_want, t_want = _reference(source, k, w)
    n = source.shape[-1]
    compared = 0
    for i in range(source.shape[0]):
        values = torch.linalg.svdvals(source[i, k:, k:k + w].double())
        if i not in degenerate and values[0] < 1e3 * values[-1]:
            compared += 1
            for label, got, want in (("H", leaf_run.h[i, k:, k:k + w], h_want[i, k:, k:k + w]),
                                     ("tau", leaf_run.tau[i, k:k + w], tau_want[i, k:k + w]),
                                     ("VT", leaf_run.vt[i, :w, :n - k], vt_want[i, :w, :n - k]),
                                     ("T", leaf_run.t[i, :w, :w], t_want[i, :w, :w])):
                torch.testing.assert_close(got, want, rtol=2e-3, atol=2e-4,
                                           msg=lambda text: f"{label} of matrix {i} at {where}: {text}")
        _check_panel_properties(source[i, k:, k:k + w], leaf_run.h[i, k:, k:k + w], leaf_run.tau[i, k:k + w],
                                leaf_run.vt[i, :w, :n - k], leaf_run.t[i, :w, :w], f"{where} matrix {i}")
    return compared


@pytest.mark.parametrize("batch, n, k, w, profile", [
    (3, 200, 0, 32, "dense"),       # read from the input: four chunks, a partial last one
    (3, 200, 8, 20, "mixed"),       # a narrower leaf below the top, in place
    (2, 150, 64, 32, "clustered"),  # two chunks; columns of wildly different scale need no fallback
])
def test_fused_leaf_matches_the_reference_panel(leaf, batch, n, k, w, profile):
    """Ordinary matrices match the reference; a zero column (the first Cholesky breaks down) and two
    equal columns (the second does) are factored column by column inside the launch, and the Grams
    and counters are left zero for the next leaf."""
    a = generate_input(batch, n, 1.0, 7, profile)
    a[1, :, k + 3] = 0.0
    if batch > 2:
        a[2, :, k + 5] = a[2, :, k + 4]
    run = Leaf(a, w)
    if k:  # in place, as the blocked loop factors every leaf but the first
        run.h.copy_(a)
    chunks = run.run(leaf, run.h if k else a, k, w)
    assert chunks == -(-(n - k) // 64)
    assert not run.gram.any() and not run.ctrl.any(), "the leaf must leave its Grams and counters zero"
    compared = _compare(run, a, k, w, {1, 2}, f"batch={batch} n={n} k={k} w={w} {profile}")
    if profile == "dense":  # the structured profiles' panels may all be ill-conditioned: properties only
        assert compared == batch - 2


def _five(five_launches, run: Leaf, source: torch.Tensor, k: int, w: int, sweep: int, one_pass: float, threads: int,
         nb: int, fold: bool) -> torch.Tensor:
    """One leaf by the five launches into run's buffers; the flags they leave."""
    batch, n = source.shape[0], source.shape[-1]
    acc = torch.zeros((batch, 1024), dtype=torch.float64)
    small = torch.zeros((batch, 4096), dtype=torch.float64)
    flags = torch.full((batch,), -1, dtype=torch.int32)
    five_launches(source.data_ptr(), run.h.data_ptr(), run.tau.data_ptr(), run.vt.data_ptr(), run.t.data_ptr(),
                 batch, n, k, w, run.vt.stride(0), run.t.stride(0), run.t.stride(1), acc.data_ptr(),
                 small.data_ptr(), flags.data_ptr(), int(sweep), one_pass, threads, nb, int(fold))
    assert not acc.any(), "the leaf must leave its Gram accumulator zero"
    return flags


@pytest.mark.parametrize("sweep, one_pass, threads, nb, fold", [
    (0, 0.0, 1024, 0, 0), (1, 0.0, 1024, 0, 0), (2, 0.0, 1024, 0, 0), (0, 1e-7, 1024, 0, 0), (1, 1e-7, 1024, 0, 0),
    (2, 1e-6, 1024, 0, 0), (1, 0.0, 256, 0, 0), (1, 1e-7, 128, 0, 0), (2, 0.0, 128, 0, 0),
    (3, 0.0, 1024, 8, 0), (3, 1e-7, 1024, 8, 0), (3, 0.0, 1024, 4, 0), (3, 1e-7, 1024, 4, 0),
    (1, 1e-7, 1024, 0, 1), (3, 1e-7, 1024, 8, 1), (3, 1e-7, 1024, 4, 1), (1, 0.0, 1024, 0, 1)])
@pytest.mark.parametrize("batch, n, k, w, profile", [(4, 200, 0, 32, "dense"), (4, 200, 8, 20, "mixed")])
def test_five_launches_match_the_reference_panel(five_launches, sweep, one_pass, threads, nb, fold, batch, n, k, w,
                                                profile):
    """The five launches of a leaf (the defaults' tall panels), with the 32x32 factors' inverses by
    triangular solves, inside the factors' sweeps, or (the first pass) on one warp: ordinary matrices
    match the reference panel, a zero column and two equal columns are flagged and factored column by
    column inside the second kernel, and the Gram accumulator is left zero.  With one_pass, a well-conditioned panel
    takes one pass (flag 2) and matches as well, while one of condition ~1e3 still takes two; the
    sweeps on 1024, 256 or 128 threads (one, four or eight elements a thread) alike, and the blocked
    first pass (sweep 3) with diagonal blocks of 4 or 8 (w = 20 with 8: a partial last block).  With fold,
    a one-pass matrix's top block is built in the first kernel (flag 3) and matches as well."""
    a = generate_input(batch, n, 1.0, 7, profile)
    a[1, :, k + 3] = 0.0
    a[2, :, k + 5] = a[2, :, k + 4]
    a[3, :, k + 6] = a[3, :, k + 7] + 1e-3 * a[3, :, k + 6]  # nearly dependent, but far from the guard
    run = Leaf(a, w)
    if k:
        run.h.copy_(a)
    flags = _five(five_launches, run, run.h if k else a, k, w, sweep, one_pass, threads, nb, bool(fold))
    assert flags.tolist()[1:] == [1, 1, 0], flags.tolist()
    one = 3 if fold else 2
    assert flags[0] == (one if one_pass and profile == "dense" else 0) or (one_pass and profile != "dense"), flags.tolist()
    where = (f"five launches batch={batch} n={n} k={k} w={w} {profile} sweep={sweep} one_pass={one_pass} "
             f"threads={threads} nb={nb} fold={fold}")
    compared = _compare(run, a, k, w, {1, 2}, where)
    if profile == "dense":
        assert compared == 1


@pytest.mark.parametrize("sweep, nb", [(1, 0), (3, 8)])
def test_folded_one_pass_leaf_gives_the_same_bits(five_launches, sweep, nb):
    """The top block built in the first kernel's launch is the second kernel's arithmetic on the same
    R1 and R1^-1: the same bits in H, tau, Vᵀ and T, matrix by matrix, whichever path each took (the
    dependent matrices take the fallback either way); and the rows below read the N it left."""
    a = generate_input(4, 160, 1.0, 5, "mixed")
    a[1, :, 19] = 0.0  # inside the leaf's columns 16..47
    outputs = []
    for fold in (False, True):
        run = Leaf(a, 32)
        run.h.copy_(a)
        flags = _five(five_launches, run, run.h, 16, 32, sweep, 1e-7, 1024, nb, fold)
        outputs.append((flags, run.h, run.tau, run.vt, run.t))
    (flags0, *plain), (flags1, *folded) = outputs
    assert flags0[1] == flags1[1] == 1
    assert torch.equal(flags1, torch.where(flags0 == 2, 3, flags0)), (flags0.tolist(), flags1.tolist())
    assert (flags1 == 3).any(), "no matrix took one pass: the fold was not exercised"
    for name, x, y in zip(("H", "tau", "VT", "T"), plain, folded):
        assert torch.equal(x, y), name


@pytest.mark.parametrize("width, cols, ldo, quads", [(48, 150, 150, True), (64, 32, 32, True), (20, 70, 70, True),
                                                     (32, 70, 72, True), (32, 70, 72, False), (48, 150, 150, False)])
def test_split_narrow_update_kernels_match_float64(five_library, width, cols, ldo, quads):
    """The split narrow update's two kernels on the factorisation's windows (C a few columns of H below
    row k, Vᵀ rows n apart, partial row and column tiles): the cross product W = VᵀC (with quads its
    sums added four columns a request where W's rows allow, ldo, one at a time past the last whole
    four; without, one at a time) and
    V·Vᵀ-style merges against float64, then C -= V W in place, and C -= V Tᵀ W with T a window (each
    block forming its columns of Tᵀ W), each writing C's window and nothing else."""
    gen = torch.Generator().manual_seed(width + cols)
    batch, n, k = 2, 300, 37
    m = n - k
    h = torch.randn((batch, n, n), generator=gen)
    vt = torch.randn((batch, 64, n), generator=gen)[:, :width, :m]
    c = h[:, k:, k + width:k + width + cols]
    padded = torch.zeros((batch, width, ldo))
    out = padded[:, :, :cols]
    five_library.run_cross(vt.data_ptr(), c.data_ptr(), out.data_ptr(), batch, width, cols, m, vt.stride(0),
                           c.stride(0), out.stride(0), vt.stride(1), vt.stride(2), c.stride(2), c.stride(1),
                           out.stride(1), quads)
    torch.testing.assert_close(out.double(), vt.double() @ c.double(), rtol=1e-5, atol=1e-3)
    assert not padded[:, :, cols:].any(), "cross wrote past its columns"
    q = min(40, width)
    merged = torch.zeros((batch, width, q))
    five_library.run_cross(vt.data_ptr(), vt.data_ptr(), merged.data_ptr(), batch, width, q, m, vt.stride(0),
                           vt.stride(0), merged.stride(0), vt.stride(1), vt.stride(2), vt.stride(1), vt.stride(2),
                           merged.stride(1), quads)
    torch.testing.assert_close(merged.double(), vt.double() @ vt[:, :q].double().transpose(1, 2), rtol=1e-5, atol=1e-3)
    w = torch.randn((batch, width, cols), generator=gen)
    t = torch.triu(torch.randn((batch, 64, 64), generator=gen))[:, :width, :width] / 8  # a window, as T's are
    for with_t in (False, True):
        before = h.clone()
        five_library.run_apply_rows(c.data_ptr(), c.data_ptr(), vt.data_ptr(), w.data_ptr(),
                                    t.data_ptr() if with_t else None, batch, m, cols, width, c.stride(0), vt.stride(0),
                                    w.stride(0), t.stride(0), c.stride(1), vt.stride(1), w.stride(1), t.stride(1))
        product = t.double().transpose(1, 2) @ w.double() if with_t else w.double()
        want = before[:, k:, k + width:k + width + cols].double() - vt.double().transpose(1, 2) @ product
        torch.testing.assert_close(c.double(), want, rtol=1e-5, atol=1e-3, msg=lambda text: f"with_t={with_t}: {text}")
        outside = torch.ones_like(h, dtype=torch.bool)
        outside[:, k:, k + width:k + width + cols] = False
        assert torch.equal(h[outside], before[outside]), "apply_rows wrote outside its window"


def test_fused_leaves_in_a_row_share_their_workspaces(leaf):
    """Leaf after leaf with the same Grams and counters, as one factorisation runs them: each starts
    from what the last left (a ticket or a count not reset would give a block the wrong matrix or
    let it read a Gram before it is summed)."""
    a = generate_input(2, 160, 1.0, 11, "dense")
    run = Leaf(a, 32)
    run.h.copy_(a)
    for k in (0, 32, 64):
        before = run.h.clone()
        run.run(leaf, run.h, k, 32)
        assert not run.gram.any() and not run.ctrl.any()
        assert _compare(run, before, k, 32, set(), f"leaf at k={k}") == 2



@pytest.mark.parametrize("p, in_place", [(32, True), (64, False), (20, True)])
def test_fused_narrow_update_applies_the_block_reflector(narrow, p, in_place):
    """C = S - V·(Tᵀ·(Vᵀ S)) on windows like the factorisation's (C a few columns of H, Vᵀ and T windows
    of wider buffers), in place or from an input laid out as C, twice on the same workspaces."""
    gen = torch.Generator().manual_seed(p)
    batch, m, ncols = 2, 150, 100
    w_buf = torch.zeros((batch, 64, 128))
    ctrl = torch.zeros((2 + 3 * batch,), dtype=torch.int32)
    for call in range(2):
        base = torch.randn((batch, 160, 200), generator=gen)
        c = base[:, 10:, 50:150]
        source_base = base.clone() if not in_place else base
        s_view = source_base[:, 10:, 50:150]
        vt_buf = torch.randn((batch, 64, 170), generator=gen) / 8
        vt = vt_buf[:, :p, :m]
        t_buf = torch.triu(torch.randn((batch, 64, 64), generator=gen)) / 8
        t = t_buf[:, :p, :p]
        want = s_view.double() - vt.double().transpose(1, 2) @ (t.double().transpose(1, 2) @ (vt.double() @ s_view.double()))
        outside = base.clone()
        chunks = narrow(s_view.data_ptr(), c.data_ptr(), vt.data_ptr(), t.data_ptr(), batch, m, ncols, p, c.stride(0),
                        c.stride(1), vt.stride(0), vt.stride(1), t.stride(0), t.stride(1), w_buf.data_ptr(),
                        w_buf.stride(1), ctrl.data_ptr())
        assert chunks == 3
        torch.testing.assert_close(c.double(), want, rtol=1e-5, atol=1e-4, msg=lambda text: f"call {call}: {text}")
        kept = torch.ones_like(base, dtype=torch.bool)
        kept[:, 10:, 50:150] = False
        assert torch.equal(base[kept], outside[kept]), "only C's window may change"
        assert not w_buf.any() and not ctrl.any(), "W and the counters must be left zero"


def test_fused_merge_computes_the_block_t(merge):
    """T12 = -T1·(V1ᵀV2)·T2 for halves of 32 and 20 columns over 150 positions, then of 64 and 64 on
    the same workspaces (the last block of each matrix computes T12 and zeroes them)."""
    gen = torch.Generator().manual_seed(9)
    batch, n = 2, 170
    x = torch.zeros((batch, 64, 64))
    count = torch.zeros((batch,), dtype=torch.int32)
    for w1, width, m in ((32, 52, 160), (64, 128, 170)):
        vt = torch.randn((batch, width, n), generator=gen) / 8
        t = torch.triu(torch.randn((batch, width, width), generator=gen)) / 4
        before = t.clone()
        v1, v2 = vt[:, :w1, w1:m], vt[:, w1:width, w1:m]
        t1, t2, t12 = t[:, :w1, :w1], t[:, w1:, w1:], t[:, :w1, w1:]
        chunks = merge(v1.data_ptr(), v2.data_ptr(), batch, w1, width - w1, m - w1, vt.stride(0), vt.stride(1),
                       t1.data_ptr(), t2.data_ptr(), t12.data_ptr(), t.stride(0), t.stride(1), x.data_ptr(),
                       count.data_ptr())
        assert chunks == -(-(m - w1) // 64)
        want = -(before[:, :w1, :w1].double() @ (v1.double() @ v2.double().transpose(1, 2))
                 @ before[:, w1:, w1:].double())
        torch.testing.assert_close(t12.double(), want, rtol=1e-5, atol=1e-5)
        kept = torch.ones_like(t, dtype=torch.bool)
        kept[:, :w1, w1:] = False
        assert torch.equal(t[kept], before[kept]), "only T12 may change"
        assert not x.any() and not count.any(), "X and the counters must be left zero"


def test_live_columns_finds_each_matrixs_last_nonzero_column(emulated):
    """1 + the last column with a nonzero element, per matrix: dense, zero trailing columns, one
    nonzero element far from the end, a NaN (not zero: its column must be factored), all zero."""
    n = 300
    a = torch.randn((5, n, n), generator=torch.Generator().manual_seed(2))
    a[1, :, 225:] = 0.0
    a[2, :, 8:] = 0.0
    a[2, 299, 7] = 0.0
    a[2, 17, 7] = 1.0  # column 7's only nonzero element, in a row far from the last
    a[2, :, 7][torch.arange(n) != 17] = 0.0
    a[3, :, 100:] = 0.0
    a[3, 250, 299] = float("nan")
    a[4] = 0.0
    live = torch.full((5,), -1, dtype=torch.int32)
    emulated.run_live(a.data_ptr(), 5, n, live.data_ptr())
    assert live.tolist() == [300, 225, 8, 300, 0]


@pytest.mark.parametrize("n", [70, 300])
def test_tail_columns_keeps_what_the_bound_allows(emulated, n):
    """1 + the last column whose 1-norm exceeds rel·‖a₀‖₁, per matrix, as the host's reference computes
    it: dense, clustered-scale (its last half 4·eps32), zero trailing columns, trailing columns 1e-3
    of the rest (kept), a NaN far in the tail (kept), a zero first column (only exact zeros go), an
    infinite first column (likewise), a zero matrix, and the last kept column just left of the first
    pass's 8 (the first chunk's last)."""
    from kernels.contract import EPS32

    from .test_cuda_families import ReferencePanel

    gen = torch.Generator().manual_seed(3)
    a = torch.randn((9, n, n), generator=gen)
    a[1, :, n // 2:] *= 4 * EPS32
    a[2, :, 50:] = 0.0
    a[3, :, 40:] *= 1e-3
    a[4, :, n // 2:] *= 4 * EPS32
    a[4, n - 1, n - 3] = float("nan")
    a[5, :, 0] = 0.0
    a[5, :, n // 2:] *= 4 * EPS32
    a[5, :, n - 5:] = 0.0
    a[6, 3, 0] = float("inf")
    a[6, :, n - 7:] = 0.0
    a[6, :, n // 2:n - 7] *= 4 * EPS32
    a[7] = 0.0
    a[8, :, n - 8:] = 0.0
    rel = 8 * EPS32
    want = {0: [n, n, 50, n, n, n - 5, n - 7, 0, n - 8], rel: [n, n // 2, 50, n, n - 2, n - 5, n - 7, 0, n - 8]}
    for r, expected in want.items():
        kept = torch.full((9,), -1, dtype=torch.int32)
        emulated.run_tail(a.data_ptr(), 9, n, r, kept.data_ptr())
        assert kept.tolist() == expected, r
        host = torch.full((9,), -1, dtype=torch.int32)
        ReferencePanel(set()).tail_columns(a, host, r)
        assert host.tolist() == expected, r


def test_tail_columns_of_matrices_narrower_than_the_first_pass(emulated):
    """n ≤ 8: the first pass's columns are all of them (and overlap column 0)."""
    n = 6
    a = torch.randn((3, n, n), generator=torch.Generator().manual_seed(8))
    a[1, :, 4:] = 0.0
    a[2] = 0.0
    kept = torch.full((3,), -1, dtype=torch.int32)
    emulated.run_tail(a.data_ptr(), 3, n, 0.0, kept.data_ptr())
    assert kept.tolist() == [6, 4, 0]


@pytest.mark.parametrize("n, cut", [(130, 130), (130, 96), (128, 64), (128, 0)])
def test_clear_tail_clears_the_dropped_taus_and_the_columns_past_the_cut(emulated, n, cut):
    """tau past each matrix's kept columns (or past the cut, the smaller), H past the cut (float4 writes
    where the cut and n allow, else one float at a time), and nothing else."""
    h = torch.randn((4, n, n), generator=torch.Generator().manual_seed(4))
    tau = torch.randn((4, n), generator=torch.Generator().manual_seed(5))
    for kept in (torch.tensor([n, 65, 0, 129], dtype=torch.int32), None):
        want_h, want_tau = h.clone(), tau.clone()
        want_h[:, :, cut:] = 0.0
        for b in range(4):
            want_tau[b, cut if kept is None else min(cut, int(kept[b])):] = 0.0
        got_h, got_tau = h.clone(), tau.clone()
        emulated.run_clear_tail(got_h.data_ptr(), got_tau.data_ptr(), 4, n, cut,
                                None if kept is None else kept.data_ptr())
        assert torch.equal(got_h, want_h) and torch.equal(got_tau, want_tau), kept
