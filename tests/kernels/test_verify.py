import math

import pytest
import torch

from kernels.contract import EPS32
from kernels.inputs import generate_input
from kernels.verify import householder_q64, verify_qr
from tests.kernels.qr_reference import householder_qr


def _a(case="dense", n=24, batch=3, cond=2, seed=1):
    return generate_input(batch, n, cond, seed=seed, case=case)


def reference_verdict(a, output):
    """The published qr_v2 gates restated independently: fp32 Q, float64 residuals,
    per-matrix factor gate, batch-max orthogonality gate."""
    if not isinstance(output, tuple) or len(output) != 2:
        return False
    h, tau = output
    batch, n, _ = a.shape
    for t, shape in ((h, (batch, n, n)), (tau, (batch, n))):
        if not isinstance(t, torch.Tensor) or tuple(t.shape) != shape or t.dtype != torch.float32:
            return False
        if t.device != a.device or not torch.isfinite(t).all():
            return False
    q = torch.linalg.householder_product(h, tau)
    if not torch.isfinite(q).all():
        return False
    q, r, a64 = q.double(), torch.triu(h).double(), a.double()
    norm1 = lambda x: torch.linalg.matrix_norm(x, ord=1)  # noqa: E731
    factor = norm1(r - q.mT @ a64)
    if (factor > 20 * n * EPS32 * norm1(a64)).any():
        return False
    orth = norm1(q.mT @ q - torch.eye(n, dtype=torch.float64)).amax()
    return bool(orth <= 100 * n * EPS32)


@pytest.mark.parametrize("case", ["dense", "upper", "rankdef", "nearrank", "clustered", "band", "rowscale",
                                  "nearcollinear", "mixed"])
def test_accepts_geqrf(case):
    a = _a(case)
    result = verify_qr(a, torch.geqrf(a.clone()))
    assert result.ok, result.message
    assert result.factor_scaled is not None and result.factor_scaled < 20
    assert result.orth_scaled is not None and result.orth_scaled < 100
    assert result.recon_scaled is not None and result.leakage_scaled is not None


def test_accepts_opposite_sign_convention():
    a = _a(n=16)
    h_opp, tau_opp = householder_qr(a, opposite_sign=True)
    h_geqrf, _ = torch.geqrf(a)
    # Really a different factorization: R's diagonal signs disagree with geqrf's.
    assert (torch.sign(h_opp.diagonal(dim1=-2, dim2=-1)) != torch.sign(h_geqrf.diagonal(dim1=-2, dim2=-1))).any()
    assert verify_qr(a, (h_opp, tau_opp)).ok
    assert verify_qr(a, householder_qr(a)).ok


