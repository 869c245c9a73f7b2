"""Every option of the CLI names its flag.

typer 0.27 names an option without one after its metavar (``typer.Option(None, metavar="SUITE")``
became ``--SUITE``), so ``qrsearch verify --suite`` failed with "No such option" on a machine with
that release.  Naming the flag explicitly works with every typer the project allows."""

from __future__ import annotations

import ast
from pathlib import Path

CLI = Path(__file__).parents[3] / "search" / "cli"


def _unnamed_options(source: str) -> list[int]:
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "Option":
            named = any(isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("-")
                        for a in node.args[1:])
            if not named:
                lines.append(node.lineno)
    return lines


def test_the_check_finds_an_option_without_a_flag_name():
    assert _unnamed_options('import typer\ndef f(suite=typer.Option(None, metavar="SUITE")): ...\n') == [2]
    assert _unnamed_options('import typer\ndef f(suite=typer.Option(None, "--suite", metavar="S")): ...\n') == []


def test_every_cli_option_names_its_flag():
    missing = {p.name: lines for p in sorted(CLI.glob("*.py")) if (lines := _unnamed_options(p.read_text()))}
    assert not missing, f"typer.Option without a flag name (file: lines): {missing}"
