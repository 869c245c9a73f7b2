"""From an LLM answer to a candidate file that can run, and its parameters.

An answer is thrown away only when its file cannot run: the edit does not apply
or there is no code (see :mod:`search.engine.edits`), a syntax error, no
``custom_kernel``, the source screen refuses it, or it reads ``PARAMS`` keys
that nothing defines.  Everything else is a candidate; its parameters are

* ``kept``: the file has a readable ``# qrsearch: params`` block (the tuner can vary it);
* ``marked``: it defines a literal ``PARAMS = {...}`` without the markers, which are added
  so that the tuner can vary it;
* ``restored``: it defines no ``PARAMS`` but its code still reads the parent's keys
  (``PARAMS["panel"]``): the parent's block is put back, and the run records that;
* ``none``: it neither defines nor reads ``PARAMS`` (a GPU MODE file as written): a new
  structure with an empty parameter space, evaluated like any other; a later edit may add knobs.
  A file whose block is there but unreadable (e.g. ``PARAMS = dict(...)``) runs as well and
  gets an empty space too.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from kernels.harness.screen import screen_source
from kernels.params import PARAMS_BEGIN, PARAMS_END, ParamsError, read_params
from search.engine.edits import EditError, apply_response

SCREEN = "screen"
UNDEFINED_PARAMS = "undefined-params"

KEPT, MARKED, RESTORED, NONE = "kept", "marked", "restored", "none"


@dataclass(frozen=True)
class ChildFile:
    source: str
    params: dict[str, Any]
    params_origin: str  # KEPT, MARKED, RESTORED or NONE


def child_file(parent_source: str, response: str) -> ChildFile:
    """The candidate an answer makes of ``parent_source``, or EditError (with its ``kind``)."""
    source = apply_response(parent_source, response)
    problems = screen_source(source)
    if problems:
        raise EditError("the file fails the source screen: " + "; ".join(problems[:5]), SCREEN)
    return settle_params(source, parent_source)


def settle_params(source: str, parent_source: str) -> ChildFile:
    """Give a parsed file that defines custom_kernel its parameters (see the module doc)."""
    try:
        return ChildFile(source, read_params(source), KEPT)
    except ParamsError:
        pass
    tree = ast.parse(source)
    assigned = [node for node in tree.body if _assigns_params(node)]
    if assigned:
        marked = _mark(source, assigned)
        return marked if marked is not None else ChildFile(source, {}, NONE)
    reads, strict = _params_reads(tree)
    if not reads:
        return ChildFile(source, {}, NONE)
    try:
        parent_params = read_params(parent_source)
    except ParamsError:
        raise EditError("the file reads PARAMS but defines none (and its parent has no PARAMS block "
                        "to restore): it cannot run", UNDEFINED_PARAMS) from None
    unknown = sorted(strict - set(parent_params))
    if unknown:
        raise EditError(f"the file reads PARAMS keys {unknown} that neither it nor its parent's block defines: "
                        "it cannot run", UNDEFINED_PARAMS)
    restored = _insert_block(source, tree, _block_text(parent_source))
    return ChildFile(restored, read_params(restored), RESTORED)


def _assigns_params(node: ast.stmt) -> bool:
    if isinstance(node, ast.Assign):
        return any(isinstance(t, ast.Name) and t.id == "PARAMS" for t in node.targets)
    return isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name) \
        and node.target.id == "PARAMS"


def _mark(source: str, assigned: list[ast.stmt]) -> ChildFile | None:
    """Wrap the one top-level literal ``PARAMS = {...}`` in the markers, if that makes a readable block."""
    if len(assigned) != 1 or PARAMS_BEGIN in source or PARAMS_END in source:
        return None
    node = assigned[0]
    lines = source.splitlines(keepends=True)
    first, last = node.lineno - 1, (node.end_lineno or node.lineno)
    if not lines[last - 1].endswith("\n"):
        lines[last - 1] += "\n"
    candidate = "".join(lines[:first] + [PARAMS_BEGIN + "\n"] + lines[first:last] + [PARAMS_END + "\n"]
                        + lines[last:])
    try:
        params = read_params(candidate)
        ast.parse(candidate)
    except (ParamsError, SyntaxError):
        return None  # e.g. another statement on the same line: the file runs as it is
    return ChildFile(candidate, params, MARKED)


def _params_reads(tree: ast.Module) -> tuple[bool, set[str]]:
    """Whether the code reads PARAMS at all, and the keys it reads by subscript (a missing one
    is a KeyError; ``PARAMS.get(k, default)`` is not)."""
    reads = False
    strict: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == "PARAMS" and isinstance(node.ctx, ast.Load):
            reads = True
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "PARAMS" \
                and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
            strict.add(node.slice.value)
    return reads, strict


def _block_text(parent_source: str) -> str:
    """The parent's block, markers included, exactly as it is written there."""
    start = parent_source.index(PARAMS_BEGIN)
    end = parent_source.index(PARAMS_END, start) + len(PARAMS_END)
    return parent_source[start:end] + "\n"


def _insert_block(source: str, tree: ast.Module, block: str) -> str:
    """Put the block after the module docstring and the leading imports, i.e. before the first
    statement that could read PARAMS at import time."""
    lines = source.splitlines(keepends=True)
    at = len(lines)
    for index, node in enumerate(tree.body):
        docstring = index == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) \
            and isinstance(node.value.value, str)
        if not docstring and not isinstance(node, (ast.Import, ast.ImportFrom)):
            decorators = [d.lineno for d in getattr(node, "decorator_list", [])]
            at = min([node.lineno, *decorators]) - 1
            break
    return "".join(lines[:at]) + block + "\n\n" + "".join(lines[at:])
