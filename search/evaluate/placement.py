"""Where an evaluator's work lives on its host: the run's Triton cache and CUDA C++ build
directory (under the run directory, so that ``resume`` finds them and no run inherits another's
kernels), and which of the host's CPUs time and which compile ahead."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

TRITON_CACHE = "triton-cache"
TORCH_EXTENSIONS = "torch-extensions"  # CUDA C++ candidates' builds (load_inline), by source hash


def run_cache_dir(run_dir: Path) -> Path:
    """The run's own Triton cache: under the run directory, so ``resume`` finds it again and no
    run inherits another's kernels."""
    return (Path(run_dir) / TRITON_CACHE).resolve()


def evaluator_env(run_dir: Path, interpret: bool) -> dict[str, str]:
    """Environment the evaluators' children get on top of the screened one: the run's own
    Triton cache and CUDA C++ build directory (both under the run, so a resume finds them)."""
    env = {"TRITON_CACHE_DIR": str(run_cache_dir(run_dir)),
           "TORCH_EXTENSIONS_DIR": str((Path(run_dir) / TORCH_EXTENSIONS).resolve())}
    if interpret:
        env["TRITON_INTERPRET"] = "1"  # no GPU: run Triton kernels in the interpreter
    return env


def split_cpus(available: Sequence[int], index: int, count: int, timing_share: float = 0.125
               ) -> tuple[frozenset[int], frozenset[int]]:
    """(timing CPUs, compile CPUs) for evaluator ``index`` of ``count`` on one host.

    The host's CPUs are shared out in contiguous slices, one per evaluator; in its slice the
    first ``timing_share`` (at least one; two of an H200 host's 16) runs the timing child and
    the rest compile ahead (the verify stage's children, which time nothing, may use any).
    A slice of one CPU cannot be split: both get it (and compiling overlaps timing's core)."""
    cpus = sorted(set(available))
    if not cpus:
        raise ValueError("no CPUs available")
    count = max(1, count)
    index = index % count
    size = max(1, len(cpus) // count)
    mine = cpus[index * size:(index + 1) * size] or cpus[-size:]
    if len(mine) < 2:
        return frozenset(mine), frozenset(mine)
    timing = max(1, round(len(mine) * timing_share))
    return frozenset(mine[:timing]), frozenset(mine[timing:])
