"""The tables ``qrsearch verify`` and ``qrsearch bench`` print: a suite report's cases, failures said
once for many cases, the geomean line and the profiles (:mod:`search.cli.eval` runs the suite)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from kernels.floors import floors
from kernels.harness.settings import host_bound
from population.outcomes import CaseStatus
from search.cli.failures import FailureGroup, all_alike, footnotes, group_failures, repeated
from search.numbers import CPU_CAVEAT, ms as fmt_ms, on_cpu, significant, speedup as fmt_speedup

if TYPE_CHECKING:  # the harness imports torch: loaded by the commands that run it, not by ``qrsearch status``
    from kernels.harness.results import CaseResult, SuiteReport

# Tables are wide; when piped, do not squeeze them into 80 columns.
console = Console(width=None if sys.stdout.isatty() else 170)


_STATUS_STYLE = {CaseStatus.OK: "green", CaseStatus.SKIPPED: "dim"}


def _fmt(x: float | None, spec: str = ".3g") -> str:
    return "-" if x is None else format(x, spec)


def load_failure(report: SuiteReport) -> str | None:
    """One line for a file that never got to run (it did not load, or the screen rejected it)."""
    statuses = {c.status for c in report.cases}
    errors = {c.error for c in report.cases}
    if len(errors) == 1 and statuses <= {CaseStatus.FAILED_COMPILE, CaseStatus.REJECTED}:
        return errors.pop()
    return None


def _status(result: CaseResult) -> str:
    style = _STATUS_STYLE.get(result.status, "red")
    return f"[{style}]{result.status.value}[/]"


def _header(report: SuiteReport) -> str:
    versions = ", ".join(f"{k} {v}" for k, v in report.versions.items())
    interpreted = "; Triton kernels in the interpreter (TRITON_INTERPRET=1), as the search runs them on a CPU" \
        if on_cpu(report.device) else ""
    return f"{report.candidate}\n{report.suite} on {report.device_name} ({report.device}){interpreted}; {versions}"


def _messages(report: SuiteReport) -> tuple[list[FailureGroup], dict[tuple[str, str], int]]:
    groups = group_failures([(r.case.name, r.status.value, "" if r.ok else r.message) for r in report.cases])
    return groups, repeated(groups)


def _message_cell(result: CaseResult, notes: dict[tuple[str, str], int]) -> str:
    """The row's message, or ``[n]`` where the same message is printed once below the table."""
    if result.ok:
        return ""
    number = notes.get((result.status.value, result.message))
    return f"[{number}]" if number else escape(result.message)


def _print_alike(report: SuiteReport, group: FailureGroup) -> None:
    console.print(_header(report), style="bold", highlight=False)
    console.print(f"every one of the {len(report.cases)} cases failed the same way ({group.status}): "
                  f"{escape(group.message)}", highlight=False)


def _print_footnotes(groups: list[FailureGroup]) -> None:
    for line in footnotes(groups):
        console.print(escape(line), highlight=False)


def print_verify(report: SuiteReport) -> None:
    groups, notes = _messages(report)
    passed = sum(c.ok for c in report.cases)
    alike = all_alike(groups, len(report.cases))
    if alike is not None:
        _print_alike(report, alike)
    else:
        console.print(_verify_table(report, notes))
        _print_footnotes(groups)
    console.print(f"{passed}/{len(report.cases)} cases passed")


def print_bench(report: SuiteReport) -> None:
    groups, notes = _messages(report)
    alike = all_alike(groups, len(report.cases))
    if alike is not None:
        _print_alike(report, alike)
    else:
        console.print(_bench_table(report, notes))
        _print_footnotes(groups)
        for line in timing_caveats(report):
            console.print(escape(line), highlight=False)
    console.print(_geomean_line(report))


def _verify_table(report: SuiteReport, notes: dict[tuple[str, str], int]) -> Table:
    table = Table(title=_header(report), title_justify="left", title_style="bold")
    for column in ("case", "status", "factor≤20", "orth≤100", "leak", "recon", "message"):
        table.add_column(column, overflow="fold", no_wrap=column == "case")
    for r in report.cases:
        v = r.verify
        table.add_row(r.case.name, _status(r), _fmt(v.factor_scaled if v else None), _fmt(v.orth_scaled if v else None),
                      _fmt(v.leakage_scaled if v else None), _fmt(v.recon_scaled if v else None),
                      _message_cell(r, notes))
    return table


