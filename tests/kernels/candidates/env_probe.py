"""Looks for secrets in its environment and fails loudly if it finds any."""
import os

import torch

_LEAKED = sorted(k for k in os.environ if "KEY" in k or "TOKEN" in k or "SECRET" in k)


def custom_kernel(A):
    if _LEAKED:
        raise RuntimeError("leaked: " + ",".join(_LEAKED))
    return torch.geqrf(A)
