"""Seeded random generators whose state can be written to JSON and read back exactly."""

from __future__ import annotations

import base64
import hashlib
import random
import struct
from typing import Any

_MT_WORDS = 624  # Mersenne Twister state words; the 625th entry is the position.


def derived_rng(seed: int, name: str) -> random.Random:
    """An independent stream per name, stable across processes and Python runs.

    ``hash()`` of a str is salted per process, so derive the integer seed from sha256.
    """
    digest = hashlib.sha256(f"{seed}/{name}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def rng_state_to_json(rng: random.Random) -> dict[str, Any]:
    """``getstate()`` packed compactly (about 3.4 kB) so it can be saved on every commit."""
    version, internal, gauss = rng.getstate()
    words, pos = internal[:_MT_WORDS], internal[_MT_WORDS]
    packed = base64.b64encode(struct.pack(f"<{_MT_WORDS}I", *words)).decode("ascii")
    return {"version": version, "mt": packed, "pos": pos, "gauss": gauss}


def rng_state_from_json(data: dict[str, Any]) -> tuple[Any, ...]:
    words = struct.unpack(f"<{_MT_WORDS}I", base64.b64decode(data["mt"]))
    return (data["version"], (*words, int(data["pos"])), data["gauss"])


def rng_from_json(data: dict[str, Any]) -> random.Random:
    rng = random.Random()
    rng.setstate(rng_state_from_json(data))
    return rng
