"""CPU time of one TPE ask against a study's finished and running trials (not a test).

    .venv/bin/python tools/tpe_ask_cost.py [--family cuda_blocked] [--cases 15:0,40:0,120:0,120:300]

One study in the family's real parameter space, sampled as the tuner samples
(search/mutation/samplers.py: multivariate TPE with the constant liar); for each FINISHED:RUNNING
pair, that many trials told (random values) and left running, then the CPU time per ask over ten
asks.  What docs/scale.md section 1 quotes for the driver's cost per sampled ask.
"""

from __future__ import annotations

import argparse
import logging
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--family", default="cuda_blocked")
    ap.add_argument("--cases", default="15:0,40:0,120:0,120:300")
    ap.add_argument("--asks", type=int, default=10)
    args = ap.parse_args()

    import optuna

    from kernels.families import FAMILIES
    from search.mutation.samplers import distributions, sampler_for

    optuna.logging.set_verbosity(logging.WARNING)
    dists = distributions(FAMILIES[args.family].space)
    rng = random.Random(1)
    print(f"{args.family}: {len(dists)} knobs")
    for case in args.cases.split(","):
        finished, running = (int(x) for x in case.split(":"))
        study = optuna.create_study(sampler=sampler_for("tpe", 3))
        for i in range(finished + running):
            trial = study.ask(dists)
            if i < finished:
                study.tell(trial, rng.random())
        # What the study holds, counted from it (not the arguments): what the asks below were shown.
        held = [t.state for t in study.get_trials(deepcopy=False)]
        done, open_ = sum(s.is_finished() for s in held), held.count(optuna.trial.TrialState.RUNNING)
        t0 = time.process_time()
        for _ in range(args.asks):
            study.tell(study.ask(dists), rng.random())
        ms = 1000 * (time.process_time() - t0) / args.asks
        print(f"finished {done:5d}  running {open_:5d}: {ms:6.1f} ms CPU per ask")
    return 0


if __name__ == "__main__":
    sys.exit(main())
