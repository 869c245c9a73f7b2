"""Registered QR families, one line each.

A family is a line of descent: one standalone candidate file in ``files/``
(``custom_kernel(A) -> (H, tau)``, torch and triton only) whose docstring
describes it, whose PARAMS block holds its knobs and whose SPACE block the
values a tuner may give them (:mod:`kernels.families.registered` reads them).
The search tunes a family inside its space and mutates its file.

    >>> fam = get_family("blocked_wy")
    >>> fam.default_params()                      # its typed space, at the file's PARAMS
    >>> fam.render({"bn": 128, **...})            # validated, then rendered
    >>> fam.source()                              # the file as committed
"""

from __future__ import annotations

from kernels.families import rules
from kernels.families.registered import FAMILIES_DIR, RegisteredFamily, family

__all__ = ["BASELINE_PATH", "FAMILIES", "FAMILIES_DIR", "RegisteredFamily", "get_family"]

BASELINE_PATH = FAMILIES_DIR / "torch_geqrf.py"

_FAMILY_LIST = (
    family("torch_geqrf", n_range=(1, 1 << 30), language="torch", baseline=True),
    family("householder_unblocked", n_range=(1, 128)),
    family("blocked_wy", n_range=(128, 512), rules=[rules.blocked_wy_fits_one_sm]),
    family("lookahead_split", n_range=(352, 1 << 30), rules=[rules.lookahead_split_fits_one_sm]),
    family("cuda_onchip", n_range=(1, 192), language="cuda"),
    family("cuda_blocked", n_range=(256, 4096), language="cuda", rules=[rules.cuda_blocked_blocks_hold_whole_panels]),
)

FAMILIES: dict[str, RegisteredFamily] = {f.name: f for f in _FAMILY_LIST}


def get_family(name: str) -> RegisteredFamily:
    try:
        return FAMILIES[name]
    except KeyError:
        raise KeyError(f"unknown family {name!r}; registered families: {', '.join(FAMILIES)}") from None
