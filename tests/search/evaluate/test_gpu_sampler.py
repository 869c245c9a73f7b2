"""The GPU-utilisation series an evaluator keeps, and the per-part attribution read from it."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from search.evaluate.gpu_sampler import GpuSampler, read_series

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tools"))


class FakeNvml:
    """NVML as pynvml spells it: rates now, and a driver buffer of timestamped samples."""

    NVML_GPU_UTILIZATION_SAMPLES = 1

    def __init__(self, buffer: list[tuple[int, int]] | None, rate: int = 40) -> None:
        self.buffer = buffer  # (µs stamp, %); None: this driver keeps no sample buffer
        self.rate = rate

    def nvmlInit(self) -> None:
        pass

    def nvmlDeviceGetHandleByIndex(self, index: int) -> str:
        return f"gpu{index}"

    def nvmlDeviceGetUtilizationRates(self, handle: str) -> SimpleNamespace:
        return SimpleNamespace(gpu=self.rate)

    def nvmlDeviceGetSamples(self, handle: str, kind: int, last_seen: int) -> tuple[int, list[SimpleNamespace]]:
        if self.buffer is None:
            raise RuntimeError("Not Supported")
        fresh = [SimpleNamespace(timeStamp=t, sampleValue=SimpleNamespace(uiVal=v)) for t, v in self.buffer if t > last_seen]
        if not fresh:
            raise RuntimeError("Not Found")
        return 0, fresh


def _stopped(nvml: FakeNvml, series: Path) -> GpuSampler:
    """A sampler without its background thread (the test drives sample_once)."""
    return GpuSampler(series=series, nvml=nvml, start=False)


def test_driver_samples_are_written_once_each_in_time_order(tmp_path: Path) -> None:
    now_us = int(time.time() * 1e6)
    nvml = FakeNvml([(now_us - 300_000, 10), (now_us - 100_000, 90)])
    sampler = _stopped(nvml, tmp_path / "gpu-util" / "gpu0.tsv")
    sampler.sample_once()
    sampler.sample_once()  # nothing new in the buffer ("Not Found"): no row repeated
    nvml.buffer.append((now_us + 50_000, 70))
    sampler.sample_once()
    series = read_series(tmp_path / "gpu-util" / "gpu0.tsv")
    assert [round(u, 2) for _, u in series] == [0.10, 0.90, 0.70]
    assert series[0][0] == pytest.approx(now_us / 1e6 - 0.3, abs=1e-3)
    assert sampler.mean() == pytest.approx(0.40)  # the mean is the rates', as every run reported it


def test_without_a_driver_buffer_the_rate_samples_make_the_series(tmp_path: Path) -> None:
    sampler = _stopped(FakeNvml(None, rate=55), tmp_path / "s.tsv")
    before = time.time()
    sampler.sample_once()
    ((stamp, util),) = read_series(tmp_path / "s.tsv")
    assert util == pytest.approx(0.55) and before - 0.001 <= stamp <= time.time() + 0.001


def test_stamps_off_the_hosts_clock_are_not_placed_in_time(tmp_path: Path) -> None:
    sampler = _stopped(FakeNvml([(123_456, 80)], rate=20), tmp_path / "s.tsv")  # µs since boot, say
    sampler.sample_once()
    ((_, util),) = read_series(tmp_path / "s.tsv")
    assert util == pytest.approx(0.20)


def test_a_torn_last_line_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "s.tsv"
    path.write_text("epoch_s\tutil_pct\n2.0\t50\n1.0\t100\n3.0\t")
    assert read_series(path) == [(1.0, 1.0), (2.0, 0.5)]


def test_no_nvml_no_sampling(tmp_path: Path) -> None:
    class Missing(FakeNvml):
        def nvmlInit(self) -> None:
            raise OSError("libnvidia-ml.so not found")

    sampler = GpuSampler(series=tmp_path / "s.tsv", nvml=Missing(None))
    assert not sampler.active and sampler.mean() is None and not (tmp_path / "s.tsv").exists()


def test_utilisation_is_attributed_to_compile_waits_families_and_gaps() -> None:
    import run_timeline

    rows = [  # an evaluation 0-4 s that waited 1 s for its compile, a gap, another 6-8 s
        {"started": 100.0, "finished": 104.0, "family": "lookahead", "stages": {"compile_wait": 1.0}},
        {"started": 106.0, "finished": 108.0, "family": "householder", "stages": {}},
    ]
    series = [(100.0 + 0.5 * i, u) for i, u in enumerate(
        [0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.5, 0.5, 0.0, 0.0, 0.0, 0.0, 0.2, 0.2, 0.2, 0.2, 0.0])]
    parts = run_timeline.gpu_attribution(rows, series)
    assert parts["compile wait"] == {"seconds": pytest.approx(1.0), "utilization": pytest.approx(0.0)}
    assert parts["lookahead"]["seconds"] == pytest.approx(3.0)
    assert parts["lookahead"]["utilization"] == pytest.approx((4 * 1.0 + 2 * 0.5) / 6)
    assert parts["between evaluations"] == {"seconds": pytest.approx(2.0), "utilization": pytest.approx(0.0)}
    assert parts["householder"]["utilization"] == pytest.approx(0.2)
    assert parts["all"]["seconds"] == pytest.approx(8.0)
    assert list(parts)[-1] == "all"


def test_utilisation_by_stage_covers_the_full_benches_of_candidates_only() -> None:
    import run_timeline

    full = {"full_bench": True, "family": "lookahead"}
    rows = [  # compile wait 0-1, verify 1-2, settle 2-3, bench job 3-5
        {**full, "started": 100.0, "finished": 105.0, "stages": {"compile_wait": 1.0, "verify": 1.0, "settle": 1.0}},
        # left out: the reference, one that went through the screen, one screened out
        {**full, "family": "torch_geqrf", "started": 105.0, "finished": 106.0, "stages": {"verify": 1.0}},
        {**full, "started": 106.0, "finished": 107.0, "stages": {"screen": 0.5, "verify": 0.5}},
        {"full_bench": False, "family": "lookahead", "started": 107.0, "finished": 108.0, "stages": {}},
    ]
    series = [(100.0 + 0.5 * i, u) for i, u in enumerate(
        [0.0, 0.0, 0.4, 0.4, 0.0, 0.0, 1.0, 1.0, 0.5, 0.5, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9])]
    stages = run_timeline.gpu_by_stage(rows, series)
    assert set(stages) == {"verify stage", "settle", "bench job"}  # no compile wait, gaps or "all"
    assert stages["verify stage"] == {"seconds": pytest.approx(1.0), "utilization": pytest.approx(0.4)}
    assert stages["settle"] == {"seconds": pytest.approx(1.0), "utilization": pytest.approx(0.0)}
    assert stages["bench job"] == {"seconds": pytest.approx(2.0), "utilization": pytest.approx(0.75)}
