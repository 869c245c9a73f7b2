"""Counting Triton compiles and cache hits in one process.

Every kernel the JIT does not already hold in memory goes through
``triton.compiler.compile``, which looks the kernel up in the on-disk cache
(``TRITON_CACHE_DIR``) and either loads it (a hit) or compiles it (a miss).  It
reports each of those outcomes to ``triton.knobs.compilation.listener`` with a
``cache_hit`` flag; the counter below sits on that hook.  Launches served from
the JIT's in-memory cache never reach ``compile`` and are counted as neither.
CUDA C++ that a candidate builds with ``load_inline`` is counted the same way
(:func:`count_extension_builds`): a build is a compile, a library already on disk a hit.
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


# Where a candidate builds CUDA C++ (torch.utils.cpp_extension.load_inline) instead of, or beside,
# Triton kernels: what its source says it uses, so that processes of other candidates never import
# cpp_extension (it pulls in setuptools) just to watch for builds.
BUILDS_CUDA_MARKER = "cpp_extension"


def builds_cuda(source: str) -> bool:
    return BUILDS_CUDA_MARKER in source


def count_extension_builds(counter: CompileCounter, launch: bool = True) -> Callable[[], None]:
    """Count ``torch.utils.cpp_extension.load_inline`` builds in ``counter`` too: a build is a
    compile (labelled ``cuda:<extension name>``, with its seconds), an extension whose library is
    already in the build directory (``TORCH_EXTENSIONS_DIR``) a cache hit.  With ``launch=False``
    (a compile-only process, which has no device) the built module's functions return None
    instead of launching.  Returns the function that undoes the patch."""
    import os
    import time

    from torch.utils import cpp_extension

    original = cpp_extension.load_inline

    def load_inline(*args: Any, **kwargs: Any) -> Any:
        name = str(kwargs.get("name", args[0] if args else "extension"))
        try:
            directory = kwargs.get("build_directory") or cpp_extension._get_build_directory(name, False)
            cached = os.path.exists(os.path.join(directory, f"{name}.so"))
        except Exception:  # a torch without the helper: count it as a build
            cached = False
        started = time.perf_counter()
        module = original(*args, **kwargs)
        if cached:
            counter.cache_hits += 1
        else:
            counter.compiled += 1
            counter.compiled_names.append(f"cuda:{name}")
            seconds = time.perf_counter() - started
            counter.compile_seconds.append(seconds)
            counter.stage_seconds["nvcc"] = counter.stage_seconds.get("nvcc", 0.0) + seconds
        return module if launch else _NoLaunch(module)

    cpp_extension.load_inline = load_inline  # type: ignore[assignment]

    def undo() -> None:
        if cpp_extension.load_inline is load_inline:
            cpp_extension.load_inline = original  # type: ignore[assignment]

    return undo


class _NoLaunch:
    """A built extension whose functions do nothing: the compile-only process has built (or
    found) the library, and there is no device to launch its kernels on."""

    def __init__(self, module: Any) -> None:
        self._module = module

    def __getattr__(self, name: str) -> Any:
        if not callable(getattr(self._module, name)):
            return getattr(self._module, name)
        return lambda *args, **kwargs: None
