"""Baseline: torch.geqrf (cuSOLVER on CUDA, LAPACK on CPU; on CUDA it loops
over the batch one matrix at a time for n > 256).

Every speedup qrsearch reports is measured against this file, timed in the
same run on the same device.  It has no knobs and is never mutated.
"""

import torch

# qrsearch: params
PARAMS = {}
# qrsearch: end params


def custom_kernel(A: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.geqrf(A)
