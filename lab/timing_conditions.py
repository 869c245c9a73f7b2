"""How the conditions around a timed call move launch-bound medians (run on a GPU host).

The search times candidates on a GPU that often idles between evaluations, while compile
processes load the host's other CPUs; a standalone ``qrsearch bench`` times the same file on a
quiet host.  This script times each family's seed on its smallest bench case with the
harness's own :func:`kernels.harness.timing.measure` under controlled conditions and prints
one row per condition: medians, their spread over repeats, and the SM clock before timing.

    python lab/timing_conditions.py [--repeats 3] [--idle-s 2] [--load 12] [--cases short|long]
                                        [--load-kind spin|compile] [--conditions warm,idle,idle+reps10,load]
                                        [--pairs FAMILY:CASE,...]

Conditions: ``memory`` (another process holds all but ``--leave-gb`` of the GPU's memory),
``warm`` (right after another measurement), ``idle`` (after the host and GPU idled
``--idle-s``), ``idle+reps10`` (the same, ten timed calls at least), ``load`` (busy CPU loops at
nice 10 on other CPUs, as compile processes would be, and on the timing CPU's SMT sibling if
it has one).  ``--load-kind compile`` loads those CPUs with what the search runs there: Triton
compiles of lookahead_split (compile-only processes, a fresh cache each, restarted as they end).
``--cases long`` times the seeds' cases of 6 ms and more instead of the launch-bound ones;
``--pairs cuda_blocked:dense-640x512-c2,...`` times the given family files' defaults on those cases.
What H200 hosts showed is in docs/search-performance.md ("Timing under load").
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

# Before Triton reads it: this script's kernels compile into a cache of its own.
SCRATCH = Path(tempfile.mkdtemp(prefix="timing-conditions-"))
os.environ["TRITON_CACHE_DIR"] = str(SCRATCH / "cache")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from kernels.candidate import load_candidate  # noqa: E402
from kernels.families import FAMILIES_DIR  # noqa: E402
from kernels.harness.precompile import CompileTarget, start_precompile  # noqa: E402
from kernels.harness.settings import TimingPolicy  # noqa: E402
from kernels.harness.timing import DeviceClock, measure  # noqa: E402
from kernels.suites import get_suite  # noqa: E402

SHORT = (("householder_unblocked", "dense-20x32-c1"), ("blocked_wy", "dense-40x176-c1"),
         ("lookahead_split", "dense-40x352-c1"))
LONG = (("lookahead_split", "dense-60x1024-c2"), ("lookahead_split", "dense-640x512-c2"),
        ("blocked_wy", "dense-640x512-c2"), ("lookahead_split", "dense-2x4096-c1"))
LOAD_SHAPES = [(2, 4096), (8, 2048), (60, 1024)]  # lookahead_split's largest: minutes of compiling


def siblings(cpu: int) -> set[int]:
    path = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list")
    if not path.exists():
        return {cpu}
    out: set[int] = set()
    for part in path.read_text().strip().split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def _spin(cpu: int, stop: mp.Event) -> None:  # type: ignore[valid-type]
    os.sched_setaffinity(0, {cpu})
    os.nice(10)
    x = 0
    while not stop.is_set():  # type: ignore[attr-defined]
        for i in range(100_000):
            x += i * i


class Load:
    def __init__(self, cpus: list[int]) -> None:
        self.stop = mp.Event()
        self.procs = [mp.Process(target=_spin, args=(c, self.stop), daemon=True) for c in cpus]

    def __enter__(self) -> "Load":
        for p in self.procs:
            p.start()
        time.sleep(0.5)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for p in self.procs:
            p.join(5)


def _hog(leave_gb: float, ready: mp.Event, stop: mp.Event) -> None:  # type: ignore[valid-type]
    """Hold all but ``leave_gb`` of the GPU's free memory, as idle CUDA processes of a search can."""
    free, _ = torch.cuda.mem_get_info()
    held = torch.empty(max(0, int(free - leave_gb * 2**30)), dtype=torch.uint8, device="cuda")
    held.fill_(1)
    torch.cuda.synchronize()
    ready.set()  # type: ignore[attr-defined]
    stop.wait()  # type: ignore[attr-defined]
    del held


