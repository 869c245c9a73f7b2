"""What one H200 SM gives a thread block, and what the registered families' Triton kernels ask
of it, so that a family's parameter space can drop the points a device cannot launch before
they are proposed (a point that asks for more fails every case with OutOfResources).

The shared-memory figures are upper bounds of what Triton allocates when it compiles these
kernels for sm_90, fitted to compiles of the kernels over their parameters (tests compile the
largest points each space accepts, on a machine without a GPU, and check them):

* a pipelined update of ``width`` columns by an ``nb``-column panel in ``rb``-row chunks (W = VᵀC,
  W2 = TᵀW, C -= V·W2) stages V and C per pipeline stage, plus W2 twice;
* a Gram matrix VᵀV stages V and copies it for the product, three more times in split TF32;
  a cooperative panel program of lookahead_split holds all its rows at once (one stage).

The bounds are conservative: a point just under the limit may be dropped, none over it is kept.

Registers cannot fail a Triton launch (Triton tells ptxas the block size, so a kernel spills
instead); a register cap that a space sets itself (``maxnreg``) can, and is checked against the
registers of an SM.  The CUDA C++ families declare their block sizes to nvcc (``__launch_bounds__``)
and size their shared memory for the largest panel they build.
"""

from __future__ import annotations

from functools import lru_cache

# One H200 (sm_90) SM.
SHARED_BYTES_PER_BLOCK = 227 * 1024  # the opt-in maximum of one block (232448 bytes)
SHARED_BYTES_PER_SM = 228 * 1024
REGISTERS_PER_SM = 64 * 1024  # 32-bit registers
REGISTERS_PER_THREAD = 255
SM_COUNT = 132
FP32 = 4


def update_bytes(nb: int, rb: int, width: int, stages: int, split_products: bool = False) -> int:
    """Shared memory of a compact-WY update of ``width`` columns (V: ``nb`` columns, ``rb``-row chunks,
    ``stages`` pipeline stages): V and C per stage (one stage, unpipelined, buffered up to 1.6 times
    as much), W2 twice; ``split_products`` (tf32x3 in blocked_wy's fused kernel) half as much again."""
    staged = (1.6 if stages == 1 else stages) * rb * (nb + width) * FP32
    return int(staged * (1.5 if split_products else 1.0)) + 2 * nb * width * FP32


def gram_bytes(nb: int, rows: int, stages: int, precision: str) -> int:
    """Shared memory of a Gram matrix VᵀV over ``rows`` rows of ``nb`` columns, pipelined in ``stages``:
    V per stage and its copies for the product (three more in split TF32, tf32x3)."""
    copies = stages + (3 if precision == "tf32x3" else 1)
    return copies * rows * nb * FP32 + 2 * nb * nb * FP32 + 4096


@lru_cache(maxsize=1)
def task_shapes() -> tuple[tuple[int, int], ...]:
    """The (batch, n) of the qr_v2 suites: the inputs a GPU search gives a family."""
    from kernels.suites import SUITES

    return tuple(sorted({(c.batch, c.n) for name, cases in SUITES.items() if name.startswith("qrv2")
                         for c in cases}))


def next_power_of_2(x: int) -> int:
    return 1 << max(x - 1, 0).bit_length()


def lookahead_bytes(params: dict, batch: int, n: int, sms: int = SM_COUNT) -> int:
    """The most shared memory any launch of lookahead_split asks for on a ``batch × n × n`` input,
    following its custom_kernel's choices of panel programs, panel rows and tiles."""
    nb, stages = params["nb"], params["stages"]
    coop = params["panel_programs"] > 1
    p = params["panel_programs"]
    while p > 1 and p * batch > sms:
        p //= 2
    if p < 4:
        coop = False
    split_from = n - params["split_rows"] if coop else -1
    bn = params["bn_coop"] if coop else params["bn"]
    stages = params["stages_coop"] if coop else stages
    if n <= 512:
        stages = params["stages_n_le512"]
    need = update_bytes(nb, params["rb"], bn, stages)  # the tile programs
    # One-program panels (every panel below split_from, and the last split_rows rows): the previous
    # panel's update of it in rb_panel-row chunks, then its own Gram matrix.
    need = max(need, update_bytes(nb, params["rb_panel"], nb, stages),
               gram_bytes(nb, params["rb_panel"], stages, params["prec_g"]))
    if split_from > 0:  # split panels, the tallest first (n rows over p programs), held whole
        rows = max(16, next_power_of_2(-(-n // p)))
        need = max(need, gram_bytes(nb, rows, 1, params["prec_g"]))
    return need


def lookahead_worst(params: dict) -> tuple[int, tuple[int, int]]:
    """(bytes, (batch, n)) of the task shape where lookahead_split asks for the most shared memory."""
    return max(((lookahead_bytes(params, batch, n), (batch, n)) for batch, n in task_shapes()),
               key=lambda need: need[0])  # the first such shape, the smallest batch
