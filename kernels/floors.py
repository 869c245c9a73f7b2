"""Speed-of-light floors for a QR case on the GPU we target (measured on an H200).

Two floors per case: arithmetic (4/3·n³·batch flops over the FP32 SIMT or the
TF32 tensor-core rate) and memory (read A, write H over copy bandwidth).  The
larger of the arithmetic and memory floor for a precision is what no version
can beat; measured time over it is the gap left.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from kernels.suites import Case

# Measured on an H200 (see kernels/BENCHMARKS.md): large GEMMs and a 8.6 GB copy.
FP32_SIMT_TFLOPS = 50.6
TF32_TFLOPS = 394.0
COPY_TBPS = 4.24


class Floors(BaseModel):
    model_config = ConfigDict(frozen=True)

    fp32_ms: float
    tf32_ms: float
    bytes_ms: float

    @property
    def fp32_floor_ms(self) -> float:
        return max(self.fp32_ms, self.bytes_ms)

    @property
    def tf32_floor_ms(self) -> float:
        return max(self.tf32_ms, self.bytes_ms)


def floors(case: Case) -> Floors:
    return Floors(
        fp32_ms=case.flops / (FP32_SIMT_TFLOPS * 1e12) * 1e3,
        tf32_ms=case.flops / (TF32_TFLOPS * 1e12) * 1e3,
        bytes_ms=case.min_bytes / (COPY_TBPS * 1e12) * 1e3,
    )
