"""What the trailing updates of a blocked QR can get from cuBLAS on this GPU (one device call).

For the update shapes of cuda_blocked (W = VᵀC, then C -= V·W on H's trailing block), time
torch.bmm/baddbmm in FP32 and, where this torch has the fp32-output overloads
(``torch.bmm(..., out_dtype=torch.float32)`` on bf16 operands), one bf16 product with FP32
output: the building block of a split-precision (bf16x3) update.  Prints TFLOP/s per shape.

    python lab/gemm_probe.py
"""

from __future__ import annotations

import torch


def _time(fn, reps: int = 20) -> float:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / reps


def main() -> None:
    dev = torch.device("cuda")
    print(f"{'shape':34} {'fp32 VtC':>10} {'fp32 C-=VW':>11} {'bf16->fp32':>11}  TFLOP/s")
    for batch, m, nb, cols in ((640, 512, 64, 448), (640, 256, 64, 192), (60, 1024, 32, 992), (60, 512, 32, 480),
                               (40, 352, 32, 320), (8, 2048, 64, 1984)):
        h = torch.randn(batch, m, m if cols + nb <= m else cols + nb, device=dev)
        c = h[:, :, h.shape[-1] - cols:]
        vt = torch.randn(batch, nb, m, device=dev)
        w = torch.randn(batch, nb, cols, device=dev)
        flops = 2.0 * batch * m * nb * cols
        t1 = _time(lambda: torch.bmm(vt, c))
        t2 = _time(lambda: c.baddbmm_(vt.transpose(1, 2), w, alpha=-1.0))
        try:
            a16, b16 = vt.to(torch.bfloat16), c.contiguous().to(torch.bfloat16)
            t3 = _time(lambda: torch.bmm(a16, b16, out_dtype=torch.float32))
            bf = f"{flops / t3 / 1e9:11.1f}"
        except Exception as exc:  # noqa: BLE001 - an older torch: no fp32-output overload
            bf = f" n/a ({type(exc).__name__})"
        print(f"{batch}x[{nb}x{m}]x[{m}x{cols}]".ljust(34) + f" {flops / t1 / 1e9:10.1f} {flops / t2 / 1e9:11.1f} {bf}")


if __name__ == "__main__":
    main()
