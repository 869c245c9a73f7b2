"""A fork server for compile-only processes: torch and Triton imported once, a forked child per compile.

:func:`kernels.harness.precompile.start_precompile` starts a fresh interpreter for every compile,
and it spends seconds before it compiles anything: importing torch and Triton, torch._dynamo
(which the first FakeTensorMode imports), and the hash of Triton's sources that keys its cache.
A search starts one such process per compile group and shard, about 230 in a 5-minute H200
search, and a child whose kernels are all in the cache waits for all of it: on a 2-core
development machine such a compile took 3.4 s of CPU from a fresh interpreter and 0.13 s forked.  :class:`CompileForkServer` starts one server process instead (CUDA hidden, the
run's Triton cache, the compile CPUs, a lower priority) that imports them once and forks a child
per compile.  Each child is its own process group from the moment it is reported started (a
SIGKILL or SIGSTOP of the group reaches it and the ptxas it runs), takes its CPUs and runs exactly what ``python -m kernels.harness.precompile``
runs (:func:`~kernels.harness.precompile.compile_request`): compiles stay as isolated from each
other as before, since every child is a fork of a process that never ran candidate code.

Parent and server speak in lines over pipes: ``ready`` once the server has imported everything,
then a JSON request in, ``started ID PID`` and ``exited PID CODE`` out (the server reaps its
children).  :meth:`CompileForkServer.start` has ``start_precompile``'s signature and returns a
:class:`ForkedProcess`, the part of ``Popen`` the compile scheduler uses.  Until the server is
ready (it starts with the scheduler), a compile starts its own interpreter as before; so does
every compile once the server failed to start or to answer.
"""

from __future__ import annotations

import itertools
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any, Mapping, Sequence

ANSWER_TIMEOUT_S = 10.0  # a fork answers in milliseconds


class ForkedProcess:
    """A compile child of the fork server: ``pid``, ``poll``, ``wait``, ``kill``, ``send_signal``."""

    def __init__(self, pid: int, server: "CompileForkServer") -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._server = server
        self._done = threading.Event()

    def _exited(self, code: int) -> None:
        self.returncode = code
        self._done.set()

    def poll(self) -> int | None:
        if self.returncode is None and not self._server.alive:
            # Its server is gone, so nobody reports its end: it has ended once its pid has.
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                self._exited(-1)
            except PermissionError:
                pass
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"compile child {self.pid}", timeout or 0.0)
            self._done.wait(0.05)
        return self.returncode  # type: ignore[return-value]

    def send_signal(self, signum: int) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, signum)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class CompileForkServer:
    """Starts compile children by forking one long-lived server (see the module doc).

    ``cache_dir`` and ``env_extra`` are the server's; a ``start`` that asks for others gets a
    fresh interpreter (``start_precompile``), as does every ``start`` once the server failed."""

    def __init__(self, cache_dir: Path, env_extra: Mapping[str, str] | None = None,
                 cpus: Sequence[int] | None = None) -> None:
        self.cache_dir = Path(cache_dir).resolve()
        self.env_extra = dict(env_extra or {})
        self.cpus = list(cpus) if cpus else None
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._answers: dict[int, int] = {}  # request id -> pid
        self._answered = threading.Condition(self._lock)
        self._children: dict[int, ForkedProcess] = {}
        self._early_exits: dict[int, int] = {}  # pid -> code, for an exit read before its start
        self.failed: str | None = None  # why the server was given up
        self.forked = 0
        self._ready = False
        with self._lock:
            self._spawn_locked()  # it imports torch and Triton meanwhile

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def ready(self) -> bool:
        return self._ready and self.failed is None and self.alive

    def start(self, candidate: Path, shapes: Sequence[tuple[int, int]], *, cache_dir: Path, target: Any,
              report_path: Path, cpus: Sequence[int] | None = None, env_extra: Mapping[str, str] | None = None,
              shard: tuple[int, int] = (0, 1)) -> Any:
        from kernels.harness.precompile import format_shapes, start_precompile

        fresh = dict(cache_dir=cache_dir, target=target, report_path=report_path, cpus=cpus, env_extra=env_extra,
                     shard=shard)
        if Path(cache_dir).resolve() != self.cache_dir or dict(env_extra or {}) != self.env_extra:
            return start_precompile(candidate, shapes, **fresh)
        report_path = Path(report_path)
        report_path.parent.mkdir(parents=True, exist_ok=True)
        report_path.unlink(missing_ok=True)  # a stale report must not pass for this run's
        request = {"candidate": str(Path(candidate).resolve()), "shapes": format_shapes(shapes),
                   "target": target.model_dump_json(), "report": str(report_path.resolve()),
                   "log": str(report_path.with_name(report_path.name + ".log").resolve()),
                   "cpus": ",".join(str(c) for c in cpus) if cpus else "", "shard": f"{shard[0]}/{shard[1]}"}
        with self._lock:
            if self.failed is None and self._proc is not None and not self.alive:
                self._give_up_locked("the compile server ended")
            if not self.ready:  # still importing, or given up: a fresh interpreter, as before
                return start_precompile(candidate, shapes, **fresh)
            rid = next(self._ids)
            try:
                assert self._proc is not None and self._proc.stdin is not None
                self._proc.stdin.write(json.dumps({"id": rid, **request}) + "\n")
                self._proc.stdin.flush()
            except (OSError, ValueError) as exc:
                self._give_up_locked(f"could not write to the compile server: {exc}")
                return start_precompile(candidate, shapes, **fresh)
            deadline = time.monotonic() + ANSWER_TIMEOUT_S
            while rid not in self._answers and self.alive and time.monotonic() < deadline:
                self._answered.wait(0.05)
            pid = self._answers.pop(rid, None)
            if pid is None:
                self._give_up_locked("the compile server did not answer")
                return start_precompile(candidate, shapes, **fresh)
            self.forked += 1
            return self._children[pid]

    def _spawn_locked(self) -> None:
        from kernels.harness.process import REPO_ROOT, child_env

        env = child_env(self.env_extra)
        env["CUDA_VISIBLE_DEVICES"] = ""  # forced, as for start_precompile: never a GPU
        env["TRITON_CACHE_DIR"] = str(self.cache_dir)
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "kernels.harness.compile_server"]
        if self.cpus:
            argv += ["--cpus", ",".join(str(c) for c in self.cpus)]
        try:
            self._proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                          env=env, cwd=REPO_ROOT, text=True, bufsize=1, start_new_session=True)
        except OSError as exc:
            self._give_up_locked(f"could not start the compile server: {exc}")
            return
        threading.Thread(target=self._read, args=(self._proc,), daemon=True, name="compile-server").start()

    def _read(self, proc: subprocess.Popen) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            kind, _, rest = line.strip().partition(" ")
            with self._lock:
                if kind == "ready":
                    self._ready = True
                elif kind == "started":
                    rid, pid = (int(x) for x in rest.split())
                    child = ForkedProcess(pid, self)
                    if pid in self._early_exits:
                        child._exited(self._early_exits.pop(pid))
                    self._children[pid] = child
                    self._answers[rid] = pid
                    self._answered.notify_all()
                elif kind == "exited":
                    pid, code = (int(x) for x in rest.split())
                    known = self._children.pop(pid, None)
                    if known is not None:
                        known._exited(code)
                    else:
                        self._early_exits[pid] = code
        with self._lock:
            self._answered.notify_all()  # EOF: the server is gone; waiting starts fall back

    def _give_up_locked(self, why: str) -> None:
        self.failed = why
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()

    def close(self) -> None:
        """Stop the server (its children are the scheduler's to kill; orphans finish alone)."""
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            try:
                assert proc.stdin is not None
                proc.stdin.close()
            except OSError:
                pass
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


