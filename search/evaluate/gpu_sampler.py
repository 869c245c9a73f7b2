"""NVML utilisation of an evaluator's GPU, sampled in the background, kept as a time series.

The mean over the actor's life is the run's "GPU utilisation" figure (``getUtilizationRates``
every ``period_s``, as every run so far reported it).  Beside it, the driver's own samples
(``nvmlDeviceGetSamples``: one every 1/6 s or so, each with its own timestamp) go to a file, so
``tools/run_timeline.py`` can say how busy the GPU was during each family's evaluations,
during compile waits and between evaluations: a mean alone cannot say where the idle time is.
Where NVML is missing (CPU machines, CI) nothing is sampled.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any, TextIO

SERIES_HEADER = "epoch_s\tutil_pct\n"


def read_series(path: Path) -> list[tuple[float, float]]:
    """(epoch seconds, utilisation 0..1) samples of a series file, in time order; bad lines skipped
    (a run killed mid-write leaves a partial last line)."""
    out: list[tuple[float, float]] = []
    for line in path.read_text().splitlines()[1:]:
        try:
            stamp, value = line.split("\t")
            out.append((float(stamp), float(value) / 100))
        except ValueError:
            continue
    out.sort()
    return out


class GpuSampler:
    """Samples this process's GPU (``CUDA_VISIBLE_DEVICES``' first) until the process ends."""

    def __init__(self, period_s: float = 0.5, series: Path | None = None, nvml: Any = None,
                 start: bool = True) -> None:
        self.samples: list[int] = []
        self.period_s = period_s
        self._series_path = series
        self._out: TextIO | None = None
        self._last_seen = 0  # NVML timestamp (µs) of the newest driver sample written
        try:
            if nvml is None:
                import pynvml  # nvidia-ml-py, present on GPU machines

                nvml = pynvml

            nvml.nvmlInit()
            visible = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]
            self._handle = nvml.nvmlDeviceGetHandleByIndex(int(visible) if visible.isdigit() else 0)
            self._nvml = nvml
        except Exception:
            self._handle = None
            return
        if start:  # tests drive sample_once themselves
            threading.Thread(target=self._run, daemon=True, name="nvml").start()

    @property
    def active(self) -> bool:
        return self._handle is not None

    def _run(self) -> None:
        while True:
            try:
                self.sample_once()
            except Exception:
                return
            time.sleep(self.period_s)

    def sample_once(self) -> None:
        """One mean sample, and the driver samples since the last call written to the series."""
        self.samples.append(int(self._nvml.nvmlDeviceGetUtilizationRates(self._handle).gpu))
        if self._series_path is None:
            return
        rows = self._driver_samples()
        if rows is None:  # no sample buffer on this driver: the mean samples stand in
            rows = [(time.time(), float(self.samples[-1]))]
        if self._out is None:
            self._series_path.parent.mkdir(parents=True, exist_ok=True)
            fresh = not self._series_path.exists()
            self._out = self._series_path.open("a")
            if fresh:
                self._out.write(SERIES_HEADER)
        self._out.writelines(f"{stamp:.3f}\t{value:g}\n" for stamp, value in rows)
        self._out.flush()

    def _driver_samples(self) -> list[tuple[float, float]] | None:
        try:
            _, samples = self._nvml.nvmlDeviceGetSamples(self._handle, self._nvml.NVML_GPU_UTILIZATION_SAMPLES,
                                                         self._last_seen)
        except Exception as exc:
            # NOT_FOUND: no new sample since the last call (not an error); anything else: unsupported.
            if "not found" in str(exc).lower():
                return []
            return None
        rows = []
        now = time.time()
        for sample in samples:
            stamp = int(sample.timeStamp)  # µs since the epoch, the host's clock
            if stamp <= self._last_seen:
                continue
            if abs(stamp / 1e6 - now) > 60:  # not the host's epoch clock: these cannot be placed in time
                return None
            self._last_seen = stamp
            rows.append((stamp / 1e6, float(sample.sampleValue.uiVal)))
        return rows

    def mean(self) -> float | None:
        return sum(self.samples) / len(self.samples) / 100 if self.samples else None
