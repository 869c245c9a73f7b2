"""install_compile_counter: Triton compiles vs on-disk cache hits in one process."""

from __future__ import annotations

from pathlib import Path

import pytest
from types import SimpleNamespace

from kernels.harness.compile_stats import install_compile_counter
from kernels.harness.precompile import CompileTarget, compile_only
from tests.kernels.test_precompile import KERNEL_CANDIDATE, isolated, needs_ptxas

# Every test imports Triton un-interpreted, so each runs in its own process (see test_precompile).


def _notify(cache_hit: bool, name: str = "k") -> None:
    from triton import knobs

    knobs.compilation.listener(src=SimpleNamespace(name=name), metadata={}, metadata_group={}, times=None,
                               cache_hit=cache_hit)


@isolated
def test_counts_both_outcomes_and_keeps_the_earlier_listener(monkeypatch):
    from triton import knobs

    seen: list[bool] = []

    def earlier(*, src, metadata, metadata_group, times, cache_hit):
        seen.append(cache_hit)

    monkeypatch.setattr(knobs.compilation, "listener", earlier)
    counter = install_compile_counter()
    _notify(False, "_qr")
    _notify(True)
    _notify(True)
    assert (counter.compiled, counter.cache_hits, counter.total) == (1, 2, 3)
    assert counter.compiled_names == ["_qr"] and counter.hit_rate == 2 / 3
    assert seen == [False, True, True]
    counter.remove()
    assert knobs.compilation.listener is earlier
    _notify(False)
    assert counter.compiled == 1  # no longer counting
    counter.remove()  # twice is harmless
    assert knobs.compilation.listener is earlier


@isolated
def test_remove_leaves_a_listener_installed_after_it(monkeypatch):
    from triton import knobs

    monkeypatch.setattr(knobs.compilation, "listener", None)
    first = install_compile_counter()
    first_hook = knobs.compilation.listener
    second = install_compile_counter()
    first.remove()  # not the active one: must not unhook the second
    _notify(True)
    assert (first.cache_hits, second.cache_hits) == (1, 1)  # the second still chains to the first's hook
    second.remove()
    assert knobs.compilation.listener is first_hook
    assert install_compile_counter().hit_rate is None  # nothing seen yet


@needs_ptxas
@isolated
def test_real_compiles_then_hits_from_the_disk_cache(tmp_path, monkeypatch):
    import torch
    from triton import knobs
    from torch._subclasses.fake_tensor import FakeTensorMode

    from kernels.candidate import load_candidate

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(knobs.compilation, "listener", None)
    path = tmp_path / "k.py"
    path.write_text(KERNEL_CANDIDATE)
    counter = install_compile_counter()
    try:
        with compile_only(CompileTarget()):
            def call(kernel, n: int) -> None:
                with FakeTensorMode():
                    kernel(torch.empty((2, n, n), device="cuda"))

            first = load_candidate(path)
            call(first, 8)
            assert (counter.compiled, counter.cache_hits) == (1, 0)
            call(first, 12)  # same specialisation: the JIT's in-memory cache, compile() is not reached
            assert (counter.compiled, counter.cache_hits) == (1, 0)
            call(load_candidate(Path(path)), 8)  # a fresh module: its JIT finds the kernel on disk
            assert (counter.compiled, counter.cache_hits) == (1, 1)
            call(first, 40)  # another NP and num_warps: another kernel
            assert (counter.compiled, counter.cache_hits) == (2, 1)
    finally:
        counter.remove()
    assert any((tmp_path / "cache").rglob("_copy.cubin"))
    # Each compile is timed and labelled with its constexprs: the two variants differ in NP.
    assert len(counter.compile_seconds) == 2 and all(s > 0 for s in counter.compile_seconds)
    assert all(label.startswith("_copy(") and "NP=" in label for label in counter.compiled_names)
    assert len(set(counter.compiled_names)) == 2
    assert {"ttir", "ptx", "cubin"} <= set(counter.stage_seconds)
    assert sum(counter.stage_seconds.values()) == pytest.approx(sum(counter.compile_seconds))
