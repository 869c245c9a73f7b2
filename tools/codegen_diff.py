"""Does a rewrite of a kernel file change the code the GPU runs?  Compile both, compare PTX.

    python tools/codegen_diff.py OLD.py NEW.py [--family NAME] [--shapes 2x4096,60x1024] [--out DIR]

Both files are precompiled for the H200 target (``kernels.harness.precompile``, no GPU needed)
at the shapes (default: the family's size domain in qrv2-quick and qrv2-bench) into empty
caches; every PTX file is normalised (source locations, comments and debug sections removed)
and the two sets are compared.  "every NEW kernel is an OLD kernel" means the rewrite runs
exactly the old code wherever it runs anything: a compile-time change that cannot change speed.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from compile_profile import domain_shapes, profile  # noqa: E402
from kernels.harness.precompile import CompileTarget, parse_shapes  # noqa: E402

_DROP = re.compile(r"^\s*(\.loc|\.file|//|@@DEBUG)")


def normalised_ptx(text: str) -> str:
    out, in_debug = [], False
    for line in text.splitlines():
        if line.strip().startswith(".section") and ".debug" in line:
            in_debug = True
        if in_debug:
            in_debug = line.strip() != "}"
            continue
        if not _DROP.match(line) and line.strip():
            out.append(line.split("//")[0].rstrip())
    return "\n".join(out)


def compile_all(label: str, path: Path, shapes: list[tuple[int, int]], out: Path) -> dict[str, str]:
    """{digest of normalised PTX: the kernel's file} for everything ``path`` compiles at ``shapes``
    (compiled as the search does it, :func:`compile_profile.profile`, into ``out/cache-LABEL``)."""
    cpus = sorted(os.sched_getaffinity(0))
    result = profile(label, path, shapes, out, cpus, CompileTarget(), timeout_s=1800, shards=len(cpus))
    if result["errors"]:
        raise SystemExit(f"codegen_diff: {path.name}: {result['errors']}")
    cache = out / f"cache-{label}"
    return {hashlib.sha256(normalised_ptx(p.read_text()).encode()).hexdigest(): str(p.relative_to(cache))
            for p in cache.rglob("*.ptx")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--family", help="whose size domain gives the shapes (default: from NEW's name)")
    parser.add_argument("--shapes", help="BATCHxN,... instead of the family's domain")
    parser.add_argument("--out", type=Path, default=Path("/tmp/codegen_diff"))
    args = parser.parse_args()
    family = args.family or args.new.stem
    shapes = parse_shapes(args.shapes) if args.shapes else domain_shapes(family, ["qrv2-quick", "qrv2-bench"])
    args.out.mkdir(parents=True, exist_ok=True)
    old = compile_all("old", args.old, shapes, args.out)
    new = compile_all("new", args.new, shapes, args.out)
    same = set(old) & set(new)
    print(f"shapes: {','.join(f'{b}x{n}' for b, n in shapes)}")
    print(f"distinct kernels (normalised PTX): old {len(old)}, new {len(new)}, shared {len(same)}")
    only_new = sorted(new[d] for d in set(new) - same)
    if only_new:
        print(f"NEW compiles {len(only_new)} kernel(s) that OLD never did:")
        print("\n".join(f"  {p}" for p in only_new))
        return 1
    print("every NEW kernel is an OLD kernel: the rewrite runs the old code wherever it runs anything")
    return 0


if __name__ == "__main__":
    sys.exit(main())
