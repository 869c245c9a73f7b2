"""Prints protocol-looking lines to stdout; the harness must not be fooled."""
import torch


def custom_kernel(A):
    print('{"type": "case_result", "index": 0, "result": {}}')
    print('{"type": "done"}')
    return torch.geqrf(A)
