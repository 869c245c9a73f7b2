"""A registered family: its file in ``files/`` and what the file says of itself.

The file is the one source of the family: its module docstring is the description (shown verbatim,
on one line, to the LLM that mutates it), its PARAMS block the knobs' defaults and its SPACE block
the values a tuner may give them (:func:`kernels.params.read_space`).  What data cannot say comes
with the registration: the sizes the family is meant for, what its kernels are written in, and the
cross-field rules of its space (:mod:`kernels.families.rules`).
"""

from __future__ import annotations

import ast
import inspect
import io
import tokenize
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Mapping, Sequence

from kernels.params import ParamSpace, Rule, read_params, read_space, render_params, space_model

FAMILIES_DIR = Path(__file__).resolve().parent / "files"

Language = Literal["triton", "torch", "cuda"]


@dataclass(frozen=True)
class RegisteredFamily:
    """One registered family: its file and typed space (``population.family.Family`` is something
    else, a family's islands and champion in a search; class names are unique across the packages).

    ``n_range`` is a hint of the sizes where the family is meant to win
    (inclusive); the file itself is correct for every n.  ``language`` is what its kernels
    are written in: ``"triton"`` and ``"torch"`` files run anywhere (Triton in the interpreter on
    CPU), ``"cuda"`` files
    build CUDA C++ with ``torch.utils.cpp_extension.load_inline`` and need nvcc and a GPU
    (without CUDA they call torch.geqrf, so a CPU-only search leaves them out).
    """

    name: str
    filename: str
    space: type[ParamSpace]
    description: str
    n_range: tuple[int, int]
    baseline: bool = False
    language: Language = "triton"

    @property
    def needs_cuda(self) -> bool:
        return self.language == "cuda"

    @property
    def path(self) -> Path:
        return FAMILIES_DIR / self.filename

    def source(self) -> str:
        return self.path.read_text(encoding="utf-8")

    def default_params(self) -> ParamSpace:
        return self.space()

    def validate(self, params: ParamSpace | Mapping[str, Any]) -> ParamSpace:
        """The assignment as this family's space (raises pydantic's ValidationError)."""
        if isinstance(params, ParamSpace):
            if not isinstance(params, self.space):
                raise TypeError(f"{self.name} takes {self.space.__name__}, got {type(params).__name__}")
            return params
        return self.space.model_validate(dict(params))

    def render(self, params: ParamSpace | Mapping[str, Any], source: str | None = None) -> str:
        """The family's file (or ``source``, e.g. a mutated descendant that kept
        the PARAMS block) with its PARAMS block set to a validated assignment."""
        return render_params(self.source() if source is None else source, self.validate(params).as_params())


def module_docstring(source: str) -> str:
    """The docstring a module's source opens with, cleaned as ``inspect`` cleans one ("" if none);
    read from its first tokens, without parsing the rest of the file."""
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.ENCODING):
            continue
        if token.type == tokenize.STRING:
            value = ast.literal_eval(token.string)
            return inspect.cleandoc(value) if isinstance(value, str) else ""
        break
    return ""


def family(name: str, n_range: tuple[int, int], language: Language = "triton", baseline: bool = False,
           rules: Sequence[Rule] = ()) -> RegisteredFamily:
    """The family whose file is ``files/<name>.py``, its space checked by ``rules`` beside its values."""
    filename = f"{name}.py"
    source = (FAMILIES_DIR / filename).read_text(encoding="utf-8")
    space = space_model("".join(part.capitalize() for part in name.split("_")) + "Space", read_space(source),
                        read_params(source), rules)
    return RegisteredFamily(name=name, filename=filename, space=space,
                            description=" ".join(module_docstring(source).split()), n_range=n_range,
                            baseline=baseline, language=language)
