"""Checks shared by every command's options, so that all of them validate the same way (a
usage error, exit 2, one line naming the option) — the commands other modules add included."""

from __future__ import annotations

from typing import Optional, TypeVar

import typer

Number = TypeVar("Number", int, float)


def positive(value: Optional[Number]) -> Optional[Number]:
    """A count, a time or a limit that must be greater than zero (None: not given)."""
    if value is not None and value <= 0:
        raise typer.BadParameter(f"must be greater than 0, not {value:g}")
    return value


def non_negative(value: Optional[Number]) -> Optional[Number]:
    """A count that may be zero (None: not given)."""
    if value is not None and value < 0:
        raise typer.BadParameter(f"must be 0 or more, not {value:g}")
    return value


def cpu_set(value: Optional[str]) -> Optional[str]:
    """A CPU list such as ``0,1`` or ``0-3,8`` whose CPUs this process may run on (None: not given).
    The text is kept; :func:`parse_cpus` turns it into the set."""
    if value is not None:
        parse_cpus(value)
    return value


def parse_cpus(text: str) -> frozenset[int]:
    import os

    cpus: set[int] = set()
    for part in (p.strip() for p in text.split(",")):
        first, sep, last = part.partition("-")
        if not first.isdigit() or (sep and not last.isdigit()):
            raise typer.BadParameter(f"not a CPU list like 0,1 or 0-3: {text!r}")
        lo, hi = int(first), int(last) if sep else int(first)
        if hi < lo:
            raise typer.BadParameter(f"empty CPU range {part!r}")
        cpus.update(range(lo, hi + 1))
    allowed = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else cpus
    missing = sorted(cpus - set(allowed))
    if missing:
        raise typer.BadParameter(f"CPUs {missing} are not available to this process (it may use {sorted(allowed)})")
    return frozenset(cpus)
