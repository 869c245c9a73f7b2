"""The contract's input generator: deterministic FP32 batches for every profile (needs torch).

The profiles, their weights and the tolerances are the contract's constants
(:mod:`kernels.contract`); this module turns them into tensors.
"""

from __future__ import annotations

import math

import torch

from kernels.contract import CASES, EPS32, MIXED_PROFILES, MIXED_WEIGHTS

__all__ = ["generate_input", "mixed_profiles"]


def _column_scaled(a: torch.Tensor, cond: float) -> torch.Tensor:
    if not cond:
        return a
    n = a.shape[-1]
    return a * torch.logspace(0.0, -float(cond), n, device=a.device, dtype=a.dtype)


def _apply_profile(a: torch.Tensor, case: str, cond: float, gen: torch.Generator) -> torch.Tensor:
    """Shape a batch of standard-normal matrices into one conditioning profile.

    Extra randomness comes from ``gen`` so that the result is a function of the seed.
    """
    m, n = a.shape[0], a.shape[-1]
    dev, dt = a.device, a.dtype
    if case == "dense":
        return _column_scaled(a, cond)
    if case == "upper":
        a = torch.triu(a)
        a = a + torch.diag_embed(torch.linspace(1.0, 0.25, n, device=dev, dtype=dt).expand(m, n))
        return _column_scaled(a, cond)
    if case == "rankdef":
        a = a.clone()
        a[:, :, max(1, (3 * n) // 4):] = 0.0
        return _column_scaled(a, cond)
    if case == "nearrank":
        rank = max(1, (3 * n) // 4)
        tail = n - rank
        a = a.clone()
        if tail > 0:
            noise = torch.randn((m, n, tail), device=dev, dtype=dt, generator=gen)
            a[:, :, rank:] = a[:, :, :tail] + 1.0e-5 * noise
        return _column_scaled(a, cond)
    if case == "clustered":
        scales = torch.ones(n, device=dev, dtype=dt)
        scales[n // 2:] = 4.0 * EPS32
        if n >= 8:
            scales[max(0, n // 2 - 2): min(n, n // 2 + 2)] = math.sqrt(EPS32)
        return a * scales
    if case == "band":
        half_width = max(2, min(32, n // 32))
        idx = torch.arange(n, device=dev)
        mask = (idx[:, None] - idx[None, :]).abs() <= half_width
        a = a * mask
        a = a + torch.diag_embed(torch.linspace(1.0, 0.5, n, device=dev, dtype=dt).expand(m, n))
        return _column_scaled(a, cond)
    if case == "rowscale":
        rows = torch.logspace(0.0, -float(max(cond, 4)), n, device=dev, dtype=dt)
        return a * rows[:, None]
    if case == "nearcollinear":
        base = torch.randn((m, n, 1), device=dev, dtype=dt, generator=gen)
        noise = torch.randn((m, n, n), device=dev, dtype=dt, generator=gen)
        return _column_scaled(base + 1.0e-4 * noise, cond)
    raise ValueError(f"unknown case {case!r}; expected one of {', '.join(CASES)}")


def mixed_profiles(batch: int, gen: torch.Generator, device: torch.device | str = "cpu") -> list[str]:
    """Draw one profile per matrix; a batch of two or more gets a dense and a stressed one."""
    weights = torch.tensor(MIXED_WEIGHTS, dtype=torch.float32, device=device)
    labels = torch.multinomial(weights, batch, replacement=True, generator=gen).tolist()
    if batch >= 2:
        positions = torch.randperm(batch, device=device, generator=gen).tolist()
        if all(label == 0 for label in labels):
            stressed = int(torch.randint(1, len(MIXED_PROFILES), (1,), device=device, generator=gen))
            labels[positions[0]] = stressed
        elif not any(label == 0 for label in labels):
            labels[positions[0]] = 0
    return [MIXED_PROFILES[label] for label in labels]


def generate_input(
    batch: int,
    n: int,
    cond: float,
    seed: int,
    case: str = "dense",
    device: torch.device | str = "cpu",
) -> torch.Tensor:
    """A deterministic (per seed and device) contiguous FP32 batch of n×n matrices."""
    if batch <= 0 or n <= 0:
        raise ValueError(f"batch and n must be positive, got batch={batch}, n={n}")
    if cond < 0:
        raise ValueError(f"cond must be non-negative, got {cond}")
    case = case.lower()
    if case not in CASES:
        raise ValueError(f"unknown case {case!r}; expected one of {', '.join(CASES)}")
    device = torch.device(device)
    gen = torch.Generator(device=device)
    gen.manual_seed(int(seed))
    a = torch.randn((batch, n, n), device=device, dtype=torch.float32, generator=gen)
    if case != "mixed":
        return _apply_profile(a, case, cond, gen).contiguous()
    profiles = mixed_profiles(batch, gen, device)
    out = a.clone()
    # Fixed profile order keeps the generator's draws, hence the data, a function of the seed.
    for profile in MIXED_PROFILES:
        rows = [i for i, p in enumerate(profiles) if p == profile]
        if rows:
            index = torch.tensor(rows, device=device)
            out[index] = _apply_profile(a[index], profile, cond, gen)
    return out.contiguous()
