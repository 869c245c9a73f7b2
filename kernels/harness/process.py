"""The evaluation child as its parent holds it: started with a clean environment, told its
jobs on stdin, heard on its result pipe (:mod:`kernels.harness.protocol`), killed with whatever
the candidate started."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kernels.harness.protocol import INIT, ChildMessage, Loaded, Unreadable, Warm, decode

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

    def _expect(self, kind: type[Loaded] | type[Warm], timeout: float) -> bool:
        """Whether the child's next message, within ``timeout`` seconds, is a ``kind`` one."""
        try:
            message = self.next_message(time.monotonic() + timeout)
        except TimeoutError:
            return False
        return isinstance(message, kind)

    def wait_loaded(self, timeout: float) -> bool:
        """Block until a staged child has done its imports (its "loaded" message; at once for one
        that is not staged).  False if it died or did not get there in ``timeout`` seconds."""
        if not self.loaded:
            self.loaded = self._expect(Loaded, timeout)
        return self.loaded

    def init(self) -> None:
        """Tell a loaded staged child to create its CUDA context (then it says "warm")."""
        if not (self.staged and self.loaded):
            raise RuntimeError("init is for a staged child that has said 'loaded'")
        self.tell(INIT)
        self._init_sent = True

    def wait_warm(self, timeout: float) -> bool:
        """Block until the child has imported torch and initialised the device (its first
        message, or a staged child's message after :meth:`init`), so that starting it cannot
        overlap work that follows.  False if it died or did not get there in ``timeout`` seconds."""
        if not self.warm:
            if not self._init_sent:
                return False  # a staged child must load and be told to init first
            self.warm = self._expect(Warm, timeout)
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
        """One line on the child's stdin: :data:`INIT`, a job's path, or :data:`GO` for a turn."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{line}\n".encode())
        self.proc.stdin.flush()

    def next_message(self, deadline: float) -> ChildMessage | Unreadable | None:
        """The next message, None at end of stream; raises TimeoutError at the deadline."""
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
        return decode(line)

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
