"""The prompt an LLM mutation sees.

It carries what a performance engineer would want before changing a kernel:
the task contract, the family's algorithm, the parent's code and parameters,
its per-case times against torch.geqrf and against the speed-of-light floors,
what the profiler saw, what was recently tried in this lineage and how it
ended (so failed ideas are not repeated), and other families' champions as
inspiration.  It asks for one hypothesis at a time, as SEARCH/REPLACE blocks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from kernels.floors import floors
from kernels.suites import Case

CONTRACT = """\
Task: batched QR factorization in FP32 with torch.geqrf's output convention.
- The file must define `custom_kernel(A) -> (H, tau)`. A is a contiguous float32 CUDA tensor of shape
  (batch, n, n). Return a 2-tuple of NEW float32 tensors on A's device: H (batch, n, n) holding R in its
  upper triangle and the Householder vectors (implicit unit diagonal) below it, and tau (batch, n).
- Do not modify A and do not return views of it. Each call must compute from its own input (inputs change
  on every call; caching outputs fails verification).
- Correctness is checked per matrix in float64: Q = householder_product(H, tau),
  ||triu(H) - Q^T A||_1 <= 20*n*eps32*||A||_1 and ||Q^T Q - I||_1 <= 100*n*eps32. Any sign convention is fine.
- Inputs include ill-conditioned cases: zero columns (tau must then be 0, never NaN), columns scaled down to
  ~5e-7, rows scaled over 4 decades, nearly collinear columns, banded and triangular matrices, and mixed
  batches. Numerics must hold on all of them, at every n.
- Only torch, triton, triton.language, math, os and functools may be imported. No global switches
  (no allow_tf32 / set_float32_matmul_precision), no patching of library functions, no threads or
  subprocesses. `tl.dot` on float32 must name its precision: input_precision="ieee" (exact),
  "tf32x3" (near-exact, uses tensor cores) or "tf32" (fails the residual gate on hard inputs at n >= 512).
- Keep the `# qrsearch: params` ... `# qrsearch: end params` block and its keys: a tuner sets those values
  separately. You may add new keys (new knobs) if your change needs them.
- Time is the median over fresh inputs with the L2 cache flushed, synchronising the whole device, so work on
  side streams counts and Python launch overhead counts too.
"""

FORMAT = """\
Answer with a short rationale (at most 5 sentences: the bottleneck you see and the one change you make),
then the edit as one or more SEARCH/REPLACE blocks against the parent file:

<<<<<<< SEARCH
exact lines copied from the parent
=======
replacement lines
>>>>>>> REPLACE

