"""The evaluation child process: loads one candidate, runs its cases, reports.

Run as ``python -m kernels.harness.child --result-fd FD [JOB | --wait]``.
With ``--wait`` it imports torch and initialises the device first, then reads
the job path from stdin: a warm spare that hides start-up cost.  Every message
is one of :mod:`kernels.harness.protocol`'s, a JSON line on FD (never stdout,
which the candidate may print to).

A process runs one candidate, or, when each job asks for it (``Job.keep_alive``), further
candidates of the same structure (children that differ only in PARAMS), so their start-up and
torch import are paid once.  It is reused only after a clean job that altered nothing trusted
and left no thread running; the runner re-runs in a fresh process any job with a case that fails in a
reused one, so a failure is blamed on the candidate that caused it.  After a CUDA error it
reports and exits, because such an error poisons the whole context.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Callable

import torch

from kernels.candidate import CandidateError, load_candidate
from kernels.harness.job import Job
from kernels.harness.profiling import profile_call
from kernels.harness.protocol import (GO, INIT, CaseFinished, CaseStarted, ChildMessage, Done, Fatal, JitCounts, Loaded,
                                      Ready, TurnAsked, TurnGivenBack, Warm, encode)
from kernels.harness.results import CaseResult, TimingStats
from kernels.floors import floors
from kernels.harness.timing import DeviceClock, DeviceTurn, call_verified, measure, timed_input_seed
from kernels.suites import Case
from kernels import verify as verify_module
from kernels.verify import VerifyResult
from kernels import inputs as inputs_module
from population.outcomes import CaseStatus


# torch.profiler's post-processing grows with the events recorded: torch.geqrf looping
# cuSOLVER over 640 matrices (1 s a call) took minutes to summarise on an H200, and a
# candidate that delegated 60x1024 to geqrf (0.23 s) kept the search's single evaluator busy
# for over four minutes.  Calls that slow have nothing for a profile to tune anyway.
PROFILE_MAX_MS = 50.0


class Reporter:
    def __init__(self, fd: int) -> None:
        self._fd = fd

    def send(self, message: ChildMessage) -> None:
        data = encode(message)
        while data:
            written = os.write(self._fd, data)
            data = data[written:]


def versions() -> dict[str, str]:
    info = {"python": platform.python_version(), "torch": torch.__version__}
    try:
        import triton

        info["triton"] = triton.__version__
    except Exception:  # triton is optional on CPU-only machines
        pass
    if torch.cuda.is_available():
        info["cuda"] = str(torch.version.cuda)
    return info


def _trusted() -> dict[str, Any]:
    """The callables a verdict or a time depends on, as they are before the candidate loads."""
    items: dict[str, Any] = {
        "householder_product": torch.linalg.householder_product,
        "triu": torch.triu,
        "tril": torch.tril,
        "matmul": torch.Tensor.__matmul__,
        "equal": torch.equal,
        "isfinite": torch.isfinite,
        "verify_qr": verify_module.verify_qr,
        "householder_q64": verify_module.householder_q64,
        "form_q": verify_module._form_q,
        "generate_input": inputs_module.generate_input,
        "perf_counter": time.perf_counter,
        "synchronize": torch.cuda.synchronize,
        "event": torch.cuda.Event,
        "event_record": torch.cuda.Event.record,
        "event_elapsed": torch.cuda.Event.elapsed_time,
        "tf32": torch.backends.cuda.matmul.allow_tf32,
        "matmul_precision": torch.get_float32_matmul_precision(),
    }
    return items


def _tampered(before: dict[str, Any]) -> list[str]:
    now = _trusted()
    return [name for name, value in before.items() if now[name] is not value and now[name] != value]


def _describe(exc: BaseException, candidate: Path) -> str:
    first = (str(exc).strip().splitlines() or [""])[0][:500]
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == str(candidate)]
    where = f" (candidate line {frames[-1].lineno})" if frames else ""
    return f"{type(exc).__name__}: {first}{where}"


def _is_compile_error(exc: BaseException) -> bool:
    names = {cls.__name__ for cls in type(exc).__mro__}
    return bool(names & {"CompilationError", "CompileTimeAssertionFailure", "UnsupportedLanguageConstruct"})


def _cuda_poisoned(exc: BaseException) -> bool:
    if not torch.cuda.is_available():
        return False
    text = str(exc)
    if "CUDA error" in text or "illegal memory access" in text or "unspecified launch failure" in text:
        return True
    try:
        torch.cuda.synchronize()
    except Exception:
        return True
    return False


class PipeTurn(DeviceTurn):
    """A turn asked of the parent (``Job.turns``): :class:`TurnAsked` on the result pipe, then wait
    for its :data:`GO` on stdin; after the region, :class:`TurnGivenBack` and wait for :data:`GO`
    again, for the parent has the device shared again only once no other lane's timed region runs.
    Before asking, this process's queued work must be done: the parent lets another lane time as
    soon as it asks."""

    def __init__(self, reporter: "Reporter") -> None:
        super().__init__()
        self._reporter = reporter

    def _exchange(self, message: TurnAsked | TurnGivenBack) -> None:
        if torch.cuda.is_available():
            try:
                torch.cuda.synchronize()
            except Exception:  # a poisoned context: the case's own error says so
                pass
        self._reporter.send(message)
        if sys.stdin.readline().strip() != GO:
            os._exit(0)  # the parent closed the pipe: it gave up on this job

    def _acquire(self) -> None:
        self._exchange(TurnAsked())

    def _release(self) -> None:
        self._exchange(TurnGivenBack())


def run_case(kernel: Callable, case: Case, job: Job, device: torch.device, clock: DeviceClock,
             candidate: Path, trusted: dict[str, Any]) -> tuple[CaseResult, bool]:
    """Returns the result and whether the process must end (poisoned CUDA context)."""
    began = time.perf_counter()
    profile_s: float | None = None
    try:
        if job.mode == "verify" or job.gate:
            verdict, _, _ = call_verified(kernel, case, case.seed, device,
                                          exact_q=case.name not in job.fast_gate_cases)
        else:
            verdict = VerifyResult(ok=True, message="gated by an earlier verify-mode job")
        stats: TimingStats | None = None
        profile = None
        if verdict.ok and job.mode == "bench":
            stats, timed = measure(kernel, case, device, clock, job.policy)
            if stats is None or not job.gate:
                verdict = timed  # the failure, or the evidence when no gate call ran here
            if stats is not None and job.profile and stats.median_ms <= PROFILE_MAX_MS:
                profiling = time.perf_counter()
                with clock.turn():  # kernel durations as they are with the device alone
                    profile = profile_call(kernel, case, device, timed_input_seed(case, 10_000))
                profile_s = time.perf_counter() - profiling
                f = floors(case)
                seconds = stats.median_ms / 1e3
                profile = profile.model_copy(update={
                    "achieved_tflops": case.flops / seconds / 1e12 if seconds else None,
                    "achieved_gbps": case.min_bytes / seconds / 1e9 if seconds else None,
                    "floor_fraction": f.fp32_floor_ms / stats.median_ms if stats.median_ms else None,
                })
    except BaseException as exc:  # noqa: BLE001 - candidates can raise anything, SystemExit too
        if isinstance(exc, torch.cuda.OutOfMemoryError):
            torch.cuda.empty_cache()
            return CaseResult(case=case, status=CaseStatus.ERROR,
                              error=f"out of memory: {_describe(exc, candidate)}"), False
        poisoned = _cuda_poisoned(exc)
        status = CaseStatus.FAILED_COMPILE if _is_compile_error(exc) else CaseStatus.ERROR
        message = _describe(exc, candidate)
        if poisoned:
            message += " (CUDA context unusable; evaluation process ended)"
        return CaseResult(case=case, status=status, error=message), poisoned
    changed = _tampered(trusted)
    if changed:
        return CaseResult(case=case, status=CaseStatus.ERROR,
                          error=f"rejected: candidate altered {', '.join(changed)}"), True
    status = CaseStatus.OK if verdict.ok else CaseStatus.FAILED_VERIFY
    return CaseResult(case=case, status=status, verify=verdict, timing=stats, profile=profile,
                      wall_s=time.perf_counter() - began, profile_s=profile_s), False


def _compile_counter() -> Any:
    """Counts Triton JIT compiles and cache hits in this process (the precompile's hit rate),
    or None where Triton or the counter is unavailable."""
    try:
        from kernels.harness.compile_stats import install_compile_counter

        return install_compile_counter()
    except Exception:  # no triton (CPU-only torch) or a Triton without the hooks: no counts
        return None


def _load_reference(job: Job, reporter: Reporter) -> tuple[Callable, Path] | None:
    if job.reference is None or job.mode != "bench":
        return None
    path = Path(job.reference).resolve()
    try:
        return load_candidate(path), path
    except CandidateError as exc:
        reporter.send(Fatal(status=CaseStatus.ERROR, error=f"the reference {path.name} does not load: {exc}"))
        os._exit(0)


def _with_reference(result: CaseResult, reference: tuple[Callable, Path], case: Case, job: Job,
                    device: torch.device, clock: DeviceClock, trusted: dict[str, Any]) -> CaseResult:
    """Time the reference on the same case right after the candidate (its outputs verified
    too); a reference that fails leaves the candidate's result without a baseline."""
    kernel, path = reference
    ref_job = job.model_copy(update={"gate": False, "profile": False})
    ref, _ = run_case(kernel, case, ref_job, device, clock, path, trusted)
    if ref.ok and ref.timing is not None:
        return result.model_copy(update={"baseline_ms": ref.timing.median_ms})
    return result


def pick_device(requested: str) -> torch.device:
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(requested)


def _run_job(job: Job, reporter: Reporter, counter: Any, trusted: dict[str, Any]) -> bool:
    """Run one job; True if it ended cleanly (no fatal message, no poisoned device)."""
    device = pick_device(job.device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu"
    reporter.send(Ready(device=str(device), device_name=name, versions=versions(), pid=os.getpid()))
    compiled0, hits0 = (counter.compiled, counter.cache_hits) if counter is not None else (0, 0)
    candidate = Path(job.candidate).resolve()
    try:
        kernel = load_candidate(candidate)
    except CandidateError as exc:
        reporter.send(Fatal(status=CaseStatus.FAILED_COMPILE, error=str(exc)))
        return False
    changed = _tampered(trusted)
    if changed:
        reporter.send(Fatal(status=CaseStatus.ERROR,
                            error=f"rejected: candidate altered {', '.join(changed)} on import"))
        return False
    turn = PipeTurn(reporter) if job.turns and job.mode == "bench" else DeviceTurn()
    clock = DeviceClock(device, turn) if job.mode == "bench" else DeviceClock(torch.device("cpu"))
    reference = _load_reference(job, reporter)
    for index, case in enumerate(job.cases):
        reporter.send(CaseStarted(index=index))
        result, must_exit = run_case(kernel, case, job, device, clock, candidate, trusted)
        if reference is not None and result.ok and result.timing is not None and not must_exit:
            result = _with_reference(result, reference, case, job, device, clock, trusted)
        reporter.send(CaseFinished(index=index, result=result))
        if must_exit:
            os._exit(3)
        if job.fail_fast and not result.ok:
            break
    if counter is not None:
        reporter.send(JitCounts(compiled=counter.compiled - compiled0, cache_hits=counter.cache_hits - hits0))
    return True


def _reusable(job: Job, clean: bool, trusted: dict[str, Any], threads: int) -> bool:
    """Whether this process may run another job: only one asked for it (``keep_alive``: the next
    candidate is of the same structure), that ended cleanly, altered nothing a verdict or a time
    depends on, and left no thread behind that could run work during the next one's timing."""
    return job.keep_alive and clean and not _tampered(trusted) and threading.active_count() <= threads


def _preload_host() -> None:
    """Host work every evaluation child would otherwise pay inside its first job: Triton, and
    the key its JIT cache lookups share (a hash of Triton's own files, about 0.3 s once per
    process; an H200 child's first Triton call took 0.5 s where the next took none)."""
    try:
        import triton  # noqa: F401
    except Exception:  # no Triton (CPU-only torch): nothing to preload
        return
    for module_name in ("triton.runtime.cache", "triton.compiler.compiler"):  # where Triton versions keep it
        try:
            module = __import__(module_name, fromlist=["triton_key"])
            key = getattr(module, "triton_key", None)
            if key is not None:
                key()
                return
        except Exception:
            continue


def _preload_device() -> None:
    """The device libraries the verifier uses (cuBLAS, cuSOLVER, the triangular solves), loaded
    by verifying one tiny factorisation: 0.1-0.2 s of every fresh child's first gate on an H200,
    paid here while the child starts under the device gate instead."""
    try:
        a = torch.randn(2, 8, 8, device="cuda")
        out = torch.geqrf(a)
        verify_module.verify_qr(a, out, exact_q=True)
        verify_module.verify_qr(a, out, exact_q=False)
        torch.cuda.synchronize()
    except Exception:  # a warm-up that fails costs its job the same time later, nothing more
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kernels.harness.child")
    parser.add_argument("--result-fd", type=int, required=True)
    parser.add_argument("--wait", action="store_true", help="warm up, then read job paths from stdin")
    parser.add_argument("--init-on-request", action="store_true",
                        help=f"with --wait: after the imports, say 'loaded' and touch the device only "
                             f"once stdin says '{INIT}'")
    parser.add_argument("job", nargs="?")
    args = parser.parse_args(argv)
    reporter = Reporter(args.result_fd)
    if args.wait:
        _preload_host()
        if args.init_on_request:
            # Imports are host work and may overlap a timed call on other CPUs; the context
            # (and even cuInit, which torch.cuda.is_available() calls) waits for the caller's
            # word, given under the device gate.
            reporter.send(Loaded())
            if sys.stdin.readline().strip() != INIT:
                return 0
        if torch.cuda.is_available():
            torch.empty(1, device="cuda")
            _preload_device()
        reporter.send(Warm())
    counter = _compile_counter()
    trusted = _trusted()  # before any candidate loads: a later job is checked against it too
    threads = threading.active_count()
    job_path = None if args.wait else args.job
    while True:
        if args.wait:
            job_path = sys.stdin.readline().strip()
            if not job_path:
                return 0
        job = Job.model_validate_json(Path(str(job_path)).read_text())
        clean = _run_job(job, reporter, counter, trusted)
        reusable = args.wait and _reusable(job, clean, trusted, threads)
        if reusable:
            # Before "done", not after: the caller's hold on the device ends with "done", and
            # freeing memory (cudaFree) must not run beside another process's timed calls.
            gc.collect()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()  # the next candidate starts with the memory a fresh process has
        reporter.send(Done(reusable=reusable))
        sys.stdout.flush()
        if not reusable:
            # Skip interpreter teardown: a candidate's atexit or finalizers cannot change what was reported.
            os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
