"""Compile shards: which launches each of several compile processes owns, and that together
they compile every kernel exactly once (the families' launch signatures match Triton's keys)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kernels.harness.compile_shards import Shard, launch_signature, parse_shard
from kernels.harness.precompile import CompileTarget, compile_only, read_report, start_precompile
from tests.kernels.test_precompile import KERNEL_CANDIDATE, _write, isolated, needs_ptxas


class Pointer:
    def __init__(self, address: int, dtype: str = "fp32") -> None:
        self.address, self.dtype = address, dtype

    def data_ptr(self) -> int:
        return self.address


def fake_fn(name: str = "k", do_not_specialize=()):
    # arguments: X (pointer), n (int), e0 (int), BM (constexpr)
    return SimpleNamespace(arg_names=["X", "n", "e0", "BM"], constexprs=[3], do_not_specialize=list(do_not_specialize),
                           fn=SimpleNamespace(__module__="m", __qualname__=name))


def test_signatures_follow_tritons_specialisation():
    fn = fake_fn()
    sig = lambda *args, **kw: launch_signature(fn, args, kw)  # noqa: E731
    base = sig(Pointer(4096), 32, 0, BM=64, num_warps=4)
    assert sig(Pointer(8192), 48, 16, BM=64, num_warps=4) == base  # same divisibility by 16: same kernel
    assert sig(Pointer(4100), 32, 0, BM=64, num_warps=4) != base  # pointer alignment
    assert sig(Pointer(4096), 33, 0, BM=64, num_warps=4) != base  # n % 16
    assert sig(Pointer(4096), 1, 0, BM=64, num_warps=4) != sig(Pointer(4096), 17, 0, BM=64, num_warps=4)  # == 1
    assert sig(Pointer(4096), 32, 0, BM=128, num_warps=4) != base  # a constexpr by value
    assert sig(Pointer(4096), 32, 0, BM=64, num_warps=8) != base  # a launch option by value
    assert sig(Pointer(4096), 2 ** 40, 0, BM=64, num_warps=4) != base  # 64-bit ints are another kernel
    assert launch_signature(fake_fn("other"), (Pointer(4096), 32, 0), {"BM": 64, "num_warps": 4}) != base
    # An argument Triton does not specialise on makes no new signature.
    loose = fake_fn(do_not_specialize=["e0"])
    assert launch_signature(loose, (Pointer(0), 32, 35), {"BM": 64}) == launch_signature(loose, (Pointer(0), 32, 48),
                                                                                          {"BM": 64})


def test_shards_share_the_signatures_round_robin_and_cover_every_launch():
    fn = fake_fn()
    launches = [((Pointer(0), 32, 0), {"BM": bm}) for bm in (16, 32, 16, 64, 128, 32, 256)]
    shards = [Shard(i, 3) for i in range(3)]
    owned = [[s.owns(fn, *launch) for launch in launches] for s in shards]
    # Every launch is owned by exactly one shard; repeats of a signature by the same one.
    assert all(sum(col) == 1 for col in zip(*owned))
    by_bm: dict[int, set[int]] = {}
    for (args, kw), col in zip(launches, zip(*owned)):
        by_bm.setdefault(kw["BM"], set()).add(col.index(True))
    assert all(len(v) == 1 for v in by_bm.values())
    # Five distinct signatures over three shards: 2, 2, 1.
    assert sorted(len({kw["BM"] for (args, kw), mine in zip(launches, row) if mine}) for row in owned) == [1, 2, 2]
    assert all(s.signatures_seen == 5 for s in shards)
    assert all(Shard(0, 1).owns(fn, *launch) for launch in launches)


def test_bad_shards_are_refused():
    assert (parse_shard("1/4").index, parse_shard("1/4").count) == (1, 4)
    for text in ("4/4", "x/2", "1", "-1/2"):
        with pytest.raises(ValueError, match="bad shard"):
            parse_shard(text)


def _requests(monkeypatch, path, shapes, shard=None):
    """Compile requests the JIT makes (vetoed by its cache hook: nothing is compiled)."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from triton import knobs

    from kernels.candidate import load_candidate

    keys: list[str] = []

    def hook(*, key, repr, fn, compile, is_manual_warmup, already_compiled):
        keys.append(f"{fn.jit_function.__name__}:{key}")
        return True

    monkeypatch.setattr(knobs.runtime, "jit_cache_hook", hook)
    with compile_only(CompileTarget(), shard):
        kernel = load_candidate(path)
        for batch, n in shapes:
            with FakeTensorMode():
                kernel(torch.empty((batch, n, n), device="cuda"))
    return keys


FAMILY_SHAPES = {
    "householder_unblocked": [(4, 32), (20, 32), (2, 64)],
    "blocked_wy": [(4, 176), (40, 176), (8, 512)],
    "lookahead_split": [(2, 1024), (60, 1024), (2, 4096)],
}


@pytest.mark.parametrize("family", sorted(FAMILY_SHAPES))
@isolated
def test_three_shards_of_a_family_request_each_kernel_exactly_once(monkeypatch, family):
    """The signature is a family's real Triton key: as many signatures as kernels, and the
    shards' requests are disjoint and together the unsharded ones."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    from kernels.families import FAMILIES_DIR

    path = FAMILIES_DIR / f"{family}.py"
    shapes = FAMILY_SHAPES[family]
    whole = _requests(monkeypatch, path, shapes)
    counted = Shard(0, 2)
    _requests(monkeypatch, path, shapes, counted)
    assert counted.signatures_seen == len(set(whole))  # one signature per kernel, no more, no fewer
    parts = [_requests(monkeypatch, path, shapes, Shard(i, 3)) for i in range(3)]
    assert sorted(k for part in parts for k in set(part)) == sorted(set(whole))
    if len(set(whole)) >= 3:
        assert all(parts)  # each shard has work


@needs_ptxas
def test_sharded_processes_compile_their_share_into_one_cache(tmp_path, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    candidate = _write(tmp_path, "k.py", KERNEL_CANDIDATE)
    shapes = [(2, 8), (2, 12), (3, 40), (3, 100)]  # three kernels: NP 16 (n 8 and 12), 64, 128
    reports = []
    for index in range(2):
        path = tmp_path / f"report{index}.json"
        proc = start_precompile(candidate, shapes, cache_dir=tmp_path / "cache", target=CompileTarget(),
                                report_path=path, shard=(index, 2))
        assert proc.wait(timeout=300) == 0
        reports.append(read_report(path))
    assert all(r is not None and r.ok and r.shapes == shapes for r in reports)
    assert [r.kernels_compiled for r in reports] == [2, 1] and [r.kernels_cached for r in reports] == [0, 0]
    # Together they filled the cache: an unsharded process finds all three there.
    whole = tmp_path / "whole.json"
    proc = start_precompile(candidate, shapes, cache_dir=tmp_path / "cache", target=CompileTarget(),
                            report_path=whole)
    assert proc.wait(timeout=300) == 0
    assert (read_report(whole).kernels_compiled, read_report(whole).kernels_cached) == (0, 3)


def test_a_bad_shard_argument_is_a_report_not_a_crash(tmp_path, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    report_path = tmp_path / "r.json"
    proc = start_precompile(_write(tmp_path, "k.py", KERNEL_CANDIDATE), [(2, 8)], cache_dir=tmp_path / "cache",
                            target=CompileTarget(), report_path=report_path, shard=(3, 2))
    assert proc.wait(timeout=240) == 0
    report = read_report(report_path)
    assert report is not None and not report.ok and "bad shard 3/2" in report.error
