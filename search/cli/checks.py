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
