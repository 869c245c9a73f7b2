"""``qrsearch verify`` and ``qrsearch bench``: one candidate file, one suite."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from enum import Enum
from typing import TYPE_CHECKING, Optional, cast

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from kernels.candidate import CandidateError, check_syntax
from kernels.families import BASELINE_PATH
from kernels.floors import floors
from kernels.harness.settings import RunLimits, TimedRegion, TimingPolicy
from kernels.suites import get_suite, suite_names
from population.outcomes import CaseStatus
from search.cli.checks import cpu_set, parse_cpus, positive
from search.cli.failures import FailureGroup, all_alike, footnotes, group_failures, repeated
from search.numbers import CPU_CAVEAT, ms as fmt_ms, on_cpu, significant, speedup as fmt_speedup

if TYPE_CHECKING:  # the harness imports torch: loaded by the commands that run it, not by ``qrsearch status``
    from kernels.harness.results import CaseResult, SuiteReport

# Tables are wide; when piped, do not squeeze them into 80 columns.
console = Console(width=None if sys.stdout.isatty() else 170)
err_console = Console(stderr=True, soft_wrap=True)

_STATUS_STYLE = {CaseStatus.OK: "green", CaseStatus.SKIPPED: "dim"}


def _fmt(x: float | None, spec: str = ".3g") -> str:
    return "-" if x is None else format(x, spec)


def _default_suite(mode: str) -> str:
    import torch

    if torch.cuda.is_available():
        return "qrv2-tests" if mode == "verify" else "qrv2-bench"
    return "smoke" if mode == "verify" else "smoke-bench"


def _check_inputs(file: Path, suite: Optional[str], mode: str) -> str:
    if file.suffix == ".json":  # `--json PATH` of earlier versions reads the path as a candidate
        raise typer.BadParameter(f"{file} is JSON, not a candidate file; to write the report to it use "
                                 f"--json-out {file}", param_hint="FILE")
    if not file.is_file():
        raise typer.BadParameter(f"no such file: {file}", param_hint="FILE")
    suite = suite or _default_suite(mode)
    if suite not in suite_names():
        raise typer.BadParameter(f"unknown suite {suite!r}; known: {', '.join(suite_names())}", param_hint="--suite")
    try:
        check_syntax(file.read_text(encoding="utf-8"), str(file))
    except (CandidateError, UnicodeDecodeError) as exc:
        err_console.print(f"[red]error:[/] {file}: {exc}")
        raise typer.Exit(1)
    return suite


def _cpu_run(device: str) -> bool:
    if device == "cpu":
        return True
    import torch

    return device == "auto" and not torch.cuda.is_available()


def interpret_on_cpu(device: str) -> bool:
    """On a CPU, run the candidate's Triton kernels in the interpreter, as the search does (the
    family files otherwise fall back to torch.geqrf, and a bench would time the wrong code)."""
    if not _cpu_run(device):
        return False
    os.environ["TRITON_INTERPRET"] = "1"  # the harness passes TRITON_* to its child process
    return True


# Both commands time and limit a candidate as the search does (kernels/harness/settings.py)
# unless told otherwise: --timeout overrides the per-case limit only.
DEFAULT_LIMITS = RunLimits()


class Region(str, Enum):
    """What one timed region holds (TimingPolicy.region)."""

    call = "call"
    gpumode = "gpumode"


class Device(str, Enum):
    """Where the candidate runs: auto (CUDA if present, else the CPU with Triton's interpreter)."""

    auto = "auto"
    cpu = "cpu"
    cuda = "cuda"


def usable_device(device: Device) -> str:
    """The device name, or a usage error for ``cuda`` where torch sees no CUDA device (every case
    would otherwise fail with the same message)."""
    if device is Device.cuda:
        import torch

        if not torch.cuda.is_available():
            why = "torch was built without CUDA" if torch.version.cuda is None else "torch sees no CUDA device"
            raise typer.BadParameter(f"CUDA is not available here ({why}, torch {torch.__version__}); "
                                     "use --device cpu or auto", param_hint="--device")
    return device.value


def _run(file: Path, suite: str, mode: str, timeout: float, keep_going: bool, profile: bool,
         device: str, label: str, only: Optional[str] = None, cpus: Optional[str] = None,
         region: TimedRegion = "call") -> SuiteReport:
    from kernels.harness.hooks import RunHooks
    from kernels.harness.job import CandidateJob, Mode
    from kernels.harness.process import ChildProcess
    from kernels.harness.runner import run_candidate

    pinned = parse_cpus(cpus) if cpus else None

    interpret_on_cpu(device)
    cases = get_suite(suite)
    if only:
        wanted = [name.strip() for name in only.split(",") if name.strip()]
        unknown = sorted(set(wanted) - {c.name for c in cases})
        if unknown:
            raise typer.BadParameter(f"not cases of {suite}: {', '.join(unknown)}", param_hint="--cases")
        cases = tuple(c for c in cases if c.name in wanted)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err_console, transient=True) as progress:
        task = progress.add_task(f"{label} ({suite})", total=len(cases))
        return run_candidate(
            CandidateJob(file, cases, suite=suite, mode=cast(Mode, mode), profile=profile,
                         device=device, keep_going=keep_going, limits=RunLimits(case_timeout_s=timeout),
                         policy=TimingPolicy(region=region)),
            RunHooks(on_case=lambda i, r: progress.advance(task), spawn=lambda: ChildProcess.pinned(pinned),
                     fresh=lambda: ChildProcess.pinned(pinned)),
        )


