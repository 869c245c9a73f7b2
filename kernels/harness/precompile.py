"""Compile a candidate's Triton kernels ahead of its evaluation, without a GPU.

Triton compiles on the CPU.  ``start_precompile`` runs
``python -m kernels.harness.precompile`` with CUDA hidden
(``CUDA_VISIBLE_DEVICES=""``), the run's ``TRITON_CACHE_DIR``, the evaluation
child's scrubbed environment, lower priority and its own CPUs.  That process
calls the candidate's ``custom_kernel`` once per shape on fake CUDA tensors
(torch's FakeTensorMode: torch ops compute shapes and strides only) while

- Triton's active driver is one that only reports the evaluator's target
  (``GPUTarget("cuda", 90, 32)`` on an H200), so no device is needed;
- every ``JITFunction`` launch becomes a compile-only warm-up, its tensor
  arguments replaced by stubs with the tensor's dtype and an address that has
  the real one's alignment (the caching allocator's blocks are 512-byte
  aligned, so a view's alignment is its byte offset's);
- ``torch.cuda.get_device_properties`` reports the target's SM count, because
  families choose constexprs from it.

The JIT's key is then the one the real child computes (same source and starting
line, argument specialisation, options, target, Triton build and knobs), so the
child's launches load the kernels from the cache instead of compiling them.  A
candidate that builds CUDA C++ with ``torch.utils.cpp_extension.load_inline`` builds it
here for real into the run's ``TORCH_EXTENSIONS_DIR`` (nvcc needs no device), and the built
module's functions then do nothing (:func:`~kernels.harness.compile_stats.count_extension_builds`).
A failure is never fatal: the child compiles what is missing as before.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Iterator, Mapping, Sequence

from pydantic import BaseModel, ConfigDict

from kernels.harness.compile_shards import Shard, parse_shard

# Where the fake tensors' stubs "live": any 512-byte aligned address will do.
_STUB_BASE_ADDRESS = 1 << 32
_NICE_INCREMENT = 10  # below the timing child, which must never wait for a compile


class CompileTarget(BaseModel):
    """The GPU the kernels are compiled for (what ``driver.active.get_current_target()`` says there)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    backend: str = "cuda"
    arch: int = 90
    warp_size: int = 32
    sm_count: int = 132  # what torch.cuda.get_device_properties(...).multi_processor_count reports (H200)


class PrecompileReport(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    ok: bool
    seconds: float
    shapes: list[tuple[int, int]]  # (batch, n) done
    kernels_compiled: int  # compiled now
    kernels_cached: int  # already in the cache
    error: str | None = None  # one line
    # Where the compile time went: seconds per compiled kernel (name, seconds; slowest first)
    # and per lowering stage.  Absent in reports written before they were recorded.
    kernel_seconds: list[tuple[str, float]] = []
    stage_seconds: dict[str, float] = {}
    # CPU seconds the whole process took, its start-up and ptxas included (0: not recorded):
    # what the scheduler learns a compile's cost from (wall time stretches while paused).
    cpu_s: float = 0.0


def _one_line(text: str, limit: int = 400) -> str:
    return " ".join(text.split())[:limit]


def _describe(exc: BaseException) -> str:
    first = (str(exc).strip().splitlines() or [""])[0]
    return _one_line(f"{type(exc).__name__}: {first}")


def format_shapes(shapes: Sequence[tuple[int, int]]) -> str:
    return ",".join(f"{b}x{n}" for b, n in shapes)


def parse_shapes(text: str) -> list[tuple[int, int]]:
    shapes = []
    for item in filter(None, text.split(",")):
        batch, _, n = item.partition("x")
        if not (batch.isdigit() and n.isdigit()) or int(batch) < 1 or int(n) < 1:
            raise ValueError(f"bad shape {item!r}: expected BATCHxN with positive integers")
        shapes.append((int(batch), int(n)))
    return shapes


# ---------------------------------------------------------------- the parent side


def start_precompile(candidate: Path, shapes: Sequence[tuple[int, int]], *, cache_dir: Path,
                     target: CompileTarget, report_path: Path, cpus: Sequence[int] | None = None,
                     env_extra: Mapping[str, str] | None = None, shard: tuple[int, int] = (0, 1)
                     ) -> subprocess.Popen:
    """Start a compile-only process for ``candidate`` at ``shapes``; it writes ``report_path`` at the end.
    With ``shard=(i, count)`` it compiles only its share of the kernels (:mod:`.compile_shards`).

    The process has its own session, so ``os.killpg(proc.pid, SIGKILL)`` at the caller's
    deadline ends it and anything it started.  Its output goes to ``report_path`` + ``.log``."""
    from kernels.harness.process import REPO_ROOT, child_env  # here: it imports torch, main() must not yet

    env = child_env(dict(env_extra or {}))
    # Forced after env_extra: the process must never see a GPU, and must fill this cache.
    env["CUDA_VISIBLE_DEVICES"] = ""
    env["TRITON_CACHE_DIR"] = str(Path(cache_dir).resolve())
    argv = [sys.executable, "-m", "kernels.harness.precompile", "--candidate", str(Path(candidate).resolve()),
            "--shapes", format_shapes(shapes), "--target", target.model_dump_json(),
            "--report", str(Path(report_path).resolve())]
    if cpus:
        argv += ["--cpus", ",".join(str(c) for c in cpus)]
    if shard[1] > 1:
        argv += ["--shard", f"{shard[0]}/{shard[1]}"]
    report_path = Path(report_path)
    report_path.parent.mkdir(parents=True, exist_ok=True)
    report_path.unlink(missing_ok=True)  # a stale report must not pass for this run's
    with open(report_path.with_name(report_path.name + ".log"), "wb") as log:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                                cwd=REPO_ROOT, start_new_session=True)


