"""Empties the caching allocator's cache before each call, so every timed call allocates from the
device (cudaMalloc and cudaFree inside the timed region)."""
import torch


def custom_kernel(A):
    torch.cuda.empty_cache()
    scratch = torch.empty(64 * 2**20, dtype=torch.uint8, device=A.device)
    scratch.zero_()
    return torch.geqrf(A)
