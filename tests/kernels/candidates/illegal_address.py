"""Writes far outside its buffer: a CUDA illegal address that poisons the context."""
import torch
import triton
import triton.language as tl


@triton.jit
def _wild(ptr):
    tl.store(ptr + 1_000_000_000_000, 1.0)


def custom_kernel(A):
    _wild[(1,)](A)
    torch.cuda.synchronize()
    return torch.geqrf(A)
