"""``qrsearch verify`` and ``qrsearch bench``: one candidate file, one suite."""

from __future__ import annotations

import json
import os
from pathlib import Path
from enum import Enum
from typing import TYPE_CHECKING, Optional, cast

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from kernels.candidate import CandidateError, check_syntax
from kernels.harness.settings import RunLimits, TimedRegion, TimingPolicy
from kernels.suites import get_suite, suite_names
from search.cli.checks import cpu_set, parse_cpus, positive
from search.cli.eval_report import load_failure, print_bench, print_profiles, print_verify

if TYPE_CHECKING:  # the harness imports torch: loaded by the commands that run it, not by ``qrsearch status``
    from kernels.harness.results import SuiteReport

err_console = Console(stderr=True, soft_wrap=True)


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


def _write_json(path: Optional[Path], payload: dict, to_stdout: bool) -> None:
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(payload, indent=2))
    if to_stdout:
        print(json.dumps(payload, indent=2))


JSON_FLAG = typer.Option(False, "--json", help="print the report as JSON instead of tables")


def verify_command(
    file: Path = typer.Argument(..., help="candidate file defining custom_kernel(A) -> (H, tau)"),
    suite: Optional[str] = typer.Option(None, "--suite", metavar="SUITE", help="suite name (default: qrv2-tests on a GPU, "
                                        "smoke on CPU)"),
    timeout: float = typer.Option(DEFAULT_LIMITS.case_timeout_s, "--timeout", metavar="SECONDS", callback=positive,
                                  help="seconds allowed per case (compile included)"),
    as_json: bool = JSON_FLAG,
    json_out: Optional[Path] = typer.Option(None, "--json-out", metavar="PATH", help="also write the report as "
                                            "JSON to this file"),
    keep_going: bool = typer.Option(False, "--keep-going", help="after a crash or hang, run the remaining cases"),
    device: Device = typer.Option(Device.auto, "--device", help="where it runs (auto: CUDA if present, else the CPU)"),
) -> None:
    """Check a candidate's outputs on every case of a suite (exit 0 iff all pass)."""
    where = usable_device(device)
    suite = _check_inputs(file, suite, "verify")
    report = _run(file, suite, "verify", timeout, keep_going, False, where, "verifying")
    failure = load_failure(report)
    if failure:
        err_console.print(f"[red]error:[/] {file}: {escape(failure)}")
    elif not as_json:
        print_verify(report)
    _write_json(json_out, report.to_json(), as_json)
    raise typer.Exit(0 if report.ok else 1)


def bench_command(
    files: list[Path] = typer.Argument(..., help="candidate file(s) defining custom_kernel(A) -> (H, tau)"),
    suite: Optional[str] = typer.Option(None, "--suite", metavar="SUITE", help="suite name (default: qrv2-bench on a GPU, "
                                        "smoke-bench on CPU)"),
    timeout: float = typer.Option(DEFAULT_LIMITS.case_timeout_s, "--timeout", metavar="SECONDS", callback=positive,
                                  help="seconds allowed per case (compile and timing included)"),
    as_json: bool = JSON_FLAG,
    json_out: Optional[Path] = typer.Option(None, "--json-out", metavar="PATH", help="also write the report(s) "
                                            "as JSON to this file"),
    keep_going: bool = typer.Option(False, "--keep-going", help="after a crash or hang, run the remaining cases"),
    profile: bool = typer.Option(False, "--profile", help="add a torch.profiler summary per case"),
    baseline: bool = typer.Option(True, "--baseline/--no-baseline", help="time torch.geqrf in the same run for speedups"),
    baseline_json: Optional[Path] = typer.Option(
        None, "--baseline-json", metavar="PATH", help="reuse torch.geqrf timings from an earlier --json-out of this suite on this "
        "device"),
    device: Device = typer.Option(Device.auto, "--device", help="where it runs (auto: CUDA if present, else the CPU)"),
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
        failure = load_failure(report)
        if failure:
            err_console.print(f"[red]error:[/] {file}: {escape(failure)}")
        reports.append(report)
        all_ok = all_ok and report.ok
    base = _baseline(suite, baseline, baseline_json, timeout, where, cpus, timing_region.value)
    if base is not None:
        reports = [r.with_baseline(base) for r in reports]
    for report in reports:
        if not load_failure(report) and not as_json:
            print_bench(report)
            if profile:
                print_profiles(report)
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
    from kernels.families import BASELINE_PATH  # the family registry: imported by the commands that time one

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


