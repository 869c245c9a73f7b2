"""What a profiler sees in one call: kernels launched, where device time goes,
host synchronisations and memory copies.  Timing says that something got
faster; this says where the time goes, and the search feeds it to mutations."""

from __future__ import annotations

from collections import defaultdict
from typing import Callable

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from kernels.inputs import generate_input
from kernels.harness.results import KernelShare, ProfileSummary
from kernels.suites import Case

_SYNC_CALLS = ("cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "cudaMemcpy")
_TOP = 5


def profile_call(kernel: Callable[[torch.Tensor], object], case: Case, device: torch.device, seed: int
                 ) -> ProfileSummary:
    a = generate_input(case.batch, case.n, case.cond, seed, case.case, device=device)
    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
        torch.cuda.synchronize()
    with profile(activities=activities) as prof:
        kernel(a)
        if device.type == "cuda":
            torch.cuda.synchronize()
    return summarize(prof.events(), cuda=device.type == "cuda")


def summarize(events: list, cuda: bool) -> ProfileSummary:
    totals: dict[str, float] = defaultdict(float)
    calls: dict[str, int] = defaultdict(int)
    syncs = memcpys = 0
    for evt in events:
        name = evt.name
        on_device = evt.device_type == DeviceType.CUDA
        if on_device:
            if name.startswith("Memcpy"):
                memcpys += 1
            totals[name] += evt.device_time_total / 1e3
            calls[name] += 1
        elif name.startswith(_SYNC_CALLS):
            # cudaMemcpy (not ...Async) blocks the host too.
            if not name.startswith("cudaMemcpyAsync"):
                syncs += 1
        elif not cuda and evt.cpu_parent is None:
            totals[name] += evt.self_cpu_time_total / 1e3
            calls[name] += 1
    if cuda:
        syncs = max(0, syncs - 1)  # our own synchronize after the call
    device_ms = sum(totals.values())
    top = sorted(totals, key=totals.__getitem__, reverse=True)[:_TOP]
    return ProfileSummary(
        kernels_per_call=sum(calls.values()),
        device_ms=device_ms,
        top_kernels=[
            KernelShare(name=n[:120], calls=calls[n], total_ms=totals[n], share=totals[n] / device_ms if device_ms else 0.0)
            for n in top
        ],
        syncs=syncs,
        memcpys=memcpys,
    )
