"""The float64 property checker for compact QR factors.

It never compares with torch.geqrf element-wise (any valid compact QR passes,
whatever its sign convention) and it never raises: whatever a candidate
returned, the answer is a :class:`VerifyResult`.

Rules (the GPU MODE ``qr_v2`` gates, applied per matrix):
  * output is a 2-tuple ``(H, tau)``; H is batch×n×n, tau batch×n, float32,
    on the input's device, all finite, and not aliasing the candidate's input;
  * Q = householder_product(H, tau) is formed exactly as the reference does
    (in the outputs' float32) and must be finite; R = triu(H);
  * ‖R − QᵀA‖₁ ≤ 20·n·eps32·‖A‖₁ and ‖QᵀQ − I‖₁ ≤ 100·n·eps32, in float64,
    with A the pristine input that the candidate never saw.

``exact_q=False`` forms Q in float64 by blocked compact-WY products over the
whole batch (:func:`householder_q64`) instead.  On CUDA, householder_product
runs cuSOLVER's orgqr one matrix at a time (about 1 s for 640 matrices of
512), which made re-checking every timed output most of a search's evaluation
time; the float64 Q is built in milliseconds and is, if anything, stricter (it
adds no float32 rounding of its own).  The harness uses it for re-checks of
warm-up and timed outputs; each case's first call, the verdict that gates a
candidate, always uses the reference construction.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import torch
from pydantic import BaseModel, ConfigDict

from kernels.contract import EPS32, FACTOR_RTOL, ORTH_RTOL

# float64 elements held per chunk of matrices (about 4 live copies of this size).
_CHUNK_ELEMENTS = 1 << 25


class VerifyResult(BaseModel):
    """A verdict with its evidence.  Residuals are scaled by eps32·n (·‖A‖₁):
    the factor gate is ``factor_scaled <= 20`` and the orthogonality gate
    ``orth_scaled <= 100``."""

    model_config = ConfigDict(frozen=True)

    ok: bool
    message: str
    factor_scaled: float | None = None
    orth_scaled: float | None = None
    leakage_scaled: float | None = None
    recon_scaled: float | None = None
    worst_matrix: int | None = None

    def summary(self) -> str:
        def fmt(x: float | None) -> str:
            return "-" if x is None else f"{x:.3g}"

        return (
            f"factor={fmt(self.factor_scaled)} orth={fmt(self.orth_scaled)} "
            f"leak={fmt(self.leakage_scaled)} recon={fmt(self.recon_scaled)}"
        )


def _fail(message: str, **evidence: Any) -> VerifyResult:
    return VerifyResult(ok=False, message=message, **evidence)


def _storage_span(t: torch.Tensor) -> tuple[int, int]:
    storage = t.untyped_storage()
    start = storage.data_ptr()
    return start, start + storage.nbytes()


def _overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.device != b.device:
        return False
    a0, a1 = _storage_span(a)
    b0, b1 = _storage_span(b)
    return a0 < b1 and b0 < a1


def outputs_share_memory(first: object, second: object) -> bool:
    """Whether two calls' outputs (each an (H, tau) tuple) share storage: a kernel that writes every
    call's result into the same buffers overwrites the result it returned before."""
    def tensors(output: object) -> list[torch.Tensor]:
        return [t for t in output if isinstance(t, torch.Tensor)] if isinstance(output, tuple) else []

    return any(_overlaps(a, b) for a in tensors(first) for b in tensors(second))


def _check_tensor(name: str, value: object, shape: tuple[int, ...], device: torch.device) -> str | None:
    """What can be said of an output tensor without reading its values (no device sync)."""
    if not isinstance(value, torch.Tensor):
        return f"{name} must be a torch.Tensor, got {type(value).__name__}"
    if tuple(value.shape) != shape:
        return f"{name} shape must be {shape}, got {tuple(value.shape)}"
    if value.dtype != torch.float32:
        return f"{name} dtype must be torch.float32, got {value.dtype}"
    if value.device != device:
        return f"{name} must be on {device}, got {value.device}"
    return None


def _l1(x: torch.Tensor) -> torch.Tensor:
    """Matrix 1-norm (max column sum) of each matrix in a batch."""
    return x.abs().sum(dim=-2).amax(dim=-1)


