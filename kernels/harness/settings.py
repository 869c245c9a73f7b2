"""How a candidate is timed and how long it may take: the one home of those defaults.

``qrsearch bench``/``verify``, the harness's own defaults and the search (``evaluation.timing`` and
``evaluation.limits`` in a run config, which embed these models unchanged) all read them from here,
so a bench and a search time a kernel the same way unless told otherwise.  The defaults are the
search's: every fitness a run store holds was measured with them, and a bench that is meant to
reproduce one must measure the same way.

Pure pydantic (no torch), so the run config and the read-only commands can import it cheaply.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

# What one timed region holds: one synchronised call on a fresh input ("call"), or, as GPU MODE's
# qr_v2 eval.py times, as many fresh inputs as fit in 256 MB (at most 50) called back to back,
# the region's time divided by their count ("gpumode").
TimedRegion = Literal["call", "gpumode"]
GPUMODE_REGION_BYTES = 256 * 1024 * 1024
GPUMODE_MAX_INPUTS = 50


# A timed call that kept the host this share of its time or more (TimingStats.host_ms: its launches
# and any wait inside it for the device) depends on the host: a busy host slows it, whatever its length.
HOST_BOUND_SHARE = 0.8


def host_bound(host_ms: float | None, median_ms: float | None, share: float = HOST_BOUND_SHARE) -> bool:
    """Whether a timing record shows its call host-bound (False where host_ms was not recorded, or
    ``share`` is 0: the test is off)."""
    if share <= 0 or host_ms is None or not median_ms:
        return False
    return host_ms >= share * median_ms


class TimingPolicy(BaseModel):
    """How each benchmark case is timed: warm-up calls, then timed calls until the mean is precise."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    warmup_calls: int = Field(2, ge=0, description="verified, untimed calls on fresh inputs before the timed ones")
    min_reps: int = Field(3, ge=1, description="timed calls per case at least")
    max_reps: int = Field(50, ge=1, description="timed calls per case at most")
    target_rel_stderr: float = Field(0.01, gt=0, description="stop timing once the standard error of the mean is "
                                     "this fraction of the mean (after min_reps)")
    max_seconds: float = Field(1.0, gt=0, description="stop timing a case after this many seconds (after min_reps)")
    region: TimedRegion = Field("call", description="what one timed region holds: 'call', one synchronised call on "
                                "a fresh input (its latency, host work included); 'gpumode', as GPU MODE qr_v2's "
                                "eval.py times, as many fresh inputs as fit in 256 MB (at most 50) called back to "
                                "back, the time divided by their count (one call's host work overlaps the last "
                                "one's device work); every output is verified either way")

    def inputs_per_region(self, batch: int, n: int) -> int:
        """How many fresh batch×n×n inputs one timed region calls the kernel on."""
        if self.region == "call":
            return 1
        return max(1, min(GPUMODE_MAX_INPUTS, GPUMODE_REGION_BYTES // (batch * n * n * 4)))


class RunLimits(BaseModel):
    """Wall-clock limits the parent enforces on an evaluation child; a child past one is killed."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    case_timeout_s: float = Field(240.0, gt=0, description="limit per case (compile, verify, timing); a hang is "
                                  "killed")
    startup_timeout_s: float = Field(180.0, gt=0, description="limit for starting the child (import torch, "
                                     "initialise the device) and loading the candidate")
