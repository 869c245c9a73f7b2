"""A fake ahead-of-time compiler with the interface of kernels.harness.precompile: a real
child process that waits a little, records what it was asked, and writes a report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Mapping, Sequence

_SCRIPT = r"""
import json, os, sys, time
report, shapes, delay, ok = sys.argv[1], json.loads(sys.argv[2]), float(sys.argv[3]), sys.argv[4] == "1"
kernels, cached = int(sys.argv[5]), int(sys.argv[6])
time.sleep(delay)
tmp = report + ".tmp"
with open(tmp, "w") as fh:
    json.dump({"ok": ok, "seconds": delay, "shapes": shapes, "kernels_compiled": kernels,
               "kernels_cached": cached, "error": None if ok else "fake compile error",
               "affinity": sorted(os.sched_getaffinity(0))}, fh)
os.replace(tmp, report)
"""


class FakeCompiler:
    def __init__(self, delay: float = 0.3, ok: bool = True, kernels_at: Mapping[int, int] | None = None,
                 delays: Mapping[str, float] | None = None, cached: int = 0) -> None:
        self.delay = delay
        self.ok = ok
        self.kernels_at = dict(kernels_at or {})  # n -> kernels a compile of it "finds" (default: 1 per shape)
        self.delays = dict(delays or {})  # candidate file stem -> its own delay
        self.cached = cached  # kernels each process reports found in the cache (compiled: the rest)
        self.calls: list[dict[str, Any]] = []

    def start(self, candidate: Path, shapes: Sequence[tuple[int, int]], *, cache_dir: Path, target: Any,
              report_path: Path, cpus: Sequence[int] | None = None,
              env_extra: Mapping[str, str] | None = None, shard: tuple[int, int] = (0, 1)) -> subprocess.Popen:
        self.calls.append({"candidate": Path(candidate), "shapes": list(shapes), "cache_dir": Path(cache_dir),
                           "cpus": list(cpus) if cpus else None, "report": Path(report_path), "shard": shard})
        sizes = sorted({n for _, n in shapes})
        total = sum(self.kernels_at.get(n, sum(1 for _, m in shapes if m == n)) for n in sizes)
        index, count = shard
        mine = total // count + (index < total % count)  # round robin, as the real shards share them
        cached = min(self.cached, mine)
        delay = self.delays.get(Path(candidate).stem, self.delay)
        proc = subprocess.Popen([sys.executable, "-c", _SCRIPT, str(report_path), json.dumps(list(shapes)),
                                 str(delay), "1" if self.ok else "0", str(mine - cached), str(cached)],
                                start_new_session=True)
        if cpus:
            import os

            os.sched_setaffinity(proc.pid, set(cpus))
        return proc

    @staticmethod
    def read(report_path: Path) -> SimpleNamespace | None:
        path = Path(report_path)
        if not path.exists():
            return None
        return SimpleNamespace(**json.loads(path.read_text()))
