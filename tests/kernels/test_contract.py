import math

import pytest
import torch

from kernels.contract import CASES, EPS32, MIXED_PROFILES
from kernels.inputs import generate_input, mixed_profiles


@pytest.mark.parametrize("case", CASES)
def test_deterministic_per_seed_and_well_formed(case):
    a = generate_input(3, 24, 2, seed=11, case=case)
    b = generate_input(3, 24, 2, seed=11, case=case)
    c = generate_input(3, 24, 2, seed=12, case=case)
    assert a.dtype == torch.float32 and a.shape == (3, 24, 24) and a.is_contiguous()
    assert torch.equal(a, b)
    assert not torch.equal(a, c)
    assert torch.isfinite(a).all()


def test_dense_columns_follow_logspace_scaling():
    plain = generate_input(2, 16, 0, seed=5, case="dense")
    scaled = generate_input(2, 16, 3, seed=5, case="dense")
    expected = plain * torch.logspace(0, -3, 16)
    torch.testing.assert_close(scaled, expected)


def test_upper_is_triangular_with_boosted_diagonal():
    a = generate_input(2, 12, 0, seed=1, case="upper")
    assert torch.count_nonzero(torch.tril(a, -1)) == 0
    raw = torch.randn((2, 12, 12), generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(a.diagonal(dim1=-2, dim2=-1), raw.diagonal(dim1=-2, dim2=-1) + torch.linspace(1, 0.25, 12))


def test_rankdef_zeroes_trailing_quarter():
    n = 20
    a = generate_input(2, n, 1, seed=2, case="rankdef")
    assert torch.count_nonzero(a[:, :, (3 * n) // 4:]) == 0
    assert (a[:, :, : (3 * n) // 4].abs().sum(dim=1) > 0).all()


def test_nearrank_tail_copies_head_columns():
    n = 16
    a = generate_input(1, n, 0, seed=3, case="nearrank")
    rank = (3 * n) // 4
    diff = a[:, :, rank:] - a[:, :, : n - rank]
    assert diff.abs().max() < 1e-4
    assert diff.abs().max() > 0


def test_clustered_column_scales():
    n = 32
    a = generate_input(4, n, 0, seed=4, case="clustered")
    col_max = a.abs().amax(dim=(0, 1))
    assert col_max[: n // 2 - 2].min() > 0.1
    assert col_max[n // 2 + 2:].max() < 4 * EPS32 * 10
    assert math.sqrt(EPS32) * 0.01 < col_max[n // 2 - 2: n // 2 + 2].max() < math.sqrt(EPS32) * 10


def test_band_structure():
    n = 40
    a = generate_input(2, n, 0, seed=6, case="band")
    half = max(2, min(32, n // 32))
    i = torch.arange(n)
    outside = (i[:, None] - i[None, :]).abs() > half
    assert torch.count_nonzero(a[:, outside]) == 0
    assert torch.count_nonzero(a[:, ~outside]) > 0


def test_rowscale_rows_decay():
    n = 32
    a = generate_input(8, n, 0, seed=7, case="rowscale")
    row_max = a.abs().amax(dim=(0, 2))
    assert row_max[0] > 1e3 * row_max[-1]  # max(cond, 4) = 4 decades over the rows


def test_nearcollinear_columns_nearly_parallel():
    a = generate_input(1, 16, 0, seed=8, case="nearcollinear")[0].double()
    cols = a / a.norm(dim=0, keepdim=True)
    cosines = cols.T @ cols
    assert cosines.abs().min() > 0.99


def test_mixed_batches_hold_dense_and_stressed_matrices():
    for seed in range(40):
        profiles = mixed_profiles(2, torch.Generator().manual_seed(seed))
        assert "dense" in profiles
        assert any(p != "dense" for p in profiles)
        assert set(profiles) <= set(MIXED_PROFILES)
    big = mixed_profiles(400, torch.Generator().manual_seed(0))
    assert 0.35 < big.count("dense") / 400 < 0.65


def test_mixed_matrices_keep_their_profile_structure():
    a = generate_input(24, 16, 0, seed=21, case="mixed")
    assert torch.isfinite(a).all()
    zero_tail = [(a[i, :, 12:] == 0).all().item() for i in range(24)]
    assert any(zero_tail), "a rankdef matrix should appear in 24 draws"
    assert not all(zero_tail)


def test_rejects_bad_arguments():
    with pytest.raises(ValueError, match="unknown case"):
        generate_input(1, 4, 0, seed=0, case="nope")
    with pytest.raises(ValueError):
        generate_input(0, 4, 0, seed=0)
    with pytest.raises(ValueError):
        generate_input(1, 4, -1, seed=0)
