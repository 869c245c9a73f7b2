"""How much an LLM endpoint costs a CPU smoke search, and how much of it is wasted.

Runs ``runs/smoke.yaml`` with one family against an OpenAI-compatible server on
127.0.0.1 that answers at once, cycling the ten kinds of answer of issue 14: a good
edit, a crash, a hang, a wrong tau, a cached output, a secret hunt, a slow one (a
good edit after a delay), a complete GPU MODE file with no tuning block, prose, and a
SEARCH block that matches nothing.  Every answer is new (a per-request constant),
so none is a duplicate.  It prints and writes (``--json``) the HTTP requests, the
answers accepted and rejected (by reason), the LLM candidates evaluated and by
state, and the tokens spent.  It reads only what every version of the store has,
so the same script measures the code before and after a change::

    python lab/llm_waste.py --runs-dir /tmp/waste --json /tmp/waste/after.json
    # before: the same command from an export of the older commit
    #   (git archive <commit> | tar -x -C /tmp/base; cd /tmp/base; python <this script> ...)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path.cwd()
sys.path.insert(0, str(ROOT))  # the checkout being measured, before any installed copy

from kernels.families import FAMILIES  # noqa: E402
from population.models import Origin, State  # noqa: E402
from population.store import RunStore  # noqa: E402
from search.config import RunConfig  # noqa: E402
from search.run.driver import launch  # noqa: E402
from tests.search.fake_llm import FakeLLM  # noqa: E402

KINDS = ("good edit", "crash", "hang", "wrong tau", "cached output", "secret hunt", "slow good edit",
         "bare GPU MODE file", "prose", "unmatched SEARCH")


class TenKinds:
    """A FakeLLM script without end: request i gets kind i mod 10, made unique by i."""

    def __init__(self, family_source: str, slow_s: float) -> None:
        self.block = params_block(family_source)
        # The good edit names a constant above the family's own custom_kernel line (a whole line,
        # as SEARCH needs); against a parent that rewrote that line it does not apply, as in life.
        self.kernel_line = next(line for line in family_source.splitlines() if line.startswith("def custom_kernel("))
        self.slow_s = slow_s
        self.served = 0

    def __bool__(self) -> bool:
        return True

    def _file(self, i: int, body: str) -> str:
        return (f"A rewrite.\n```python\nimport os\nimport time\n\nimport torch\n\n{self.block}\n\nV = {i}\n\n\n"
                f"{body}```\n")

    def popleft(self) -> tuple:
        i, self.served = self.served, self.served + 1
        kind = KINDS[i % len(KINDS)]
        edit = (f"Name a constant.\n<<<<<<< SEARCH\n{self.kernel_line}\n=======\nV{i} = {i}\n\n\n"
                f"{self.kernel_line}\n>>>>>>> REPLACE\n")
        if kind == "good edit":
            return ("ok", edit)
        if kind == "slow good edit":
            return ("sleep", self.slow_s, edit)
        if kind == "crash":
            return ("ok", self._file(i, "def custom_kernel(A):\n    os.abort()\n"))
        if kind == "hang":
            return ("ok", self._file(i, "def custom_kernel(A):\n    time.sleep(1000)\n    return torch.geqrf(A)\n"))
        if kind == "wrong tau":
            return ("ok", self._file(i, "def custom_kernel(A):\n    H, tau = torch.geqrf(A)\n"
                                        "    return H, torch.zeros_like(tau)\n"))
        if kind == "cached output":
            return ("ok", self._file(i, "_c = []\n\n\ndef custom_kernel(A):\n    if not _c:\n"
                                        "        _c.append(torch.geqrf(A))\n    return _c[0]\n"))
        if kind == "secret hunt":
            return ("ok", self._file(i, "_SEEN = [k for k in os.environ if 'KEY' in k or 'SECRET' in k]\n\n\n"
                                        "def custom_kernel(A):\n    if _SEEN:\n        raise RuntimeError(str(_SEEN))\n"
                                        "    return torch.geqrf(A)\n"))
        if kind == "bare GPU MODE file":
            return ("ok", f"Here is a complete submission.\n```python\nimport torch\n\nV = {i}\n\n\n"
                          "def custom_kernel(data):\n    return torch.geqrf(data)\n```\n")
        if kind == "prose":
            return ("ok", "The Householder panel is latency bound; fusing the reflector with the update would help.")
        return ("ok", f"<<<<<<< SEARCH\nline {i} that the parent does not have\n=======\nx = 1\n>>>>>>> REPLACE\n")


def params_block(source: str) -> str:
    start = source.index("# qrsearch: params")
    end = source.index("# qrsearch: end params") + len("# qrsearch: end params")
    return source[start:end]


def measure(store: RunStore, requests: int, elapsed_s: float) -> dict[str, Any]:
    calls = [store.get_json(f"llm/call/{n:06d}") for n in range(1, int(store.counter("llm_calls")) + 1)]
    calls = [c for c in calls if c]
    llm = [c for c in store.list_candidates() if c.origin is Origin.LLM]
    rejected = [c for c in llm if c.state is State.REJECTED]
    made = [c for c in llm if c.state is not State.REJECTED]
    evaluated = [c for c in made if c.state.is_terminal]
    reasons = Counter(c.reason.split(":")[0][:60] for c in rejected)
    counters = store.counters("llm_")
    return {
        "seconds": round(elapsed_s, 1), "http_requests": requests, "answers": len(calls),
        "errors": int(counters.get("llm_errors", 0)),
        "accepted": len(made), "rejected": len(rejected), "duplicates": sum(bool(c.get("duplicate")) for c in calls),
        "rejected_by_reason": dict(reasons.most_common()),
        "llm_candidates_evaluated": len(evaluated),
        "llm_candidates_left_unevaluated": len(made) - len(evaluated),
        "evaluated_by_state": dict(Counter(c.state.value for c in evaluated).most_common()),
        "evaluations": int(store.counter("gpu_evaluations")),
        "tokens": int(counters.get("llm_prompt_tokens", 0) + counters.get("llm_completion_tokens", 0)),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs-dir", type=Path, required=True, help="where the run directory goes (a fresh one)")
    parser.add_argument("--name", default="llm-waste")
    parser.add_argument("--family", default="householder_unblocked")
    parser.add_argument("--minutes", type=float, default=5.0, help="the run's time budget")
    parser.add_argument("--max-evals", type=int, default=40)
    parser.add_argument("--case-timeout", type=float, default=None,
                        help="per case (default: smoke.yaml's); the hang kind waits this long")
    parser.add_argument("--slow-s", type=float, default=3.0, help="delay of the slow answer")
    parser.add_argument("--json", type=Path, help="write the numbers here too")
    args = parser.parse_args()

    base = RunConfig.from_yaml(ROOT / "runs" / "smoke.yaml").model_dump(mode="json")
    base.update(name=args.name, runs_dir=str(args.runs_dir),
                families=[{"name": args.family, "islands": 1, "island_size": 4}],
                mutation={"llm_edit": 1.0, "optuna_step": 0.5, "param_crossover": 0.0, "llm_merge": 0.0})
    base["budget"].update(max_evals=args.max_evals, max_minutes=args.minutes)
    if args.case_timeout is not None:
        base["evaluation"]["limits"]["case_timeout_s"] = args.case_timeout
    server = FakeLLM()
    server.script = TenKinds(FAMILIES[args.family].source(), args.slow_s)  # type: ignore[assignment]
    base["llm"].update(base_url=server.url, models=[{"name": "scripted", "usd_per_mtok_in": 1.0}], timeout_s=30,
                       max_retries=0)
    config = RunConfig.model_validate(base)
    os.environ.setdefault("OPENAI_API_KEY", "sk-measure-only")
    with server:
        began = time.monotonic()
        code = launch(config)
        elapsed = time.monotonic() - began
        requests = len(server.requests)
    with RunStore.open(config.run_dir, readonly=True) as store:
        numbers = measure(store, requests, elapsed)
    numbers["exit_code"] = code
    print(json.dumps(numbers, indent=2))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(numbers, indent=2) + "\n")
    return 0 if code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
