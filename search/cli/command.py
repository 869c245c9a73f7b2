"""How every qrsearch command shows its parameters in ``--help``: a value as one metavar
(``FILE``, ``FILES...``, ``SECONDS``, ``[auto|cpu|cuda]``), a flag as nothing.

Typer shows Python types instead (``<bool>`` beside every flag, ``<list[Path]>``,
``{file}``), which reads as noise to someone learning the tool; the README's CLI table
(``search/cli/doc.py``) reads the same metavars, so the two agree.
"""

from __future__ import annotations

from typing import Any

from typer.core import TyperCommand


def choices_of(param: Any) -> list[str]:
    """The values a choice parameter (an Enum or Literal) accepts; [] for any other."""
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is not None and getattr(descriptor, "is_choice", False):
        return [str(getattr(c, "value", c)) for c in descriptor.choices or ()]
    choices = getattr(getattr(param, "type", None), "choices", None)  # click's own Choice
    return [str(getattr(c, "value", c)) for c in choices or ()]


def metavar_of(param: Any) -> str:
    """What ``--help`` shows for ``param``: "" for a flag, the declared metavar, the choices, or the name."""
    if param.param_type_name == "option" and (getattr(param, "is_flag", False) or getattr(param, "count", False)):
        return ""
    if param.metavar:
        return str(param.metavar)
    choices = choices_of(param)
    if choices:
        return "[" + "|".join(choices) + "]"
    if param.param_type_name == "argument":
        return (param.name or "arg").upper() + ("..." if param.nargs != 1 else "")
    return max(param.opts, key=len).lstrip("-").replace("-", "_").upper()


def _settle(param: Any) -> None:
    metavar = metavar_of(param)
    param.metavar = metavar
    if param.param_type_name != "argument":
        return
    # An argument's name column already shows the metavar: no type beside it, and the usage line
    # reads FILE / [FILE] / FILES... rather than Typer's {file} and {files}....
    param.display_type_rich = lambda ctx=None: None
    param._usage_display_name = lambda: metavar if param.required else f"[{metavar}]"
    param._rich_display_name = lambda: metavar


class QrsearchCommand(TyperCommand):
    """A Typer command whose parameters (and ``--help`` itself) carry real metavars."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            _settle(param)

    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)
        for param in params:  # --help is made here, per context
            if param.metavar is None or param.param_type_name == "option" and getattr(param, "is_flag", False):
                _settle(param)
        return params
