import pytest

from search.engine.edits import EditError, apply_response, parse_blocks

PARENT = '''import torch

# qrsearch: params
PARAMS = {
    "block": 32,
}
# qrsearch: end params


def helper(x):
    return x


def custom_kernel(A):
    return torch.geqrf(helper(A))
'''


def block(search, replace):
    return f"<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n"


def test_applies_blocks_in_order():
    response = "Rationale.\n" + block("    return x\n", "    return x.contiguous()\n") + block(
        '    "block": 32,\n', '    "block": 64,\n')
    child = apply_response(PARENT, response)
    assert "x.contiguous()" in child and '"block": 64' in child


def test_blocks_inside_a_code_fence():
    response = "```python\n" + block("    return x\n", "    return x * 1\n") + "```\n"
    assert "x * 1" in apply_response(PARENT, response)


def test_tolerates_dropped_trailing_whitespace():
    parent = PARENT.replace("    return x\n", "    return x   \n")
    child = apply_response(parent, block("    return x\n", "    return x + 0\n"))
    assert "x + 0" in child


def test_whole_file_answer():
    new = PARENT.replace("helper(A)", "A")
    assert apply_response(PARENT, f"Here it is:\n```python\n{new}```\n") == new


@pytest.mark.parametrize("response, needle", [
    (block("    return y\n", "    return z\n"), "does not occur"),
    ("just prose, no code", "no SEARCH/REPLACE"),
    (block("    return x\n", "    return x\n"), "unchanged"),
    (block("    return x\n", "    return (x\n"), "does not parse"),
    (block("def custom_kernel(A):\n", "def kernel(A):\n"), "no longer defines custom_kernel"),
    (block("   \n", "x\n"), "empty SEARCH"),
])
def test_rejections_say_why(response, needle):
    with pytest.raises(EditError, match=needle):
        apply_response(PARENT, response)


def test_parse_counts_blocks():
    assert len(parse_blocks(block("a\n", "b\n") * 3)) == 3


def test_ambiguous_search_is_rejected():
    parent = PARENT.replace("def helper(x):\n    return x\n", "def helper(x):\n    return x\n\n\ndef other(x):\n    return x\n")
    with pytest.raises(EditError, match="occurs 2 times"):
        apply_response(parent, block("    return x\n", "    return -x\n"))
