"""Tunable parameters: the PARAMS block of a candidate file and typed spaces.

A family's candidate file carries its knobs as a literal dict between two
marker comments::

    # qrsearch: params
    PARAMS = {"panel": 32, "num_warps": 8}
    # qrsearch: end params

The tuner rewrites only that block (:func:`render_params`), so an LLM-edited
file keeps its knobs, and :func:`structure_fingerprint` hashes everything but
the block's values: two files that differ only in parameters share a
structure.  A family's space is a :class:`ParamSpace` pydantic model whose
fields carry a dimension (:class:`Choice`, :class:`IntRange`,
:class:`FloatRange`, or a ``Literal``) — the space is data a tuner can read.
"""

from __future__ import annotations

import ast
import hashlib
import json
import math
import random
import re
import typing
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Mapping, Union

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

PARAMS_BEGIN = "# qrsearch: params"
PARAMS_END = "# qrsearch: end params"
_BLOCK = re.compile(
    rf"^{re.escape(PARAMS_BEGIN)}[ \t]*\n(?P<body>.*?)^{re.escape(PARAMS_END)}[ \t]*$",
    re.MULTILINE | re.DOTALL,
)


class ParamsError(ValueError):
    """A PARAMS block is missing, malformed or holds values a space rejects."""


@dataclass(frozen=True)
class Choice:
    values: tuple[Any, ...]

    def __init__(self, *values: Any) -> None:
        if not values:
            raise ValueError("Choice needs at least one value")
        object.__setattr__(self, "values", tuple(values))

    def contains(self, value: Any) -> bool:
        return any(value == v and type(value) is type(v) for v in self.values)

    def sample(self, rng: random.Random) -> Any:
        return rng.choice(self.values)


