"""Set up GPU MODE's qr_v2 runner for `tools/gpumode_eval.sh`: its files out of a checkout (or bare
mirror) of gpu-mode/reference-kernels, and the benchmark specs in the groups a device call can fit.

    python tools/gpumode_runner.py REFERENCE_KERNELS_GIT_DIR [OUT_DIR] [--rev REV]

OUT_DIR (default ``.probe/gpumode``, ignored by git: the files are GPU MODE's, not this repository's)
gets ``eval.py``, ``reference.py``, ``task.py``, ``task.yml`` of ``problems/linalg/qr_v2`` and
``utils.py`` of ``problems/pmpp_v2``, read with ``git show REV:PATH`` (so a bare mirror will do), and
one spec file per group, a spec a line as ``eval.py`` reads them (``batch: 20; n: 32; cond: 1; seed:
43214``): ``all12.txt`` (every benchmark), ``wt9.txt`` (the seven wide and two tall ones), ``wide7.txt``,
``tall2.txt`` and ``small3.txt``.  Leaderboard mode times a spec until its mean settles or its time
runs out, so twelve specs may not fit one 600 s call (40x352 alone once took 300 s): ``wt9`` first,
then ``small3``, is two calls that do.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

FILES = {"eval.py": "problems/linalg/qr_v2/eval.py", "reference.py": "problems/linalg/qr_v2/reference.py",
         "task.py": "problems/linalg/qr_v2/task.py", "task.yml": "problems/linalg/qr_v2/task.yml",
         "utils.py": "problems/pmpp_v2/utils.py"}
SMALL_N = 352  # n up to this: the launch-bound specs
TALL_BATCH = 8  # batch up to this, with n above SMALL_N: the tall specs


def benchmark_specs(task_yml: str) -> list[str]:
    """The ``benchmarks:`` entries of task.yml (flow mappings, one a line) as eval.py's spec lines."""
    specs, inside = [], False
    for line in task_yml.splitlines():
        if re.match(r"^\w", line):
            inside = line.startswith("benchmarks:")
        elif inside and line.strip().startswith("- {"):
            pairs = re.findall(r'"(\w+)":\s*("?[\w.-]+"?)', line)
            specs.append("; ".join(f"{k}: {v.strip(chr(34))}" for k, v in pairs))
    if not specs:
        raise ValueError("task.yml lists no benchmarks")
    return specs


def _field(spec: str, key: str) -> int:
    match = re.search(rf"\b{key}: (\d+)", spec)
    if match is None:
        raise ValueError(f"spec without {key}: {spec!r}")
    return int(match[1])


def groups(specs: list[str]) -> dict[str, list[str]]:
    """The spec files to write: every spec, and the small, wide and tall ones apart."""
    small = [s for s in specs if _field(s, "n") <= SMALL_N]
    tall = [s for s in specs if _field(s, "n") > SMALL_N and _field(s, "batch") <= TALL_BATCH]
    wide = [s for s in specs if s not in small and s not in tall]
    return {"all12.txt": specs, "wt9.txt": wide + tall, "wide7.txt": wide, "tall2.txt": tall, "small3.txt": small}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", type=Path, help="a git checkout or bare mirror of gpu-mode/reference-kernels")
    parser.add_argument("out", type=Path, nargs="?", default=Path(".probe/gpumode"))
    parser.add_argument("--rev", default="HEAD")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, path in FILES.items():
        shown = subprocess.run(["git", "-C", str(args.repo), "show", f"{args.rev}:{path}"], capture_output=True,
                               text=True)
        if shown.returncode != 0:
            print(f"gpumode_runner: {path} not found at {args.rev} in {args.repo}: {shown.stderr.strip()}",
                  file=sys.stderr)
            return 1
        (args.out / name).write_text(shown.stdout)
    for name, specs in groups(benchmark_specs((args.out / "task.yml").read_text())).items():
        (args.out / name).write_text("".join(s + "\n" for s in specs))
        print(f"{args.out / name}: {len(specs)} specs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
