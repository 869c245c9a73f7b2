"""A static screen for candidate source, applied before anything runs.

Candidates run in the same process as the checker (their outputs are CUDA
tensors), so a candidate could try to win by changing the checker or the
clock instead of computing a QR: patching torch functions, reaching into
``kernels``, walking the interpreter's frames, or writing to the harness's
result pipe.  None of that is needed to compute a QR, so the screen rejects
the source outright.  A runtime tamper check (see ``child.py``) backs it up.

This stops accidental and casual cheating by generated code; it is not a
sandbox against code written to escape one (CUDA C++ through load_inline can
still do anything), which is why candidates also run in a child process
with no secrets in its environment.
"""

from __future__ import annotations

import ast
import functools

_FORBIDDEN_MODULES = frozenset(
    {
        "kernels", "search", "population", "gc", "inspect", "ctypes", "builtins", "importlib",
        "socket", "subprocess", "multiprocessing", "threading", "signal", "pty", "http", "urllib",
        "requests", "shutil", "atexit", "faulthandler", "resource", "tracemalloc",
    }
)
_FORBIDDEN_CALLS = frozenset(
    {"eval", "exec", "compile", "__import__", "globals", "locals", "vars", "setattr", "delattr", "breakpoint"}
)
_FORBIDDEN_ATTRIBUTES = frozenset(
    {
        "modules", "_getframe", "settrace", "setprofile", "__globals__", "__builtins__", "__code__",
        "__subclasses__", "f_back", "f_globals", "f_locals", "system", "popen", "fork", "kill", "killpg",
        "fdopen", "dup2", "execv", "execve", "spawnv", "write", "getppid",
        # Global numerics switches change what the checker computes, too.
        "set_float32_matmul_precision", "allow_tf32", "allow_fp16_reduced_precision_reduction",
    }
)


def _root_name(node: ast.expr) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def screen_source(source: str) -> list[str]:
    """Problems found in ``source`` (empty when it may run).  Unparseable source
    is left to the loader, which reports the syntax error.

    Each distinct source is parsed once per process (an evaluation calls the harness for its
    verify groups, its screen and its bench, with the same file)."""
    return list(_screened(source))


@functools.lru_cache(maxsize=256)
def _screened(source: str) -> tuple[str, ...]:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return ()
    imported: set[str] = set()
    problems: list[str] = []

    def flag(node: ast.AST, what: str) -> None:
        problems.append(f"line {getattr(node, 'lineno', '?')}: {what}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                imported.add(alias.asname or top)
                if top in _FORBIDDEN_MODULES:
                    flag(node, f"imports {alias.name}")
        elif isinstance(node, ast.ImportFrom):
            top = (node.module or "").split(".")[0]
            if top in _FORBIDDEN_MODULES or node.level:
                flag(node, f"imports from {node.module or '.'}")
            for alias in node.names:
                imported.add(alias.asname or alias.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FORBIDDEN_CALLS:
            flag(node, f"calls {node.func.id}()")
        elif isinstance(node, ast.Attribute) and node.attr in _FORBIDDEN_ATTRIBUTES:
            flag(node, f"uses .{node.attr}")
        elif isinstance(node, ast.Name) and node.id in ("__builtins__", "__loader__", "__spec__"):
            flag(node, f"uses {node.id}")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute) and _root_name(target) in imported:
                    flag(node, f"assigns to {ast.unparse(target)} (patching a library)")
    return tuple(dict.fromkeys(problems))
