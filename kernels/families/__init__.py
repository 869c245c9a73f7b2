"""Registered QR families: candidate files with typed parameter spaces."""

from __future__ import annotations

from pathlib import Path

FAMILIES_DIR = Path(__file__).resolve().parent
BASELINE_PATH = FAMILIES_DIR / "torch_geqrf.py"
