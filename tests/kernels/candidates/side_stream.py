"""Does its real work on a side stream and returns without waiting for it."""
import torch

_side = []


def custom_kernel(A):
    if not _side:
        _side.append(torch.cuda.Stream())
    x = torch.randn(4096, 4096, device=A.device)
    with torch.cuda.stream(_side[0]):
        for _ in range(20):
            x = x @ x.T / 4096.0  # about 20 x 137 GFLOP of busy work nobody waits for
    return torch.geqrf(A)
