"""What a fresh evaluation process pays the first time it uses each piece (seconds, one line).

    python lab/first_use.py [family]

Imports, cuInit, the context, the first float64 GEMM (cuBLAS), the first householder_product
(the exact-Q gate), Triton's driver, a family's first call at 4x32 and at 4x512 (its kernels
loaded from the cache), then the same calls again: the start-up costs a warm spare could pay
before its first job instead of inside one.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

began = time.perf_counter()
marks: list[tuple[str, float]] = []


def mark(name: str) -> None:
    marks.append((name, time.perf_counter()))


import torch  # noqa: E402

mark("import torch")
import triton  # noqa: E402

mark("import triton")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kernels.candidate import load_candidate  # noqa: E402
from kernels.inputs import generate_input  # noqa: E402
from kernels.verify import verify_qr  # noqa: E402

mark("import kernels")
torch.cuda.is_available()
mark("cuInit")
torch.empty(1, device="cuda")
torch.cuda.synchronize()
mark("context")
a = torch.randn(4, 32, 32, device="cuda", dtype=torch.float64)
(a @ a).sum().item()
mark("first fp64 matmul")
h, tau = torch.geqrf(a.float())
torch.linalg.householder_product(h.double(), tau.double()).sum().item()
mark("first geqrf + householder_product")
triton.runtime.driver.active.get_current_device()
triton.runtime.driver.active.utils  # noqa: B018 - loads cuda_utils
mark("triton driver")
family = sys.argv[1] if len(sys.argv) > 1 else "blocked_wy"
kernel = load_candidate(Path(__file__).resolve().parents[1] / "kernels" / "families" / "files" / f"{family}.py")
mark(f"load {family}")
for n in (32, 512):
    x = generate_input(4, n, 1.0, 1, "dense", device="cuda")
    out = kernel(x.clone())
    torch.cuda.synchronize()
    mark(f"first call 4x{n}")
    assert verify_qr(x, out, exact_q=False).ok
    mark(f"first verify 4x{n}")
    kernel(x.clone())
    torch.cuda.synchronize()
    mark(f"second call 4x{n}")
print(" ".join(f"{name}={stamp - prev:.3f}" for (name, stamp), prev in
               zip(marks, [began] + [s for _, s in marks[:-1]])))
