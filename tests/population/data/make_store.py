"""Write a small run store the way a driver leaves it: ``python make_store.py RUN_DIR [--old]``.

It uses only the population API (the same at commit 484b148 and now) plus the driver's
key/value records and counters.  With ``--old`` the keys come from the flat ``search/`` of
commit 484b148 (run it with ``PYTHONPATH`` at an export of that commit): that is how
``old484_run.sqlite`` beside this file was made, so the tests can check that a store of the
previous version still opens.  Without it the keys come from ``population.records``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from population.config import FamilyConfig, PopulationConfig
from population.events import EventKind, EventWriter, new_event
from population.models import CaseOutcome, CaseStatus, EvalResult, NewCandidate, Origin, State
from population.run import Run

BENCH = ("dense-8x16-c1", "dense-4x32-c1", "mixed-4x48-c2", "rankdef-2x64-c0")  # the smoke-bench suite
SOURCE = '"""toy {tag}"""\nimport torch\n\n# qrsearch: params\nPARAMS = {{"tag": "{tag}"}}\n# qrsearch: end params\n\n\n' \
         'def custom_kernel(A):\n    return torch.geqrf(A)\n'
T0 = 1_700_000_000.0  # fixed wall clock: the store's content does not depend on when it was made


def keys(old: bool) -> dict[str, str]:
    if old:  # the flat search/ of 484b148: keys spread over the engine modules
        from search.driver import SESSIONS_KEY  # type: ignore[import-not-found]
        from search.llm_budget import STATE_KEY  # type: ignore[import-not-found]
        from search.loop import STATUS_KEY  # type: ignore[import-not-found]
        from search.proposer import NOTE_KEY, TRIAL_KEY  # type: ignore[import-not-found]

        return {"status": STATUS_KEY, "sessions": SESSIONS_KEY, "note": NOTE_KEY, "trial": TRIAL_KEY,
                "llm_state": STATE_KEY, "llm_call": "llm/call/{n:06d}"}
    from population import records

    return {"status": records.STATUS_KEY, "sessions": records.SESSIONS_KEY, "note": records.NOTE_KEY,
            "trial": records.TRIAL_KEY, "llm_state": records.LLM_STATE_KEY, "llm_call": records.LLM_CALL_KEY}


def build(run_dir: Path, old: bool = False) -> dict[str, str]:
    """The run: a baseline, a seed, an Optuna child, an LLM child, a failed one, a crossover;
    a stopped driver's status, two sessions (the first killed), an LLM call, a note."""
    k = keys(old)
    families = (FamilyConfig(name="torch_geqrf", islands=1, capacity=1, tuning_budget=0),
                FamilyConfig(name="f", islands=1, capacity=20, tuning_budget=0))
    config = {"name": "old-store", "seed": 0, "families": [{"name": "f"}],
              "evaluation": {"verify_suite": "smoke-quick", "bench_suite": "smoke-bench"},
              "llm": {"base_url": "http://localhost:1/v1", "models": [{"name": "toy-llm"}]}}
    run = Run.create(run_dir, PopulationConfig(seed=0, families=families), run_config_json=json.dumps(config),
                     clock=lambda: T0)
    ids: dict[str, str] = {}

    def add(name: str, family: str, parents: tuple[str, ...], origin: Origin, times: list[float] | None,
            state: State = State.VERIFIED) -> None:
        cand = run.add_candidate(NewCandidate(family=family, origin=origin, parent_ids=parents,
                                              source=SOURCE.format(tag=name), params={"tag": name}, fingerprint="s0"))
        run.mark_running(cand.id)
        if times is None:
            run.tell(cand.id, state, reason="verify dense-8x16-c1: bad H",
                     result=EvalResult(candidate_id=cand.id, error="bad H", device="cpu"))
        else:
            cases = tuple(CaseOutcome(case=c, status=CaseStatus.OK, median_ms=t, min_ms=t, max_ms=t,
                                      residuals={"factor": 0.1}) for c, t in zip(BENCH, times))
            geo = 1.0
            for t in times:
                geo *= t
            run.tell(cand.id, State.VERIFIED, result=EvalResult(
                candidate_id=cand.id, cases=cases, geomean_ms=geo ** (1 / len(times)), device="cpu",
                versions={"torch": "x"}, eval_seconds=2.0, stage_seconds={"verify": 0.5, "bench": 1.5}))
        run.add_counters({"gpu_evaluations": 1, f"state/{state.value}": 1, "busy_seconds": 2.0})
        ids[name] = cand.id

    add("base", "torch_geqrf", (), Origin.SEED, [1.0, 1.0, 2.0, 2.0])
    add("seed", "f", (), Origin.SEED, [4.0, 4.0, 4.0, 4.0])
    add("tuned", "f", (ids["seed"],), Origin.OPTUNA, [2.0, 2.0, 4.0, 4.0])
    add("edited", "f", (ids["seed"],), Origin.LLM, [3.0, 3.0, 3.0, 3.0])
    add("broken", "f", (ids["tuned"],), Origin.LLM, None, State.FAILED_VERIFY)
    add("merged", "f", (ids["tuned"], ids["edited"]), Origin.CROSSOVER, [1.0, 1.0, 2.0, 2.0])
    run.store.set_json(k["trial"].format(cid=ids["tuned"]), {"study": "f/s0", "number": 0})
    run.store.set_json(k["note"].format(cid=ids["edited"]), "unrolled the panel loop")
    n = run.add_counters({"llm_calls": 1, "llm_prompt_tokens": 100, "llm_completion_tokens": 50,
                          "llm_cost_usd": 0.25})["llm_calls"]
    run.store.set_json(k["llm_call"].format(n=int(n)), {
        "model": "toy-llm", "prompt_tokens": 100, "completion_tokens": 50, "cost_usd": 0.25, "latency_s": 1.5,
        "family": "f", "parents": [ids["seed"]], "at": T0 + 30, "child": ids["edited"], "params": "kept"})
    run.add_counters({"llm_model/requests/toy-llm": 1, "llm_model/answers/toy-llm": 1,
                      "llm_model/accepted/toy-llm": 1})
    run.store.set_json(k["llm_state"].format(model="toy-llm"), {"streak": 0, "not_before": 0.0, "paused_until": None,
                                                                "pauses": 0, "last_reason": ""})
    run.set_json(k["sessions"], [{"pid": 11, "host": "h", "started": T0, "address": "local"},
                                 {"pid": 12, "host": "h", "started": T0 + 100, "address": "local",
                                  "ended": T0 + 160}])
    run.set_json(k["status"], {"state": "stopped", "updated": T0 + 160, "session_evaluations": 6,
                               "evals_per_minute": 6.0, "lost": 0, "by_state": {"verified": 5, "failed_verify": 1},
                               "queue": 0, "inflight": 0, "llm_inflight": 0, "llm": "on", "evaluators": 1,
                               "evaluators_ready": 1, "busy_fraction": {"gpu0": 0.5}, "driver_seconds": 0.1,
                               "stop_reason": "budget: 6 evaluations", "human": {"paused": False}, "focus": None})
    run.close()
    with EventWriter(run_dir) as writer:
        writer.append(new_event(EventKind.NOTE, ids["merged"], "looks good", who="tester", at=T0 + 120))
    return ids


if __name__ == "__main__":
    print(json.dumps(build(Path(sys.argv[1]), old="--old" in sys.argv[2:])))
