"""The ``qrsearch`` command line: one Typer app, commands from the cli_* modules."""

from __future__ import annotations

import sys
from typing import Optional

import typer

from search.cli_eval import bench_command, verify_command
from search.cli_human import COMMANDS as HUMAN_COMMANDS
from search.cli_inspect import champions_command, export_command, lineage_command, report_command, show_command
from search.cli_run import launch_command, resume_command, status_command

app = typer.Typer(
    name="qrsearch",
    help="Evolutionary search for fast, verified batched FP32 QR kernels (torch.geqrf's contract).",
    no_args_is_help=True,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
)

app.command("verify")(verify_command)
app.command("bench")(bench_command)
app.command("launch")(launch_command)
app.command("resume")(resume_command)
app.command("status")(status_command)
app.command("champions")(champions_command)
app.command("lineage")(lineage_command)
app.command("show")(show_command)
app.command("report")(report_command)
app.command("export")(export_command)
for _name, _command in HUMAN_COMMANDS.items():  # the human in the loop (search/cli_human.py)
    app.command(_name)(_command)


def main(argv: Optional[list[str]] = None) -> None:
    try:
        app(args=argv, prog_name="qrsearch")
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        raise SystemExit(130)
