"""Repeated failures said once: the cases of a suite that failed with one message, grouped.

A candidate whose ``custom_kernel`` raises fails every case with the same text; a table of
45 identical messages hides the one thing to read.  ``verify`` and ``bench`` print such a
message once, with the number of cases and their names, and mark the table's rows.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FailureGroup:
    status: str
    message: str
    cases: tuple[str, ...]

    @property
    def label(self) -> str:
        return f"{self.status}, {len(self.cases)} cases"


def group_failures(rows: list[tuple[str, str, str]]) -> list[FailureGroup]:
    """Groups of ``(case, status, message)`` rows that share status and message, in first-seen order;
    only failures with a message count (passing rows have none)."""
    groups: dict[tuple[str, str], list[str]] = {}
    for case, status, message in rows:
        if message:
            groups.setdefault((status, message), []).append(case)
    return [FailureGroup(status, message, tuple(cases)) for (status, message), cases in groups.items()]


def repeated(groups: list[FailureGroup]) -> dict[tuple[str, str], int]:
    """``(status, message) -> footnote number`` for the messages more than one case failed with."""
    numbered = [g for g in groups if len(g.cases) > 1]
    return {(g.status, g.message): i + 1 for i, g in enumerate(numbered)}


def all_alike(groups: list[FailureGroup], total: int) -> FailureGroup | None:
    """The one group, when every one of ``total`` cases (at least two) failed the same way."""
    if total > 1 and len(groups) == 1 and len(groups[0].cases) == total:
        return groups[0]
    return None


def footnotes(groups: list[FailureGroup], shown: int = 6) -> list[str]:
    """One line per repeated message: ``[1] error in 12 cases (a, b, c, ... and 9 more): text``."""
    lines = []
    for number, group in enumerate((g for g in groups if len(g.cases) > 1), start=1):
        names = ", ".join(group.cases[:shown])
        if len(group.cases) > shown:
            names += f" and {len(group.cases) - shown} more"
        lines.append(f"[{number}] {group.status} in {len(group.cases)} cases ({names}): {group.message}")
    return lines