Each SEARCH text must appear exactly once in the parent. For a rewrite of most of the file, give the complete
new file in a single ```python block instead.
"""

SYSTEM = ("You are an expert GPU kernel engineer. You improve batched FP32 Householder QR kernels written in "
          "Triton and PyTorch for an NVIDIA H200 (132 SMs, 60 MB L2, 4.8 TB/s HBM, ~50 TFLOP/s FP32 SIMT, "
          "~390 TFLOP/s TF32 tensor cores). You change one hypothesis at a time and keep the code correct.")


@dataclass(frozen=True)
class PromptAttempt:
    """One earlier try in the lineage, newest first, as the prompt shows it (not
    ``population.store.Attempt``, the stored record it is made from)."""

    candidate_id: str
    origin: str
    state: str
    reason: str = ""
    speedup: float | None = None
    note: str = ""


@dataclass(frozen=True)
class Inspiration:
    family: str
    candidate_id: str
    speedup: float | None
    source: str


@dataclass(frozen=True)
class ParentView:
    candidate_id: str
    source: str
    params: Mapping[str, Any]
    cases: Sequence[Mapping[str, Any]] = ()  # CaseOutcome dumps
    geomean_ms: float | None = None
    speedup: float | None = None
    profile: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class PromptContext:
    family: str
    description: str
    space: Mapping[str, str]
    parent: ParentView
    suite: Sequence[Case]
    attempts: Sequence[PromptAttempt] = ()
    inspirations: Sequence[Inspiration] = ()
    second_parent: ParentView | None = None  # a code merge (crossover)
    max_inspiration_chars: int = 6000
    human_notes: Sequence[str] = ()  # the engineer's notes on this lineage (qrsearch note), newest last
    extra: Sequence[str] = field(default_factory=tuple)


def _fmt(x: Any, spec: str = ".3g") -> str:
    return "-" if x is None else format(x, spec)


def results_table(cases: Sequence[Mapping[str, Any]], suite: Sequence[Case]) -> str:
    by_name = {c.name: c for c in suite}
    rows = ["| case | status | median ms | torch.geqrf ms | speedup | fp32 floor ms | tf32 floor ms | % of fp32 floor | factor res | orth res | note |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in cases:
        case = by_name.get(c.get("case", ""))
        f = floors(case) if case else None
        median = c.get("median_ms")
        frac = 100 * f.fp32_floor_ms / median if f and median else None
        res = c.get("residuals") or {}
        rows.append(
            f"| {c.get('case')} | {c.get('status')} | {_fmt(median, '.4g')} | {_fmt(c.get('baseline_ms'), '.4g')} | "
            f"{_fmt(c.get('speedup'), '.1f')} | {_fmt(f and f.fp32_floor_ms, '.3g')} | {_fmt(f and f.tf32_floor_ms, '.3g')} | "
            f"{_fmt(frac, '.1f')} | {_fmt(res.get('factor'))} | {_fmt(res.get('orth'))} | {str(c.get('message') or '')[:160]} |")
    return "\n".join(rows)


def profile_text(profile: Mapping[str, Any] | None) -> str:
    if not profile:
        return "(no profile recorded)"
    lines = []
    for case, p in profile.items():
        if not isinstance(p, Mapping):
            continue
        top = ", ".join(f"{k.get('name', '?')[:60]} {100 * float(k.get('share', 0)):.0f}%"
                        for k in p.get("top_kernels", [])[:3])
        lines.append(f"- {case}: {p.get('kernels_per_call')} kernels/call, {p.get('syncs')} host syncs, "
                     f"{p.get('memcpys')} memcpys, device {_fmt(p.get('device_ms'), '.3g')} ms; top: {top}")
    return "\n".join(lines) or "(no profile recorded)"


def _parent_block(title: str, parent: ParentView, suite: Sequence[Case]) -> str:
    params = ", ".join(f"{k}={v!r}" for k, v in parent.params.items()) or "(none)"
    return (f"## {title} {parent.candidate_id}\n"
            f"Geomean {_fmt(parent.geomean_ms, '.4g')} ms, speedup vs torch.geqrf {_fmt(parent.speedup, '.2f')}x; "
            f"parameters: {params}\n\n```python\n{parent.source}\n```\n\n"
            f"### Its results\n{results_table(parent.cases, suite) if parent.cases else '(not evaluated)'}\n\n"
            f"### Profile (one call per case)\n{profile_text(parent.profile)}\n")


def build_messages(ctx: PromptContext) -> list[dict[str, str]]:
    parts = [f"{CONTRACT}\n## Family `{ctx.family}`\n{ctx.description}\n"]
    if ctx.space:
        parts.append("## Tunable parameters (tuned by Optuna separately)\n"
                     + "\n".join(f"- {k}: {v}" for k, v in ctx.space.items()) + "\n")
    parts.append(_parent_block("Parent", ctx.parent, ctx.suite))
    if ctx.second_parent is not None:
        parts.append(_parent_block("Second parent", ctx.second_parent, ctx.suite))
    if ctx.attempts:
        lines = []
        for a in ctx.attempts:
            outcome = a.state + (f" ({a.reason[:200]})" if a.reason else "")
            speed = f", speedup {a.speedup:.2f}x" if a.speedup else ""
            lines.append(f"- {a.candidate_id} [{a.origin}] {outcome}{speed}{' — ' + a.note if a.note else ''}")
        parts.append("## Recent attempts in this lineage (newest first; do not repeat failed ideas)\n"
                     + "\n".join(lines) + "\n")
    if ctx.human_notes:
        parts.append("## The engineer's notes on this lineage (hypotheses and findings; take them into account)\n"
                     + "\n".join(ctx.human_notes) + "\n")
    for insp in ctx.inspirations:
        source = insp.source
        if len(source) > ctx.max_inspiration_chars:
            source = source[: ctx.max_inspiration_chars] + "\n# ... (truncated)"
        parts.append(f"## Inspiration: champion of family `{insp.family}` ({insp.candidate_id}, "
                     f"speedup {_fmt(insp.speedup, '.2f')}x)\n```python\n{source}\n```\n")
    parts.extend(ctx.extra)
    if ctx.second_parent is not None:
        task = ("## Your task\nMerge the two parents into one candidate that keeps what makes each fast "
                "(e.g. the faster path per size range, or one's panel with the other's update). Edit the FIRST parent.\n")
    else:
        task = ("## Your task\nPropose one change to the parent that should lower the geometric-mean time over the cases "
                "above while passing every case. Prefer the cases furthest from their floor.\n")
    parts.append(task + "\n" + FORMAT)
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "\n".join(parts)}]
