"""Render docs/config.md from RunConfig itself, so the reference cannot drift from the code.

    python -m search.config_doc > docs/config.md
"""

from __future__ import annotations

import json
import re
import typing
from typing import Any

from pydantic import BaseModel

from search.config import MutationMix, RunConfig
from search.config.evaluation import DEPRECATED_EVALUATION_KEYS
from search.config.mutation import LEGACY_MUTATION_KEYS
from search.config.sections import DEPRECATED_REMOVED_IN, LLM_MODELS_EXAMPLE


def _type_name(annotation: object) -> str:
    text = str(annotation).replace("typing.", "")
    for prefix in ("<class '", "'>"):
        text = text.replace(prefix, "")
    return re.sub(r"search\.config\.(?:\w+\.)?", "", text)  # the package and its modules


def _mapping_section(model: type[MutationMix], prefix: str, lines: list[str]) -> None:
    """A mapping whose keys are registered names (the mutation operators), not fields."""
    title = prefix.rstrip(".")
    doc = " ".join(line.strip() for line in (model.__doc__ or "").strip().splitlines())
    rows = [f"| `{prefix}{name}` | `{kind}` | `{json.dumps(default)}` | {meaning} |"
            for name, kind, default, meaning in model.reference()]
    legacy = ", ".join(f"`{old}` as {' and '.join(f'`{n}`' for n in new)}" for old, new in LEGACY_MUTATION_KEYS.items())
    lines += [f"## {title}", "", doc, "", "| field | type | default | meaning |", "|---|---|---|---|", *rows, "",
              f"Deprecated (removed in {DEPRECATED_REMOVED_IN}): the old keys still load, with a warning: {legacy} "
              "(one weight for both). "
              "Old and new keys cannot be mixed in one mapping.", ""]


def _plain(default: Any) -> Any:
    """A default as YAML would write it (a list of models as a list of mappings)."""
    if isinstance(default, list):
        return [d.model_dump(mode="json") if isinstance(d, BaseModel) else d for d in default]
    return default


def _item_model(annotation: object) -> type[BaseModel] | None:
    """The model of a ``list[Model]`` field (families, llm.models), whose items have fields of their own."""
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is list and args and isinstance(args[0], type) and issubclass(args[0], BaseModel):
        return args[0]
    return None


def _doc(model: type[BaseModel]) -> str:
    return " ".join(line.strip() for line in (model.__doc__ or "").strip().split("\n\n")[0].splitlines())


def _section(model: type[BaseModel], prefix: str, lines: list[str], title: str | None = None) -> None:
    nested: list[tuple[str, type[BaseModel]]] = []
    items: list[tuple[str, type[BaseModel]]] = []
    rows = []
    if issubclass(model, MutationMix):
        _mapping_section(model, prefix, lines)
        return
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            nested.append((f"{prefix}{name}", annotation))
            continue
        item = _item_model(annotation)
        if item is not None:
            items.append((f"{prefix}{name}", item))
        default = None if field.is_required() else _plain(field.get_default(call_default_factory=True))
        shown = "required" if field.is_required() else f"`{json.dumps(default, default=str)}`"
        rows.append(f"| `{prefix}{name}` | `{_type_name(annotation)}` | {shown} | "
                    f"{field.description or ''}" + (f" (its fields: [{prefix}{name}[]](#{_anchor(prefix + name)}))"
                                                     if item is not None else "") + " |")
    if rows:
        lines += [f"## {title or prefix.rstrip('.') or 'top level'}", "", _doc(model), "",
                  "| field | type | default | meaning |", "|---|---|---|---|", *rows, ""]
    for name, item in items:
        _section(item, f"{name}[].", lines, title=f"{name}[]")
        lines += ITEM_NOTES.get(name, lambda: [])()
    for name, sub in nested:
        _section(sub, f"{name}.", lines)


def _anchor(name: str) -> str:
    """GitHub's anchor of the heading ``name[]``."""
    return re.sub(r"[^a-z0-9_-]", "", name.lower().replace(" ", "-"))


def _registered_families() -> list[str]:
    from kernels.families import FAMILIES

    rows = [f"| `{f.name}` | {f.language} | {f.n_range[0]}" + (" and up" if f.n_range[1] >= 2 ** 20 else
                                                                    f"..{f.n_range[1]}") + " | "
            f"{'no (CUDA C++ needs a GPU)' if f.needs_cuda else 'yes (Triton interpreter)'} |"
            for f in FAMILIES.values() if not f.baseline]
    return ["Registered families (`kernels/families/__init__.py`; `torch_geqrf`, the reference, is always in "
            "the run):", "", "| name | kernels in | meant for n | runs on a CPU |", "|---|---|---|---|", *rows, ""]


def _llm_models_example() -> list[str]:
    return ["With prices, `budget.max_llm_cost_usd` can stop the spending; every call's tokens are priced "
            "by its model:", "", "```yaml", *LLM_MODELS_EXAMPLE.rstrip().splitlines(), "```", ""]


ITEM_NOTES = {"families": _registered_families, "llm.models": _llm_models_example}


def render() -> str:
    lines = ["# Run configuration reference", "",
             "Generated from `search/config/` by `python -m search.config_doc`; a test keeps it current.",
             "A run config is YAML; every key is optional; unknown keys are errors that name the field and the file.",
             "Examples: `runs/smoke.yaml`, `runs/h200.yaml`, `runs/multi-gpu.yaml`.", ""]
    _section(RunConfig, "", lines)
    lines += ["## Deprecated keys", "",
              f"Still accepted (with a warning) and moved to their new place until {DEPRECATED_REMOVED_IN}, which "
              "removes them; a key given both ways is an error.", "",
              "| old key | use instead |", "|---|---|",
              *(f"| `evaluation.{old}` | `evaluation.{section}.{field}` |"
                for old, (section, field) in DEPRECATED_EVALUATION_KEYS.items()), ""]
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    print(render(), end="")
