"""Returns fresh, correct outputs but scribbles over its input."""
import torch


def custom_kernel(A):
    out = torch.geqrf(A)
    A.zero_()
    return out
