"""Source texts in the store: each kept once, whole or as the span where it differs from a whole one.

A tuner's child is its parent's text with another PARAMS block, an LLM's child its parent's with
an edit: stored whole, a 64-GPU run wrote 57 KB a candidate (``cuda_blocked``'s file is 161 KB),
about 5 GB an hour.  A text that shares all but a small middle with its parent's *whole* text
(its base) is stored as that middle and the lengths of the shared head and tail
(``source_deltas``), with an empty ``blobs`` row that keeps its hash a key candidates can name.
Bases are always whole, so any text is one read and one join away.  Nothing here knows what a
kernel file looks like: the span is found by comparing the two texts.
"""

from __future__ import annotations

import sqlite3
from collections import OrderedDict
from dataclasses import dataclass

# A text is stored as a delta only when the part that differs is at most this share of it, and
# the text is long enough for the saving to be worth a row of its own.
MAX_MIDDLE_SHARE = 0.25
MIN_DELTA_TEXT = 4096
_CHUNK = 4096
BASES_KEPT = 64  # whole base texts a reader keeps (one per structure in use, a few hundred KB each)

DELTAS_TABLE = "source_deltas"


@dataclass(frozen=True)
class Delta:
    """``text == base[:head] + middle + base[len(base) - tail:]``."""

    base: str  # the sha256 of the whole text it is taken from
    head: int
    tail: int
    middle: str


def _common_head(a: str, b: str) -> int:
    """The length of the longest common prefix, compared a chunk at a time (slices are C loops)."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i:i + _CHUNK] == b[i:i + _CHUNK]:
        i += _CHUNK
    i = min(i, n)
    end = min(i + _CHUNK, n)
    while i < end and a[i] == b[i]:
        i += 1
    return i


def _common_tail(a: str, b: str, limit: int) -> int:
    """The length of the longest common suffix, at most ``limit``."""
    j = 0
    while j < limit:
        step = min(_CHUNK, limit - j)
        if a[len(a) - j - step:len(a) - j] != b[len(b) - j - step:len(b) - j]:
            break
        j += step
    while j < limit and a[len(a) - 1 - j] == b[len(b) - 1 - j]:
        j += 1
    return j


def delta_against(base_sha: str, base: str, text: str) -> Delta | None:
    """``text`` as a delta of the whole text ``base``, or None where storing it whole is better."""
    if len(text) < MIN_DELTA_TEXT:
        return None
    head = _common_head(base, text)
    tail = _common_tail(base, text, min(len(base), len(text)) - head)
    middle = text[head:len(text) - tail]
    if len(middle) > MAX_MIDDLE_SHARE * len(text):
        return None
    return Delta(base=base_sha, head=head, tail=tail, middle=middle)


def join(base: str, delta: Delta) -> str:
    return base[:delta.head] + delta.middle + base[len(base) - delta.tail:]


def has_deltas(conn: sqlite3.Connection) -> bool:
    """Whether the store has the deltas' table (a store of schema 1 read without migrating has not)."""
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?",
                        (DELTAS_TABLE,)).fetchone() is not None


class SourceReader:
    """Reads texts by sha256 through one connection, keeping the latest whole bases it joined."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._deltas: bool | None = None
        self._bases: OrderedDict[str, str] = OrderedDict()

    def delta(self, sha: str) -> Delta | None:
        if self._deltas is None:
            self._deltas = has_deltas(self._conn)
        if not self._deltas:
            return None
        row = self._conn.execute(f"SELECT base, head, tail, middle FROM {DELTAS_TABLE} WHERE sha256 = ?",
                                 (sha,)).fetchone()
        return None if row is None else Delta(*row)

    def whole(self, sha: str) -> str | None:
        """A text stored whole (a base), from the kept ones when it is there."""
        text = self._bases.get(sha)
        if text is not None:
            self._bases.move_to_end(sha)
            return text
        text = self._blob(sha)
        if text is None:
            return None
        self._bases[sha] = text
        if len(self._bases) > BASES_KEPT:
            self._bases.popitem(last=False)
        return text

    def base_of(self, sha: str) -> tuple[str, str] | None:
        """The whole text a new delta of ``sha``'s text should be taken from: its own, or its base."""
        delta = self.delta(sha)
        base_sha = sha if delta is None else delta.base
        text = self.whole(base_sha)
        return None if text is None else (base_sha, text)

    def text(self, sha: str) -> str | None:
        delta = self.delta(sha)
        if delta is None:  # read, not kept: most texts read are no one's base
            return self._bases.get(sha) or self._blob(sha)
        base = self.whole(delta.base)
        if base is None:
            raise KeyError(f"source {sha} is a delta of {delta.base}, which is missing")
        return join(base, delta)

    def _blob(self, sha: str) -> str | None:
        row = self._conn.execute("SELECT text FROM blobs WHERE sha256 = ?", (sha,)).fetchone()
        return None if row is None else row[0]
