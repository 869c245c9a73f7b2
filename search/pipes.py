"""Output that survives a closed pipe: ``qrsearch launch | tee log`` and Ctrl-C kills ``tee``
first, after which every write to stdout fails with EPIPE.  The search must still stop
cleanly (finish or re-queue in-flight work, record the stop), so once stdout is gone its
writes are dropped and the file descriptor points at /dev/null (so that the interpreter's
final flush does not fail either)."""

from __future__ import annotations

import os
from typing import IO, Any

from rich.console import Console


class PipeSafeStream:
    """A text stream that turns EPIPE into silence instead of an exception."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self.broken = False

    def _lost(self) -> None:
        self.broken = True
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
        except (OSError, ValueError, AttributeError):
            pass

    def write(self, text: str) -> int:
        if self.broken:
            return len(text)
        try:
            return self._stream.write(text)
        except (BrokenPipeError, ConnectionResetError):
            self._lost()
            return len(text)

    def flush(self) -> None:
        if self.broken:
            return
        try:
            self._stream.flush()
        except (BrokenPipeError, ConnectionResetError):
            self._lost()

    def isatty(self) -> bool:
        return not self.broken and self._stream.isatty()

    def fileno(self) -> int:
        return self._stream.fileno()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def pipe_safe(console: Console) -> Console:
    """Make ``console`` (stdout's) drop output once its reader is gone; returns it."""
    if not isinstance(console.file, PipeSafeStream):
        console.file = PipeSafeStream(console.file)  # type: ignore[assignment]
    return console
