"""The writer of the kill test: drives a run forever until the parent SIGKILLs it.

It behaves like an asynchronous search driver: creates children, keeps a few in
flight, finishes them out of order, and writes an LLM-cost counter in the same
transaction as each result.  After a result's commit *returns*, its id is
appended to the side file and fsynced: the side file lists only committed work.

Usage: python kill_child.py RUN_DIR SIDE_FILE SEED
"""

from __future__ import annotations

import hashlib
import os
import random
import sys
from pathlib import Path

from population.config import FamilyConfig, MigrationConfig, PopulationConfig, Topology
from population.errors import StoreNotFound
from population.models import FAILURE_STATES, Candidate, EvalResult, NewCandidate, Origin, State
from population.run import Run

CONFIG = PopulationConfig(seed=5, families=(
    FamilyConfig(name="a", islands=2, capacity=5, tuning_budget=2,
                 migration=MigrationConfig(topology=Topology.RING, interval=3)),
    FamilyConfig(name="b", islands=3, capacity=4, tuning_budget=3, maturation_timeout=8,
                 migration=MigrationConfig(topology=Topology.BEST_TO_WORST, interval=4))))


def h(*parts: object) -> int:
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:4], "big")


def tokens_of(job: int) -> int:
    """The LLM cost booked with a job's result; the parent re-derives the total from the jobs.

    Odd jobs book nothing and are told outside any driver transaction, so that the
    atomicity of ``Run.tell`` alone is exercised too.
    """
    return 0 if job % 2 else job % 97 + 1


def finish(run: Run, c: Candidate, log) -> None:
    job = int(c.params["job"])  # type: ignore[arg-type]
    roll = h(job, "outcome") % 10
    if roll < 3:
        state = FAILURE_STATES[h(job, "kind") % len(FAILURE_STATES)]
        result = EvalResult(candidate_id=c.id, error=f"{state} in job {job}")
    else:
        state, result = State.VERIFIED, EvalResult(candidate_id=c.id, geomean_ms=0.2 + h(job, "ms") % 5000 / 1000)
    if tokens_of(job):
        with run.transaction():
            report = run.tell(c.id, state, result=result)
            run.add_counters({"tokens": tokens_of(job)})
    else:
        report = run.tell(c.id, state, result=result)
    assert not report.already_recorded, f"{c.id} was finished twice"
    log.write(c.id + "\n")
    log.flush()
    os.fsync(log.fileno())


def main(run_dir: Path, side: Path, seed: int) -> None:
    try:
        run = Run.open(run_dir)
    except StoreNotFound:
        run = Run.create(run_dir, CONFIG)
    rng = random.Random(seed)  # this process's scheduling whims; not part of the run
    with open(side, "a") as log:
        inflight = [run.mark_running(c.id) for c in run.requeue_inflight()]
        print("ready", flush=True)
        while True:
            job = run.store.get_json("job", 0)
            fam = "ab"[h(job, "fam") % 2]
            island = h(job, "isl") % len(run.population.family(fam).islands)
            parent = run.select_parent(fam, island)
            fp = f"{fam}{h(job, 'fp') % 5}" if parent else f"{fam}-seed"
            with run.transaction():
                child = run.add_candidate(NewCandidate(
                    family=fam, island=island, parent_ids=(parent.id,) if parent else (),
                    origin=Origin.LLM if parent else Origin.SEED, source=f"def k():  # {fp} {job % 50}\n",
                    params={"job": job}, fingerprint=fp))
                run.set_json("job", job + 1)
            if rng.random() < 0.8:
                inflight.append(run.mark_running(child.id))
            while inflight and (len(inflight) > 4 or rng.random() < 0.5):
                finish(run, inflight.pop(rng.randrange(len(inflight))), log)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]))
