"""A small real search for the inspection tests: the Ray driver on CPU, two toy families
and a scripted LLM, so the run has seeds, Optuna and crossover children, an LLM edit
that makes a new structure, champion changes, and crashed / rejected / failed
candidates.  ``python -m tests.search.inspect_run RUN_DIR`` builds one by hand.

The toy kernel is torch.geqrf plus a sleep that depends on its parameters and on n
(shortest when ``block`` equals n), so different candidates win different shapes
and the composite export has something to route.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import kernels.families
from kernels.harness.settings import RunLimits, TimingPolicy
from search.config import BudgetConfig, EvaluationConfig, LLMConfig, MaturationSettings, MutationMix
from search.config.sections import LLMModel
from tests.search.fake_llm import FakeLLM
from tests.search.fakes import ToyFamily, toy_baseline
from tests.search.toy_driver import toy_config

SHAPED_SOURCE = '''"""A toy kernel: torch.geqrf after a parameter-dependent pause."""

import math
import time

import torch

# qrsearch: params
PARAMS = {
    "block": 16,
    "warps": 4,
    "stages": 2,
}
# qrsearch: end params


def _pause_s(n):
    return 0.0004 * (abs(math.log2(PARAMS["block"] / max(n, 1))) + abs(PARAMS["stages"] - 3))


def custom_kernel(A):
    time.sleep(_pause_s(A.shape[-1]))
    return torch.geqrf(A)
'''

PARAMS_BLOCK = SHAPED_SOURCE[SHAPED_SOURCE.index("# qrsearch: params"):SHAPED_SOURCE.index("# qrsearch: end params")]

# The scripted LLM: a real improvement (a new structure), an edit that does not apply
# (rejected), a crash, a cache that fails verification.
FASTER = ("Halve the pause.\n<<<<<<< SEARCH\n    time.sleep(_pause_s(A.shape[-1]))\n=======\n"
          "    time.sleep(_pause_s(A.shape[-1]) / 2)\n>>>>>>> REPLACE\n")
NOT_APPLYING = "<<<<<<< SEARCH\nthis line is nowhere\n=======\nx = 1\n>>>>>>> REPLACE\n"


def _whole(body: str) -> str:
    return (f"Rewrite.\n```python\nimport os\nimport math\nimport time\n\nimport torch\n\n{PARAMS_BLOCK}"
            f"# qrsearch: end params\n\n{body}\n```\n")


CRASH = _whole("def custom_kernel(A):\n    os.abort()\n")
CACHED = _whole("_c = []\n\n\ndef custom_kernel(A):\n    if not _c:\n        _c.append(torch.geqrf(A))\n"
                "    return _c[0]\n")
SCRIPT = [("ok", FASTER), ("ok", NOT_APPLYING), ("ok", CRASH), ("ok", CACHED), ("ok", NOT_APPLYING)]

FAMILIES = ("toy", "toy2")
EVALS = 14


def install() -> None:
    fams = {"torch_geqrf": toy_baseline()}
    for name in FAMILIES:
        fams[name] = ToyFamily(name, text=SHAPED_SOURCE, description="a toy kernel with a pause")
    kernels.families.FAMILIES = fams


def build(runs_dir: Path, name: str = "inspect", evals: int = EVALS) -> Path:
    """Run the search to completion and return its run directory."""
    from search.config import FamilySpec
    from search.run.driver import launch

    install()
    os.environ.setdefault("OPENAI_API_KEY", "sk-test-only")
    server = FakeLLM(list(SCRIPT))
    server.thread.start()
    try:
        config = toy_config(
            runs_dir, name, budget=BudgetConfig(max_evals=evals, max_minutes=8),
            families=[FamilySpec(name="toy", islands=1, island_size=6), FamilySpec(name="toy2", islands=1,
                                                                                  island_size=4)],
            # Parameter crossover outweighs the Optuna step, so that the few immediate
            # proposals after the first Optuna children (its only possible mates) make a
            # crossover child whatever order a loaded machine finishes them in.
            mutation=MutationMix({"llm_edit": 1.0, "optuna_step": 1.0, "param_crossover": 2.0, "llm_merge": 0.6}),
            maturation=MaturationSettings(tuning_budget=1, timeout_evals=4),
            evaluation=EvaluationConfig(verify_suite="smoke-quick", bench_suite="smoke-bench", device="cpu",
                                        limits=RunLimits(case_timeout_s=20),
                                        timing=TimingPolicy(min_reps=2, max_reps=3, max_seconds=0.05),
                                        # One candidate at a time and every child fully benched, so the
                                        # scripted run makes the lineage shapes the views are tested on.
                                        profile=False, screen_cases=0, compile_ahead=0),
            llm=LLMConfig(base_url=server.url, models=[LLMModel(name="scripted", usd_per_mtok_in=1.0,
                                                                usd_per_mtok_out=4.0)],
                          concurrency=1, timeout_s=30, max_retries=0))  # a loaded CI machine answers slowly
        from rich.console import Console

        with open(os.devnull, "w") as sink:
            code = launch(config, console=Console(file=sink))
        if code != 0:
            raise RuntimeError(f"the smoke search exited with {code}")
    finally:
        server.stop()
    return config.run_dir


if __name__ == "__main__":
    target = Path(sys.argv[1])
    print(build(target.parent, target.name))
