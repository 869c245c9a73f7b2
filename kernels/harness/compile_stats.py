"""Counting Triton compiles and cache hits in one process.

Every kernel the JIT does not already hold in memory goes through
``triton.compiler.compile``, which looks the kernel up in the on-disk cache
(``TRITON_CACHE_DIR``) and either loads it (a hit) or compiles it (a miss).  It
reports each of those outcomes to ``triton.knobs.compilation.listener`` with a
``cache_hit`` flag; the counter below sits on that hook.  Launches served from
the JIT's in-memory cache never reach ``compile`` and are counted as neither.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass
class CompileCounter:
    """JIT compiles (``compiled``) and on-disk cache hits (``cache_hits``) seen in this process."""

    compiled: int = 0
    cache_hits: int = 0
    compiled_names: list[str] = field(default_factory=list)  # kernel labels (kernel_label), in order
    # Seconds each compiled kernel took (same order as compiled_names), and their sum per
    # lowering stage (ttir, ttgir, llir, ptx, cubin: where a family's compile time goes).
    compile_seconds: list[float] = field(default_factory=list)
    stage_seconds: dict[str, float] = field(default_factory=dict)
    _previous: Callable[..., Any] | None = field(default=None, repr=False)
    _listener: Callable[..., Any] | None = field(default=None, repr=False)

    @property
    def total(self) -> int:
        return self.compiled + self.cache_hits

    @property
    def hit_rate(self) -> float | None:
        return self.cache_hits / self.total if self.total else None

    def remove(self) -> None:
        """Put back the listener that was installed before this one (if this one is still active)."""
        from triton import knobs

        if self._listener is not None and knobs.compilation.listener is self._listener:
            knobs.compilation.listener = self._previous
        self._listener = None


def install_compile_counter() -> CompileCounter:
    """Start counting compiles and cache hits; an earlier listener keeps being called."""
    from triton import knobs

    counter = CompileCounter(_previous=knobs.compilation.listener)

    def listener(*, src: Any, metadata: Any, metadata_group: Any, times: Any, cache_hit: bool) -> None:
        if cache_hit:
            counter.cache_hits += 1
        else:
            counter.compiled += 1
            counter.compiled_names.append(kernel_label(src))
            counter.compile_seconds.append(_record_stages(times, counter.stage_seconds))
        if counter._previous is not None:
            counter._previous(src=src, metadata=metadata, metadata_group=metadata_group, times=times,
                              cache_hit=cache_hit)

    counter._listener = listener
    knobs.compilation.listener = listener
    return counter


def _record_stages(times: Any, stages: dict[str, float]) -> float:
    """Add one compile's per-stage seconds to ``stages``; its total seconds (0 if Triton gave none)."""
    if times is None:
        return 0.0
    parts = [("setup", getattr(times, "ir_initialization", 0)), *getattr(times, "lowering_stages", []),
             ("store", getattr(times, "store_results", 0))]
    total = 0.0
    for name, microseconds in parts:
        seconds = float(microseconds) / 1e6
        stages[str(name)] = stages.get(str(name), 0.0) + seconds
        total += seconds
    return total


def kernel_label(src: Any) -> str:
    """``name`` or ``name(CONST=value, ...)``: the kernel and the constexprs it was specialised on,
    so that a report tells one variant of a kernel from another."""
    name = str(getattr(src, "name", "?"))
    constants = getattr(src, "constants", None)
    arg_names = getattr(getattr(src, "fn", None), "arg_names", None)
    if not constants or not arg_names:
        return name
    parts = []
    for key, value in constants.items():
        index = key[0] if isinstance(key, tuple) and len(key) == 1 else None
        if isinstance(index, int) and 0 <= index < len(arg_names) and value is not None:
            parts.append(f"{arg_names[index]}={value}")
    return f"{name}({', '.join(parts)})"[:300] if parts else name
