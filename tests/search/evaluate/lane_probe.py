"""What the lane tests' candidates call around their work (tests/search/evaluate/test_worker_lanes.py).

Each call appends ``start PID T`` and ``end PID T`` lines to a log (``T``: time.monotonic(), one
clock for every process of the machine, the test's included).  The first call of a process
waits until some other process has called too (or ``limit_s`` passed): two lanes whose verify
stages can run at once then do so, whatever the scheduler does; lanes that cannot (a gate that
serialised them) make it wait out the limit, and the test sees no overlap.
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager
from typing import Iterator

_first_call = True


def _append(log: str, line: str) -> None:
    # One write of one short line with O_APPEND: lines from several processes never interleave.
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def _callers(log: str) -> set[str]:
    try:
        with open(log, encoding="utf-8") as handle:
            return {line.split()[1] for line in handle if line.startswith("start ")}
    except FileNotFoundError:
        return set()


@contextmanager
def call(log: str, meet: int = 2, limit_s: float = 20.0) -> Iterator[None]:
    global _first_call
    pid = os.getpid()
    _append(log, f"start {pid} {time.monotonic():.6f}")
    if _first_call:
        _first_call = False
        deadline = time.monotonic() + limit_s
        while len(_callers(log)) < meet and time.monotonic() < deadline:
            time.sleep(0.005)
    try:
        yield
    finally:
        _append(log, f"end {pid} {time.monotonic():.6f}")
