"""Render docs/config.md from RunConfig itself, so the reference cannot drift from the code.

    python -m search.config_doc > docs/config.md
"""

from __future__ import annotations

import json
import typing

from pydantic import BaseModel

from search.config import DEPRECATED_EVALUATION_KEYS, LEGACY_MUTATION_KEYS, MutationMix, RunConfig


def _type_name(annotation: object) -> str:
    text = str(annotation).replace("typing.", "")
    for prefix in ("<class '", "'>"):
        text = text.replace(prefix, "")
    return text.replace("search.config.", "")


def _mapping_section(model: type[MutationMix], prefix: str, lines: list[str]) -> None:
    """A mapping whose keys are registered names (the mutation operators), not fields."""
    title = prefix.rstrip(".")
    doc = " ".join(line.strip() for line in (model.__doc__ or "").strip().splitlines())
    rows = [f"| `{prefix}{name}` | `{kind}` | `{json.dumps(default)}` | {meaning} |"
            for name, kind, default, meaning in model.reference()]
    legacy = ", ".join(f"`{old}` as {' and '.join(f'`{n}`' for n in new)}" for old, new in LEGACY_MUTATION_KEYS.items())
    lines += [f"## {title}", "", doc, "", "| field | type | default | meaning |", "|---|---|---|---|", *rows, "",
              f"Deprecated: the old keys still load, with a warning: {legacy} (one weight for both). "
              "Old and new keys cannot be mixed in one mapping.", ""]


def _section(model: type[BaseModel], prefix: str, lines: list[str]) -> None:
    nested: list[tuple[str, type[BaseModel]]] = []
    rows = []
    if issubclass(model, MutationMix):
        _mapping_section(model, prefix, lines)
        return
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            nested.append((f"{prefix}{name}", annotation))
            continue
        default = field.get_default(call_default_factory=True)
        if isinstance(default, list) and default and isinstance(default[0], BaseModel):
            default = [d.model_dump(mode="json") for d in default]
        rows.append(f"| `{prefix}{name}` | `{_type_name(annotation)}` | `{json.dumps(default, default=str)}` | "
                    f"{field.description or ''} |")
    if rows:
        title = prefix.rstrip(".") or "top level"
        doc = (model.__doc__ or "").strip().split("\n")[0]
        lines += [f"## {title}", "", doc, "", "| field | type | default | meaning |", "|---|---|---|---|", *rows, ""]
    for name, sub in nested:
        _section(sub, f"{name}.", lines)


def render() -> str:
    lines = ["# Run configuration reference", "",
             "Generated from `search/config.py` by `python -m search.config_doc`; a test keeps it current.",
             "A run config is YAML; every key is optional; unknown keys are errors that name the field and the file.",
             "Examples: `runs/smoke.yaml`, `runs/h200.yaml`, `runs/multi-gpu.yaml`.", ""]
    _section(RunConfig, "", lines)
    lines += ["## Deprecated keys", "",
              "Still accepted (with a warning) and moved to their new place; a key given both ways is an error.", "",
              "| old key | use instead |", "|---|---|",
              *(f"| `evaluation.{old}` | `evaluation.{section}.{field}` |"
                for old, (section, field) in DEPRECATED_EVALUATION_KEYS.items()), ""]
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    print(render(), end="")
