"""Turning an LLM response into a new candidate file.

Two answer forms are accepted:

* SEARCH/REPLACE blocks, each replacing one exact, unique stretch of the parent::

      <<<<<<< SEARCH
      old lines
      =======
      new lines
      >>>>>>> REPLACE

* a whole file in one fenced ```python block (used when no blocks are present),
  or, with neither blocks nor fences, the whole answer when it is itself a file
  that defines ``custom_kernel``.

Anything else is an :class:`EditError` whose message goes back into the next
prompt, so the model learns what went wrong; its ``kind`` names the reason
in the run's counters (``qrsearch status``).
"""

from __future__ import annotations

import ast
import re

from kernels.candidate import CandidateError, check_syntax

# Rejection kinds, as counted per model: stable names, one per way an answer cannot run.
NO_CODE = "no-code"
SEARCH_MISMATCH = "search-mismatch"
UNCHANGED = "unchanged"
SYNTAX = "syntax"
NO_CUSTOM_KERNEL = "no-custom-kernel"

_BLOCK = re.compile(
    r"^<{5,9} ?SEARCH[^\n]*\n(?P<search>.*?)^={5,9}[ \t]*\n(?P<replace>.*?)^>{5,9} ?REPLACE[^\n]*$",
    re.MULTILINE | re.DOTALL,
)
# Any info string (```python, ```py, ```python3, ```Python, none): the body is checked anyway.
_FENCE = re.compile(r"```[\w+.-]*[ \t]*\n(?P<body>.*?)^```", re.MULTILINE | re.DOTALL)


class EditError(ValueError):
    """The response cannot be turned into a candidate; the message says why, ``kind`` names the reason."""

    def __init__(self, message: str, kind: str = SEARCH_MISMATCH) -> None:
        super().__init__(message)
        self.kind = kind


def _strip_fences(text: str) -> str:
    """Blocks are often wrapped in a code fence; drop fence lines that surround them."""
    return re.sub(r"^```[a-zA-Z]*[ \t]*$\n?", "", text, flags=re.MULTILINE)


def parse_blocks(response: str) -> list[tuple[str, str]]:
    return [(m.group("search"), m.group("replace")) for m in _BLOCK.finditer(_strip_fences(response))]


def _locate(source: str, search: str) -> tuple[int, int]:
    """Span of the unique occurrence of ``search``; falls back to a match that
    ignores trailing whitespace on each line (models often drop it)."""
    count = source.count(search)
    if count == 1:
        start = source.index(search)
        return start, start + len(search)
    if count > 1:
        raise EditError(f"SEARCH text occurs {count} times; include more context so it is unique:\n{_clip(search)}")
    want = [line.rstrip() for line in search.rstrip("\n").split("\n")]
    lines = source.split("\n")
    hits = [i for i in range(len(lines) - len(want) + 1)
            if [line.rstrip() for line in lines[i:i + len(want)]] == want]
    if len(hits) != 1:
        reason = "does not occur in the parent" if not hits else f"occurs {len(hits)} times"
        raise EditError(f"SEARCH text {reason} (it must match the parent's lines exactly):\n{_clip(search)}")
    start = sum(len(line) + 1 for line in lines[:hits[0]])
    end = start + sum(len(line) + 1 for line in lines[hits[0]:hits[0] + len(want)])
    return start, min(end, len(source))


def _clip(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit] + " ..."


def apply_blocks(source: str, blocks: list[tuple[str, str]]) -> str:
    for number, (search, replace) in enumerate(blocks, 1):
        if not search.strip():
            raise EditError(f"block {number}: empty SEARCH section", SEARCH_MISMATCH)
        try:
            start, end = _locate(source, search)
        except EditError as exc:
            raise EditError(f"block {number}: {exc}", exc.kind) from None
        source = source[:start] + replace + source[end:]
    return source


def defines_custom_kernel(tree: ast.Module) -> bool:
    """A top-level ``def custom_kernel`` (sync or async) or ``custom_kernel = ...``."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "custom_kernel":
            return True
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
            if isinstance(node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == "custom_kernel" for t in targets):
            return True
    return False


def _whole_file(response: str) -> str:
    """The complete file an answer gives instead of blocks: the longest fenced body that
    defines custom_kernel, or the bare answer when it parses as such a file."""
    fences = [m.group("body") for m in _FENCE.finditer(response)]
    whole = [body for body in fences if "def custom_kernel" in body]
    if whole:
        return max(whole, key=len)
    if not fences and "def custom_kernel" in response:
        try:
            if defines_custom_kernel(ast.parse(response)):
                return response if response.endswith("\n") else response + "\n"
        except (SyntaxError, ValueError):
            pass
    raise EditError("no SEARCH/REPLACE blocks and no complete ```python file with custom_kernel found", NO_CODE)


def apply_response(parent_source: str, response: str) -> str:
    """The child's source, or EditError.  The result must parse and still define custom_kernel."""
    blocks = parse_blocks(response)
    child = apply_blocks(parent_source, blocks) if blocks else _whole_file(response)
    if child == parent_source:
        raise EditError("the edit leaves the parent unchanged", UNCHANGED)
    try:
        check_syntax(child)
    except CandidateError as exc:
        raise EditError(f"the edited file does not parse: {exc}", SYNTAX) from None
    if not defines_custom_kernel(ast.parse(child)):
        raise EditError("the edited file no longer defines custom_kernel at top level", NO_CUSTOM_KERNEL)
    return child
