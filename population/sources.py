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
    """The length of the longest common prefix: whole chunks compared while they match, then the
    first differing chunk halved until one character is left (slice comparisons are C loops; a
    character at a time through a 4 KB chunk was most of storing a child)."""
    n = min(len(a), len(b))
    i = 0
    while i < n:
        end = min(i + _CHUNK, n)
        if a[i:end] != b[i:end]:
            return _first_difference(a, b, i, end)
        i = end
    return n


def _first_difference(a: str, b: str, lo: int, hi: int) -> int:
    """The first index in [lo, hi) where ``a`` and ``b`` differ, given that they agree before ``lo``
    and differ somewhere in [lo, hi)."""
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def _common_tail(a: str, b: str, limit: int) -> int:
    """The length of the longest common suffix, at most ``limit`` (as :func:`_common_head`, from the end)."""
    la, lb = len(a), len(b)
    j = 0
    while j < limit:
        step = min(_CHUNK, limit - j)
        if a[la - j - step:la - j] != b[lb - j - step:lb - j]:
            # Suffixes of length lo agree, of length hi do not: halve until they are one apart.
            lo, hi = j, j + step
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if a[la - mid:la - lo] == b[lb - mid:lb - lo]:
                    lo = mid
                else:
                    hi = mid
            return lo
        j += step
    return limit


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