class MemoryLoad:
    """Another process holding the GPU's memory but ``leave_gb`` (its context idle meanwhile)."""

    def __init__(self, leave_gb: float) -> None:
        ctx = mp.get_context("spawn")
        self.ready, self.stop = ctx.Event(), ctx.Event()
        self.proc = ctx.Process(target=_hog, args=(leave_gb, self.ready, self.stop), daemon=True)

    def __enter__(self) -> "MemoryLoad":
        self.proc.start()
        if not self.ready.wait(60):
            raise RuntimeError("the memory-holding process did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.proc.join(10)


class CompileLoad:
    """One compile-only process of lookahead_split per CPU, each into a fresh cache, restarted as it ends."""

    def __init__(self, cpus: list[int]) -> None:
        self.cpus = cpus
        self.procs: dict[int, object] = {}
        self.done = threading.Event()
        self.count = 0

    def _start(self, cpu: int) -> None:
        self.count += 1
        where = SCRATCH / f"load-{cpu}-{self.count}"
        self.procs[cpu] = start_precompile(FAMILIES_DIR / "lookahead_split.py", LOAD_SHAPES, cache_dir=where / "cache",
                                           target=CompileTarget(), report_path=where / "report.json", cpus=[cpu])

    def _keep(self) -> None:
        while not self.done.wait(0.2):
            for cpu, proc in list(self.procs.items()):
                if proc.poll() is not None:  # type: ignore[attr-defined]
                    self._start(cpu)

    def __enter__(self) -> "CompileLoad":
        for cpu in self.cpus:
            self._start(cpu)
        self.thread = threading.Thread(target=self._keep, daemon=True)
        self.thread.start()
        time.sleep(5.0)  # past their imports: compiling
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join(5)
        for proc in self.procs.values():
            proc.kill()  # type: ignore[attr-defined]
            proc.wait()  # type: ignore[attr-defined]


def precompile(cases: tuple[tuple[str, str], ...], cpus: list[int]) -> None:
    """Compile the kernels the timed cases need ahead, in parallel (as the search does)."""
    bench = {c.name: c for c in get_suite("qrv2-bench")}
    procs = []
    for fam in sorted({f for f, _ in cases}):
        shapes = sorted({(bench[c].batch, bench[c].n) for f, c in cases if f == fam})
        for i in range(4):
            procs.append(start_precompile(FAMILIES_DIR / f"{fam}.py", shapes, cache_dir=SCRATCH / "cache",
                                          target=CompileTarget(), report_path=SCRATCH / f"pre-{fam}-{i}.json",
                                          cpus=[cpus[len(procs) % len(cpus)]], shard=(i, 4)))
    for proc in procs:
        proc.wait()


def sm_clock() -> int | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        return int(pynvml.nvmlDeviceGetClockInfo(pynvml.nvmlDeviceGetHandleByIndex(0), pynvml.NVML_CLOCK_SM))
    except Exception:
        return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--idle-s", type=float, default=2.0)
    parser.add_argument("--load", type=int, default=12, help="busy CPU loops in the load conditions")
    parser.add_argument("--cases", choices=["short", "long"], default="short")
    parser.add_argument("--pairs", default="", help="FAMILY:CASE[,FAMILY:CASE...] to time instead of --cases")
    parser.add_argument("--load-kind", choices=["spin", "compile"], default="spin")
    parser.add_argument("--conditions", default="warm,idle,idle+reps10,load")
    parser.add_argument("--leave-gb", type=float, default=4.0, help="GPU memory left free in the 'memory' condition")
    args = parser.parse_args()
    timing_cpu = min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {timing_cpu})
    mine = siblings(timing_cpu)
    others = [c for c in sorted(os.sched_getaffinity(0) | set(range(os.cpu_count() or 1))) if c not in mine]
    sibling = sorted(mine - {timing_cpu})
    print(f"timing CPU {timing_cpu}, its SMT siblings {sibling or 'none'}; {os.cpu_count()} CPUs")
    device = torch.device("cuda")
    clock = DeviceClock(device)
    policy = TimingPolicy(max_seconds=0.5)
    bench = {c.name: c for c in get_suite("qrv2-bench")}
    cases = SHORT if args.cases == "short" else LONG
    if args.pairs:
        cases = tuple(tuple(pair.split(":", 1)) for pair in args.pairs.split(","))  # type: ignore[misc]
    precompile(cases, others)
    kernels = {fam: load_candidate(FAMILIES_DIR / f"{fam}.py") for fam, _ in cases}
    for fam, case in cases:  # load everything first
        measure(kernels[fam], bench[case], device, clock, policy)

    def once(condition: str, pol: TimingPolicy) -> dict[tuple[str, str], tuple[float, int | None]]:
        out = {}
        for fam, case in cases:
            if condition.startswith("idle"):
                torch.cuda.synchronize()
                time.sleep(args.idle_s)
            mhz = sm_clock()
            stats, verdict = measure(kernels[fam], bench[case], device, clock, pol)
            assert stats is not None, verdict.message
            out[(fam, case)] = (stats.median_ms, mhz)
        return out

    load_cpus = (sibling + [c for c in others if c not in sibling])[: args.load]
    known = {"warm": (policy, None), "idle": (policy, None),
             "idle+reps10": (policy.model_copy(update={"min_reps": 10}), None), "load": (policy, load_cpus),
             "memory": (policy, None)}
    conditions = [(name, *known[name]) for name in args.conditions.split(",")]
    rows = []
    for name, pol, cpus in conditions:
        runs = []
        for _ in range(args.repeats):
            if name == "memory":
                with MemoryLoad(args.leave_gb):
                    runs.append(once(name, pol))
            elif cpus:
                with (Load(cpus) if args.load_kind == "spin" else CompileLoad(cpus)):
                    runs.append(once(name, pol))
            else:
                runs.append(once(name, pol))
        rows.append((name, runs))
    print(f"{'condition':<14} " + " ".join(f"{fam[:9] + ' ' + case:>34}" for fam, case in cases)
          + f"   ({args.load_kind} load)")
    for name, runs in rows:
        cells = []
        for key in cases:
            meds = [r[key][0] for r in runs]
            mhz = [r[key][1] for r in runs if r[key][1] is not None]
            clock_txt = f"@{min(mhz)}MHz" if mhz else ""
            cells.append(f"{statistics.median(meds):.4f} [{min(meds):.4f}-{max(meds):.4f}]{clock_txt}")
        print(f"{name:<14} " + " ".join(f"{c:>34}" for c in cells))
    shutil.rmtree(SCRATCH, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