def householder_q64(h: torch.Tensor, tau: torch.Tensor, block: int = 32) -> torch.Tensor:
    """Q = H_1 H_2 ... H_n in float64 for a batch of compact factors (``H_i = I - tau_i v_i v_iᵀ``).

    Reflectors are applied ``block`` at a time as ``Q ← Q - (Q V) T Vᵀ``.  The block's T
    solves (I + D·striu(VᵀV)) T = D with D = diag(tau): the compact-WY identity
    T⁻¹ = D⁻¹ + striu(VᵀV) multiplied through by D, so tau = 0 (H_i = I) needs no
    special case.  A handful of batched operations per block: launches, not arithmetic,
    bound this on a GPU, and LAPACK's column-by-column recurrence took 20 times as many.
    """
    batch, n = h.shape[0], h.shape[-1]
    eye = torch.eye(n, dtype=torch.float64, device=h.device)
    v_all = torch.tril(h.double(), diagonal=-1) + eye
    t64 = tau.double()
    q = eye.expand(batch, n, n).clone()
    for k in range(0, n, block):
        end = min(n, k + block)
        v = v_all[:, k:, k:end]  # rows above k are zero for these reflectors
        d = t64[:, k:end]
        unit = torch.triu(v.transpose(-1, -2) @ v, diagonal=1) * d[:, :, None] + eye[: end - k, : end - k]
        t = torch.linalg.solve_triangular(unit, torch.diag_embed(d), upper=True, unitriangular=True)
        right = q[:, :, k:]
        q[:, :, k:] = right - ((right @ v) @ t) @ v.transpose(-1, -2)
    return q


def verify_qr(a: torch.Tensor, output: object, given: torch.Tensor | None = None,
              exact_q: bool = True) -> VerifyResult:
    """Check ``output`` as the compact QR of the pristine batch ``a``.

    ``given`` is the tensor the candidate was called with (a copy of ``a``):
    outputs must not alias it and it must come back unchanged.  ``exact_q=False``
    forms Q with :func:`householder_q64` (fast on CUDA; see the module docstring).
    """
    return verify_many([(a, output, given)], exact_q=exact_q)[0]


def _form_q(h: torch.Tensor, tau: torch.Tensor, exact_q: bool) -> torch.Tensor:
    return torch.linalg.householder_product(h, tau) if exact_q else householder_q64(h, tau)


def _check_form(a: torch.Tensor, output: object, given: torch.Tensor | None) -> VerifyResult | None:
    """The contract's form that reads no values: a 2-tuple of float32 tensors of the right shapes
    on the input's device, sharing no memory with the input.  A failed verdict, or None."""
    batch, n, _ = a.shape
    if not isinstance(output, tuple) or len(output) != 2:
        kind = type(output).__name__
        size = f" of length {len(output)}" if isinstance(output, (tuple, list)) else ""
        return _fail(f"output must be a 2-tuple (H, tau), got {kind}{size}")
    h, tau = output
    error = _check_tensor("H", h, (batch, n, n), a.device) or _check_tensor("tau", tau, (batch, n), a.device)
    if error:
        return _fail(error)
    assert isinstance(h, torch.Tensor) and isinstance(tau, torch.Tensor)
    if given is not None:
        for name, value in (("H", h), ("tau", tau)):
            if _overlaps(value, given):
                return _fail(f"{name} shares memory with the input A (outputs must be fresh tensors)")
    return None


_VALUE_FAILURES = ("H contains NaN or Inf", "tau contains NaN or Inf", "the candidate modified its input A in place")


def _first_value_failure(calls: Sequence[tuple[torch.Tensor, object, torch.Tensor | None]]
                         ) -> tuple[VerifyResult, int] | None:
    """The checks that read values (H and tau finite, the input unchanged) of calls whose form
    passed, all calls at once: one device sync however many calls a region holds, where a
    check per call and per tensor stalled a GPU MODE region of 50 small calls 150 times.
    Returns (the first failure in call order, its call index) or None."""
    if not calls:
        return None
    rows = []
    for a, output, given in calls:
        assert isinstance(output, tuple)  # the form passed
        h, tau = output
        changed = (given != a).any() if given is not None else torch.zeros((), dtype=torch.bool, device=a.device)
        # NaN != NaN, so a NaN written into the input reads as changed, as torch.equal would have it.
        rows.append(torch.stack([~torch.isfinite(h).all(), ~torch.isfinite(tau).all(), changed]))
    flags = torch.stack(rows).tolist()
    for index, row in enumerate(flags):
        for bad, message in zip(row, _VALUE_FAILURES):
            if bad:
                return _fail(message), index
    return None


def verify_many(calls: Sequence[tuple[torch.Tensor, object, torch.Tensor | None]], exact_q: bool = True
                ) -> tuple[VerifyResult, int | None]:
    """:func:`verify_qr` of several calls' outputs at once: each call's form checked on its own,
    then the float64 properties of all of them as one batch (a few launches in all rather than a
    few per call: GPU MODE's timed regions hold up to 50 calls of a 20×32 batch).

    ``calls`` holds (pristine input, output, the tensor the candidate was called with) per call, all of
    one shape.  Returns (the first failing verdict, else one over every matrix; the index of the
    failing call or None)."""
    try:
        # The first call that fails a check, in call order: the form of each (no device sync),
        # then the values of those before the first broken form, all at once.
        broken: tuple[VerifyResult, int] | None = None
        for index, (a, output, given) in enumerate(calls):
            failed = _check_form(a, output, given)
            if failed is not None:
                broken = (failed, index)
                break
        formed = calls if broken is None else calls[: broken[1]]
        value = _first_value_failure(formed)
        if value is not None:
            return value
        if broken is not None:
            return broken
        # The form of every output is checked: only the float64 properties are left, over one batch.
        if len(calls) == 1:
            a, output, _ = calls[0]
            return _check_properties(a, output[0], output[1], exact_q), None  # type: ignore[index]
        a_all = torch.cat([a for a, _, _ in calls])
        h_all = torch.cat([out[0] for _, out, _ in calls])  # type: ignore[index]
        tau_all = torch.cat([out[1] for _, out, _ in calls])  # type: ignore[index]
        verdict = _check_properties(a_all, h_all, tau_all, exact_q)
    except Exception as exc:  # a verdict, never an exception: candidates can return anything
        return _fail(f"verifier could not evaluate the output: {type(exc).__name__}: {exc}"), None
    batch = calls[0][0].shape[0]
    if verdict.ok or verdict.worst_matrix is None or batch == 0:
        return verdict, None
    index, matrix = divmod(verdict.worst_matrix, batch)
    message = verdict.message.replace(f"in matrix {verdict.worst_matrix}:", f"in matrix {matrix}:")
    return verdict.model_copy(update={"message": message, "worst_matrix": matrix}), index


