"""Compile-ahead: the process start_precompile makes, its report, failures, kills, and what it compiles.

Real CUDA compiles need ptxas (Triton's own or one on PATH); tests that compile skip without
one.  The interception path itself (fake CUDA inputs, target-only driver, launch turned into a
compile request) runs everywhere: ``jit_cache_hook`` records each compile request and vetoes it.

Tests that import Triton without ``TRITON_INTERPRET=1`` run in a fresh interpreter (``isolated``):
Triton decides at import whether its own ``@jit`` helpers (``tl.sum``'s combine functions, ...)
are interpreted, and the suite's interpreter tests fail in a process that imported it otherwise.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kernels.harness.precompile import (CompileTarget, PrecompileReport, compile_only, parse_shapes,
                                        precompile_in_process, read_report, start_precompile, write_report)

ROOT = Path(__file__).resolve().parents[2]

KERNEL_CANDIDATE = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _copy(X, Y, n, NP: tl.constexpr):
    offs = tl.arange(0, NP)
    tl.store(Y + offs, tl.load(X + offs, mask=offs < n), mask=offs < n)


def custom_kernel(A):
    if not A.is_cuda:
        raise RuntimeError("expected a CUDA tensor")
    n = A.shape[-1]
    H = torch.empty_like(A)
    warps = 4 if n > 32 else 1
    _copy[(1,)](A, H, n, NP=max(16, triton.next_power_of_2(n)), num_warps=warps)
    return H, torch.empty((A.shape[0], n), dtype=A.dtype, device=A.device)
'''


def _write(tmp_path: Path, name: str, source: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return path


def _can_compile_for_cuda() -> bool:
    """Whether Triton will find a ptxas (its own, TRITON_PTXAS_PATH or PATH), without importing Triton."""
    spec = importlib.util.find_spec("triton")
    if spec is None or not spec.submodule_search_locations:
        return False
    bundled = Path(list(spec.submodule_search_locations)[0]) / "backends" / "nvidia" / "bin" / "ptxas"
    return bundled.is_file() or Path(os.environ.get("TRITON_PTXAS_PATH", "/nonexistent")).is_file() or bool(
        shutil.which("ptxas"))


def isolated(test):
    """Run ``test`` in a fresh pytest process without TRITON_INTERPRET (see the module docstring)."""

    @functools.wraps(test)
    def wrapper(*args, **kwargs):
        if os.environ.get("QRSEARCH_TRITON_ISOLATED") == "1":
            return test(*args, **kwargs)
        node = os.environ["PYTEST_CURRENT_TEST"].rsplit(" (", 1)[0]
        env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "PYTEST_CURRENT_TEST")}
        env["QRSEARCH_TRITON_ISOLATED"] = "1"
        result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                                 "-W", "ignore::UserWarning", node], cwd=ROOT, env=env, capture_output=True,
                                text=True, timeout=900)
        assert result.returncode == 0, result.stdout[-4000:]
        assert " passed" in result.stdout, result.stdout[-2000:]  # ran, not skipped or deselected

    return wrapper


needs_ptxas = pytest.mark.skipif(not _can_compile_for_cuda(), reason="no ptxas to compile CUDA kernels with")


@pytest.fixture
def clean_env(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    return monkeypatch


def test_process_hides_cuda_uses_the_cache_pins_cpus_and_gets_no_secrets(tmp_path, clean_env):
    probe = tmp_path / "probe.json"
    candidate = _write(tmp_path, "probe.py", f'''
        import json, os
        json.dump({{"cuda": os.environ.get("CUDA_VISIBLE_DEVICES"), "cache": os.environ.get("TRITON_CACHE_DIR"),
                   "secret": os.environ.get("OPENAI_API_KEY"), "extra": os.environ.get("QRSEARCH_PROBE"),
                   "cpus": sorted(os.sched_getaffinity(0)), "nice": os.nice(0)}}, open({str(probe)!r}, "w"))

        def custom_kernel(A):
            return A, A
    ''')
    clean_env.setenv("OPENAI_API_KEY", "sk-must-not-leak")
    clean_env.setenv("CUDA_VISIBLE_DEVICES", "0")
    cpu = min(os.sched_getaffinity(0))
    parent_nice = os.nice(0)
    report_path = tmp_path / "out" / "report.json"
    proc = start_precompile(candidate, [(2, 8)], cache_dir=tmp_path / "cache", target=CompileTarget(),
                            report_path=report_path, cpus=[cpu],
                            env_extra={"QRSEARCH_PROBE": "yes", "CUDA_VISIBLE_DEVICES": "0"})
    assert proc.wait(timeout=240) == 0
    seen = json.loads(probe.read_text())
    assert seen["cuda"] == ""  # forced even over env_extra
    assert seen["cache"] == str((tmp_path / "cache").resolve())
    assert seen["secret"] is None
    assert seen["extra"] == "yes"
    assert seen["cpus"] == [cpu]
    assert seen["nice"] > parent_nice
    report = read_report(report_path)
    assert report is not None and report.ok and report.shapes == [(2, 8)]
    assert report.kernels_compiled == 0 and report.kernels_cached == 0  # that candidate launches no kernel


def test_report_round_trip_and_unreadable_reports(tmp_path):
    report = PrecompileReport(ok=False, seconds=1.5, shapes=[(20, 32), (40, 176)], kernels_compiled=3,
                              kernels_cached=1, error="40x352: ValueError: boom")
    path = tmp_path / "r.json"
    write_report(report, path)
    assert read_report(path) == report
    assert read_report(tmp_path / "missing.json") is None
    (tmp_path / "half.json").write_text('{"ok": true, "seconds"')
    assert read_report(tmp_path / "half.json") is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["half.json", "r.json"]  # no temp file left behind


def test_shapes_parse_and_reject_bad_input():
    assert parse_shapes("20x32,640x512") == [(20, 32), (640, 512)]
    with pytest.raises(ValueError, match="bad shape '0x32'"):
        parse_shapes("0x32")
    with pytest.raises(ValueError, match="bad shape"):
        parse_shapes("20by32")


@pytest.mark.parametrize("source, expected", [
    ("raise SystemExit(3)\n", "error while importing: SystemExit"),
    ("import no_such_module_qrsearch\n", "import failed: ModuleNotFoundError"),
    ("def custom_kernel(A):\n    raise ValueError('bad\\nsecond line')\n", "ValueError: bad"),
])
@isolated
def test_a_failing_candidate_gives_a_one_line_error(tmp_path, clean_env, source, expected):
    report = precompile_in_process(_write(tmp_path, "bad.py", source), [(2, 8), (2, 16)], CompileTarget())
    assert not report.ok
    assert expected in report.error
    assert "\n" not in report.error and "second line" not in report.error
    assert report.shapes == []


@isolated
def test_one_failing_shape_keeps_the_others(tmp_path, clean_env):
    candidate = _write(tmp_path, "picky.py", '''
        def custom_kernel(A):
            if A.shape[-1] == 16:
                raise ValueError("no 16")
            return A, A
    ''')
    report = precompile_in_process(candidate, [(2, 8), (2, 16), (3, 32)], CompileTarget())
    assert not report.ok and report.error == "2x16: ValueError: no 16"
    assert report.shapes == [(2, 8), (3, 32)]


def test_interpreted_kernels_are_reported_not_compiled(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    report = precompile_in_process(_write(tmp_path, "k.py", KERNEL_CANDIDATE), [(2, 8)], CompileTarget())
    assert not report.ok and "TRITON_INTERPRET=1" in report.error


def test_a_hanging_candidate_is_killed_with_its_session(tmp_path, clean_env):
    started = tmp_path / "started"
    candidate = _write(tmp_path, "hang.py", f'''
        import time

        def custom_kernel(A):
            open({str(started)!r}, "w").close()
            time.sleep(600)
    ''')
    report_path = tmp_path / "report.json"
    proc = start_precompile(candidate, [(2, 8)], cache_dir=tmp_path / "cache", target=CompileTarget(),
                            report_path=report_path)
    assert os.getpgid(proc.pid) == proc.pid  # its own session: killpg takes it and its children
    for _ in range(300):
        if started.exists():
            break
        try:
            proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            continue
        pytest.fail(f"precompile ended early: {(tmp_path / 'report.json.log').read_text()[-500:]}")
    else:
        pytest.fail("the candidate was never called")
    assert proc.poll() is None  # inside custom_kernel, hanging
    os.killpg(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=30) == -signal.SIGKILL
    assert read_report(report_path) is None  # killed: no report, the caller knows nothing was precompiled


def test_a_stale_report_is_removed_when_a_new_precompile_starts(tmp_path, clean_env):
    report_path = tmp_path / "report.json"
    write_report(PrecompileReport(ok=True, seconds=0, shapes=[(1, 1)], kernels_compiled=9, kernels_cached=0),
                 report_path)
    proc = start_precompile(tmp_path / "absent.py", [(2, 8)], cache_dir=tmp_path / "cache",
                            target=CompileTarget(), report_path=report_path)
    assert read_report(report_path) is None or read_report(report_path).kernels_compiled == 0
    assert proc.wait(timeout=240) == 0
    report = read_report(report_path)
    assert report is not None and not report.ok and "no such candidate file" in report.error


@isolated
def test_launches_become_compile_requests_for_the_target(tmp_path, clean_env):
    """Without compiling: the JIT's own cache hook sees each request (and vetoes it)."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from triton import knobs

    from kernels.candidate import load_candidate

    requests: list[dict] = []

    def hook(*, key, repr, fn, compile, is_manual_warmup, already_compiled):
        names = fn.jit_function.arg_names
        requests.append({"constants": {names[k[0]]: v for k, v in compile["constants"].items()},
                         "num_warps": compile["num_warps"], "signature": compile["signature"],
                         "warmup": is_manual_warmup})
        return True  # skip the compile

    clean_env.setattr(knobs.runtime, "jit_cache_hook", hook)
    target = CompileTarget(arch=90, sm_count=7)
    from triton.runtime.jit import JITFunction

    originals = (torch.cuda.get_device_properties, torch.geqrf, JITFunction.run)
    with compile_only(target):
        from triton.runtime.driver import driver

        assert driver.active.get_current_target().arch == 90
        assert torch.cuda.get_device_properties(0).multi_processor_count == 7
        kernel = load_candidate(_write(tmp_path, "k.py", KERNEL_CANDIDATE))
        for batch, n in [(2, 8), (3, 40)]:
            with FakeTensorMode():
                kernel(torch.empty((batch, n, n), device="cuda"))
    assert [r["constants"]["NP"] for r in requests] == [16, 64]
    assert [r["num_warps"] for r in requests] == [1, 4]
    assert all(r["warmup"] for r in requests)  # compile-only: no launch follows
    assert requests[0]["signature"]["X"] == "*fp32"
    # Everything patched is put back.
    assert (torch.cuda.get_device_properties, torch.geqrf, JITFunction.run) == originals


