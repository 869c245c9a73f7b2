"""The run's Optuna journal, written by its one writer in batches.

Optuna's ``JournalFileBackend`` takes a file lock, appends and fsyncs the file for every
storage operation, and re-opens the file to read back what it wrote: one ask of a 23-knob
family is about 30 operations, and a 64-GPU simulated run spent more of the driver's time
there than anywhere else.  The driver is the journal's only writer (the run's lock says so), so
this backend keeps the logs not yet read in memory, answers reads from memory, and appends to
the file in one write per :meth:`BufferedJournal.flush`.  The tuner flushes before the store
commits a child that names its trial (so the store never names a trial the file lacks) and the
loop once per step; like the run store (SQLite WAL, ``synchronous=NORMAL``) a write is not
fsynced, so a killed driver loses nothing that was flushed and a lost tell is settled from the
store on resume (:meth:`search.mutation.tuning.Tuner.reconcile`).  The file is Optuna's own
format, one JSON log per line: optuna-dashboard and a plain ``JournalFileBackend`` read it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from optuna.storages.journal import BaseJournalBackend


class BufferedJournal(BaseJournalBackend):
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.touch(exist_ok=True)
        data = self.path.read_bytes()
        complete = data[: data.rfind(b"\n") + 1]
        if len(complete) != len(data):
            # A line torn by a killed writer: never a log (Optuna skips it too); cut it so that the
            # next append starts a line of its own.
            with self.path.open("r+b") as f:
                f.truncate(len(complete))
        self._unread: list[dict[str, Any]] = [json.loads(line) for line in complete.splitlines() if line]
        self._first = 0  # the log number of _unread[0]
        self._pending: list[str] = []

    def read_logs(self, log_number_from: int) -> Iterable[dict[str, Any]]:
        if log_number_from < self._first:
            raise ValueError(f"{self.path}: logs before {self._first} were read already and are not kept")
        # Logs before log_number_from were read: the storage reads forward only, so they go.
        del self._unread[: log_number_from - self._first]
        self._first = log_number_from
        return list(self._unread)

    def append_logs(self, logs: list[dict[str, Any]]) -> None:
        self._unread.extend(logs)
        self._pending.extend(json.dumps(log, separators=(",", ":")) for log in logs)

    def flush(self) -> None:
        if not self._pending:
            return
        text = "\n".join(self._pending) + "\n"
        with self.path.open("ab") as f:
            f.write(text.encode("utf-8"))
        self._pending.clear()

    @property
    def pending(self) -> int:
        return len(self._pending)
