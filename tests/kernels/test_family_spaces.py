"""The families' spaces, built from their files' SPACE blocks and the registry's rules, accept and
reject what the hand-written pydantic classes they replaced did (tests/kernels/family_spaces.json:
each space's values and defaults, the verdict on 200 seeded assignments of its values, and three
seeded samples).

A space changed on purpose changes this record too: rewrite it with
``python -m tests.kernels.test_family_spaces`` and read its diff.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from kernels.families import FAMILIES

RECORD = Path(__file__).with_name("family_spaces.json")
ASSIGNMENTS = 200
SAMPLES = 3


def _assignments(name: str, values: dict[str, list[Any]]) -> list[dict[str, Any]]:
    out = []
    for i in range(ASSIGNMENTS):
        rng = random.Random(f"{name}-{i}")
        out.append({key: rng.choice(choices) for key, choices in values.items()})
    return out


def _verdict(space: Any, assignment: dict[str, Any]) -> str:
    try:
        space(**assignment)
    except ValidationError as exc:
        return "; ".join(e["msg"] for e in exc.errors())
    return "ok"


def describe(name: str) -> dict[str, Any]:
    """What the record holds of one family, from its space as built today."""
    space = FAMILIES[name].space
    values = {key: list(dim.values) for key, dim in space.dimensions().items()}
    rejections: list[str] = []
    verdicts = []
    for assignment in _assignments(name, values):
        verdict = _verdict(space, assignment)
        if verdict != "ok" and verdict not in rejections:
            rejections.append(verdict)
        verdicts.append(0 if verdict == "ok" else rejections.index(verdict) + 1)
    samples = [list(space.sample(random.Random(s)).as_params().values()) for s in range(SAMPLES)] if values else []
    return {"values": values, "defaults": space().as_params(), "rejections": rejections, "verdicts": verdicts,
            "samples": samples}


RECORDED = json.loads(RECORD.read_text(encoding="utf-8"))


def test_the_record_covers_every_family():
    assert set(RECORDED) == set(FAMILIES)


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_a_space_built_from_its_file_is_the_recorded_one(name):
    recorded, now = RECORDED[name], describe(name)
    assert now["values"] == recorded["values"]  # the same keys, values and order
    assert now["defaults"] == recorded["defaults"]
    rejections = [""] + recorded["rejections"]
    for assignment, was, verdict in zip(_assignments(name, recorded["values"]), recorded["verdicts"],
                                        now["verdicts"]):
        got = "ok" if verdict == 0 else now["rejections"][verdict - 1]
        assert got == ("ok" if was == 0 else rejections[was]), assignment
    assert now["samples"] == recorded["samples"]


def _write() -> None:
    """The record as it is today: a family a block, an entry a line."""
    blocks = []
    for name in FAMILIES:
        entries = ",\n".join(f"  {json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}"
                             for key, value in describe(name).items())
        blocks.append(f" {json.dumps(name)}: {{\n{entries}\n }}")
    RECORD.write_text("{\n" + ",\n".join(blocks) + "\n}\n", encoding="utf-8")


if __name__ == "__main__":
    _write()
    sys.exit(0)
