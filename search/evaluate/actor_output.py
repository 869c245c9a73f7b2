"""An evaluator actor's own stdout and stderr in a file of the run (``ray.log_to_driver`` off).

Ray streams every actor's output to the driver, which prints it to a terminal and keeps none of it.
In a file under the evaluator's work directory it outlives the terminal, and a lost evaluator's
reason (the driver's log; the store once a request is lost three times) names the file and quotes
its last error.
"""

from __future__ import annotations

import faulthandler
import os
import sys
from pathlib import Path

OUTPUT_FILE = "actor.log"
TAIL_CHARS = 400  # a lost evaluator's reason quotes this much of its file
SEARCHED_BYTES = 65536  # of the file's end, for its last error report
ERROR_MARKERS = ("Fatal Python error", "Traceback (most recent call last)")


def output_path(workdir: Path, name: str) -> Path:
    """Where evaluator ``name`` writes its output (its worker's own directory)."""
    return workdir / name / OUTPUT_FILE


def redirect_output(path: Path) -> None:
    """Send this process's stdout and stderr to ``path``, appended.

    The file descriptors are replaced, not just ``sys.stdout``: what the processes it starts
    (compiles, evaluation children) and the interpreter's own fatal-error report write goes there
    too.  A fatal signal (a segfault in the actor) writes every thread's Python stack there."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
    finally:
        os.close(fd)
    faulthandler.enable(file=sys.stderr, all_threads=True)


def describe_output(path: Path | None) -> str:
    """A clause for a lost evaluator's reason: where its output is, and an excerpt where this process
    can read the file (the driver's host, or a shared file system); empty without a file.

    The excerpt starts at the last error report in the file's end (a fatal error's or a traceback's
    first line: a fatal error's stacks end in a long list of extension modules, which says
    nothing), else it is the file's last characters."""
    if path is None:
        return ""
    try:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - SEARCHED_BYTES))
            text = handle.read().decode(errors="replace")
    except OSError:
        return f"; its output: {path}"
    start = max(text.rfind(marker) for marker in ERROR_MARKERS)
    excerpt = " ".join((text[start:] if start >= 0 else text).split())
    if not excerpt:
        return f"; its output: {path} (empty)"
    if start >= 0:
        return f"; its output: {path}, from its last error: {excerpt[:TAIL_CHARS]}"
    return f"; its output: {path}, ending: {excerpt[-TAIL_CHARS:]}"
