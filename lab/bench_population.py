"""Benchmark the population store (not a test): insert rates, lineage depth, and resume time.

    .venv/bin/python lab/bench_population.py [--n 100000] [--dir /tmp/bench] [--keep]

Figures: candidates inserted per second (one transaction each, and in batches),
full evaluations recorded per second (add + running + tell), the ancestor query
on a 1,000-deep chain, and opening a run of N evaluated candidates (integrity
check plus rebuilding the in-memory population).
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table

from population import lineage
from population.config import FamilyConfig, MigrationConfig, PopulationConfig
from population.models import Candidate, EvalResult, NewCandidate, Origin, State
from population.run import Run, load_population
from population.store import RunStore

CHAIN = 1000
FAMILIES = PopulationConfig(seed=1, families=tuple(
    FamilyConfig(name=f"f{i}", islands=4, capacity=32, tuning_budget=8,
                 migration=MigrationConfig(interval=50)) for i in range(4)))
SOURCE = "import triton\n\n@triton.jit\ndef panel(A, tau, n: tl.constexpr):\n" + "    pass  # body\n" * 60


def new(parent: Candidate | None, i: int, family: str = "f0", island: int = 0) -> NewCandidate:
    # One source per 20 candidates: realistic dedup (most children are parameter changes).
    return NewCandidate(family=family, island=island, parent_ids=(parent.id,) if parent else (),
                        origin=Origin.OPTUNA if parent else Origin.SEED, source=f"{SOURCE}# v{i // 20}\n",
                        params={"block_m": 16 << (i % 4), "warps": 4, "i": i}, fingerprint=f"s{i // 20 % 500}")


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def bench_inserts_single(root: Path, n: int) -> tuple[float, Run]:
    run = Run.create(root / "single", FAMILIES)
    made: list[Candidate] = []
    rng = random.Random(0)

    def go() -> None:
        for i in range(n):
            # The first CHAIN candidates form one line; later ones hang off random earlier ones.
            parent = made[-1] if 0 < i < CHAIN else (made[rng.randrange(len(made))] if made else None)
            made.append(run.add_candidate(new(parent, i)))
    return n / timed(go), run


def bench_inserts_batched(root: Path, n: int, batch: int = 1000) -> float:
    run = Run.create(root / "batched", FAMILIES)
    seed = run.add_candidate(new(None, 0))

    def go() -> None:
        for start in range(0, n, batch):
            run.add_candidates([new(seed, i) for i in range(start, min(n, start + batch))])
    rate = n / timed(go)
    run.close()
    return rate


def evaluate(run: Run, i: int, rng: random.Random) -> None:
    fam = f"f{i % 4}"
    island = i // 4 % 4
    parent = run.select_parent(fam, island)
    c = run.add_candidate(new(parent, i, fam, island))
    run.mark_running(c.id)
    if rng.random() < 0.2:
        run.tell(c.id, State.FAILED_VERIFY, reason="orthogonality residual 3e-3 > 1e-4")
    else:
        run.tell(c.id, State.VERIFIED, result=EvalResult(candidate_id=c.id, geomean_ms=rng.uniform(0.1, 5),
                                                         device="bench", versions={"torch": "2.9"}))


def bench_lifecycle_single(root: Path, n: int) -> float:
    run = Run.create(root / "lifecycle", FAMILIES)
    rng = random.Random(1)
    rate = n / timed(lambda: [evaluate(run, i, rng) for i in range(n)])
    run.close()
    return rate


def bench_lifecycle_batched(root: Path, n: int, batch: int = 500) -> tuple[float, Path]:
    run = Run.create(root / "big", FAMILIES)
    rng = random.Random(2)

    def go() -> None:
        for start in range(0, n, batch):
            with run.transaction():
                for i in range(start, min(n, start + batch)):
                    evaluate(run, i, rng)
    rate = n / timed(go)
    run.close()
    return rate, root / "big"


def bench_ancestors(run: Run, query: Callable[..., list]) -> tuple[float, int]:
    tip = run.store.get_candidate(f"c{CHAIN:07d}")
    times, found = [], 0
    for _ in range(7):
        t0 = time.perf_counter()
        found = len(query(run.store, tip.id))
        times.append(time.perf_counter() - t0)
    return statistics.median(times), found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--lifecycle-n", type=int, default=10_000, help="evaluations for the unbatched lifecycle rate")
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    root = args.dir or Path(tempfile.mkdtemp(prefix="bench_population_"))
    root.mkdir(parents=True, exist_ok=True)
    console = Console()
    rows: list[tuple[str, str]] = []
    try:
        rate, single = bench_inserts_single(root, args.n)
        rows.append((f"insert {args.n:,} candidates, one transaction each", f"{rate:,.0f} /s"))
        for label, query in (("lineage.ancestors", lineage.ancestors), ("lineage.ancestor_ids", lineage.ancestor_ids)):
            anc, found = bench_ancestors(single, query)
            assert found == CHAIN - 1
            rows.append((f"{label}: tip of a {CHAIN:,}-deep chain (store of {args.n:,})", f"{anc * 1e3:.1f} ms"))
        single.close()
        batched = bench_inserts_batched(root, args.n)
        rows.append((f"insert {args.n:,} candidates, batches of 1,000", f"{batched:,.0f} /s"))
        rows.append((f"record {args.lifecycle_n:,} evaluations (add+running+tell), one commit each",
                     f"{bench_lifecycle_single(root, args.lifecycle_n):,.0f} /s"))
        rate, big = bench_lifecycle_batched(root, args.n)
        rows.append((f"record {args.n:,} evaluations, 500 per commit", f"{rate:,.0f} /s"))
        size = sum(p.stat().st_size for p in big.iterdir())
        rows.append(("size of that run on disk", f"{size / 2**20:.1f} MiB"))
        holder: list[Run] = []
        t_open = timed(lambda: holder.append(Run.open(big)))
        members = sum(len(f.members()) for f in holder[0].population.families.values())
        holder[0].close()
        rows.append((f"open a run of {args.n:,} evaluated candidates for writing (quick_check + rebuild, "
                     f"{members} members)", f"{t_open * 1e3:.0f} ms"))
        t_fast = timed(lambda: _open_fast(big))
        rows.append(("same, integrity check skipped (RunStore.open(..., integrity=False))", f"{t_fast * 1e3:.0f} ms"))
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    table = Table(title="population store benchmark")
    table.add_column("measure")
    table.add_column("result", justify="right")
    for r in rows:
        table.add_row(*r)
    console.print(table)


def _open_fast(path: Path) -> None:
    with RunStore.open(path, integrity=False) as store:
        load_population(store)


if __name__ == "__main__":
    main()