def test_accepts_rankdef_with_zero_tau_on_zero_columns():
    n = 16
    a = _a("rankdef", n=n, cond=0)
    h, tau = householder_qr(a)
    assert torch.count_nonzero(tau[:, (3 * n) // 4:]) == 0
    result = verify_qr(a, (h, tau))
    assert result.ok, result.message


def _valid(a):
    return torch.geqrf(a.clone())


@pytest.mark.parametrize(
    "mutate, expect",
    [
        (lambda a, h, t: (h, torch.zeros_like(t)), "R - Q"),
        (lambda a, h, t: (h, t * (1 + 1e-3)), "R - Q"),
        (lambda a, h, t: (h.transpose(-1, -2).contiguous(), t), "R - Q"),
        (lambda a, h, t: (h + 1e-3 * torch.tril(torch.ones_like(h), -1), t), ""),
        (lambda a, h, t: (torch.where(torch.rand_like(h) < 0.01, float("nan"), h), t), "NaN"),
        (lambda a, h, t: (h, t.index_fill(1, torch.tensor([0]), float("inf"))), "NaN or Inf"),
        (lambda a, h, t: (h.double(), t), "dtype"),
        (lambda a, h, t: (h[:, :-1], t), "shape"),
        (lambda a, h, t: (h, t[:, :-1]), "shape"),
        (lambda a, h, t: (h.to("meta"), t), "must be on"),
        (lambda a, h, t: (h, t, t), "2-tuple"),
        (lambda a, h, t: [h, t], "2-tuple"),
        (lambda a, h, t: (h.tolist(), t), "torch.Tensor"),
        (lambda a, h, t: "not a result", "2-tuple"),
        (lambda a, h, t: None, "2-tuple"),
    ],
    ids=["tau-zero", "tau-1e-3", "H-transposed", "lower-leak", "nan", "inf", "dtype", "H-shape", "tau-shape",
         "device", "3-tuple", "list", "non-tensor", "string", "none"],
)
@pytest.mark.parametrize("exact_q", [True, False], ids=["reference-q", "fast-q"])
def test_rejects(mutate, expect, exact_q):
    a = _a()
    h, tau = _valid(a)
    result = verify_qr(a, mutate(a, h, tau), exact_q=exact_q)
    assert not result.ok
    assert expect in result.message


@pytest.mark.parametrize("exact_q", [True, False], ids=["reference-q", "fast-q"])
def test_rejects_nonorthogonal_q_with_consistent_r(exact_q):
    a = _a(n=12)
    h, tau = _valid(a)
    bad_tau = tau * 1.5
    q = torch.linalg.householder_product(h, bad_tau)
    r = torch.triu((q.mT.double() @ a.double()).float())
    h_bad = torch.triu(r) + torch.tril(h, -1)
    result = verify_qr(a, (h_bad, bad_tau), exact_q=exact_q)
    assert not result.ok


def test_rejects_outputs_that_alias_the_input():
    a = _a()
    given = a.clone()
    h, tau = torch.geqrf(given)
    given.copy_(h)  # the candidate factored in place and returns a view of A
    result = verify_qr(a, (given[:], tau), given=given)
    assert not result.ok and "shares memory" in result.message


def test_rejects_input_modified_in_place():
    a = _a()
    given = a.clone()
    out = torch.geqrf(given)
    given.mul_(2)
    result = verify_qr(a, out, given=given)
    assert not result.ok and "modified its input" in result.message


def test_never_raises_on_exotic_output():
    a = _a(n=4)

    class Weird(tuple):
        def __len__(self):
            raise RuntimeError("boom")

    assert not verify_qr(a, Weird((1, 2))).ok


@pytest.mark.parametrize("exact_q", [True, False], ids=["reference-q", "fast-q"])
def test_names_the_worst_matrix(exact_q):
    a = _a(batch=4)
    h, tau = _valid(a)
    tau = tau.clone()
    tau[2] *= 1.01
    result = verify_qr(a, (h, tau), exact_q=exact_q)
    assert not result.ok and result.worst_matrix == 2 and "matrix 2" in result.message


def test_chunked_verdicts_match_unchunked(monkeypatch):
    import kernels.verify as v

    a = _a(batch=7, n=10)
    h, tau = _valid(a)
    tau_bad = tau.clone()
    tau_bad[5] *= 1.001
    whole = [verify_qr(a, (h, tau)), verify_qr(a, (h, tau_bad))]
    monkeypatch.setattr(v, "_CHUNK_ELEMENTS", 2 * 10 * 10)  # two matrices per chunk
    chunked = [verify_qr(a, (h, tau)), verify_qr(a, (h, tau_bad))]
    for x, y in zip(whole, chunked):
        assert x.ok == y.ok and x.worst_matrix == y.worst_matrix
        assert math.isclose(x.factor_scaled, y.factor_scaled, rel_tol=1e-12)


def test_agrees_with_reference_gates_across_perturbation_sizes():
    gen = torch.Generator().manual_seed(0)
    verdicts = set()
    for case in ("dense", "rankdef", "clustered", "rowscale", "mixed"):
        a = generate_input(3, 20, 2, seed=5, case=case)
        h, tau = torch.geqrf(a)
        for scale in (0.0, 1e-9, 1e-7, 3e-7, 1e-6, 1e-5, 1e-3):
            for target in ("tau", "upper", "lower"):
                noise_h = torch.randn(h.shape, generator=gen)
                if target == "tau":
                    out = (h, tau * (1 + scale * torch.randn(tau.shape, generator=gen)))
                elif target == "upper":
                    out = (h + scale * torch.triu(noise_h) * h.abs().amax(), tau)
                else:
                    out = (h + scale * torch.tril(noise_h, -1), tau)
                ours = verify_qr(a, out).ok
                assert ours == reference_verdict(a, out), (case, scale, target)
                # The fast re-check (float64 Q) lands on the same side of the gates.
                assert verify_qr(a, out, exact_q=False).ok == ours, (case, scale, target)
                verdicts.add(ours)
    assert verdicts == {True, False}, "the sweep must cross the threshold to mean anything"


@pytest.mark.parametrize("block", [32, 8, 64])
@pytest.mark.parametrize("n", [1, 2, 31, 32, 33, 70])
def test_fast_q_is_householder_product_in_float64(n, block):
    """Whatever the block width (stage_profile's --q64-block measures others on a GPU)."""
    gen = torch.Generator().manual_seed(n)
    h, tau = torch.geqrf(torch.randn(3, n, n, generator=gen))
    tau = tau.clone()
    tau[:, ::3] = 0  # H_i = I: LAPACK's convention for a zero column
    expected = torch.linalg.householder_product(h.double(), tau.double())
    assert torch.allclose(householder_q64(h, tau, block=block), expected, rtol=0, atol=1e-13)


def test_fast_q_verdict_and_residuals_match_the_reference():
    a = _a(case="mixed", n=64, batch=5)
    out = _valid(a)
    exact, fast = verify_qr(a, out), verify_qr(a, out, exact_q=False)
    assert exact.ok and fast.ok
    # Residuals differ only by the float32 rounding inside the reference Q (well under the gates).
    assert abs(exact.factor_scaled - fast.factor_scaled) < 0.5
    assert abs(exact.orth_scaled - fast.orth_scaled) < 2


def _region(calls=5, n=16, batch=3):
    """A GPU MODE timed region's worth of calls: (pristine input, output, the tensor passed)."""
    out = []
    for seed in range(calls):
        a = _a(n=n, batch=batch, seed=100 + seed)
        given = a.clone()
        out.append((a, torch.geqrf(given.clone()), given))
    return out


def test_a_region_verified_at_once_agrees_with_each_call_verified_alone():
    from kernels.verify import verify_many

    calls = _region()
    verdict, index = verify_many(calls, exact_q=False)
    alone = [verify_qr(a, out, given, exact_q=False) for a, out, given in calls]
    assert verdict.ok and index is None and all(v.ok for v in alone)
    assert verdict.factor_scaled == pytest.approx(max(v.factor_scaled for v in alone))
    assert verdict.orth_scaled == pytest.approx(max(v.orth_scaled for v in alone))


def test_a_wrong_call_inside_a_region_is_named_with_its_own_matrix():
    from kernels.verify import verify_many

    calls = _region(calls=5, batch=3)
    a, (h, tau), given = calls[3]
    bad = h.clone()
    bad[1, 0, 0] += 1.0  # matrix 1 of call 4: R no longer matches QᵀA
    calls[3] = (a, (bad, tau), given)
    verdict, index = verify_many(calls, exact_q=False)
    assert not verdict.ok and index == 3 and verdict.worst_matrix == 1
    assert "in matrix 1:" in verdict.message


def test_a_region_fails_on_the_first_call_with_a_broken_form_or_a_changed_input():
    from kernels.verify import verify_many

    calls = _region(calls=4)
    a, (h, tau), given = calls[2]
    calls[2] = (a, (h.double(), tau), given)
    verdict, index = verify_many(calls)
    assert not verdict.ok and index == 2 and "float32" in verdict.message
    calls = _region(calls=4)
    calls[1][2].add_(1.0)  # the candidate wrote into its input during call 2
    verdict, index = verify_many(calls)
    assert not verdict.ok and index == 1 and "modified its input" in verdict.message


def test_a_region_whose_calls_return_one_buffer_fails_after_the_region():
    """A kernel that writes every call's result into the same tensors: all but the last output
    were overwritten when the region ends, and the harness says which call shared memory."""
    from kernels.harness.timing import calls_verified
    from kernels.suites import Case

    held: dict[str, tuple] = {}

    def reusing(a):
        h, tau = torch.geqrf(a)
        if "out" not in held:
            held["out"] = (h, tau)
        held["out"][0].copy_(h)
        held["out"][1].copy_(tau)
        return held["out"]

    case = Case(batch=3, n=16, cond=1.0, seed=5)
    verdict, _, _ = calls_verified(reusing, case, [1, 2, 3], torch.device("cpu"), exact_q=False)
    assert not verdict.ok and verdict.message.startswith("call 2 of 3:") and "share memory" in verdict.message


def test_a_region_names_the_first_failing_call_even_when_a_later_one_has_a_broken_form():
    """Forms are checked before values (the form reads nothing from the device), but the verdict
    is still the first failure in call order: a NaN in call 2 before a wrong dtype in call 4."""
    from kernels.verify import verify_many

    calls = _region(calls=5)
    a, (h, tau), given = calls[1]
    calls[1] = (a, (h.index_fill(1, torch.tensor([0]), float("nan")), tau), given)
    a, (h, tau), given = calls[3]
    calls[3] = (a, (h.double(), tau), given)
    verdict, index = verify_many(calls, exact_q=False)
    assert not verdict.ok and index == 1 and "H contains NaN or Inf" in verdict.message
    calls[1] = _region(calls=5)[1]  # call 2 mended: now the broken form of call 4 is the first failure
    verdict, index = verify_many(calls, exact_q=False)
    assert not verdict.ok and index == 3 and "float32" in verdict.message


def test_a_nan_written_into_the_input_counts_as_modifying_it():
    from kernels.verify import verify_many

    calls = _region(calls=3)
    calls[2][2][0, 0, 0] = float("nan")
    verdict, index = verify_many(calls, exact_q=False)
    assert not verdict.ok and index == 2 and "modified its input" in verdict.message


class _Reads:
    """Counts the reads of tensor values into Python (each one a device sync on a GPU)."""

    NAMES = ("__bool__", "item", "tolist", "__float__", "__int__", "__index__")

    def __init__(self, monkeypatch):
        self.count = 0
        for name in self.NAMES:
            original = getattr(torch.Tensor, name)

            def counted(tensor, *args, _original=original, **kwargs):
                self.count += 1
                return _original(tensor, *args, **kwargs)

            monkeypatch.setattr(torch.Tensor, name, counted)


def test_a_region_of_many_calls_reads_the_device_a_fixed_number_of_times(monkeypatch):
    """GPU MODE's regions hold up to 50 calls; a check per call and per tensor stalled the GPU
    150 times per region.  The reads must not grow with the number of calls."""
    from kernels.verify import verify_many

    reads = {}
    for count in (2, 20):
        calls = _region(calls=count)
        counter = _Reads(monkeypatch)
        verdict, _ = verify_many(calls, exact_q=False)
        monkeypatch.undo()
        assert verdict.ok
        reads[count] = counter.count
    assert reads[20] == reads[2] <= 3
