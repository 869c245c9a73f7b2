"""What a candidate could do to its process if it got past the source screen (used by
test_reuse.py's candidates, which import it: the screen does not know this module)."""

from __future__ import annotations

import threading
import time

import torch


def _broken(*args: object, **kwargs: object) -> None:
    raise RuntimeError("torch.geqrf was replaced by an earlier candidate")


def break_geqrf() -> None:
    torch.geqrf = _broken  # type: ignore[assignment]


def leave_a_thread() -> None:
    threading.Thread(target=time.sleep, args=(600,), daemon=True).start()
