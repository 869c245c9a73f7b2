"""Write a family file with some of its PARAMS overridden (the B side of an A/B, a variant to verify).

    python tools/param_variant.py FAMILY 'KEY=VALUE[,KEY=VALUE]' OUT.py
"""

from __future__ import annotations

import ast
import pathlib
import sys

from kernels.params import read_params, render_params


def main(family: str, overrides: str, out: str) -> None:
    src = pathlib.Path(f"kernels/families/files/{family}.py").read_text()
    params = read_params(src)
    for item in overrides.split(","):
        key, value = item.split("=", 1)
        if key not in params:
            sys.exit(f"{family} has no parameter {key!r}")
        try:
            params[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            params[key] = value
    path = pathlib.Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_params(src, params))


if __name__ == "__main__":
    main(*sys.argv[1:4])
