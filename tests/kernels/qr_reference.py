"""Float64 Householder QR for tests, with either sign convention for beta.

LAPACK's slarfg picks beta = -sign(alpha)·‖x‖ (no cancellation in alpha - beta);
the opposite convention beta = +sign(alpha)·‖x‖ is just as valid a QR when
alpha - beta is formed without cancellation (Parlett's formula).  A tail of
zeros gives tau = 0 (an identity reflector), as in LAPACK.
"""

from __future__ import annotations

import math

import torch


def householder_qr(a: torch.Tensor, opposite_sign: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    work = a.double().clone()
    batch, n, _ = work.shape
    tau = torch.zeros(batch, n, dtype=torch.float64)
    for b in range(batch):
        m = work[b]
        for k in range(n):
            alpha = float(m[k, k])
            tail = m[k + 1:, k]
            tail_norm = float(tail.norm()) if tail.numel() else 0.0
            if tail_norm == 0.0:
                continue
            norm = math.hypot(alpha, tail_norm)
            if opposite_sign:
                beta = math.copysign(norm, alpha)
                v0 = -(tail_norm ** 2) / (alpha + beta)
            else:
                beta = -math.copysign(norm, alpha)
                v0 = alpha - beta
            v = torch.cat([torch.ones(1, dtype=torch.float64), tail / v0])
            t = 2.0 / float(v @ v)
            trailing = m[k:, k + 1:]
            trailing -= t * torch.outer(v, v @ trailing)
            m[k, k] = beta
            m[k + 1:, k] = v[1:]
            tau[b, k] = t
    return work.float(), tau.float()
