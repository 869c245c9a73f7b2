"""A Ray of a test's own for a driver it starts in a subprocess and kills: the driver's local Ray
lives under a temp dir of its own (``RAY_TMPDIR``), and only the processes under that dir are
reaped afterwards.  ``ray stop --force`` would also stop every other Ray on the machine (other
tests, other people's runs, a loopback cluster started beside this one)."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
from pathlib import Path

from search.evaluate.simulated.loopback import _pids_matching, _with_descendants


class OwnRay:
    def __init__(self) -> None:
        # Short, under /tmp: Ray's socket paths live below it and have a length limit.
        self.temp = Path(tempfile.mkdtemp(prefix="qrt", dir="/tmp"))

    def env(self, base: dict[str, str]) -> dict[str, str]:
        """``base`` with the driver's Ray placed under this test's temp dir."""
        return dict(base, RAY_TMPDIR=str(self.temp))

    def reap(self, timeout: float = 30.0) -> None:
        """Kill the processes of this Ray (those whose command line names its temp dir, and every
        process started under them) and empty the dir: a Ray started there later must not find the
        dead one's ``ray_current_cluster`` and try to join it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pids = _with_descendants(_pids_matching(str(self.temp)))
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.2)
        shutil.rmtree(self.temp, ignore_errors=True)