@isolated
def test_stub_addresses_keep_the_alignment_of_views():
    import torch

    from kernels.harness.precompile import _pointer_stub_class, _stub_arguments

    stub = _pointer_stub_class()
    base = torch.empty(64)
    for offset in (0, 1, 4, 5):
        view = base[offset:]
        stubbed = _stub_arguments((view, 3), stub)
        assert stubbed[1] == 3
        assert stubbed[0].dtype == torch.float32
        assert (stubbed[0].data_ptr() % 16 == 0) == (offset * 4 % 16 == 0)


@needs_ptxas
def test_a_second_process_finds_every_kernel_in_the_cache(tmp_path, clean_env):
    """Real CUDA compiles on the CPU: the first process compiles, a fresh one only hits."""
    candidate = _write(tmp_path, "k.py", KERNEL_CANDIDATE)
    shapes = [(2, 8), (2, 12), (3, 40)]  # n=8 and n=12 share NP=16 and warps: one kernel
    reports = []
    for attempt in range(2):
        path = tmp_path / f"report{attempt}.json"
        proc = start_precompile(candidate, shapes, cache_dir=tmp_path / "cache", target=CompileTarget(),
                                report_path=path)
        assert proc.wait(timeout=300) == 0
        reports.append(read_report(path))
    first, second = reports
    assert first.ok, first.error
    assert (first.kernels_compiled, first.kernels_cached) == (2, 0)
    assert second.ok and (second.kernels_compiled, second.kernels_cached) == (0, 2)
    assert first.shapes == second.shapes == shapes
    # Another target is another key: nothing cached for it yet.
    other = tmp_path / "report_sm80.json"
    proc = start_precompile(candidate, shapes[:1], cache_dir=tmp_path / "cache", target=CompileTarget(arch=80),
                            report_path=other)
    assert proc.wait(timeout=300) == 0
    assert (read_report(other).kernels_compiled, read_report(other).kernels_cached) == (1, 0)