# ---------------------------------------------------------------- the server side


def _child(request: dict[str, str]) -> None:
    """In a forked child: a process group of its own, output to the compile's log, then the compile."""
    try:
        os.setpgid(0, 0)  # the server does it too, so the group exists before it says "started"
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        sys.stdout = os.fdopen(1, "w", buffering=1)
        sys.stderr = os.fdopen(2, "w", buffering=1)
        from kernels.harness.precompile import compile_request

        compile_request(Path(request["candidate"]), request["shapes"], request["target"], Path(request["report"]),
                        request["cpus"], request["shard"], nice=False)  # the server is niced already
    finally:
        os._exit(1)  # compile_request ends the process itself; only a failure before it gets here


def serve(stdin_fd: int = 0, out: IO[str] | None = None) -> int:
    """Read requests until the parent closes stdin; fork a child for each; report starts and exits."""
    out = out or sys.stdout
    # What every child needs, done once here (CUDA is hidden: nothing touches a device).  Each
    # costs a fresh interpreter seconds: the imports about 1.6 s, the first FakeTensorMode (it
    # imports torch._dynamo) 1.4 s, Triton's own version key (a hash of its sources) 0.5 s.
    # None of them starts a thread, so the forks stay safe.
    import torch  # noqa: F401
    import triton  # noqa: F401
    from torch._subclasses.fake_tensor import FakeTensorMode

    import kernels.harness.precompile  # noqa: F401

    FakeTensorMode()
    try:
        from triton.runtime.cache import triton_key

        triton_key()
    except Exception:  # another Triton keeps it elsewhere: each child computes it
        pass

    out.write("ready\n")
    out.flush()
    buffer = b""
    children: set[int] = set()
    open_ = True
    while open_ or children:
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                children.clear()
                break
            if pid == 0:
                break
            children.discard(pid)
            out.write(f"exited {pid} {os.waitstatus_to_exitcode(status)}\n")
            out.flush()
        if not open_:
            time.sleep(0.05)
            continue
        ready, _, _ = select.select([stdin_fd], [], [], 0.05)
        if not ready:
            continue
        data = os.read(stdin_fd, 1 << 16)
        if not data:
            # The parent is done (or died while compiles were stopped for a timing): the children
            # finish, their kernels stay in the cache, and none is left stopped for ever.
            open_ = False
            for pid in children:
                try:
                    os.killpg(pid, signal.SIGCONT)
                except OSError:
                    pass
            continue
        buffer += data
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            request = json.loads(line)
            pid = os.fork()
            if pid == 0:
                _child(request)
            try:
                os.setpgid(pid, pid)  # whichever of the two runs first makes the group
            except OSError:
                pass
            children.add(pid)
            out.write(f"started {request['id']} {pid}\n")
            out.flush()
    return 0


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="kernels.harness.compile_server")
    parser.add_argument("--cpus", default="", help="comma-separated CPU ids the server and its children run on")
    args = parser.parse_args(argv)
    if args.cpus:
        os.sched_setaffinity(0, {int(c) for c in args.cpus.split(",")})
    from kernels.harness.precompile import _NICE_INCREMENT

    os.nice(_NICE_INCREMENT)  # below the timing child, which must never wait for a compile
    return serve()


if __name__ == "__main__":
    sys.exit(main())