@dataclass(frozen=True)
class IntRange:
    low: int
    high: int
    step: int = 1
    log: bool = False

    def contains(self, value: Any) -> bool:
        return (
            isinstance(value, int)
            and not isinstance(value, bool)
            and self.low <= value <= self.high
            and (value - self.low) % self.step == 0
        )

    def sample(self, rng: random.Random) -> int:
        if self.log:
            x = math.exp(rng.uniform(math.log(self.low), math.log(self.high)))
            k = round((x - self.low) / self.step)
        else:
            k = rng.randint(0, (self.high - self.low) // self.step)
        return min(self.high, self.low + k * self.step)


@dataclass(frozen=True)
class FloatRange:
    low: float
    high: float
    log: bool = False

    def contains(self, value: Any) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and self.low <= value <= self.high

    def sample(self, rng: random.Random) -> float:
        if self.log:
            return math.exp(rng.uniform(math.log(self.low), math.log(self.high)))
        return rng.uniform(self.low, self.high)


Dimension = Union[Choice, IntRange, FloatRange]


class ParamSpace(BaseModel):
    """Base class of a family's parameter space; subclasses declare fields with
    defaults that are valid for every n, and cross-field rules as validators."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    max_sample_tries: ClassVar[int] = 200

    @classmethod
    def dimensions(cls) -> dict[str, Dimension]:
        dims: dict[str, Dimension] = {}
        for name, field in cls.model_fields.items():
            found = [m for m in field.metadata if isinstance(m, (Choice, IntRange, FloatRange))]
            if found:
                dims[name] = found[0]
            elif typing.get_origin(field.annotation) is Literal:
                dims[name] = Choice(*typing.get_args(field.annotation))
            elif field.annotation is bool:
                dims[name] = Choice(False, True)
            else:
                raise TypeError(f"{cls.__name__}.{name} has no dimension (Choice, IntRange, FloatRange or Literal)")
        return dims

    @model_validator(mode="after")
    def _values_in_dimensions(self) -> "ParamSpace":
        for name, dim in type(self).dimensions().items():
            value = getattr(self, name)
            if not dim.contains(value):
                raise ValueError(f"{name}={value!r} is outside its dimension {dim}")
        return self

    @classmethod
    def sample(cls, rng: random.Random) -> "ParamSpace":
        """A random valid assignment (rejection sampling against cross-field rules)."""
        dims = cls.dimensions()
        last: Exception | None = None
        for _ in range(cls.max_sample_tries):
            try:
                return cls(**{name: dim.sample(rng) for name, dim in dims.items()})
            except ValidationError as exc:
                last = exc
        raise ParamsError(f"could not sample a valid {cls.__name__} in {cls.max_sample_tries} tries: {last}")

    def as_params(self) -> dict[str, Any]:
        return self.model_dump()


def _block(source: str) -> re.Match[str]:
    match = _BLOCK.search(source)
    if match is None:
        raise ParamsError(f"no '{PARAMS_BEGIN}' ... '{PARAMS_END}' block in the source")
    return match


def read_params(source: str) -> dict[str, Any]:
    """The literal dict in the PARAMS block."""
    body = _block(source).group("body")
    try:
        tree = ast.parse(body)
    except SyntaxError as exc:
        raise ParamsError(f"PARAMS block does not parse: {exc.msg}") from None
    if (
        len(tree.body) != 1
        or not isinstance(tree.body[0], ast.Assign)
        or [getattr(t, "id", None) for t in tree.body[0].targets] != ["PARAMS"]
    ):
        raise ParamsError("PARAMS block must hold exactly one assignment 'PARAMS = {...}'")
    try:
        value = ast.literal_eval(tree.body[0].value)
    except ValueError:
        raise ParamsError("PARAMS must be a literal dict (numbers, strings, booleans)") from None
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise ParamsError("PARAMS must be a dict with string keys")
    return value


def _literal(value: Any) -> str:
    # Double-quoted strings, like the hand-written blocks in the family files.
    return json.dumps(value) if isinstance(value, str) else repr(value)


def format_params(params: Mapping[str, Any]) -> str:
    lines = ["PARAMS = {"]
    lines += [f"    {_literal(key)}: {_literal(value)}," for key, value in params.items()]
    lines.append("}")
    return "\n".join(lines) + "\n"


def render_params(source: str, params: Mapping[str, Any]) -> str:
    """Return ``source`` with its PARAMS block replaced by ``params`` (keys must match)."""
    match = _block(source)
    current = read_params(source)
    if set(current) != set(params):
        missing, extra = set(current) - set(params), set(params) - set(current)
        raise ParamsError(f"parameter keys differ from the file's: missing {sorted(missing)}, unknown {sorted(extra)}")
    ordered = {key: params[key] for key in current}
    return source[: match.start("body")] + format_params(ordered) + source[match.end("body"):]


def structure_fingerprint(source: str) -> str:
    """A hash of the code that ignores formatting, comments and PARAMS values.

    Two files that differ only in their parameter values share a fingerprint;
    a new knob (a new key) or any code change makes a new structure.
    """
    match = _BLOCK.search(source)
    if match is not None:
        try:
            keys = tuple(read_params(source))
        except ParamsError:
            return _fingerprint(source)
        # Outside its PARAMS block a tuner's child is its parent's text, and the block's values do
        # not count: parse the file once per (text around the block, keys), not once per child
        # (a family file parses and dumps in about 10 ms; the search renders one per proposal).
        return _skeleton_fingerprint(source[: match.start("body")], source[match.end("body"):], keys, source)
    return _fingerprint(source)


_SKELETONS: dict[tuple[str, str, tuple[str, ...]], str] = {}
_SKELETONS_KEPT = 64


def _skeleton_fingerprint(head: str, tail: str, keys: tuple[str, ...], source: str) -> str:
    key = (head, tail, keys)
    found = _SKELETONS.get(key)
    if found is None:
        found = _fingerprint(source)
        if len(_SKELETONS) >= _SKELETONS_KEPT:
            _SKELETONS.pop(next(iter(_SKELETONS)))
        _SKELETONS[key] = found
    return found


def _fingerprint(source: str) -> str:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return "raw-" + hashlib.sha256(source.encode()).hexdigest()[:16]
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and [getattr(t, "id", None) for t in node.targets] == ["PARAMS"]
            and isinstance(node.value, ast.Dict)
        ):
            node.value.values = [ast.Constant(value=None) for _ in node.value.values]
    return hashlib.sha256(ast.dump(tree, include_attributes=False).encode()).hexdigest()[:16]