@pytest.mark.gpu
def test_the_gpu_child_hits_the_cache_a_cuda_hidden_precompile_filled(tmp_path, clean_env):
    from kernels.families import FAMILIES_DIR

    family = FAMILIES_DIR / "householder_unblocked.py"
    shapes = [(4, 16), (4, 64), (2, 128)]
    report_path = tmp_path / "report.json"
    proc = start_precompile(family, shapes, cache_dir=tmp_path / "cache", target=CompileTarget(),
                            report_path=report_path)
    assert proc.wait(timeout=300) == 0
    report = read_report(report_path)
    assert report is not None and report.ok, report and report.error
    assert report.kernels_compiled == 3
    from kernels.harness.process import child_env

    run = subprocess.run(
        [sys.executable, str(ROOT / "lab" / "precompile_check.py"), "--run", str(family), "--shapes",
         ",".join(f"{b}x{n}" for b, n in shapes)],
        env=child_env({"TRITON_CACHE_DIR": str(tmp_path / "cache")}), capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert (seen["compiled"], seen["cache_hits"]) == (0, report.kernels_compiled)


CUDA_EXTENSION_CANDIDATE = '''
import torch


def custom_kernel(A):
    from torch.utils.cpp_extension import load_inline

    major, minor = torch.cuda.get_device_capability(A.device)
    arch = "%d%d" % (major, minor)
    ext = load_inline(name="toy_ext_" + arch, cpp_sources="", cuda_sources="", functions=["qr"],
                      extra_cuda_cflags=["-gencode=arch=compute_%s,code=sm_%s" % (arch, arch)])
    return ext.qr(A, 4)
'''


@isolated
def test_a_cuda_extension_is_built_for_the_target_and_never_launched(tmp_path, clean_env):
    """A candidate that builds CUDA C++ with load_inline: the compile-only process builds it for
    the evaluator's target (here a fake load_inline records the build), its functions launch
    nothing there, the build counts as a compile, and one already on disk as a cache hit."""
    from torch.utils import cpp_extension

    builds: list[tuple[str, list[str]]] = []

    class Built:
        @staticmethod
        def qr(*args):
            raise AssertionError("a compile-only process launched the extension")

    def fake_load_inline(name, **kwargs):
        builds.append((name, kwargs["extra_cuda_cflags"]))
        return Built()

    clean_env.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    clean_env.setattr(cpp_extension, "load_inline", fake_load_inline)
    candidate = _write(tmp_path, "cuda_cand.py", CUDA_EXTENSION_CANDIDATE)
    target = CompileTarget(arch=90, sm_count=132)
    first = precompile_in_process(candidate, [(2, 32), (4, 64)], target)
    assert first.ok, first.error
    assert builds and all(name == "toy_ext_90" for name, _ in builds)
    assert builds[0][1] == ["-gencode=arch=compute_90,code=sm_90"]
    assert first.kernels_compiled == 2 and first.kernels_cached == 0  # the fake leaves no library behind
    assert [name for name, _ in first.kernel_seconds] == ["cuda:toy_ext_90"] * 2
    assert "nvcc" in first.stage_seconds
    assert cpp_extension.load_inline is fake_load_inline  # the counting wrapper is gone again
    library = Path(cpp_extension._get_build_directory("toy_ext_90", False)) / "toy_ext_90.so"
    library.write_bytes(b"built")
    second = precompile_in_process(candidate, [(2, 32)], target)
    assert second.ok and second.kernels_compiled == 0 and second.kernels_cached == 1
