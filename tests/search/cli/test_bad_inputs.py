"""Bad input as a new user types it, through the real entry point: one clear line and the
right exit code (2 for usage, 1 for a failed check or a damaged store), and nothing left
behind.  Every launch here stops before a search starts."""

from __future__ import annotations

import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from kernels.families import BASELINE_PATH
from search.config import RunConfig
from search.run.driver import create_run
from tests.search.cli.test_cli_tools import run_cli

ROOT = Path(__file__).parents[3]


def one_error_line(err: str) -> str:
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ") and "Traceback" not in err and "Value error" not in err, err
    return lines[0]


def test_an_unknown_device_is_a_usage_error_that_lists_the_choices(capsys):
    code, out, err = run_cli(capsys, "verify", BASELINE_PATH, "--device", "gpu")
    assert code == 2 and out == ""
    line = one_error_line(err)
    assert "--device" in line and "'gpu' is not one of 'auto', 'cpu', 'cuda'" in line


def test_cuda_without_cuda_is_one_usage_error_not_a_table_of_failures(capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    for command in ("verify", "bench"):
        code, out, err = run_cli(capsys, command, BASELINE_PATH, "--device", "cuda")
        assert code == 2 and out == ""
        line = one_error_line(err)
        assert "--device" in line and "CUDA is not available here" in line


def test_an_endpoint_without_a_model_and_a_model_without_an_endpoint_are_usage_errors(capsys):
    code, _, err = run_cli(capsys, "launch", "--llm-base-url", "http://127.0.0.1:8000/v1")
    assert code == 2 and "--llm-base-url needs a model: add --llm-model NAME" in one_error_line(err)
    code, _, err = run_cli(capsys, "launch", "--llm-model", "qwen3-coder")
    assert code == 2 and "--llm-model needs an endpoint: add --llm-base-url URL" in one_error_line(err)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_endpoint_is_said_once_at_launch(capsys, tmp_path):
    """The probe runs before the run starts; the run here exists already, so launch stops right after it."""
    runs = tmp_path / "runs"
    create_run(RunConfig(name="taken", runs_dir=str(runs))).close()
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    code, _, err = run_cli(capsys, "launch", "--name", "taken", "--runs-dir", runs, "--llm-base-url", url,
                           "--llm-model", "m")
    assert code == 1 and "already exists" in err
    warnings = [ln for ln in err.splitlines() if ln.startswith("warning:")]
    assert len(warnings) == 1 and url in warnings[0] and "cannot be reached" in warnings[0], err


def test_a_reachable_endpoint_gets_no_warning(capsys, tmp_path):
    from tests.search.fake_llm import FakeLLM

    runs = tmp_path / "runs"
    create_run(RunConfig(name="taken", runs_dir=str(runs))).close()
    server = FakeLLM([])
    server.thread.start()
    try:
        code, _, err = run_cli(capsys, "launch", "--name", "taken", "--runs-dir", runs, "--llm-base-url", server.url,
                               "--llm-model", "m")
    finally:
        server.stop()
    assert code == 1 and "warning" not in err


def test_a_focus_case_that_is_not_in_the_suite_names_the_option_not_pydantic(capsys):
    code, _, err = run_cli(capsys, "launch", "--focus", "nosuchcase")
    assert code == 2
    line = one_error_line(err)
    assert line.startswith("error: --focus: nosuchcase not in bench suite demo-bench") and ": :" not in line


def test_broken_yaml_names_the_file_and_the_line(capsys, tmp_path):
    config = tmp_path / "broken.yaml"
    config.write_text("name: x\nevaluation: [unclosed\n")
    code, _, err = run_cli(capsys, "launch", "--config", config)
    assert code == 2
    line = one_error_line(err)
    assert f"{config}: not valid YAML: line 3, column 1" in line and "<unicode string>" not in line


def test_a_launch_under_ray_job_submit_without_an_absolute_runs_dir_is_refused(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("RAY_JOB_CONFIG_JSON_ENV_VAR", '{"runtime_env": {"working_dir": "."}}')
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(capsys, "launch")
    assert code == 2
    line = one_error_line(err)
    assert "--runs-dir" in line and "absolute path" in line
    assert not (tmp_path / "runs").exists()
    # With an absolute --runs-dir the launch goes ahead (here it stops at a run that exists).
    runs = tmp_path / "abs-runs"
    create_run(RunConfig(name="taken", runs_dir=str(runs))).close()
    code, _, err = run_cli(capsys, "launch", "--name", "taken", "--runs-dir", runs)
    assert code == 1 and "already exists" in err


@pytest.fixture
def corrupt_run(tmp_path) -> Path:
    config = RunConfig(name="damaged", runs_dir=str(tmp_path / "runs"))
    create_run(config).close()
    store = config.run_dir / "run.sqlite"
    data = bytearray(store.read_bytes())
    data[4096:4096 * 6] = b"\x5a" * (4096 * 5)  # pages after the header
    store.write_bytes(bytes(data))
    return config.run_dir


@pytest.mark.parametrize("command", ["status", "champions", "resume"])
def test_a_damaged_store_is_one_line_with_a_way_out_and_is_left_as_it_was(capsys, corrupt_run, command):
    before = (corrupt_run / "run.sqlite").read_bytes()
    code, _, err = run_cli(capsys, command, corrupt_run)
    assert code == 1
    line = one_error_line(err)
    assert "run.sqlite" in line and ".recover" in line and "config.yaml" in line
    assert (corrupt_run / "run.sqlite").read_bytes() == before
    assert sorted(p.name for p in corrupt_run.iterdir() if p.name.startswith("run.sqlite")) == ["run.sqlite"]


@pytest.mark.parametrize("command", ["status", "report"])
def test_a_candidate_row_edited_out_of_shape_is_one_line_too(capsys, tmp_path, command):
    # The file is sound, one row is not: inspection builds the rows that pass its checks without
    # validating them, and this one must not be among them.
    config = RunConfig(name="edited", runs_dir=str(tmp_path / "runs"))
    create_run(config).close()
    db = sqlite3.connect(config.run_dir / "run.sqlite")
    (seed,) = db.execute("SELECT id FROM candidates WHERE origin = 'seed'").fetchone()
    db.execute("UPDATE candidates SET origin = 'llm' WHERE id = ?", (seed,))  # an LLM edit without a parent
    db.commit()
    db.close()
    output = ["-o", tmp_path / "r.html"] if command == "report" else []
    code, _, err = run_cli(capsys, command, config.run_dir, *output)
    assert code == 1
    line = one_error_line(err)
    assert f"candidate row '{seed}' does not validate" in line and "config.yaml" in line


def _qrsearch(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "search", *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)


def test_a_kernel_that_always_raises_is_reported_once_with_the_count(tmp_path):
    candidate = tmp_path / "unwritten.py"
    candidate.write_text("def custom_kernel(A):\n    raise RuntimeError('my kernel is not written yet')\n")
    proc = _qrsearch("verify", candidate, "--suite", "smoke-bench")
    assert proc.returncode == 1
    assert proc.stdout.count("my kernel is not written yet") == 1, proc.stdout
    assert "every one of the 4 cases failed the same way (error)" in proc.stdout
    assert "0/4 cases passed" in proc.stdout


def test_a_message_shared_by_some_cases_is_printed_once_below_the_table(tmp_path):
    candidate = tmp_path / "small_only.py"
    candidate.write_text("import torch\n\n\ndef custom_kernel(A):\n    if A.shape[-1] >= 32:\n"
                         "        raise ValueError('too big for this kernel')\n    return torch.geqrf(A)\n")
    proc = _qrsearch("bench", candidate, "--suite", "smoke-bench", "--no-baseline")
    assert proc.returncode == 1
    assert proc.stdout.count("too big for this kernel") == 1, proc.stdout
    assert "[1] error in 3 cases (dense-4x32-c1, mixed-4x48-c2, rankdef-2x64-c0)" in proc.stdout
    assert proc.stdout.count("[1]") == 4  # three rows point at it, and the line itself
