"""The parent side of an evaluation: one child process per candidate, limits,
and a report whatever happens in the child.

A crash (segfault, abort, CUDA error), a hang (killed at the limit) or an
exception in the candidate becomes that case's failed result; the caller never
goes down with it.  Cases after a crash or hang are reported as ``skipped``
unless ``keep_going`` asks for a fresh child to run them.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Protocol

from kernels.harness.job import Job
from kernels.harness.results import CaseResult, SuiteReport
from kernels.harness.screen import screen_source
from kernels.harness.settings import RunLimits, TimingPolicy
from kernels.suites import Case
from population.outcomes import CaseStatus

REPO_ROOT = Path(__file__).resolve().parents[2]

# Environment a candidate may see: what torch, triton and CUDA need, nothing else
# (no API keys, tokens or credentials from the caller's environment).
_ENV_EXACT = frozenset(
    {"PATH", "HOME", "USER", "LANG", "TMPDIR", "PYTHONPATH", "PYTHONHASHSEED", "LD_LIBRARY_PATH",
     "VIRTUAL_ENV", "CC", "CXX", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "TZ"}
)
_ENV_PREFIXES = ("LC_", "CUDA_", "NVIDIA_", "TRITON_", "NCCL_", "NVSHMEM_", "TORCH_CUDA_ARCH_LIST",
                 "TORCH_SYMM_MEM_", "TORCH_EXTENSIONS_DIR", "CUBLAS_WORKSPACE_CONFIG")


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in _ENV_EXACT or k.startswith(_ENV_PREFIXES)}
    # The child imports ``kernels`` from this checkout whether or not it is installed.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


class ChildProcess:
    """A started evaluation child that has loaded torch and waits for one job.

    ``staged``: the child imports torch and Triton, says "loaded", and creates its CUDA context
    only when :meth:`init` asks, so that the host work of a start can overlap a timed call
    elsewhere and only the context creation needs the device gate."""

    def __init__(self, env: dict[str, str] | None = None, python: str = sys.executable, *,
                 staged: bool = False) -> None:
        self._read_fd, write_fd = os.pipe()
        self._log = tempfile.TemporaryFile()
        self.started = time.monotonic()
        self.staged = staged
        self.loaded = not staged  # a staged child's imports are done (its "loaded" message)
        self._init_sent = not staged
        argv = [python, "-m", "kernels.harness.child", "--result-fd", str(write_fd), "--wait"]
        self.proc = subprocess.Popen(
            argv + (["--init-on-request"] if staged else []),
            stdin=subprocess.PIPE,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            pass_fds=(write_fd,),
            env=env if env is not None else child_env(),
            cwd=REPO_ROOT,
            start_new_session=True,  # so a kill takes anything the candidate started
        )
        os.close(write_fd)
        self._buffer = b""
        self.warm = False
        self.jobs = 0  # jobs handed to it: more than one only for a reused child
        self.reusable = False  # its last job ended with the child ready for another

    def _expect(self, kind: str, timeout: float) -> bool:
        """Whether the child's next message, within ``timeout`` seconds, is a ``kind`` one."""
        try:
            message = self.next_message(time.monotonic() + timeout)
        except TimeoutError:
            return False
        return message is not None and message.get("type") == kind

    def wait_loaded(self, timeout: float) -> bool:
        """Block until a staged child has done its imports (its "loaded" message; at once for one
        that is not staged).  False if it died or did not get there in ``timeout`` seconds."""
        if not self.loaded:
            self.loaded = self._expect("loaded", timeout)
        return self.loaded

    def init(self) -> None:
        """Tell a loaded staged child to create its CUDA context (then it says "warm")."""
        if not (self.staged and self.loaded):
            raise RuntimeError("init is for a staged child that has said 'loaded'")
        self.tell("init")
        self._init_sent = True

    def wait_warm(self, timeout: float) -> bool:
        """Block until the child has imported torch and initialised the device (its first
        message, or a staged child's message after :meth:`init`), so that starting it cannot
        overlap work that follows.  False if it died or did not get there in ``timeout`` seconds."""
        if not self.warm:
            if not self._init_sent:
                return False  # a staged child must load and be told to init first
            self.warm = self._expect("warm", timeout)
        return self.warm

    def pin(self, cpus: frozenset[int]) -> bool:
        """Restrict every thread of the child (torch's pools included) to ``cpus``, so a timing
        child keeps off the cores that compile ahead.  False where the OS does not allow it."""
        try:
            for tid in os.listdir(f"/proc/{self.proc.pid}/task"):
                os.sched_setaffinity(int(tid), cpus)
        except (OSError, AttributeError, ValueError):
            return False
        return True

    @classmethod
    def pinned(cls, cpus: frozenset[int] | None, env: dict[str, str] | None = None) -> "ChildProcess":
        """A child restricted to ``cpus`` from its start (threads it makes later inherit them)."""
        child = cls(env=env)
        if cpus:
            child.pin(cpus)
        return child

    def submit(self, job_path: Path) -> None:
        self.jobs += 1
        self.reusable = False
        self.tell(str(job_path))

    def tell(self, line: str) -> None:
        """One line on the child's stdin: "init", a job's path, or "go" for a turn the job asked for."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{line}\n".encode())
        self.proc.stdin.flush()

    def next_message(self, deadline: float) -> dict | None:
        """The next JSON message, None at end of stream; raises TimeoutError at the deadline."""
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            ready, _, _ = select.select([self._read_fd], [], [], min(remaining, 1.0))
            if not ready:
                continue
            chunk = os.read(self._read_fd, 1 << 16)
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            return json.loads(line)
        except json.JSONDecodeError:
            return {"type": "garbage", "line": line[:200].decode(errors="replace")}

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
        self.proc.wait()

    def exit_description(self) -> str:
        code = self.proc.wait()
        if code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exited with code {code}"

    def output_tail(self, limit: int = 1500) -> str:
        self._log.seek(0, os.SEEK_END)
        size = self._log.tell()
        self._log.seek(max(0, size - limit))
        return self._log.read().decode(errors="replace").strip()

    def close(self) -> None:
        """Kill the child and release its pipe and log; closing twice is harmless (a reused
        child's owner and the runner may both close it)."""
        self.kill()
        if self._read_fd >= 0:
            os.close(self._read_fd)
            self._read_fd = -1
        self._log.close()


class Turns(Protocol):
    """The parent's side of a bench job's turns (:class:`kernels.harness.child.PipeTurn`): the
    device to the job alone for each of its timed regions, shared between them."""

    def acquire(self) -> float:
        """Wait until the job may have the device alone; the seconds waited."""

    def release(self) -> float:
        """Share the device again (a no-op when not acquired); the seconds waited."""


@dataclass
class _Attempt:
    results: dict[int, CaseResult] = field(default_factory=dict)
    device: str = "unknown"
    device_name: str = "unknown"
    versions: dict[str, str] = field(default_factory=dict)
    stopped: bool = False  # the child ended before finishing its cases
    infra_error: str | None = None  # the child died or hung before it was ready
    startup_s: float = 0.0  # job handed over -> the child said it was ready
    jit_compiled: int = 0
    jit_cache_hits: int = 0


def _tail_line(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return f": {lines[-1][:300]}" if lines else ""


def _run_attempt(child: ChildProcess, job: Job, indices: list[int], limits: RunLimits,
                 on_case: Callable[[int, CaseResult], None] | None,
                 release: Callable[[ChildProcess], None] | None = None, turns: Turns | None = None) -> _Attempt:
    """Run ``job`` in ``child``; a child that ends it ready for another goes to ``release``
    (the caller's pool of reusable children), any other is closed.  The child's requests for
    turns go to ``turns`` (answered at once without it); waiting for one does not count
    against a case's time limit."""
    attempt = _Attempt()
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        handle.write(job.model_dump_json())
        job_path = Path(handle.name)
    try:
        child.submit(job_path)
        submitted = time.monotonic()
        deadline = submitted + limits.startup_timeout_s
        current: int | None = None
        phase = "starting the evaluation process"
        while True:
            try:
                message = child.next_message(deadline)
            except TimeoutError:
                child.kill()
                if attempt.device == "unknown":
                    attempt.infra_error = f"evaluation process not ready after {limits.startup_timeout_s:g} s"
                limit = limits.case_timeout_s if current is not None else limits.startup_timeout_s
                index = indices[current] if current is not None else indices[0]
                attempt.results[index] = CaseResult(
                    case=job.cases[current or 0], status=CaseStatus.TIMEOUT,
                    error=f"timed out after {limit:g} s while {phase}; process killed")
                attempt.stopped = True
                return attempt
            if message is None:
                description = child.exit_description()
                if attempt.device == "unknown":
                    attempt.infra_error = f"evaluation process {description} before it was ready" + \
                        _tail_line(child.output_tail())
                if current is not None:
                    index = indices[current]
                    attempt.results[index] = CaseResult(
                        case=job.cases[current], status=CaseStatus.CRASHED,
                        error=f"evaluation process {description}{_tail_line(child.output_tail())}")
                elif not attempt.results:
                    attempt.results[indices[0]] = CaseResult(
                        case=job.cases[0], status=CaseStatus.CRASHED,
                        error=f"evaluation process {description} while {phase}{_tail_line(child.output_tail())}")
                attempt.stopped = len(attempt.results) < len(indices)
                return attempt
            kind = message.get("type")
            if kind == "ready":
                attempt.startup_s = time.monotonic() - submitted
                attempt.device = message["device"]
                attempt.device_name = message["device_name"]
                attempt.versions = message["versions"]
                phase = "loading the candidate"
            elif kind == "fatal":
                status = CaseStatus(message.get("status", CaseStatus.ERROR))
                for local, index in enumerate(indices):
                    attempt.results[index] = CaseResult(case=job.cases[local], status=status, error=message["error"])
                return attempt
            elif kind == "case_start":
                current = int(message["index"])
                phase = f"running case {job.cases[current].name}"
                deadline = time.monotonic() + limits.case_timeout_s
            elif kind == "case_result":
                local = int(message["index"])
                result = CaseResult.model_validate(message["result"])
                attempt.results[indices[local]] = result
                if on_case:
                    on_case(indices[local], result)
                current = None
                deadline = time.monotonic() + limits.case_timeout_s
            elif kind == "jit":
                attempt.jit_compiled = int(message.get("compiled", 0))
                attempt.jit_cache_hits = int(message.get("cache_hits", 0))
            elif kind in ("turn", "turn_done"):
                waited = 0.0
                if turns is not None:
                    waited = turns.acquire() if kind == "turn" else turns.release()
                deadline += waited
                try:
                    child.tell("go")
                except OSError:  # it died meanwhile: its end of stream comes next
                    pass
            elif kind == "done":
                child.reusable = bool(message.get("reusable")) and release is not None
                return attempt
    finally:
        if turns is not None:
            turns.release()  # a child that died or hung inside a timed region held the device
        if child.reusable and child.proc.poll() is None:
            release(child)  # type: ignore[misc]
        else:
            child.close()
        job_path.unlink(missing_ok=True)


def run_candidate(
    candidate: str | Path,
    cases: Iterable[Case],
    *,
    suite: str = "custom",
    mode: str = "verify",
    profile: bool = False,
    device: str = "auto",
    limits: RunLimits = RunLimits(),
    policy: TimingPolicy = TimingPolicy(),
    keep_going: bool = False,
    fail_fast: bool = False,
    gate: bool = True,
    fast_gate_cases: frozenset[str] = frozenset(),
    on_case: Callable[[int, CaseResult], None] | None = None,
    spawn: Callable[[], ChildProcess] = ChildProcess,
    reference: str | Path | None = None,
    release: Callable[[ChildProcess], None] | None = None,
    fresh: Callable[[], ChildProcess] = ChildProcess,
    turns: Turns | None = None,
) -> SuiteReport:
    """Evaluate a candidate file on ``cases`` in child processes and report every case.

    ``gate=False`` (bench mode) skips each case's reference-verified first call because an
    earlier verify-mode job ran that exact call; every timed output is still verified.
    ``fast_gate_cases`` names cases whose gate call is checked with the fast float64 Q.
    ``reference`` (bench mode): a file timed on each case right after the candidate in the
    same child; its median becomes the case's ``baseline_ms``.

    ``release`` lets children stay for another candidate of the same structure: each job asks
    its child to stay, and a child that ends a job cleanly goes to ``release``.  A job with a
    case that does not pass in a child that ran an earlier candidate is re-run whole in a
    ``fresh`` one, so a crash, a hang or a wrong answer is blamed only on the candidate that
    caused it, and the verdict is what a fresh process gives.

    ``turns`` (bench mode): the device is the job's alone only for its timed regions, which
    it asks ``turns`` for (:class:`Turns`); without it the caller owns the device throughout."""
    started = time.monotonic()
    path = Path(candidate).resolve()
    cases = list(cases)
    results: dict[int, CaseResult] = {}
    info = _Attempt()
    infra_error: str | None = None
    startup_s = 0.0
    jit = [0, 0]
    problems = screen_source(path.read_text(encoding="utf-8", errors="replace")) if path.is_file() else []
    if problems:
        reason = "rejected by the source screen: " + "; ".join(problems[:5])
        results = {i: CaseResult(case=c, status=CaseStatus.REJECTED, error=reason) for i, c in enumerate(cases)}
    remaining = [i for i in range(len(cases)) if i not in results]
    while remaining:
        job = Job(candidate=str(path), cases=[cases[i] for i in remaining], mode=mode, profile=profile,
                  device=device, policy=policy, fail_fast=fail_fast, gate=gate, fast_gate_cases=fast_gate_cases,
                  reference=None if reference is None else str(Path(reference).resolve()),
                  keep_alive=release is not None, turns=turns is not None and mode == "bench")
        child = spawn()
        reused = child.jobs > 0
        attempt = _run_attempt(child, job, remaining, limits, on_case, release, turns)
        if reused and (attempt.infra_error or any(not r.ok for r in attempt.results.values())
                       or len(attempt.results) < len(remaining)):
            # An earlier candidate may have left this process broken: the whole job runs again
            # in a fresh child, whose verdict is the one a fresh process would have given (the
            # same calls in the same order: a candidate that cheats after N calls still does).
            attempt = _run_attempt(fresh(), job, remaining, limits, on_case, release, turns)
        if attempt.device != "unknown":
            info.device, info.device_name, info.versions = attempt.device, attempt.device_name, attempt.versions
        results.update(attempt.results)
        infra_error = infra_error or attempt.infra_error
        startup_s += attempt.startup_s
        jit[0] += attempt.jit_compiled
        jit[1] += attempt.jit_cache_hits
        if (attempt.stopped and not keep_going) or (fail_fast and any(not r.ok for r in attempt.results.values())):
            break
        remaining = [i for i in remaining if i not in results]
    for i, case in enumerate(cases):
        if i not in results:
            results[i] = CaseResult(case=case, status=CaseStatus.SKIPPED,
                                    error="not run: an earlier case crashed, hung or failed")
    return SuiteReport(
        candidate=str(candidate), suite=suite, mode="bench" if mode == "bench" else "verify",
        device=info.device, device_name=info.device_name, versions=info.versions,
        cases=[results[i] for i in range(len(cases))], wall_s=time.monotonic() - started, infra_error=infra_error,
        startup_s=startup_s, jit_compiled=jit[0], jit_cache_hits=jit[1],
    )


def shape_groups(cases: list[Case], groups: int) -> list[list[int]]:
    """Split case indices into at most ``groups`` groups, all cases of one n together.

    A Triton candidate compiles once per n (shapes are compile-time constants in our
    families), so groups by n compile in parallel without compiling anything twice.  The
    groups are balanced by a rough cost: a compile per n plus verification, which on CUDA is
    dominated by the reference householder_product's per-matrix cost.
    """
    by_n: dict[int, list[int]] = {}
    for i, case in enumerate(cases):
        by_n.setdefault(case.n, []).append(i)

    def cost(indices: list[int]) -> float:
        return 5.0 + sum(0.002 * cases[i].batch * max(1.0, (cases[i].n / 512) ** 2) for i in indices)

    loads = [0.0] * max(1, min(groups, len(by_n)))
    members: list[list[int]] = [[] for _ in loads]
    for indices in sorted(by_n.values(), key=cost, reverse=True):
        slot = loads.index(min(loads))
        members[slot].extend(indices)
        loads[slot] += cost(indices)
    return [sorted(m) for m in members if m]


def run_candidate_parallel(candidate: str | Path, cases: Iterable[Case], *, processes: int,
                           spawn: Callable[[], ChildProcess] = ChildProcess, suite: str = "custom",
                           **kwargs: object) -> SuiteReport:
    """:func:`run_candidate` over :func:`shape_groups` of ``cases``, one child process each, at once.

    Verify mode only: timing must never share the device with another process."""
    if kwargs.get("mode", "verify") != "verify":
        raise ValueError("only verify-mode jobs may run in parallel (timing needs the device alone)")
    cases = list(cases)
    groups = shape_groups(cases, processes)
    if len(groups) <= 1:
        return run_candidate(candidate, cases, suite=suite, spawn=spawn, **kwargs)  # type: ignore[arg-type]
    started = time.monotonic()
    with ThreadPoolExecutor(len(groups), thread_name_prefix="verify") as pool:
        reports = list(pool.map(
            lambda idx: run_candidate(candidate, [cases[i] for i in idx], suite=suite, spawn=spawn,
                                      **kwargs),  # type: ignore[arg-type]
            groups))
    merged: dict[int, CaseResult] = {}
    for indices, report in zip(groups, reports):
        merged.update(zip(indices, report.cases))
    known = next((r for r in reports if r.device != "unknown"), reports[0])
    return SuiteReport(
        candidate=str(candidate), suite=suite, mode="verify", device=known.device,
        device_name=known.device_name, versions=known.versions, cases=[merged[i] for i in range(len(cases))],
        wall_s=time.monotonic() - started, infra_error=next((r.infra_error for r in reports if r.infra_error), None),
        startup_s=max(r.startup_s for r in reports), jit_compiled=sum(r.jit_compiled for r in reports),
        jit_cache_hits=sum(r.jit_cache_hits for r in reports))
