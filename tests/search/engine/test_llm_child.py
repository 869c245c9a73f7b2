"""An LLM answer becomes a candidate unless its file cannot run; its PARAMS are kept, marked,
restored from the parent, or none (a new structure with an empty parameter space)."""

from __future__ import annotations

import pytest

from kernels.params import read_params, structure_fingerprint
from search.engine.edits import EditError
from search.engine.llm_child import KEPT, MARKED, NONE, RESTORED, child_file
from tests.search.fakes import TOY_SOURCE

GPU_MODE = '''import torch


def custom_kernel(data):
    return torch.geqrf(data)
'''


def fenced(body: str, tag: str = "python") -> str:
    return f"Here is the whole kernel.\n```{tag}\n{body}```\nIt should be faster."


def test_a_bare_gpu_mode_file_is_a_new_structure_with_no_parameters():
    made = child_file(TOY_SOURCE, fenced(GPU_MODE))
    assert (made.source, made.params, made.params_origin) == (GPU_MODE, {}, NONE)
    assert structure_fingerprint(made.source) != structure_fingerprint(TOY_SOURCE)


@pytest.mark.parametrize("tag", ["python3", "Python", "py", ""])
def test_any_fence_tag_and_a_bare_answer_are_read_as_the_file(tag):
    assert child_file(TOY_SOURCE, fenced(GPU_MODE, tag)).source == GPU_MODE
    assert child_file(TOY_SOURCE, GPU_MODE.rstrip("\n")).source == GPU_MODE  # no fence at all


def test_a_file_that_still_reads_the_parents_keys_gets_the_parents_block_back():
    body = ('"""A rewrite that forgot the block."""\nimport torch\n\nBLOCK = PARAMS["block"]\n\n\n'
            'def custom_kernel(A):\n    return torch.geqrf(A) if PARAMS.get("warps", 1) else None\n')
    made = child_file(TOY_SOURCE, fenced(body))
    assert made.params_origin == RESTORED
    assert made.params == read_params(TOY_SOURCE)
    # Placed before the first statement that reads it at import time, after the docstring and imports.
    assert made.source.index("# qrsearch: end params") < made.source.index('BLOCK = PARAMS["block"]')
    assert made.source.index("import torch") < made.source.index("# qrsearch: params")
    compile(made.source, "child", "exec")


def test_a_parents_values_are_restored_not_the_familys_defaults():
    parent = TOY_SOURCE.replace('"block": 16', '"block": 64')
    made = child_file(parent, fenced("import torch\n\n\ndef custom_kernel(A):\n    b = PARAMS['block']\n"
                                     "    return torch.geqrf(A)\n"))
    assert made.params["block"] == 64


def test_an_unmarked_literal_params_dict_is_marked_and_tunable():
    body = 'import torch\nPARAMS = {\n    "block": 8,\n}\n\n\ndef custom_kernel(A):\n    return torch.geqrf(A)\n'
    made = child_file(TOY_SOURCE, fenced(body))
    assert (made.params_origin, made.params) == (MARKED, {"block": 8})
    assert made.source.replace("# qrsearch: params\n", "").replace("# qrsearch: end params\n", "") == body


def test_a_kept_block_is_kept_and_an_unreadable_one_still_runs():
    edit = ("<<<<<<< SEARCH\n    return torch.geqrf(A)\n=======\n    return torch.geqrf(A.contiguous())\n"
            ">>>>>>> REPLACE\n")
    assert child_file(TOY_SOURCE, edit).params_origin == KEPT
    unreadable = TOY_SOURCE.replace('PARAMS = {\n    "block": 16,\n    "warps": 4,\n    "stages": 2,\n}',
                                    'PARAMS = dict(block=16, warps=4, stages=2)')
    made = child_file(TOY_SOURCE, fenced(unreadable))
    assert (made.params_origin, made.params, made.source) == (NONE, {}, unreadable)


@pytest.mark.parametrize("answer, kind, needle", [
    ("I would fuse the two loops; that should help.", "no-code", "no SEARCH/REPLACE blocks"),
    (fenced("def custom_kernel(A:\n    pass\n"), "syntax", "does not parse: syntax error at line 1"),
    (fenced("import torch\n\n\ndef kernel(A):\n    return torch.geqrf(A)\n\n\ndef custom_kernel_x(A):\n    pass\n"),
     "no-custom-kernel", "no longer defines custom_kernel"),
    (fenced("import subprocess\n\n\ndef custom_kernel(A):\n    return subprocess.run(A)\n"), "screen",
     "fails the source screen: line 1: imports subprocess"),
    (fenced("import torch\n\n\ndef custom_kernel(A):\n    return PARAMS['tile']\n"), "undefined-params",
     r"PARAMS keys \['tile'\]"),
    ("<<<<<<< SEARCH\nnot in the parent\n=======\nx = 1\n>>>>>>> REPLACE\n", "search-mismatch", "does not occur"),
])
def test_only_files_that_cannot_run_are_rejected_and_the_kind_says_why(answer, kind, needle):
    with pytest.raises(EditError, match=needle) as info:
        child_file(TOY_SOURCE, answer)
    assert info.value.kind == kind


def test_reading_params_with_no_block_to_restore_is_rejected():
    with pytest.raises(EditError, match="parent has no PARAMS block") as info:
        child_file(GPU_MODE, fenced("import torch\n\n\ndef custom_kernel(A):\n    n = PARAMS['x']\n"
                                    "    return torch.geqrf(A)\n"))
    assert info.value.kind == "undefined-params"