def _load_failure(report: SuiteReport) -> str | None:
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
    for column in ("case", "status", "median ms", "min/max ms", "n", "geqrf ms", "speedup", "floor %",
                   "factor", "orth", "message"):
        table.add_column(column, overflow="fold", justify="right" if column not in ("case", "message") else "left")
    for r in report.cases:
        t, v = r.timing, r.verify
        on_gpu = t is not None and t.timer == "cuda_events" and t.median_ms > 0
        floor = significant(100 * floors(r.case).fp32_floor_ms / t.median_ms) if on_gpu and t else "-"
        table.add_row(
            r.case.name, _status(r), fmt_ms(t.median_ms if t else None),
            f"{fmt_ms(t.min_ms)}/{fmt_ms(t.max_ms)}" if t else "-", str(t.count) if t else "-",
            fmt_ms(r.baseline_ms), fmt_speedup(r.speedup), floor,
            _fmt(v.factor_scaled if v else None), _fmt(v.orth_scaled if v else None), _message_cell(r, notes),
        )
    return table


def _write_json(path: Optional[Path], payload: dict, to_stdout: bool) -> None:
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(payload, indent=2))
    if to_stdout:
        print(json.dumps(payload, indent=2))


JSON_FLAG = typer.Option(False, "--json", help="print the report as JSON instead of tables")


def verify_command(
    file: Path = typer.Argument(..., help="candidate file defining custom_kernel(A) -> (H, tau)"),
    suite: Optional[str] = typer.Option(None, metavar="SUITE", help="suite name (default: qrv2-tests on a GPU, "
                                        "smoke on CPU)"),
    timeout: float = typer.Option(DEFAULT_LIMITS.case_timeout_s, metavar="SECONDS", callback=positive,
                                  help="seconds allowed per case (compile included)"),
    as_json: bool = JSON_FLAG,
    json_out: Optional[Path] = typer.Option(None, "--json-out", metavar="PATH", help="also write the report as "
                                            "JSON to this file"),
    keep_going: bool = typer.Option(False, "--keep-going", help="after a crash or hang, run the remaining cases"),
    device: Device = typer.Option(Device.auto, help="where it runs (auto: CUDA if present, else the CPU)"),
) -> None:
    """Check a candidate's outputs on every case of a suite (exit 0 iff all pass)."""
    where = usable_device(device)
    suite = _check_inputs(file, suite, "verify")
    report = _run(file, suite, "verify", timeout, keep_going, False, where, "verifying")
    failure = _load_failure(report)
    if failure:
        err_console.print(f"[red]error:[/] {file}: {escape(failure)}")
    elif not as_json:
        print_verify(report)
    _write_json(json_out, report.to_json(), as_json)
    raise typer.Exit(0 if report.ok else 1)


