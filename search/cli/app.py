"""The ``qrsearch`` command line: one Typer app, its commands from the modules beside this one."""

from __future__ import annotations

import os
import sys
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Callable, Optional

import typer

from search.cli.command import QrsearchCommand
from search.cli.eval import bench_command, verify_command
from search.cli.human import COMMANDS as HUMAN_COMMANDS
from search.cli.inspect import champions_command, export_command, lineage_command, report_command, show_command
from search.cli.run import launch_command, resume_command, status_command
from search.cli.runs import runs_command

app = typer.Typer(
    name="qrsearch",
    help="Evolutionary search for fast, verified batched FP32 QR kernels (torch.geqrf's contract).",
    no_args_is_help=True,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
)


def package_version() -> str:
    try:
        return version("qrsearch")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


def _print_version(value: bool) -> None:
    if value:
        print(f"qrsearch {package_version()}")
        raise typer.Exit(0)


@app.callback()
def _root(
    show_version: Optional[bool] = typer.Option(None, "--version", "-V", is_eager=True, callback=_print_version,
                                                help="print the version and exit"),
) -> None:
    """Evolutionary search for fast, verified batched FP32 QR kernels (torch.geqrf's contract)."""


COMMANDS: dict[str, Callable[..., Any]] = {
    "verify": verify_command, "bench": bench_command, "launch": launch_command, "resume": resume_command,
    "status": status_command, "runs": runs_command, "champions": champions_command, "lineage": lineage_command,
    "show": show_command, "report": report_command, "export": export_command,
    **HUMAN_COMMANDS,  # the human in the loop (search/cli/human.py)
}
for _name, _command in COMMANDS.items():
    app.command(_name, cls=QrsearchCommand)(_command)


def _flush_stdout() -> None:
    """Flush stdout now, so a reader that went away (``| head``) costs no traceback and no
    exit status 120 from the interpreter's own final flush."""
    try:
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        except (OSError, ValueError):
            pass


# The exception classes of the click that typer runs on (typer may ship its own copy).
_click_errors = sys.modules[typer.BadParameter.__module__]
_Abort = getattr(_click_errors, "Abort", KeyboardInterrupt)  # not every copy has its own Abort


def one_line(message: str) -> str:
    """A usage error as one line, without the "Value error, " that Typer's coercion puts in front."""
    return " ".join(message.replace("Value error, ", "").split())


def main(argv: Optional[list[str]] = None) -> None:
    """Every command's usage errors the same way: one line on stderr, exit 2; Ctrl-C exits 130."""
    try:
        code = app(args=argv, prog_name="qrsearch", standalone_mode=False)
    except _click_errors.NoArgsIsHelpError as exc:
        print(exc.ctx.get_help() if exc.ctx else exc.format_message())
        code = 2
    except _click_errors.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx else "qrsearch"
        print(f"error: {one_line(exc.format_message())} (see `{where} --help`)", file=sys.stderr)
        code = 2
    except _click_errors.ClickException as exc:
        print(f"error: {exc.format_message()}", file=sys.stderr)
        code = exc.exit_code
    except (KeyboardInterrupt, _Abort):
        print("interrupted", file=sys.stderr)
        code = 130
    finally:
        _flush_stdout()
    raise SystemExit(code if isinstance(code, int) else 0)
