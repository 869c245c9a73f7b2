"""Factors correctly, but into the same two buffers every call: each output is right when it
returns and wrong once the next call overwrites it."""
import torch

_buffers = {}


def custom_kernel(A):
    key = (tuple(A.shape), A.device)
    if key not in _buffers:
        _buffers[key] = (torch.empty_like(A), torch.empty(A.shape[:-1], dtype=A.dtype, device=A.device))
    h, tau = _buffers[key]
    out_h, out_tau = torch.geqrf(A)
    h.copy_(out_h)
    tau.copy_(out_tau)
    return h, tau