def read_report(report_path: Path) -> PrecompileReport | None:
    """The report, or None while there is none (not finished, killed) or it is unreadable."""
    try:
        return PrecompileReport.model_validate_json(Path(report_path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def write_report(report: PrecompileReport, report_path: Path) -> None:
    tmp = report_path.with_name(f".{report_path.name}.{os.getpid()}.tmp")
    tmp.write_text(report.model_dump_json(), encoding="utf-8")
    os.replace(tmp, report_path)  # readers never see half a report


# ---------------------------------------------------------------- the compile-only process


class _TargetOnlyDriver:
    """Stands in for Triton's CUDA driver where there is no device: reports the target, launches nothing."""

    def __init__(self, target: Any) -> None:
        self._target = target

    @staticmethod
    def is_active() -> bool:
        return False

    def get_current_target(self) -> Any:
        return self._target

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device: int | None = None) -> int:
        return 0

    def get_active_torch_device(self) -> Any:
        import torch

        return torch.device("cuda", 0)

    def get_device_interface(self) -> Any:
        raise RuntimeError("compile-only process: there is no device")

    def get_benchmarker(self) -> Any:
        raise RuntimeError("compile-only process: nothing can be timed here")


def _pointer_stub_class() -> type:
    from triton.runtime.jit import MockTensor

    class PointerStub(MockTensor):
        """What a launch argument tensor is to the specialiser: a dtype and an address."""

        def __init__(self, dtype: Any, address: int) -> None:
            super().__init__(dtype)
            self._address = address

        def data_ptr(self) -> int:  # type: ignore[override]
            return self._address

    return PointerStub


def _stub_arguments(value: Any, stub: type) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return stub(value.dtype, _STUB_BASE_ADDRESS + value.storage_offset() * value.element_size())
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_stub_arguments(v, stub) for v in value)
    return value