def bench_command(
    files: list[Path] = typer.Argument(..., help="candidate file(s) defining custom_kernel(A) -> (H, tau)"),
    suite: Optional[str] = typer.Option(None, metavar="SUITE", help="suite name (default: qrv2-bench on a GPU, "
                                        "smoke-bench on CPU)"),
    timeout: float = typer.Option(DEFAULT_LIMITS.case_timeout_s, metavar="SECONDS", callback=positive,
                                  help="seconds allowed per case (compile and timing included)"),
    as_json: bool = JSON_FLAG,
    json_out: Optional[Path] = typer.Option(None, "--json-out", metavar="PATH", help="also write the report(s) "
                                            "as JSON to this file"),
    keep_going: bool = typer.Option(False, "--keep-going", help="after a crash or hang, run the remaining cases"),
    profile: bool = typer.Option(False, "--profile", help="add a torch.profiler summary per case"),
    baseline: bool = typer.Option(True, help="time torch.geqrf in the same run for speedups"),
    baseline_json: Optional[Path] = typer.Option(
        None, metavar="PATH", help="reuse torch.geqrf timings from an earlier --json-out of this suite on this "
        "device"),
    device: Device = typer.Option(Device.auto, help="where it runs (auto: CUDA if present, else the CPU)"),
    cases: Optional[str] = typer.Option(None, "--cases", metavar="CASE[,CASE...]", help="only these cases of the "
                                        "suite (e.g. a family's domain as the search timed it)"),
    cpus: Optional[str] = typer.Option(None, "--cpus", metavar="CPUS", callback=cpu_set,
                                       help="run the timing process on these "
                                       "CPUs only, as the search does (one GPU: the first eighth of the host's "
                                       "CPUs, 0,1 of 16)"),
    timing_region: Region = typer.Option(Region.call, "--timing-region", help="call: one synchronised call per "
                                         "timed region, as the search times; gpumode: as GPU MODE qr_v2's eval.py, "
                                         "up to 50 fresh inputs (256 MB) back to back per region, time divided by "
                                         "their count (torch.geqrf is timed the same way)"),
) -> None:
    """Verify, then time candidates against torch.geqrf (exit 1 if any case fails, timing included).

    With several files, torch.geqrf is timed once and a best-per-case composite table follows."""
    where = usable_device(device)
    suites = {_check_inputs(f, suite, "bench") for f in files}
    suite = suites.pop()
    reports: list[SuiteReport] = []
    all_ok = True
    for file in files:
        report = _run(file, suite, "bench", timeout, keep_going, profile, where, f"benchmarking {file.name}",
                      only=cases, cpus=cpus, region=timing_region.value)
        failure = _load_failure(report)
        if failure:
            err_console.print(f"[red]error:[/] {file}: {escape(failure)}")
        reports.append(report)
        all_ok = all_ok and report.ok
    base = _baseline(suite, baseline, baseline_json, timeout, where, cpus, timing_region.value)
    if base is not None:
        reports = [r.with_baseline(base) for r in reports]
    for report in reports:
        if not _load_failure(report) and not as_json:
            print_bench(report)
            if profile:
                _print_profiles(report)
    payload: dict = reports[0].to_json() if len(reports) == 1 else {"reports": [r.to_json() for r in reports]}
    if len(reports) > 1:
        composite = composite_report(reports)
        if not as_json:
            print_bench(composite)
        payload["composite"] = composite.to_json()
    if base is not None:
        payload["baseline"] = base.to_json()
    _write_json(json_out, payload, as_json)
    raise typer.Exit(0 if all_ok else 1)


def _geomean_line(report: SuiteReport) -> str:
    failed = sum(not c.ok for c in report.cases)
    return (f"{report.candidate}: geomean {fmt_ms(report.geomean_ms)} ms; speedup vs torch.geqrf "
            f"{fmt_speedup(report.geomean_speedup)}" + _cpu_note(report) + (f"  [red]({failed} cases failed)[/]" if failed else ""))


def _cpu_note(report: SuiteReport) -> str:
    gpu = any(c.timing and c.timing.timer == "cuda_events" for c in report.cases)
    return "" if gpu or not any(c.timing for c in report.cases) else " (CPU: not a speed measurement)"


def _baseline(suite: str, enabled: bool, saved: Optional[Path], timeout: float, device: str,
              cpus: Optional[str] = None, region: TimedRegion = "call") -> SuiteReport | None:
    from kernels.harness.results import SuiteReport

    if saved is not None:
        data = json.loads(saved.read_text())
        # A bench JSON of torch_geqrf itself, or any bench JSON that carries its baseline.
        report = SuiteReport.model_validate(data.get("baseline", data))
        if report.suite != suite:
            raise typer.BadParameter(f"{saved} holds suite {report.suite!r}, not {suite!r}", param_hint="--baseline-json")
        policy = TimingPolicy(region=region)
        if any(c.timing and c.timing.calls_per_region != policy.inputs_per_region(c.case.batch, c.case.n)
               for c in report.cases):
            raise typer.BadParameter(f"{saved} was not timed with --timing-region {region}", param_hint="--baseline-json")
        return report
    if not enabled:
        return None
    return _run(BASELINE_PATH, suite, "bench", max(timeout, 600.0), True, False, device, "timing torch.geqrf",
                cpus=cpus, region=region)


def composite_report(reports: list[SuiteReport]) -> SuiteReport:
    """Best passing candidate per case (by median time); the label names the winners."""
    cases = []
    winners = []
    for index, first in enumerate(reports[0].cases):
        passing = [r.cases[index] for r in reports if r.cases[index].ok and r.cases[index].timing]
        best = min(passing, key=lambda c: c.timing.median_ms) if passing else first  # type: ignore[union-attr]
        owner = next((r for r in reports if r.cases[index] is best), reports[0])
        winners.append(Path(owner.candidate).stem)
        cases.append(best.model_copy(update={"error": None if best.ok else best.error}))
    label = "composite (best per case: " + ", ".join(sorted(set(winners))) + ")"
    return reports[0].model_copy(update={"candidate": label, "cases": cases})


def _print_profiles(report: SuiteReport) -> None:
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