def _check_properties(a: torch.Tensor, h: torch.Tensor, tau: torch.Tensor, exact_q: bool) -> VerifyResult:
    """The float64 gates on outputs whose form and values :func:`verify_many` checked first."""
    batch, n, _ = a.shape
    per_chunk = max(1, _CHUNK_ELEMENTS // max(1, n * n))
    factor = torch.empty(batch, dtype=torch.float64, device=a.device)
    orth = torch.empty_like(factor)
    leak = torch.empty_like(factor)
    recon = torch.empty_like(factor)
    scale = torch.empty_like(factor)
    q_finite = []  # read once after the loop: a check per chunk would stall the queue per chunk
    for lo in range(0, batch, per_chunk):
        hi = min(batch, lo + per_chunk)
        q_formed = _form_q(h[lo:hi], tau[lo:hi], exact_q)
        q_finite.append(torch.isfinite(q_formed).all())
        q = q_formed.double()
        del q_formed
        r = torch.triu(h[lo:hi]).double()
        a64 = a[lo:hi].double()
        projected = q.transpose(-1, -2) @ a64
        scale[lo:hi] = _l1(a64)
        factor[lo:hi] = _l1(r - projected)
        leak[lo:hi] = _l1(torch.tril(projected, diagonal=-1))
        recon[lo:hi] = _l1(q @ r - a64)
        del projected, a64
        eye = torch.eye(n, dtype=torch.float64, device=a.device)
        orth[lo:hi] = _l1(q.transpose(-1, -2) @ q - eye)
        del q, r
    if batch == 0:
        return VerifyResult(ok=True, message=f"ok (batch=0, n={n})")

    denom = EPS32 * max(n, 1)
    norm = scale.clamp_min(1e-30)
    factor_scaled = factor / (denom * norm)
    leak_scaled = leak / (denom * norm)
    recon_scaled = recon / (denom * norm)
    orth_scaled = orth / denom
    # ``~(x <= limit)`` also fails NaN residuals.
    bad_factor = ~(factor <= FACTOR_RTOL * denom * scale)
    bad_orth = ~(orth <= ORTH_RTOL * denom)
    worst_factor = torch.where(bad_factor, factor_scaled.nan_to_num(math.inf), -1.0).argmax()
    worst_orth = torch.where(bad_orth, orth_scaled.nan_to_num(math.inf), -1.0).argmax()
    # Every number the verdict needs in one transfer (one sync, where each read was one).
    numbers = torch.stack([
        torch.stack(q_finite).all().double(),
        *(x.nan_to_num(math.inf).max() for x in (factor_scaled, orth_scaled, leak_scaled, recon_scaled)),
        bad_factor.any().double(), worst_factor.double(), factor_scaled[worst_factor],
        bad_orth.any().double(), worst_orth.double(), orth_scaled[worst_orth],
        factor_scaled.argmax().double(),
    ]).tolist()
    q_ok, f_max, o_max, l_max, r_max, f_bad, f_worst, f_value, o_bad, o_worst, o_value, best_guess = numbers
    if not q_ok:
        return _fail("Q = householder_product(H, tau) contains NaN or Inf")
    evidence = dict(factor_scaled=f_max, orth_scaled=o_max, leakage_scaled=l_max, recon_scaled=r_max)
    gates = (
        ("R - QᵀA too large", "scaled residual", f_bad, int(f_worst), f_value, FACTOR_RTOL),
        ("Q not orthogonal", "scaled ‖QᵀQ−I‖₁", o_bad, int(o_worst), o_value, ORTH_RTOL),
    )
    for what, measure, bad, worst, value, limit in gates:
        if bad:
            return _fail(f"{what} in matrix {worst}: {measure} {value:.3g} > {limit:g}",
                         worst_matrix=worst, **evidence)
    return VerifyResult(ok=True, message=f"ok (batch={batch}, n={n})", worst_matrix=int(best_guess), **evidence)
