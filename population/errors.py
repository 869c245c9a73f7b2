"""Errors raised by the population package.

Store errors always carry the path of the file they are about, so that a user
looking at a failed resume knows which run is damaged without reading a trace.
"""

from __future__ import annotations

from pathlib import Path


class PopulationError(Exception):
    """A request that contradicts the population's rules (bad family, bad transition)."""


class InvalidTransition(PopulationError):
    """A lifecycle change that the state machine does not allow."""


class RunStoreError(Exception):
    """Base of every error about a run store file."""

    def __init__(self, path: Path | str, message: str) -> None:
        self.path = Path(path)
        super().__init__(f"{self.path}: {message}")


class StoreNotFound(RunStoreError):
    """No run store exists at the given place."""


class StoreExists(RunStoreError):
    """``create`` was asked to make a store where one already exists."""


class StoreCorrupt(RunStoreError):
    """The file is not a readable SQLite database, or fails its integrity check."""


class StoreForeign(RunStoreError):
    """The file is a valid SQLite database, but not a qrsearch run store."""


class StoreTooNew(RunStoreError):
    """The store was written by a newer schema than this code understands."""


class StoreTooOld(RunStoreError):
    """The store was written by an older schema that this code cannot read."""


class StoreLocked(RunStoreError):
    """Another process already holds this run open for writing."""


class StoreReadOnly(RunStoreError):
    """A write was attempted through a store opened with ``readonly=True``."""
