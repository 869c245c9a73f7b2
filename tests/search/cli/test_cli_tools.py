"""The command line as a Unix tool: one validation for every command's numbers (exit 2, one
line, no URL or class name), a missing run directory named as such, read-only commands that
leave no SQLite side files, ``--version``, one meaning per short flag, the README's CLI
table generated from the CLI, and one number format."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import typer

from search.cli.app import app, main
from search.cli.doc import README, render_table, updated_readme
from search.config import RunConfig
from search.run.driver import create_run
from population.records import STATUS_KEY
from search.numbers import ms, significant, speedup
from search.inspect.sessions import session_seconds


def run_cli(capsys, *args: object) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main([str(a) for a in args])
    out, err = capsys.readouterr()
    return int(exit_info.value.code or 0), out, err


@pytest.fixture
def run_dir(tmp_path) -> Path:
    config = RunConfig(name="created", runs_dir=str(tmp_path / "runs"))
    run = create_run(config)
    run.set_json(STATUS_KEY, {"state": "stopped", "stop_reason": "evaluation budget reached (4)", "updated": 1.0})
    run.close()
    return config.run_dir


def test_readme_cli_table_is_generated_from_the_cli():
    text = README.read_text(encoding="utf-8")
    assert updated_readme(text, render_table(app)) == text, "run `python -m search.cli.doc`"
    # Every command and every option is in it.
    group = typer.main.get_command(app)
    table = render_table(app)
    for name in group.list_commands(typer.Context(group)):
        command = group.get_command(typer.Context(group), name)
        assert f"`qrsearch {name}" in table
        for param in command.params:
            for opt in getattr(param, "opts", []):
                if opt != "--help" and param.param_type_name == "option":
                    assert opt in table, (name, opt)


def test_a_short_flag_means_one_thing_in_every_command():
    group = typer.main.get_command(app)
    meaning: dict[str, tuple[str, str]] = {}
    for name in group.list_commands(typer.Context(group)):
        for param in group.get_command(typer.Context(group), name).params:
            opts = getattr(param, "opts", [])
            long = max(opts, key=len) if opts else None
            for opt in opts:
                if len(opt) == 2 and opt != "-h":
                    first = meaning.setdefault(opt, (long, name))
                    assert first[0] == long, f"{opt} is {first[0]} in {first[1]} but {long} in {name}"


@pytest.mark.parametrize("args", [
    ["resume", "{run}", "--max-evals", "-3"],
    ["resume", "{run}", "--max-minutes", "0"],
    ["launch", "--max-evals", "0"],
    ["launch", "--max-minutes", "-1"],
    ["launch", "--gpus", "-1"],
    ["verify", "{file}", "--timeout", "0"],
    ["bench", "{file}", "--timeout", "-5"],
    ["lineage", "{run}", "--depth", "-1"],
])
def test_bad_numbers_are_one_line_usage_errors_and_change_nothing(capsys, run_dir, tmp_path, args):
    candidate = tmp_path / "k.py"
    candidate.write_text("def custom_kernel(A):\n    return A\n")
    before = (run_dir / "run.sqlite").read_bytes()
    code, out, err = run_cli(capsys, *(a.format(run=run_dir, file=candidate) for a in args))
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and args[-2] in lines[0]
    assert "http" not in err and "Error" not in err and "pydantic" not in err
    assert (run_dir / "run.sqlite").read_bytes() == before  # resume --max-evals -3 ran no session


RUN_COMMANDS = [["status"], ["champions"], ["lineage"], ["show", "{run}", "c1"], ["report", "{run}", "-o", "{out}"],
                ["export", "{run}", "-f", "householder_unblocked", "-o", "{out}"], ["resume"],
                ["inject", "{run}", "{file}", "-f", "householder_unblocked"], ["note", "{run}", "c1", "text"],
                ["recheck", "{run}", "c1"], ["promote", "{run}", "c1"], ["retire", "{run}", "c1"], ["pause"],
                ["unpause"]]


@pytest.mark.parametrize("command", RUN_COMMANDS)
def test_a_missing_run_is_one_usage_error_in_one_wording(capsys, tmp_path, command):
    candidate = tmp_path / "k.py"
    candidate.write_text("def custom_kernel(A):\n    return A\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    for missing in (tmp_path / "no-such-run", empty):
        args = [a.format(run=missing, out=tmp_path / "r.html", file=candidate) for a in command]
        if len(args) == 1:
            args.append(str(missing))
        code, _, err = run_cli(capsys, *args)
        assert code == 2, err
        lines = err.strip().splitlines()
        assert len(lines) == 1 and f"no run at {missing}" in lines[0], err
        assert "RunStore" not in err and "Traceback" not in err
    assert not (tmp_path / "no-such-run").exists() and list(empty.iterdir()) == []


def test_read_only_commands_leave_no_sqlite_side_files(capsys, run_dir, tmp_path):
    for args in (["status", run_dir], ["status", run_dir, "--json"], ["champions", run_dir],
                 ["lineage", run_dir], ["show", run_dir, "c1"]):
        code, out, err = run_cli(capsys, *args)
        assert code == 0, err
        assert out.endswith("\n"), args  # piped output ends its last line
    assert sorted(p.name for p in run_dir.iterdir() if p.name.startswith("run.sqlite")) == ["run.sqlite"]
    # The store is still a WAL database a writer can open.
    with sqlite3.connect(run_dir / "run.sqlite") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_version(capsys):
    code, out, _ = run_cli(capsys, "--version")
    assert code == 0 and out.startswith("qrsearch ") and out.strip().split()[1][0].isdigit()


@pytest.mark.parametrize("value, text", [
    (7.92e-05, "0.0000792"), (0.000115, "0.000115"), (0.00115, "0.00115"), (0.91, "0.910"), (9.996, "10.0"),
    (27.04, "27.0"), (642.3, "642"), (1234567.0, "1.23e+06"), (0.0, "0"),
])
def test_one_format_for_times_and_speedups(value, text):
    assert significant(value) == text
    assert speedup(value) == text + "x"
    assert ms(value) == text and ms(value, unit=True) == text + " ms"
    assert speedup(None) == ms(None) == "-"


def test_elapsed_counts_session_time_not_the_gap_before_a_resume():
    sessions = [{"started": 1000.0, "ended": 1240.0}, {"started": 5000.0, "ended": 5003.0}]
    assert session_seconds(sessions, updated=5003.0) == pytest.approx(243.0)
    # A killed session (no end stamp) counts to the next start; the running one to the last update.
    killed = [{"started": 1000.0}, {"started": 1300.0}]
    assert session_seconds(killed, updated=1360.0) == pytest.approx(360.0)
    assert session_seconds([], updated=None) is None


INTERPRETED_ONLY = '''import os

import torch


def custom_kernel(A):
    # The family files fall back to torch.geqrf unless Triton runs in the interpreter on a CPU.
    if not A.is_cuda and os.environ.get("TRITON_INTERPRET") != "1":
        raise RuntimeError("the Triton kernels would not run here")
    return torch.geqrf(A)
'''


def test_verify_and_bench_on_a_cpu_run_triton_in_the_interpreter(capsys, tmp_path, monkeypatch):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CPU-only behaviour")
    monkeypatch.setenv("TRITON_INTERPRET", "0")  # restored afterwards, whatever the command sets
    candidate = tmp_path / "interpreted.py"
    candidate.write_text(INTERPRETED_ONLY)
    code, out, err = run_cli(capsys, "verify", candidate, "--suite", "smoke-quick")
    assert code == 0, out + err
    assert "TRITON_INTERPRET=1" in out
    code, out, err = run_cli(capsys, "bench", candidate, "--suite", "smoke-quick", "--no-baseline")
    assert code == 0, out + err
    assert "not a speed measurement" in out


def test_busy_lists_a_few_evaluators_and_sums_up_many():
    from search.numbers import busy
    assert busy({"gpu10": 0.5, "gpu2": 0.25}) == "gpu2 25%, gpu10 50%"
    many = {f"gpu{i}": 0.9 for i in range(256)} | {"gpu200": 0.39, "gpu7": 0.4, "gpu31": 0.39}
    line = busy(many, listed=3)
    assert line.startswith("256 evaluators, mean 89%, median 90%; least busy: ")
    assert line.endswith("gpu31 39%, gpu200 39%, gpu7 40%")  # ties by natural name order
