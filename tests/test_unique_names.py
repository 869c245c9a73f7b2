"""Guards over kernels/, population/ and search/ together: a name means one thing.

A class name defined twice (two ``Family``, two ``Attempt``) makes every import a guess at which
one is meant, and a helper defined twice (the geomean) drifts apart.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("kernels", "population", "search")


def _sources(*folders: str) -> list[Path]:
    paths = sorted(p for folder in folders for p in (ROOT / folder).rglob("*.py"))
    assert paths, f"no sources under {folders}"
    return paths


def test_every_class_name_is_unique_across_the_packages() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    for path in _sources(*PACKAGES):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.ClassDef):
                where[node.name].append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert len(where) > 50  # the walk itself found the packages' classes
    duplicates = {name: places for name, places in where.items() if len(places) > 1}
    assert duplicates == {}, f"class names defined more than once: {duplicates}"


def test_one_geomean() -> None:
    """population/outcomes.py holds the one geomean."""
    pattern = re.compile(r"^\s*def _?(geomean|gm)\(", re.M)
    found = [str(p.relative_to(ROOT)) for p in _sources(*PACKAGES)
             if pattern.search(p.read_text(encoding="utf-8"))]
    assert found == ["population/outcomes.py"]
