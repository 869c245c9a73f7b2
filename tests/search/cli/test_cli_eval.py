"""``qrsearch verify`` / ``bench`` as a user runs them: a real process, real exit codes."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kernels.families import BASELINE_PATH

CANDIDATES = Path(__file__).parents[2] / "kernels" / "candidates"
ROOT = Path(__file__).parents[3]


def qrsearch(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "search", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def test_verify_baseline_on_smoke_exits_zero_and_writes_json(tmp_path):
    out = tmp_path / "r.json"
    proc = qrsearch("verify", BASELINE_PATH, "--suite", "smoke", "--json-out", out)
    assert proc.returncode == 0, proc.stderr
    assert "45/45 cases passed" in proc.stdout
    data = json.loads(out.read_text())
    assert data["ok"] is True and len(data["cases"]) == 45
    assert all(c["status"] == "ok" for c in data["cases"])


def test_bench_on_cpu_reports_speedup_and_cpu_timing(tmp_path):
    out = tmp_path / "b.json"
    proc = qrsearch("bench", BASELINE_PATH, "--suite", "smoke-bench", "--json-out", out)
    assert proc.returncode == 0, proc.stderr
    assert "CPU timing" in proc.stdout and "speedup vs torch.geqrf" in proc.stdout
    data = json.loads(out.read_text())
    assert all(c["baseline_ms"] > 0 and c["speedup"] > 0 for c in data["cases"])
    assert data["geomean_speedup"] > 0


def test_failing_candidate_exits_one_with_reasons():
    proc = qrsearch("verify", CANDIDATES / "raises.py", "--suite", "smoke-bench")
    assert proc.returncode == 1
    assert "kernel exploded" in proc.stdout


def test_bench_of_a_cheat_exits_one():
    proc = qrsearch("bench", CANDIDATES / "stale_when_timed.py", "--suite", "smoke-bench", "--no-baseline")
    assert proc.returncode == 1
    assert "failed_verify" in proc.stdout


@pytest.mark.parametrize("name, needle", [("syntax_error.py", "syntax error at line 1"),
                                          ("no_kernel.py", "defines no custom_kernel"),
                                          ("import_error.py", "No module named")])
def test_malformed_file_gets_one_line_not_a_traceback(name, needle):
    proc = qrsearch("verify", CANDIDATES / name, "--suite", "smoke-bench")
    assert proc.returncode == 1
    assert needle in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert len([ln for ln in proc.stderr.splitlines() if ln.strip()]) == 1


def test_crash_reports_case_and_not_run_rest():
    proc = qrsearch("verify", CANDIDATES / "aborts.py", "--suite", "smoke-bench")
    assert proc.returncode == 1
    assert "crashed" in proc.stdout and "SIGABRT" in proc.stdout and "skipped" in proc.stdout


@pytest.mark.parametrize("args", [
    ("verify", "does_not_exist.py"),
    ("verify", str(BASELINE_PATH), "--suite", "nope"),
    ("bench",),
    ("frobnicate",),
])
def test_usage_errors_exit_two(args):
    assert qrsearch(*args).returncode == 2


@pytest.mark.parametrize("command", ["verify", "bench"])
def test_help(command):
    proc = qrsearch(command, "--help")
    assert proc.returncode == 0 and "--suite" in proc.stdout


def test_bench_of_some_cases_times_only_those(tmp_path):
    from kernels.suites import get_suite

    names = [c.name for c in get_suite("smoke-bench")][1:3]
    out = tmp_path / "r.json"
    proc = qrsearch("bench", BASELINE_PATH, "--suite", "smoke-bench", "--no-baseline", "--cases", ",".join(names),
                    "--json-out", out)
    assert proc.returncode == 0, proc.stderr
    assert [c["name"] for c in json.loads(out.read_text())["cases"]] == names
    bad = qrsearch("bench", BASELINE_PATH, "--suite", "smoke-bench", "--cases", "dense-1x1-c0")
    assert bad.returncode == 2 and "not cases of smoke-bench: dense-1x1-c0" in bad.stderr


def test_bench_on_chosen_cpus_runs_and_bad_cpu_lists_are_usage_errors(tmp_path):
    import os

    from kernels.suites import get_suite

    cpu = min(os.sched_getaffinity(0))
    out = tmp_path / "r.json"
    name = get_suite("smoke-bench")[0].name
    proc = qrsearch("bench", BASELINE_PATH, "--suite", "smoke-bench", "--cases", name,
                    "--cpus", str(cpu), "--json-out", out)
    assert proc.returncode == 0, proc.stderr
    timed = json.loads(out.read_text())["cases"][0]
    assert timed["status"] == "ok" and timed["baseline_ms"] > 0  # torch.geqrf timed on those CPUs too
    for bad, needle in [("100000", "not available to this process"), ("0,x", "not a CPU list"), ("3-1", "empty")]:
        proc = qrsearch("bench", BASELINE_PATH, "--suite", "smoke-bench", "--cpus", bad)
        assert proc.returncode == 2 and needle in proc.stderr and "--cpus" in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr


def test_bench_times_gpu_modes_way_when_asked_and_keeps_baselines_apart(tmp_path):
    from kernels.suites import get_suite

    name = get_suite("smoke-bench")[0].name
    calls = tmp_path / "call.json"
    proc = qrsearch("bench", BASELINE_PATH, "--suite", "smoke-bench", "--cases", name, "--json-out", calls)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(calls.read_text())["cases"][0]["timing"]["calls_per_region"] == 1
    gpumode = tmp_path / "gpumode.json"
    proc = qrsearch("bench", BASELINE_PATH, "--suite", "smoke-bench", "--cases", name, "--timing-region", "gpumode",
                    "--json-out", gpumode)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(gpumode.read_text())
    assert data["cases"][0]["timing"]["calls_per_region"] == 50 and data["cases"][0]["baseline_ms"] > 0
    # torch.geqrf timed one call per region is no baseline for GPU MODE's regions
    proc = qrsearch("bench", BASELINE_PATH, "--suite", "smoke-bench", "--cases", name, "--timing-region", "gpumode",
                    "--baseline-json", calls)
    assert proc.returncode == 2 and "--baseline-json" in proc.stderr and "Traceback" not in proc.stderr
    assert qrsearch("bench", BASELINE_PATH, "--timing-region", "fast").returncode == 2
