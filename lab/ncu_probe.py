"""One call of a family's candidate under Nsight Compute (run on the GPU machine).

    ncu --profile-from-start off ... python lab/ncu_probe.py FAMILY BATCHxN [key=value ...]

Loads the family file with the given PARAMS overrides (values parsed as Python literals),
makes two warm-up calls (compiles, builds, graph captures), then profiles exactly one call
between cudaProfilerStart and cudaProfilerStop, so that ncu's --profile-from-start off sees
that call's kernels only.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernels.candidate import load_candidate, materialize  # noqa: E402
from kernels.families import get_family  # noqa: E402
from kernels.inputs import generate_input  # noqa: E402


def main() -> None:
    family, shape, *overrides = sys.argv[1:]
    batch, n = (int(x) for x in shape.split("x"))
    fam = get_family(family)
    params = fam.default_params().as_params()
    for item in overrides:
        key, _, value = item.partition("=")
        params[key] = ast.literal_eval(value)
    kernel = load_candidate(materialize(fam.render(params), "/tmp/ncu-probe"))
    a = generate_input(batch, n, 1.0, 1, "dense", device="cuda")
    for _ in range(2):
        kernel(a)
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    kernel(a)
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()


if __name__ == "__main__":
    main()
