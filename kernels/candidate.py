"""Loading candidate files.

A candidate is a Python file that defines ``custom_kernel(A) -> (H, tau)``
(the GPU MODE submission format).  Triton's ``@jit`` needs real source
files, so a candidate given as text is first written to ``cand_<hash>.py``
and then imported from that file into a fresh module.

GPU MODE's runner puts the problem's ``task.py`` beside a submission, and submissions import
its type names (``from task import input_t, output_t``).  So that such a file loads here
unchanged, a ``task`` module with qr_v2's names stands in when the file imports one and no real
``task`` module can be found.
"""

from __future__ import annotations

import hashlib
import importlib.util
import itertools
import os
import re
import sys
import tempfile
import traceback
import types
from pathlib import Path
from typing import Callable, TypedDict, TypeVar

Kernel = Callable[..., object]

_load_counter = itertools.count()


class CandidateError(Exception):
    """A candidate file cannot be used; the message is one line meant for people."""


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


def check_syntax(source: str, filename: str = "<candidate>") -> None:
    """Raise CandidateError for source that does not even parse."""
    try:
        compile(source, filename, "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise CandidateError(f"syntax error at line {exc.lineno}: {exc.msg}") from None
    except ValueError as exc:  # e.g. null bytes
        raise CandidateError(f"invalid source: {exc}") from None


def materialize(source: str, directory: str | Path) -> Path:
    """Write ``source`` to ``directory/cand_<sha256>.py`` (atomically, once) and return the path."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"cand_{source_hash(source)[:24]}.py"
    if path.exists() and path.read_text(encoding="utf-8") == source:
        return path
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".cand_", suffix=".py")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(source)
    os.replace(tmp, path)
    return path


_IMPORTS_TASK = re.compile(r"^\s*(from\s+task\s+import\b|import\s+task\b)", re.MULTILINE)


class TestSpec(TypedDict):
    """One qr_v2 test or benchmark line, as GPU MODE's task.yml writes it."""

    batch: int
    n: int
    cond: int
    seed: int
    case: str


def _provide_task_module(source: str) -> None:
    """Register qr_v2's ``task`` names if ``source`` imports ``task`` and none is importable."""
    if not _IMPORTS_TASK.search(source) or "task" in sys.modules or importlib.util.find_spec("task"):
        return
    task = types.ModuleType("task", "qr_v2's task types, standing in for GPU MODE's task.py")
    # Bounds as strings: naming torch's types needs no torch import here.
    task.input_t = TypeVar("input_t", bound="torch.Tensor")  # type: ignore[attr-defined]  # noqa: F821 (a string bound)
    task.output_t = TypeVar("output_t", bound="tuple[torch.Tensor, torch.Tensor]")  # type: ignore[attr-defined]  # noqa: F821 (a string bound)
    task.TestSpec = TestSpec  # type: ignore[attr-defined]
    sys.modules["task"] = task


def _where(exc: BaseException, path: Path) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == str(path)]
    return f" (line {frames[-1].lineno})" if frames else ""


def load_candidate(path: str | Path) -> Kernel:
    """Import ``path`` into a fresh module and return its ``custom_kernel``."""
    path = Path(path).resolve()
    if not path.is_file():
        raise CandidateError(f"no such candidate file: {path}")
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CandidateError(f"cannot read {path}: {exc}") from None
    check_syntax(source, str(path))
    _provide_task_module(source)
    name = f"qrsearch_candidate_{source_hash(source)[:12]}_{next(_load_counter)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise CandidateError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except ImportError as exc:
        del sys.modules[name]
        raise CandidateError(f"import failed: {type(exc).__name__}: {exc}{_where(exc, path)}") from None
    except BaseException as exc:  # noqa: BLE001 - a candidate may raise anything, SystemExit included
        del sys.modules[name]
        raise CandidateError(f"error while importing: {type(exc).__name__}: {exc}{_where(exc, path)}") from None
    kernel = getattr(module, "custom_kernel", None)
    if kernel is None:
        raise CandidateError(f"{path.name} defines no custom_kernel(A) function")
    if not callable(kernel):
        raise CandidateError(f"custom_kernel in {path.name} is not callable")
    return kernel
