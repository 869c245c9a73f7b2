"""How ``store_before_one_vocabulary/`` was made: run with the ``population`` package of commit b11619a
(before kernels and population shared one case-status enum), e.g.

    git archive b11619a population | tar -x -C /tmp/old
    PYTHONPATH=/tmp/old python tests/population/data/make_store_before_one_vocabulary.py OUT_DIR

Kept as a file so the test opens what the previous version really wrote.
"""

from __future__ import annotations

import sys
from pathlib import Path

from population.config import FamilyConfig, PopulationConfig
from population.models import CaseOutcome, CaseStatus, EvalResult, NewCandidate, Origin, State
from population.run import Run

CONFIG = PopulationConfig(seed=3, families=(FamilyConfig(name="a", islands=1, capacity=3, tuning_budget=2),))


def main(out: Path) -> None:
    run = Run.create(out, CONFIG, clock=lambda: 100.0)
    seed = run.add_candidate(NewCandidate(family="a", origin=Origin.SEED, source="def k(): pass\n", fingerprint="s0"))
    cases = tuple(CaseOutcome(case=f"dense/{i}", status=status, median_ms=1.0 + i if status is CaseStatus.OK else None)
                  for i, status in enumerate(CaseStatus))
    run.tell(seed.id, State.VERIFIED, result=EvalResult(candidate_id=seed.id, cases=cases[:1], geomean_ms=1.0,
                                                        device="cpu"))
    bad = run.add_candidate(NewCandidate(family="a", origin=Origin.LLM, parent_ids=(seed.id,),
                                         source="def k(): return 1\n", fingerprint="s1"))
    run.tell(bad.id, State.FAILED_VERIFY, reason="dense/1: R - QᵀA too large",
             result=EvalResult(candidate_id=bad.id, cases=cases, device="cpu", error="dense/1: too large"))
    run.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
