"""Turning an LLM response into a new candidate file.

Two answer forms are accepted:

* SEARCH/REPLACE blocks, each replacing one exact, unique stretch of the parent::

      <<<<<<< SEARCH
      old lines
      =======
      new lines
      >>>>>>> REPLACE

* a whole file in one fenced ```python block (used when no blocks are present).

Anything else is an :class:`EditError` whose message goes back into the next
prompt, so the model learns what went wrong.
"""

from __future__ import annotations

import re

from kernels.candidate import CandidateError, check_syntax

_BLOCK = re.compile(
    r"^<{5,9} ?SEARCH[^\n]*\n(?P<search>.*?)^={5,9}[ \t]*\n(?P<replace>.*?)^>{5,9} ?REPLACE[^\n]*$",
    re.MULTILINE | re.DOTALL,
)
_FENCE = re.compile(r"```(?:python|py)?[ \t]*\n(?P<body>.*?)^```", re.MULTILINE | re.DOTALL)


class EditError(ValueError):
    """The response cannot be turned into a candidate; the message says why."""


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
            raise EditError(f"block {number}: empty SEARCH section")
        try:
            start, end = _locate(source, search)
        except EditError as exc:
            raise EditError(f"block {number}: {exc}") from None
        source = source[:start] + replace + source[end:]
    return source


def apply_response(parent_source: str, response: str) -> str:
    """The child's source, or EditError.  The result must parse and still define custom_kernel."""
    blocks = parse_blocks(response)
    if blocks:
        child = apply_blocks(parent_source, blocks)
    else:
        fences = [m.group("body") for m in _FENCE.finditer(response)]
        whole = [body for body in fences if "def custom_kernel" in body]
        if not whole:
            raise EditError("no SEARCH/REPLACE blocks and no complete ```python file with custom_kernel found")
        child = max(whole, key=len)
    if child == parent_source:
        raise EditError("the edit leaves the parent unchanged")
    try:
        check_syntax(child)
    except CandidateError as exc:
        raise EditError(f"the edited file does not parse: {exc}") from None
    if not re.search(r"^def custom_kernel\(", child, re.MULTILINE):
        raise EditError("the edited file no longer defines custom_kernel at top level")
    return child
