"""One CLI, one way: ``--json`` is a flag everywhere (``--json-out PATH`` writes a file), help
shows metavars and choices rather than Python types, times and speedups keep three
significant figures, the live panel fits 80 columns, nothing stale is shown after a stop,
and ``show`` does not invent a finish time for a candidate still waiting."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from rich.console import Console

import kernels.families
from kernels.families import BASELINE_PATH
from population.models import Origin
from search.cli.app import app
from search.config import EvaluationConfig, FamilySpec, MutationMix, RunConfig
from search.run.budget import budget_progress
from search.run.driver import create_run
from search.run.progress import render
from search.engine.loop import SearchLoop
from search.mutation.tuning import Tuner
from search.numbers import significant
from tests.search.cli.test_cli_tools import run_cli
from tests.search.fakes import FakePool, ToyFamily, toy_baseline
from tests.search.inspect.test_inspect_units import Builder

ROOT = Path(__file__).parents[3]


def _commands() -> list[tuple[str, typer.core.TyperCommand]]:
    group = typer.main.get_command(app)
    ctx = typer.Context(group)
    return [(name, group.get_command(ctx, name)) for name in group.list_commands(ctx)]


def test_json_is_a_flag_in_every_command_and_json_out_writes_a_file():
    seen = []
    for name, command in _commands():
        for param in command.params:
            if "--json" in getattr(param, "opts", ()):
                assert param.is_flag, f"{name} --json takes a value"
                seen.append(name)
            if "--json-out" in getattr(param, "opts", ()):
                assert not param.is_flag and param.metavar == "PATH", name
    assert {"verify", "bench", "status", "runs", "champions", "show", "inject"} <= set(seen)


def test_verify_json_prints_the_report_and_json_out_writes_the_same(tmp_path):
    out = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, "-m", "search", "verify", str(BASELINE_PATH), "--suite", "smoke-bench",
                           "--json", "--json-out", str(out)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    printed = json.loads(proc.stdout)  # the JSON alone: no table around it
    assert printed == json.loads(out.read_text()) and printed["ok"] is True


def test_a_json_path_given_as_a_file_points_to_json_out(capsys, tmp_path):
    code, _, err = run_cli(capsys, "bench", BASELINE_PATH, "--json", tmp_path / "r.json")
    assert code == 2 and f"--json-out {tmp_path / 'r.json'}" in err and len(err.strip().splitlines()) == 1


CHOICES = {("verify", "--device"): "[auto|cpu|cuda]", ("bench", "--device"): "[auto|cpu|cuda]",
           ("bench", "--timing-region"): "[call|gpumode]", ("lineage", "--format"): "[tree|json|dot]"}


@pytest.mark.parametrize("name", [name for name, _ in _commands()])
def test_help_shows_metavars_and_choices_not_python_types(capsys, monkeypatch, name):
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run_cli(capsys, name, "--help")
    assert code == 0
    assert not re.search(r"<(bool|str|int|float|path|list)", out), out
    assert "list[" not in out and "%%" not in out and "{" not in out, out
    for (command, option), choices in CHOICES.items():
        if command == name:
            assert choices in out
    assert max(len(line) for line in out.splitlines()) <= 80


def test_show_of_a_pending_candidate_gives_no_finish_time(capsys, tmp_path):
    config = RunConfig(name="fresh", runs_dir=str(tmp_path / "runs"))
    create_run(config).close()  # seeds queued, none evaluated
    code, out, _ = run_cli(capsys, "show", config.run_dir, "c2")
    assert code == 0
    assert "not finished: pending since" in out and "finished" not in out.replace("not finished", "")


THREE_FIGURES = re.compile(r"^(?:0\.0*[1-9]\d{0,2}|[1-9](?:\d{0,2}|\.\d{1,2}|\d\.\d)|[1-9]\d{2,}|-)x?$")


def test_the_composite_docstring_gives_times_and_speedups_with_three_significant_figures(capsys, tmp_path):
    build = Builder(tmp_path / "run")  # torch.geqrf: 1 ms on every case
    build.add("f", None, Origin.SEED, times=[0.05686, 684.2, 0.09999, 1234.5])
    build.add("f", None, Origin.SEED, times=[684.2, 0.05686, 1234.5, 1300.1])
    build.run.close()
    code, out, err = run_cli(capsys, "export", tmp_path / "run", "--composite", "--from-family", "f",
                             "-o", tmp_path / "c.py")
    assert code == 0, err
    text = (tmp_path / "c.py").read_text()
    table = text[text.index("batch x n"):text.index("Times were measured")]
    rows = [line.split() for line in table.splitlines()[1:] if line.strip()]
    assert rows and all(len(row) >= 6 for row in rows)
    for row in rows:
        for cell in row[3:6]:  # ms, torch.geqrf ms, speedup
            assert THREE_FIGURES.match(cell), (cell, table)
    assert "0.00x" not in text and "0.05686" not in text and "1234.5" not in text
    assert "0.0569" in text and "1230" in text and "0.000810x" in text  # 2x64: 1 ms / 1234.5 ms


@pytest.fixture
def long_named_loop(tmp_path, monkeypatch):
    fams = {"torch_geqrf": toy_baseline(), "householder_unblocked": ToyFamily("householder_unblocked")}
    monkeypatch.setattr(kernels.families, "FAMILIES", fams, raising=False)
    config = RunConfig(name="default-cpu-20261204-202016", runs_dir=str(tmp_path), seed=3,
                       families=[FamilySpec(name="householder_unblocked", islands=1, island_size=4)],
                       evaluation=EvaluationConfig(verify_suite="smoke-quick", bench_suite="smoke-bench", device="cpu"),
                       mutation=MutationMix({"optuna_step": 1.0}))
    run = create_run(config, fams)
    loop = SearchLoop(config, run, FakePool(), Tuner(config.run_dir / "optuna.journal", seed=3), fams,
                      log=lambda _: None, max_evals=40, max_minutes=10)
    loop.start()
    for _ in range(6):
        loop.step(timeout=0)
    yield loop
    run.close()


@pytest.mark.parametrize("width", [80, 100])
def test_the_live_panel_fits_the_terminal_one_line_per_line(long_named_loop, width):
    console = Console(width=width, record=True, color_system=None)
    console.print(render(long_named_loop, long_named_loop.run.store.run_dir.name))
    lines = console.export_text().splitlines()
    assert max(len(line) for line in lines) <= width
    head = lines[:lines.index(next(line for line in lines if line.startswith("┏")))]
    assert len(head) == 5, "\n".join(head)  # five short lines, none wrapped into a second one
    assert head[0].startswith("default-cpu-20261204-202016") and head[-1].startswith("evals ")


def test_no_eta_once_the_session_stops(long_named_loop):
    assert "ETA" in budget_progress(long_named_loop)
    long_named_loop.request_stop("SIGINT received")
    assert "ETA" not in budget_progress(long_named_loop)
    console = Console(width=80, record=True, color_system=None)
    console.print(render(long_named_loop, "run"))
    shown = console.export_text()
    assert "ETA" not in shown and "stopping (SIGINT received): waiting for" in shown


def test_significant_is_what_the_pattern_accepts():
    for value in (0.05686, 684.2, 0.09999, 1234.5, 7.92e-05, 2.0):
        assert THREE_FIGURES.match(significant(value)), significant(value)
