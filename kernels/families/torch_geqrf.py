"""Baseline: torch.geqrf (cuSOLVER on CUDA, LAPACK on CPU).

Every speedup qrsearch reports is measured against this file, timed in the
same run on the same device.
"""

import torch

# qrsearch: params
PARAMS = {}
# qrsearch: end params


def custom_kernel(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.geqrf(A)
