"""Probe (not a test, not the product): where simulated evaluators' idle time goes at N evaluators.

    .venv/bin/python lab/scale_idle_probe.py [--evaluators 64] [--seed 1] [--virtual-minutes 3]
        [--config runs/multi-gpu.yaml] [--set SECTION.KEY=VALUE ...] [--variant reserve]

The real loop on the virtual pool (``tools/scale_quality.py``'s set-up: the driver taken as
infinitely fast), stopped after ``--virtual-minutes``.  Between two events each evaluator is in
one state: ``running`` (an evaluation in flight), ``holding`` (requests queued, none started: every
one still compiling) or ``empty`` (nothing queued).  The probe prints the time-weighted share of
each state per virtual minute and, for the holds, how many compile slots were busy and how many
compiles waited for one; then the evaluations' mean compile wait and queued time.  The last
minute drains (the stop), so read the ones before it.

``--variant`` patches the pool for a lead, not in the product (the lead once called
``anticipate`` is the product's ``--set evaluation.compile_before_need=true``):
- ``reserve``: the last free compile slot goes only to a compile expected under 2 s.
"""

from __future__ import annotations

import argparse
import collections
import heapq
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

import scale_quality  # noqa: E402
from search.evaluate.simulated import compiles, gpu, virtual_pool  # noqa: E402

QUICK_S = 2.0


def _state_counts(pool: virtual_pool.VirtualPool) -> collections.Counter[str]:
    out: collections.Counter[str] = collections.Counter()
    for ev in pool.evaluators:
        if ev.running:
            out["running"] += 1
        elif ev.queue:
            out["holding"] += 1
            slots = ev.compiles
            busy = sum(1 for t in slots._free_at if t > pool.now)
            out[f"hold: {busy} slots busy, {min(len(slots._waiting), 3)}{'+' if len(slots._waiting) >= 3 else ''} "
                f"waiting"] += 1
        else:
            out["empty"] += 1
    return out


def instrument(per_minute: dict[int, collections.Counter[str]], stages: collections.Counter[str]) -> None:
    poll = virtual_pool.VirtualPool.poll

    def timed_poll(self: virtual_pool.VirtualPool, timeout: float) -> list[Any]:
        before = self.now
        for ev in self.evaluators:
            self._fill(ev)  # the states as they stand until the clock moves
        counts = _state_counts(self)
        events = poll(self, timeout)
        for key, n in counts.items():
            per_minute[int(before // 60)][key] += n * (self.now - before)
        return events

    virtual_pool.VirtualPool.poll = timed_poll  # type: ignore[method-assign]
    outcome = gpu.GpuModel.outcome

    def counted(self: gpu.GpuModel, request: Any, verdict: Any, stage_s: dict[str, float], *args: Any) -> Any:
        if request.family != "torch_geqrf":
            stages["evaluations"] += 1
            for key in ("compile_wait", "queued", "compile_ahead"):
                stages[key] += stage_s.get(key, 0.0)
        return outcome(self, request, verdict, stage_s, *args)

    gpu.GpuModel.outcome = counted  # type: ignore[method-assign]


def reserve() -> None:
    def advance(self: compiles.CompileSlots, now: float) -> None:
        while self._waiting:
            free = sorted(t for t in self._free_at if t <= now)
            if not free:
                return
            there = [c for c in self._waiting if self._jobs[c].announced <= free[0]]
            pick = min(there or self._waiting, key=lambda c: (self._jobs[c].cost, self._jobs[c].seq))
            slot_t = free[0]
            if self._jobs[pick].cost > QUICK_S:
                if len(free) < 2:  # the last free slot: only for a quick compile
                    quick = [c for c in self._waiting if self._jobs[c].cost <= QUICK_S]
                    if not quick:
                        return
                    pick = min(quick, key=lambda c: self._jobs[c].seq)
                else:
                    slot_t = free[1]
            self._waiting.remove(pick)
            self._free_at.remove(slot_t)
            job = self._jobs[pick]
            job.finish = max(slot_t, job.announced) + job.seconds
            self._free_at.append(job.finish)
            heapq.heapify(self._free_at)

    compiles.CompileSlots._advance = advance  # type: ignore[method-assign]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--evaluators", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--virtual-minutes", type=float, default=3.0)
    ap.add_argument("--config", type=Path, default=ROOT / "runs" / "multi-gpu.yaml")
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    ap.add_argument("--variant", choices=["reserve"], default=None)
    args = ap.parse_args()

    per_minute: dict[int, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    stages: collections.Counter[str] = collections.Counter()
    instrument(per_minute, stages)
    if args.variant == "reserve":
        reserve()
    scale_quality.WITHIN = -1.0  # never "reached": the run stops on virtual time
    from search.engine.loop import SearchLoop

    run_until_done = SearchLoop.run_until_done

    def stop_on_time(self: SearchLoop, on_tick: Any = None) -> None:
        def tick() -> None:
            if on_tick is not None:
                on_tick()
            if self.pool.now > args.virtual_minutes * 60:  # type: ignore[attr-defined]
                self.request_stop("probe: virtual time")

        run_until_done(self, on_tick=tick)

    SearchLoop.run_until_done = stop_on_time  # type: ignore[method-assign]
    ns = argparse.Namespace(config=args.config, trials=100_000, max_evals=1_000_000, queue_total=None, set=args.set)
    with tempfile.TemporaryDirectory() as tmp:
        record = scale_quality.run_one(ns, args.evaluators, args.seed, Path(tmp))
    print(f"{args.evaluators} evaluators, seed {args.seed}, {args.variant or 'as configured'} {args.set}: "
          f"busy {record['busy']:.3f} over {record['virtual_minutes']} virtual minutes")
    print("| minute | running | holding | empty | the holds |")
    print("|---:|---:|---:|---:|---|")
    for minute in sorted(per_minute):
        c = per_minute[minute]
        total = c["running"] + c["holding"] + c["empty"]
        holds = ", ".join(f"{k[6:]} {v / total:.3f}" for k, v in sorted(c.items())
                          if k.startswith("hold:") and v / total >= 0.005)
        print(f"| {minute} | {c['running'] / total:.3f} | {c['holding'] / total:.3f} | {c['empty'] / total:.3f} "
              f"| {holds} |")
    n = max(1, stages["evaluations"])
    print(f"evaluations {stages['evaluations']}: mean compile wait {stages['compile_wait'] / n:.2f} s, "
          f"queued {stages['queued'] / n:.1f} s, compile {stages['compile_ahead'] / n:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
