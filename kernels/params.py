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

A family file declares its space beside its PARAMS, as data too, so that the
file stays a plain GPU MODE submission (torch and triton only)::

    # qrsearch: space
    SPACE = {"panel": [16, 32, 64], "num_warps": [4, 8]}
    # qrsearch: end space

Each key lists the values a tuner may give that PARAMS key; the PARAMS value is
the default.  :func:`space_model` builds the typed space from the two blocks.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import math
import random
import re
import typing
import weakref
from dataclasses import dataclass
from typing import Annotated, Any, Callable, ClassVar, Literal, Mapping, Sequence, Union

from pydantic import BaseModel, ConfigDict, ValidationError, create_model, model_validator

PARAMS_BEGIN = "# qrsearch: params"
PARAMS_END = "# qrsearch: end params"
SPACE_BEGIN = "# qrsearch: space"
SPACE_END = "# qrsearch: end space"


def _block_pattern(begin: str, end: str) -> re.Pattern[str]:
    return re.compile(rf"^{re.escape(begin)}[ \t]*\n(?P<body>.*?)^{re.escape(end)}[ \t]*$", re.MULTILINE | re.DOTALL)


_BLOCK = _block_pattern(PARAMS_BEGIN, PARAMS_END)
_SPACE_BLOCK = _block_pattern(SPACE_BEGIN, SPACE_END)


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
_DIMENSIONS: "weakref.WeakKeyDictionary[type, dict[str, Dimension]]" = weakref.WeakKeyDictionary()


class ParamSpace(BaseModel):
    """Base class of a family's parameter space; subclasses declare fields with
    defaults that are valid for every n, and cross-field rules as validators."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    max_sample_tries: ClassVar[int] = 200

    @classmethod
    def dimensions(cls) -> dict[str, Dimension]:
        # A class's fields are fixed once it is built, and the proposer asks for them per neighbour.
        cached = _DIMENSIONS.get(cls)
        if cached is None:
            cached = _DIMENSIONS[cls] = cls._read_dimensions()
        return dict(cached)

    @classmethod
    def _read_dimensions(cls) -> dict[str, Dimension]:
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


def _literal_dict(body: str, name: str) -> dict[str, Any]:
    """The literal dict that the block ``body`` assigns to ``name`` (a fresh copy: the parse of
    each block text is kept, since the search renders every child from its parent's block and
    parsing one is ~0.1 ms, 3 per evaluation at 64 GPUs)."""
    value = _parsed_literal(body, name)
    return {k: list(v) if isinstance(v, list) else v for k, v in value.items()}


@functools.lru_cache(maxsize=4096)
def _parsed_literal(body: str, name: str) -> dict[str, Any]:
    try:
        tree = ast.parse(body)
    except SyntaxError as exc:
        raise ParamsError(f"{name} block does not parse: {exc.msg}") from None
    if (
        len(tree.body) != 1
        or not isinstance(tree.body[0], ast.Assign)
        or [getattr(t, "id", None) for t in tree.body[0].targets] != [name]
    ):
        raise ParamsError(f"{name} block must hold exactly one assignment '{name} = {{...}}'")
    try:
        value = ast.literal_eval(tree.body[0].value)
    except ValueError:
        raise ParamsError(f"{name} must be a literal dict (numbers, strings, booleans)") from None
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise ParamsError(f"{name} must be a dict with string keys")
    return value


def read_params(source: str) -> dict[str, Any]:
    """The literal dict in the PARAMS block."""
    return _literal_dict(_block(source).group("body"), "PARAMS")


def read_space(source: str) -> dict[str, list[Any]]:
    """The literal dict in the SPACE block: each key's values as a non-empty list of numbers,
    strings or booleans, all of one type (``{}`` for a file without the block: no knobs)."""
    match = _SPACE_BLOCK.search(source)
    if match is None:
        return {}
    space = _literal_dict(match.group("body"), "SPACE")
    for key, values in space.items():
        if not isinstance(values, list) or not values or len({type(v) for v in values}) != 1 \
                or not isinstance(values[0], (bool, int, float, str)):
            raise ParamsError(f"SPACE[{key!r}] must be a non-empty list of values of one type, not {values!r}")
    return space


def _annotation(values: list[Any]) -> Any:
    """The field type of a dimension: ``bool`` and ``Literal`` where the type says it all, else the
    type with its :class:`Choice` (whose order is the order a sampler draws from)."""
    if isinstance(values[0], bool):
        return bool if values == [False, True] else Annotated[bool, Choice(*values)]
    if isinstance(values[0], str):
        return Literal[tuple(values)]
    return Annotated[type(values[0]), Choice(*values)]


Rule = Callable[[Mapping[str, Any]], None]


def space_model(name: str, space: Mapping[str, list[Any]], defaults: Mapping[str, Any],
                rules: Sequence[Rule] = ()) -> type[ParamSpace]:
    """The typed space of a family: a field per ``space`` key with those values, defaulting to
    ``defaults`` (its PARAMS), and ``rules`` that drop assignments the dimensions alone cannot
    (each raises ValueError with its reason)."""
    if set(space) != set(defaults):
        missing, extra = sorted(set(defaults) - set(space)), sorted(set(space) - set(defaults))
        raise ParamsError(f"{name}: SPACE and PARAMS keys differ: PARAMS keys without values {missing}, "
                          f"SPACE keys without a PARAMS value {extra}")
    fields: dict[str, Any] = {key: (_annotation(values), defaults[key]) for key, values in space.items()}
    validators: dict[str, Any] = {}
    if rules:
        def _rules(self: ParamSpace) -> ParamSpace:
            params = self.as_params()
            for rule in rules:
                rule(params)
            return self

        validators["_rules"] = model_validator(mode="after")(_rules)
    model: type[ParamSpace] = create_model(name, __base__=ParamSpace, __validators__=validators, **fields)
    return model


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


_SKELETONS: dict[tuple[bytes, tuple[str, ...]], str] = {}
# Keyed by a digest of the text around the block, not the text (about 100 KB a family file), so
# that every structure of a long run fits: with 64 kept, a run that had made more structures than
# that parsed a file per proposal again (a tenth of the driver at 6,000 evaluations).
_SKELETONS_KEPT = 4096


def _skeleton_fingerprint(head: str, tail: str, keys: tuple[str, ...], source: str) -> str:
    head_bytes = head.encode()
    digest = hashlib.blake2b(len(head_bytes).to_bytes(8, "little"), digest_size=16)
    digest.update(head_bytes)
    digest.update(tail.encode())
    key = (digest.digest(), keys)
    found = _SKELETONS.pop(key, None)  # put back last: the least recently used go first
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
