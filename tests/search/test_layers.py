"""search/ stands in layers: a module imports only from its own room or from a room below it.

A room is a subpackage of ``search`` (``search.engine``) or a top-level module (``search.config``).
Every import counts, those inside functions and under ``TYPE_CHECKING`` too: a lazy import that runs
back up is still a circle a reader has to hold in mind.  Rooms on one layer import neither each other.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# From the top down; rooms on one line are one layer.
LAYERS: list[set[str]] = [
    {"search.__main__", "search.config_doc"},
    {"search.cli"},
    {"search.run"},  # the driver and its live screen
    {"search.evaluate", "search.inspect"},  # the pools and workers; read-only views of a run
    {"search.engine"},  # the loop, and the pool Protocol and messages it talks through
    {"search.config"},
    {"search.mutation"},  # the operators (the config checks mutation keys against them), the tuner
    {"search.numbers", "search.pipes", "search.run_dirs"},
]
LAYER_OF = {room: depth for depth, rooms in enumerate(LAYERS) for room in rooms}


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _room(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2])


def _imports(module: str, source: str, is_package: bool) -> list[tuple[int, str]]:
    package = module if is_package else module.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.append((node.lineno, target))
            if target == "search":  # ``from search import engine`` names a room
                found += [(node.lineno, f"search.{alias.name}") for alias in node.names]
    return [(line, name) for line, name in found if name.startswith("search.")]


def violations(module: str, source: str, is_package: bool = False) -> list[str]:
    """The imports of one module of ``search`` that do not run down (or stay in its room)."""
    here = _room(module)
    wrong = []
    for line, target in _imports(module, source, is_package):
        there = _room(target)
        if there == here:
            continue
        if here not in LAYER_OF or there not in LAYER_OF:
            wrong.append(f"{module}:{line}: {here} or {there} has no layer in LAYERS")
        elif LAYER_OF[there] <= LAYER_OF[here]:
            wrong.append(f"{module}:{line}: {here} imports {target}, which is not below it")
    return wrong


def _search_modules() -> list[Path]:
    return [p for p in sorted((ROOT / "search").rglob("*.py")) if _module(p) != "search"]


def test_search_imports_only_downward():
    wrong = [v for p in _search_modules() for v in violations(_module(p), p.read_text(), p.name == "__init__.py")]
    assert wrong == []


def test_every_room_has_a_layer():
    rooms = {_room(_module(p)) for p in _search_modules()}
    assert rooms <= set(LAYER_OF), sorted(rooms - set(LAYER_OF))


def test_an_upward_import_is_caught():
    assert violations("search.engine.loop", "from search.run.driver import launch\n")
    assert violations("search.engine.loop", "def f():\n    from ..evaluate import ray_pool\n")
    assert violations("search.evaluate.worker", "from search import inspect\n")  # same layer, other room
    assert violations("search.config", "import search.engine.loop\n")
    assert not violations("search.engine.loop", "from search.engine.pool import EvaluatorPool\n")
    assert not violations("search.engine.loop", "from .pool import EvaluatorPool\n")
    assert not violations("search.run.driver", "from search.evaluate.ray_pool import RayPool\n")
