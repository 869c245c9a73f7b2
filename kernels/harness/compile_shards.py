"""Splitting one candidate's compiles over several processes: which launches a shard compiles.

A family can compile a dozen kernels for one n (lookahead_split: one variant per panel
height, split or not, first panel or not), and one process compiles them one after
another: that latency, not the CPU time, is what an evaluation waits for.  Shard ``i`` of
``count`` runs the same calls as every other shard (the launches are intercepted, so that
costs nothing) and compiles only the kernels it owns: the distinct launch signatures
(:func:`launch_signature`) in order of first appearance, round robin.

The signature approximates Triton's specialisation key (the kernel, its constexprs and
launch options by value, ints by the properties Triton specialises on, pointers by dtype
and 16-byte alignment).  Getting it wrong never loses a kernel: every launch runs in
exactly one shard, so every kernel is compiled somewhere; a signature coarser than the key
only unbalances the shards, a finer one may compile a kernel twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Hashable, Mapping, Sequence

_INT32 = range(-(2 ** 31), 2 ** 31)


def _argument(value: Any, constexpr: bool, specialised: bool) -> Hashable:
    if constexpr:
        return ("c", repr(value))
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, int):
        if not specialised:
            return ("i", value in _INT32)
        return ("i", value in _INT32, value == 1, value % 16 == 0)
    if isinstance(value, float):
        return ("f",)
    if hasattr(value, "data_ptr"):
        return ("p", str(getattr(value, "dtype", "")), int(value.data_ptr()) % 16 == 0)
    if isinstance(value, tuple):
        return ("t", tuple(_argument(v, False, specialised) for v in value))
    if value is None or isinstance(value, str):
        return ("v", value)
    return ("o", type(value).__name__)


def launch_signature(fn: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Hashable:
    """What tells one compiled variant of ``fn`` from another, as far as a launch shows it."""
    names = list(getattr(fn, "arg_names", []) or [])
    constexprs = set(getattr(fn, "constexprs", []) or [])
    unspecialised = set()
    for item in getattr(fn, "do_not_specialize", []) or []:
        unspecialised.add(names.index(item) if isinstance(item, str) and item in names else item)
    inner = getattr(fn, "fn", fn)
    where = (getattr(inner, "__module__", ""), getattr(inner, "__qualname__", repr(inner)))
    positional = tuple(_argument(a, i in constexprs, i not in unspecialised) for i, a in enumerate(args))
    named: list[tuple[str, Hashable]] = []
    for key in sorted(kwargs):
        index = names.index(key) if key in names else None
        if index is None:  # a launch option (num_warps, num_stages, maxnreg, ...)
            named.append((key, ("opt", repr(kwargs[key]))))
        else:
            named.append((key, _argument(kwargs[key], index in constexprs, index not in unspecialised)))
    return (where, positional, tuple(named))


@dataclass
class Shard:
    """Shard ``index`` of ``count``: :meth:`owns` says whether this process compiles a launch."""

    index: int = 0
    count: int = 1
    _seen: dict[Hashable, int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.count < 1 or not 0 <= self.index < self.count:
            raise ValueError(f"bad shard {self.index}/{self.count}: expected 0 <= index < count")

    def owns(self, fn: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> bool:
        if self.count == 1:
            return True
        ordinal = self._seen.setdefault(launch_signature(fn, args, kwargs), len(self._seen))
        return ordinal % self.count == self.index

    @property
    def signatures_seen(self) -> int:
        return len(self._seen)


def parse_shard(text: str) -> Shard:
    """``"I/N"`` (shard I of N, I from 0)."""
    index, _, count = text.partition("/")
    if not (index.isdigit() and count.isdigit()):
        raise ValueError(f"bad shard {text!r}: expected I/N, e.g. 0/4")
    return Shard(int(index), int(count))
