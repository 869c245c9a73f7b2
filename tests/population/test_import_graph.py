"""population/ is pure data and persistence: importing it must not pull in the heavy stack."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import population

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = {"torch", "ray", "optuna", "triton", "numpy", "kernels", "search"}


def test_no_module_of_population_imports_the_heavy_stack() -> None:
    modules = sorted(m.name for m in pkgutil.iter_modules(population.__path__, "population."))
    assert len(modules) >= 10  # the listing itself must find the package's modules
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {sorted(FORBIDDEN)!r})\n"
        "print('FORBIDDEN', bad)\n"
        "sys.exit(1 if bad else 0)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "FORBIDDEN []" in proc.stdout
