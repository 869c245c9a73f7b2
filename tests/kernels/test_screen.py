import pytest

from kernels.families import BASELINE_PATH
from kernels.harness.screen import screen_source


def test_plain_kernel_passes():
    assert screen_source(BASELINE_PATH.read_text()) == []
    src = "import os\nimport torch, triton\nimport triton.language as tl\nINTERP = os.environ.get('TRITON_INTERPRET')\n"
    assert screen_source(src) == []


@pytest.mark.parametrize("src, needle", [
    ("import torch\ntorch.linalg.householder_product = None\n", "assigns to torch.linalg.householder_product"),
    ("import torch\ntorch.backends.cuda.matmul.allow_tf32 = True\n", "allow_tf32"),
    ("import torch\ntorch.set_float32_matmul_precision('high')\n", "set_float32_matmul_precision"),
    ("import inspect\n", "imports inspect"),
    ("from kernels import verify\n", "imports from kernels"),
    ("import sys\nsys.modules['x'] = 1\n", ".modules"),
    ("import torch\nsetattr(torch, 'triu', None)\n", "setattr"),
    ("import os\nos.write(3, b'{}')\n", ".write"),
    ("import os\nos.kill(os.getppid(), 9)\n", ".kill"),
    ("exec('1')\n", "exec"),
    ("import torch.cuda as c\nc.synchronize = lambda: None\n", "assigns to c.synchronize"),
])
def test_cheats_are_flagged_with_their_line(src, needle):
    problems = screen_source(src)
    assert any(needle in p for p in problems), problems
    assert all(p.startswith("line ") for p in problems)


def test_unparseable_source_is_left_to_the_loader():
    assert screen_source("def f(:\n") == []


def test_a_source_is_screened_once_per_process_and_callers_get_their_own_list():
    from kernels.harness.screen import _screened

    source = "import subprocess\n\n\ndef custom_kernel(A):\n    return A\n"
    hits = _screened.cache_info().hits
    first = screen_source(source)
    first.append("changed by a caller")
    again = screen_source(source)
    assert again == ["line 1: imports subprocess"]  # the cached verdict is not the caller's list
    assert _screened.cache_info().hits == hits + 1
