"""Run the real driver (Ray, actors, store) on toy families, as a script or in-process.

The toy families are plain torch.geqrf candidates with tunable knobs that do not
change the work, so a search over them is fast on a CPU-only CI machine while
every production component (Ray actors, child processes, the store, Optuna) runs
for real.  ``python -m tests.search.toy_driver RUN_DIR launch|resume [N]``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import kernels.families
from kernels.harness.settings import RunLimits, TimingPolicy
from search.config import EvaluationConfig, FamilySpec, MutationMix, RayConfig, RunConfig
from tests.search.fakes import TOY_SOURCE, ToyFamily, toy_registry

SLOW_SOURCE = TOY_SOURCE.replace("import torch\n", "import time\n\nimport torch\n").replace(
    "    return torch.geqrf(A)", "    time.sleep(0.5)\n    return torch.geqrf(A)")


def install(slow: bool = False) -> dict[str, ToyFamily]:
    fams = toy_registry(SLOW_SOURCE if slow else TOY_SOURCE)
    kernels.families.FAMILIES = fams
    return fams


def toy_config(runs_dir: Path, name: str = "toy", **kw) -> RunConfig:
    base = dict(
        name=name, runs_dir=str(runs_dir), seed=5, families=[FamilySpec(name="toy", islands=1, island_size=4)],
        evaluation=EvaluationConfig(verify_suite="smoke-quick", bench_suite="smoke-bench", device="cpu",
                                    limits=RunLimits(case_timeout_s=60),
                                    timing=TimingPolicy(min_reps=2, max_reps=3, max_seconds=0.05),
                                    profile=False),
        mutation=MutationMix({"llm_edit": 0.0, "optuna_step": 1.0, "param_crossover": 0.0, "llm_merge": 0.0}),
        ray=RayConfig(cpu_evaluators=1, cpus_per_evaluator=1.0))
    base.update(kw)
    return RunConfig(**base)


def main(argv: list[str]) -> int:
    from search.run.driver import launch, resume

    run_dir, action = Path(argv[0]), argv[1]
    install(slow=True)
    if action == "launch":
        config = toy_config(run_dir.parent, run_dir.name, budget={"max_evals": int(argv[2]), "max_minutes": 10})
        return launch(config)
    return resume(run_dir, max_evals=int(argv[2]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
