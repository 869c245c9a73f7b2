"""An evaluator actor's output in its own file when Ray does not stream it to the driver
(``ray.log_to_driver`` off, the default): what it, its children and a fatal error write lands there,
and a lost evaluator's reason names the file and quotes its last error."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from search.engine.pool import Lost
from search.evaluate.actor_output import TAIL_CHARS, describe_output, output_path
from tests.search.evaluate.test_pool_contract import request, wait_for_slot

ROOT = Path(__file__).resolve().parents[3]


def test_the_process_its_children_and_a_fatal_error_write_to_the_file(tmp_path):
    log = tmp_path / "gpu0" / "actor.log"
    log.parent.mkdir()
    log.write_text("an earlier start\n")
    script = ("import faulthandler, os, sys\n"
              "from pathlib import Path\n"
              "from search.evaluate.actor_output import redirect_output\n"
              f"redirect_output(Path({str(log)!r}))\n"
              "print('to stdout'); print('to stderr', file=sys.stderr)\n"
              "os.system('echo from a child')\n"
              "faulthandler._sigsegv()\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    assert done.returncode != 0 and done.stdout == "" and done.stderr == ""  # nothing on the terminal
    text = log.read_text()
    assert text.startswith("an earlier start\n")  # appended: a restarted actor keeps its predecessor's lines
    for line in ("to stdout", "to stderr", "from a child", "Fatal Python error: Segmentation fault"):
        assert line in text


def test_a_reason_quotes_the_last_error_not_what_follows_it(tmp_path):
    log = tmp_path / "actor.log"
    log.write_text("Traceback (most recent call last):\n  old\nValueError: old\n"
                   "Fatal Python error: Segmentation fault\n\nCurrent thread 0x1 (most recent call first):\n"
                   "  File \"worker.py\", line 9 in evaluate\n\nExtension modules: " + "mod, " * 500 + "\n")
    clause = describe_output(log)
    assert clause.startswith(f"; its output: {log}, from its last error: Fatal Python error: Segmentation fault "
                             "Current thread 0x1 (most recent call first): File \"worker.py\", line 9 in evaluate")
    assert "ValueError" not in clause and len(clause) < len(str(log)) + TAIL_CHARS + 60


def test_without_an_error_a_reason_quotes_the_end_and_without_a_file_only_the_path(tmp_path):
    log = tmp_path / "actor.log"
    log.write_text("x" * 1000 + " the last words\n")
    assert describe_output(log).endswith("x the last words") and "x" * (TAIL_CHARS + 1) not in describe_output(log)
    assert describe_output(tmp_path / "elsewhere.log") == f"; its output: {tmp_path / 'elsewhere.log'}"
    assert describe_output(None) == ""


@pytest.mark.slow
def test_an_evaluator_that_crashes_is_lost_with_its_error_text_in_the_reason(local_ray, tmp_path):
    from search.evaluate.ray_pool import RayPool

    pool = RayPool(workdir=tmp_path / "work", gpus=0, cpu_evaluators=1, output_to_files=True)
    try:
        assert wait_for_slot(pool) == 1
        pool.submit(request("c0"))
        os.kill(pool.actor_pids()["cpu0"], signal.SIGSEGV)
        events: list = []
        deadline = time.monotonic() + 60
        while not events and time.monotonic() < deadline:
            events = [e for e in pool.poll(0.5) if isinstance(e, Lost)]
        assert [e.candidate_id for e in events] == ["c0"]  # lost, so re-queued with nobody blamed
        reason = events[0].reason
        assert f"its output: {output_path(tmp_path / 'work', 'cpu0')}, from its last error: " in reason
        assert "Segmentation fault" in reason
    finally:
        pool.shutdown()