def _bench_table(report: SuiteReport, notes: dict[tuple[str, str], int]) -> Table:
    timer = "CUDA events" if any(c.timing and c.timing.timer == "cuda_events" for c in report.cases) \
        else f"host timer (CPU timing); {CPU_CAVEAT}"
    if any(c.timing and c.timing.calls_per_region > 1 for c in report.cases):
        timer += "; as GPU MODE's eval.py: fresh inputs back to back per timed region, time per call"
    table = Table(title=f"{_header(report)}\ntiming: {timer}", title_justify="left", title_style="bold")
    for column in ("case", "status", "median ms", "min/max ms", "n", "host ms", "geqrf ms", "speedup", "floor %",
                   "factor", "orth", "message"):
        table.add_column(column, overflow="fold", justify="right" if column not in ("case", "message") else "left")
    for r in report.cases:
        t, v = r.timing, r.verify
        on_gpu = t is not None and t.timer == "cuda_events" and t.median_ms > 0
        floor = significant(100 * floors(r.case).fp32_floor_ms / t.median_ms) if on_gpu and t else "-"
        table.add_row(
            r.case.name, _status(r), fmt_ms(t.median_ms if t else None),
            f"{fmt_ms(t.min_ms)}/{fmt_ms(t.max_ms)}" if t else "-", str(t.count) if t else "-",
            fmt_ms(t.host_ms if t else None), fmt_ms(r.baseline_ms), fmt_speedup(r.speedup), floor,
            _fmt(v.factor_scaled if v else None), _fmt(v.orth_scaled if v else None), _message_cell(r, notes),
        )
    return table


def timing_caveats(report: SuiteReport) -> list[str]:
    """One line per timed case whose time holds more than its kernels: device allocator calls
    inside the timed regions, or a call that kept the host about as long as it ran ("host ms":
    the median time from the start mark to the call's return, its launches and any wait inside
    it for the device)."""
    lines = []
    for r in report.cases:
        t = r.timing
        if t is None or t.timer != "cuda_events":
            continue
        if t.allocator_calls:
            retried = f", {t.alloc_retries} of them retried after freeing the cache" if t.alloc_retries else ""
            lines.append(f"{r.case.name}: the timed calls made {t.allocator_calls} cudaMalloc/cudaFree calls"
                         f"{retried}; their stalls are in the time")
        if host_bound(t.host_ms, t.median_ms):
            lines.append(f"{r.case.name}: host-bound (a call returned to the host after {fmt_ms(t.host_ms)} of its "
                         f"{fmt_ms(t.median_ms)} ms, enqueueing or waiting inside it): a busy host slows it")
    return lines


def _geomean_line(report: SuiteReport) -> str:
    failed = sum(not c.ok for c in report.cases)
    return (f"{report.candidate}: geomean {fmt_ms(report.geomean_ms)} ms; speedup vs torch.geqrf "
            f"{fmt_speedup(report.geomean_speedup)}" + _cpu_note(report) + (f"  [red]({failed} cases failed)[/]" if failed else ""))


def _cpu_note(report: SuiteReport) -> str:
    gpu = any(c.timing and c.timing.timer == "cuda_events" for c in report.cases)
    return "" if gpu or not any(c.timing for c in report.cases) else " (CPU: not a speed measurement)"


def print_profiles(report: SuiteReport) -> None:
    table = Table(title="profile (one call per case)", title_justify="left")
    for column in ("case", "kernels", "syncs", "memcpys", "device ms", "TFLOP/s", "GB/s", "top kernels"):
        table.add_column(column, overflow="fold")
    for r in report.cases:
        p = r.profile
        if p is None:
            continue
        top = "; ".join(f"{k.name[:40]} {100 * k.share:.0f}%" for k in p.top_kernels[:3])
        table.add_row(r.case.name, str(p.kernels_per_call), str(p.syncs), str(p.memcpys), f"{p.device_ms:.3g}",
                      _fmt(p.achieved_tflops), _fmt(p.achieved_gbps), top)
    console.print(table)
