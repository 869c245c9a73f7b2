"""Loading candidate files: GPU MODE's task module stands in only where a file needs it."""

from __future__ import annotations

import sys

import pytest

from kernels.candidate import load_candidate, materialize

GPU_MODE_FILE = """
import torch
from task import input_t, output_t, TestSpec

def custom_kernel(data: input_t) -> output_t:
    spec: TestSpec = {"batch": 1, "n": 2, "cond": 0, "seed": 1, "case": "dense"}
    return torch.geqrf(data)
"""


@pytest.fixture
def no_task_module(monkeypatch):
    monkeypatch.delitem(sys.modules, "task", raising=False)


def test_the_stand_in_task_module_has_qr_v2s_names(tmp_path, no_task_module):
    load_candidate(materialize(GPU_MODE_FILE, tmp_path))
    task = sys.modules["task"]
    assert task.input_t.__bound__.__forward_arg__ == "torch.Tensor"
    assert set(task.TestSpec.__annotations__) == {"batch", "n", "cond", "seed", "case"}


def test_a_real_task_module_on_the_path_wins(tmp_path, monkeypatch, no_task_module):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "task.py").write_text("input_t = output_t = object\nTestSpec = dict\nREAL = True\n")
    monkeypatch.syspath_prepend(str(tmp_path / "lib"))
    load_candidate(materialize(GPU_MODE_FILE, tmp_path / "cand"))
    assert getattr(sys.modules["task"], "REAL", False)


def test_a_file_that_does_not_import_task_gets_none(tmp_path, no_task_module):
    load_candidate(materialize("import torch\n\ndef custom_kernel(a):\n    return torch.geqrf(a)\n", tmp_path))
    assert "task" not in sys.modules