@contextlib.contextmanager
def compile_only(target: CompileTarget, shard: Shard | None = None) -> Iterator[None]:
    """Inside: Triton launches compile and return, for ``target``, with no device present (with
    ``shard``: only the launches it owns compile; the others just return)."""
    import torch
    from triton.backends.compiler import GPUTarget
    from triton.runtime.driver import driver
    from triton.runtime.jit import JITFunction

    stub = _pointer_stub_class()
    original_run = JITFunction.run
    original_active = driver._active
    original_properties = torch.cuda.get_device_properties
    original_capability = torch.cuda.get_device_capability
    original_geqrf = torch.geqrf

    def run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
        args = tuple(_stub_arguments(a, stub) for a in args)
        kwargs = {k: _stub_arguments(v, stub) for k, v in kwargs.items()}
        if shard is not None and not shard.owns(self, args, kwargs):
            return None  # another shard compiles it; launchers never read what a launch returns
        return original_run(self, *args, grid=grid, warmup=True, **kwargs)

    properties = SimpleNamespace(name="compile-only target", major=target.arch // 10, minor=target.arch % 10,
                                 multi_processor_count=target.sm_count, warp_size=target.warp_size)

    def geqrf(A: torch.Tensor, *args: Any, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        # Delegated shapes compile nothing; fake CUDA tensors may lack geqrf's meta kernel.
        m, n = A.shape[-2], A.shape[-1]
        return torch.empty_like(A), A.new_empty((*A.shape[:-2], min(m, n)))

    driver.set_active(_TargetOnlyDriver(GPUTarget(target.backend, target.arch, target.warp_size)))
    JITFunction.run = run  # type: ignore[method-assign]
    torch.cuda.get_device_properties = lambda *a, **k: properties  # type: ignore[assignment]
    torch.cuda.get_device_capability = lambda *a, **k: (properties.major, properties.minor)  # type: ignore[assignment]
    torch.geqrf = geqrf  # type: ignore[assignment]
    try:
        yield
    finally:
        JITFunction.run = original_run  # type: ignore[method-assign]
        driver._active = original_active  # reset_active() would look for a real device
        torch.cuda.get_device_properties = original_properties  # type: ignore[assignment]
        torch.cuda.get_device_capability = original_capability  # type: ignore[assignment]
        torch.geqrf = original_geqrf  # type: ignore[assignment]


def precompile_in_process(candidate: Path, shapes: Sequence[tuple[int, int]],
                          target: CompileTarget, shard: Shard | None = None) -> PrecompileReport:
    """Call the candidate at ``shapes`` on fake CUDA inputs with launches turned into compiles.

    Never raises: whatever goes wrong becomes ``ok=False`` and a one-line ``error`` (the
    shapes done before it stay listed and their kernels stay in the cache)."""
    started = time.perf_counter()
    done: list[tuple[int, int]] = []
    errors: list[str] = []
    counter = None
    try:
        if os.environ.get("TRITON_INTERPRET") == "1":
            raise RuntimeError("TRITON_INTERPRET=1: kernels are interpreted, there is nothing to compile")
        import torch
        from torch._subclasses.fake_tensor import FakeTensorMode

        from kernels.candidate import load_candidate
        from kernels.harness.compile_stats import builds_cuda, count_extension_builds, install_compile_counter

        counter = install_compile_counter()
        undo_builds = None
        path = Path(candidate)
        if path.is_file() and builds_cuda(path.read_text(encoding="utf-8", errors="replace")):
            # CUDA C++ builds for real (nvcc needs no device; the family asks the patched
            # get_device_capability for its target), then its functions launch nothing.
            undo_builds = count_extension_builds(counter, launch=False)
        try:
            with compile_only(target, shard):
                kernel = load_candidate(candidate)
                for batch, n in shapes:
                    try:
                        with FakeTensorMode():
                            kernel(torch.empty((batch, n, n), dtype=torch.float32, device="cuda"))
                        done.append((batch, n))
                    except Exception as exc:  # noqa: BLE001 - the candidate may raise anything
                        errors.append(f"{batch}x{n}: {_describe(exc)}")
        finally:
            counter.remove()
            if undo_builds is not None:
                undo_builds()
    except BaseException as exc:  # noqa: BLE001 - SystemExit from a candidate's import included
        errors.append(_describe(exc))
    return PrecompileReport(
        ok=not errors, seconds=time.perf_counter() - started, shapes=done,
        kernels_compiled=counter.compiled if counter else 0, kernels_cached=counter.cache_hits if counter else 0,
        error=_one_line("; ".join(errors)) if errors else None,
        kernel_seconds=sorted(zip(counter.compiled_names, counter.compile_seconds), key=lambda k: -k[1])
        if counter else [],
        stage_seconds=dict(counter.stage_seconds) if counter else {})


def _cpu_seconds() -> float:
    """CPU time of this process and its finished children (ptxas)."""
    import resource

    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def compile_request(candidate: Path, shapes: str, target: str, report_path: Path, cpus: str = "",
                    shard: str = "0/1", nice: bool = True) -> None:
    """What a compile process does, whole: take its CPUs (and a lower priority), compile, write
    the report, print it, and end the process (a candidate's atexit hooks cannot change the
    report).  Run by ``python -m kernels.harness.precompile`` and by each child of the fork
    server (:mod:`kernels.harness.compile_server`)."""
    started = time.perf_counter()
    try:
        # Before torch starts its thread pools, so that they are born on these CPUs.
        if cpus:
            os.sched_setaffinity(0, {int(c) for c in cpus.split(",")})
        if nice:
            os.nice(_NICE_INCREMENT)
        report = precompile_in_process(candidate, parse_shapes(shapes), CompileTarget.model_validate_json(target),
                                       parse_shard(shard))
    except Exception as exc:  # noqa: BLE001 - bad arguments still get a report
        traceback.print_exc()
        report = PrecompileReport(ok=False, seconds=time.perf_counter() - started, shapes=[],
                                  kernels_compiled=0, kernels_cached=0, error=_describe(exc))
    report = report.model_copy(update={"cpu_s": _cpu_seconds()})
    write_report(report, report_path)
    print(json.dumps(report.model_dump(mode="json")), flush=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kernels.harness.precompile")
    parser.add_argument("--candidate", type=Path, required=True)
    parser.add_argument("--shapes", required=True, help="BATCHxN,BATCHxN,...")
    parser.add_argument("--target", required=True, help="CompileTarget as JSON")
    parser.add_argument("--report", type=Path, required=True)
    parser.add_argument("--cpus", default="", help="comma-separated CPU ids to run on")
    parser.add_argument("--shard", default="0/1", help="I/N: compile only shard I of N of the kernels")
    args = parser.parse_args(argv)
    compile_request(args.candidate, args.shapes, args.target, args.report, args.cpus, args.shard)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
