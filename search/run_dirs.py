"""Where runs live: a run directory holds ``run.sqlite``; a folder of runs holds run
directories and ``latest``, a link to the run launched last there (so ``qrsearch status
runs/latest`` needs no timestamped name).  No torch, Ray or Optuna here."""

from __future__ import annotations

import os
from pathlib import Path

from population.store_schema import DB_NAME

LATEST = "latest"


def is_run(path: Path) -> bool:
    return (path / DB_NAME).is_file()


def runs_in(folder: Path) -> list[Path]:
    """The run directories directly inside ``folder``, oldest first (``latest`` is a pointer, not a run)."""
    if not folder.is_dir():
        return []
    found = [p for p in folder.iterdir() if p.name != LATEST and p.is_dir() and is_run(p)]
    return sorted(found, key=lambda p: ((p / DB_NAME).stat().st_mtime, p.name))


def point_latest(run_dir: Path) -> Path | None:
    """Make ``<runs-dir>/latest`` a relative link to ``run_dir``, replaced atomically; None where that
    cannot be done (no symlinks on this file system, or something other than a link is named latest)."""
    link = run_dir.parent / LATEST
    if link.exists() and not link.is_symlink():
        return None
    tmp = run_dir.parent / f".{LATEST}.{os.getpid()}"
    try:
        if tmp.is_symlink():
            tmp.unlink()
        tmp.symlink_to(run_dir.name, target_is_directory=True)
        os.replace(tmp, link)
    except OSError:
        return None
    return link
