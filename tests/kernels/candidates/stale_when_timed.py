"""Cheat: honest for its first three calls, then replays its last output."""
import torch

_state = {"calls": 0, "last": None}


def custom_kernel(A):
    _state["calls"] += 1
    if _state["calls"] <= 3 or _state["last"] is None:
        _state["last"] = torch.geqrf(A)
    return _state["last"]
