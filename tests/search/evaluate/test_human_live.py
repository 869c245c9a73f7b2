"""The human commands against a running CPU search (the Ray driver, real evaluator children,
a scripted LLM on loopback), and events that survive a SIGKILLed driver.

The driver runs in the test's main thread (it installs signal handlers); an "engineer"
thread uses the commands, through the real CLI where it matters, and waits for the
driver's acknowledgement in the store: every wait is for a state, never a duration.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kernels.harness.settings import RunLimits, TimingPolicy
from population.consistency import check_consistency
from population.events import EventKind, EventWriter, new_event, read_events, read_outcomes
from population.models import Origin, State
from population.store import RunStore
from search.config import BudgetConfig, EvaluationConfig, FamilySpec, LLMConfig, MutationMix
from search.config.sections import LLMModel
from population.records import STATUS_KEY
from tests.search.fake_llm import FakeLLM
from tests.search.inspect_run import NOT_APPLYING, SHAPED_SOURCE, install
from tests.search.toy_driver import toy_config

ROOT = Path(__file__).parents[3]
pytestmark = pytest.mark.slow
NOTE = "unrolling the panel loop was tried by hand: slower at n=64"
HAND_WRITTEN = SHAPED_SOURCE.replace("    time.sleep(_pause_s(A.shape[-1]))",
                                     "    time.sleep(_pause_s(A.shape[-1]) / 3)  # hand-written")


def qrsearch(*args: object) -> str:
    """The real CLI in its own process, with the toy families registered as in the driver."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    code = ("import sys; from tests.search.inspect_run import install; install(); from search.cli.app import main; "
            "main(sys.argv[1:])")
    result = subprocess.run([sys.executable, "-c", code, *map(str, args)], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    return " ".join(result.stdout.split())


class Engineer(threading.Thread):
    def __init__(self, run_dir: Path, server: FakeLLM, tmp: Path) -> None:
        super().__init__(daemon=True)
        self.run_dir, self.server, self.tmp = run_dir, server, tmp
        self.facts: dict = {}
        self.error: BaseException | None = None

    def read(self, fn):
        with RunStore.open(self.run_dir, readonly=True, integrity=False) as store:
            return fn(store)

    def until(self, what: str, fn, limit: float = 240.0):
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            try:
                value = self.read(fn)
            except Exception:  # the store may not exist yet
                value = None
            if value:
                return value
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what}")

    def outcome(self, seq: int, statuses=("applied",)):
        return self.until(f"event #{seq}", lambda s: (o := read_outcomes(s.connection).get(seq)) is not None
                          and o.status.value in statuses and o)

    def send(self, kind, target="", text="", **kw):
        with EventWriter(self.run_dir) as writer:
            return writer.append(new_event(kind, target, text, who="tester", **kw))

    def run(self) -> None:
        try:
            self.script()
        except BaseException as exc:  # reported by the test in the main thread
            self.error = exc
        finally:
            os.kill(os.getpid(), signal.SIGINT)  # the driver stops cleanly (Ctrl-C)

    def script(self) -> None:
        f = self.facts
        evals = lambda s: int(s.counter("gpu_evaluations"))  # noqa: E731
        self.until("the seed's evaluation", lambda s: evals(s) >= 2 and s.current_champion_ids().get("toy"))
        champion = self.read(lambda s: s.current_champion_ids()["toy"])
        # note -> the next LLM prompts carry it
        before = len(self.server.requests)
        self.outcome(self.send(EventKind.NOTE, champion, NOTE).seq)
        seen = len(self.server.requests)  # prompts in [before, seen] may have been built either side of it
        deadline = time.monotonic() + 120
        while len(self.server.requests) <= seen + 1 and time.monotonic() < deadline:
            time.sleep(0.2)
        f["prompts_after_note"] = [r["body"]["messages"][1]["content"] for r in self.server.requests[seen + 1:]]
        f["prompts_before_note"] = [r["body"]["messages"][1]["content"] for r in self.server.requests[:before]]
        # pause (the real CLI): the work in flight finishes, then nothing starts
        qrsearch("pause", self.run_dir)
        self.until("a paused, idle driver", lambda s: (st := s.get_json(STATUS_KEY) or {}).get("human", {}).get(
            "paused") and st.get("inflight") == 0 and st["updated"] > time.time() - 3)
        paused_at = self.read(evals)
        f["told_at_pause"] = self.read(lambda s: int(s.counter("evaluations")))  # rejected edits count too
        # inject while paused: queued, not started; after unpause it is the very next evaluation
        hand = self.tmp / "hand.py"
        hand.write_text(HAND_WRITTEN)
        out = qrsearch("inject", self.run_dir, hand, "--family", "toy", "--note", "a third of the pause")
        said = re.search(r"candidate (c\d+): injected into toy by .* \(event #(\d+)\); next in line", out)
        assert said, out  # a running driver gives the id within seconds, and the command says it
        injected = self.outcome(int(said[2])).candidate_id
        assert injected == said[1]
        f["paused_state"] = self.read(lambda s: (s.get_candidate(injected).state, evals(s)))
        f["paused_at"] = paused_at
        from search.cli.run import run_status

        f["status_paused"] = run_status(self.run_dir)
        self.outcome(self.send(EventKind.UNPAUSE).seq)
        f["injected"] = self.until("the injected candidate's evaluation",
                                   lambda s: (c := s.get_candidate(injected)).state.is_terminal and
                                   (c, s.told_seq(injected)))
        # retire the seed structure: nothing made afterwards builds on it
        seed_fp = self.read(lambda s: s.get_candidate(champion).fingerprint)
        retire = self.send(EventKind.RETIRE, f"toy/{seed_fp}", "dead end")
        self.outcome(retire.seq)
        # An LLM call in flight was given its parent before the retirement: let it (and the next) land first.
        asked = len(self.server.requests)
        deadline = time.monotonic() + 120
        while len(self.server.requests) < asked + 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        first = self.read(lambda s: s.next_seq())
        made = self.until("children after the retirement", lambda s: (
            m := [c for c in s.list_candidates(family="toy") if int(c.id[1:]) >= first and c.origin
                  is not Origin.MIGRATION and c.state.is_terminal]) and len(m) >= 3 and m)
        f["made_after_retire"] = made
        f["parents_after_retire"] = self.read(lambda s: [s.get_candidate(p).fingerprint for c in made
                                                         for p in c.parent_ids])
        f["seed_fp"] = seed_fp
        # promote a verified non-champion; export takes it (the real CLI)
        promoted = self.read(lambda s: next(c.id for c in s.list_candidates(family="toy", state=State.VERIFIED)
                                            if c.id not in s.current_champion_ids().values()
                                            and c.origin is not Origin.MIGRATION))
        self.outcome(self.send(EventKind.PROMOTE, promoted, "timings look right").seq)
        f["export"] = qrsearch("export", self.run_dir, "--family", "toy", "-o", self.tmp / "exported.py")
        f["promoted"] = promoted
        # recheck the champion on the live evaluator
        f["rechecked"] = champion
        f["recheck"] = self.outcome(self.send(EventKind.RECHECK, champion, data={"cases": []}).seq, ("done",))


def test_commands_against_a_running_search(tmp_path, monkeypatch):
    from rich.console import Console

    from search.run.driver import launch, resume

    install()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-only")
    server = FakeLLM([("ok", NOT_APPLYING)], default=("sleep", 1.0, NOT_APPLYING))
    server.thread.start()
    config = toy_config(
        tmp_path, "live", budget=BudgetConfig(max_evals=200, max_minutes=9),
        families=[FamilySpec(name="toy", islands=1, island_size=6)],
        mutation=MutationMix({"llm_edit": 1.0, "optuna_step": 1.0, "param_crossover": 0.0, "llm_merge": 0.0}),
        evaluation=EvaluationConfig(verify_suite="smoke-quick", bench_suite="smoke-bench", device="cpu",
                                    limits=RunLimits(case_timeout_s=20),
                                    timing=TimingPolicy(min_reps=3, max_reps=5, max_seconds=0.1),
                                    profile=False),
        llm=LLMConfig(base_url=server.url, models=[LLMModel(name="scripted")], concurrency=1, timeout_s=10,
                      max_retries=0))
    engineer = Engineer(config.run_dir, server, tmp_path)
    engineer.start()
    try:
        with open(os.devnull, "w") as sink:
            launch(config, console=Console(file=sink))
    finally:
        server.stop()
    engineer.join(timeout=60)
    if engineer.error is not None:
        raise engineer.error
    f = engineer.facts
    assert not any(NOTE in p for p in f["prompts_before_note"])
    assert f["prompts_after_note"] and all(NOTE in p for p in f["prompts_after_note"])
    state, evals_while_paused = f["paused_state"]
    assert state is State.PENDING and evals_while_paused == f["paused_at"]  # nothing ran while paused
    assert f["status_paused"]["state"].startswith("running, paused") and f["status_paused"]["human"]["paused"]
    cand, told = f["injected"]
    assert cand.origin is Origin.HUMAN and cand.state is State.VERIFIED
    with RunStore.open(config.run_dir, readonly=True) as store:
        between = [c for c in store.list_candidates() if f["told_at_pause"] < (store.told_seq(c.id) or 0) < told]
    # The injected candidate is the next one evaluated: only LLM edits that never ran (rejected) came between.
    assert all(c.state is State.REJECTED for c in between), [(c.id, c.state) for c in between]
    assert all(c.fingerprint != f["seed_fp"] for c in f["made_after_retire"] if c.origin is not Origin.HUMAN)
    assert f["seed_fp"] not in f["parents_after_retire"]
    assert f"candidate {f['promoted']}, promoted by" in f["export"]
    honest = f["recheck"]
    assert honest.data["cases"] and all(r["geqrf_recheck_ms"] for r in honest.data["cases"])  # timed in one child
    with RunStore.open(config.run_dir, readonly=True) as store:
        assert check_consistency(store, deep=True) == []
        assert NOTE in json.dumps([e.model_dump() for e in read_events(store.connection)])

    # The same recheck on a copy of the store whose recorded times were divided by 20 does not hold.
    copy = tmp_path / "tampered"
    shutil.copytree(config.run_dir, copy)
    champion = f["rechecked"]
    db = sqlite3.connect(copy / "run.sqlite")
    (body,) = db.execute("SELECT body FROM results WHERE candidate_id = ?", (champion,)).fetchone()
    data = json.loads(body)
    for case in data["cases"]:
        for key in ("median_ms", "min_ms", "max_ms"):
            case[key] /= 20
    db.execute("UPDATE results SET body = ? WHERE candidate_id = ?", (json.dumps(data), champion))
    db.commit()
    db.close()
    with EventWriter(copy) as writer:
        event = writer.append(new_event(EventKind.RECHECK, champion, "too good to be true", who="tester"))
    with open(os.devnull, "w") as sink:
        assert resume(copy, max_evals=1, console=Console(file=sink)) == 0
    with RunStore.open(copy, readonly=True) as store:
        tampered = read_outcomes(store.connection)[event.seq]
        assert check_consistency(store, deep=True) == []
    assert tampered.status.value == "done" and tampered.data["holds"] is False
    assert all(not r["holds"] for r in tampered.data["cases"])

    def median(rows):
        ratios = sorted(r["adjusted_ratio"] for r in rows)
        return ratios[len(ratios) // 2]

    assert median(tampered.data["cases"]) > 5 * median(honest.data["cases"])  # the /20, through CPU noise
    show = qrsearch("show", copy, champion)
    assert "disputed" in show and "does not hold" in show


def test_events_survive_a_sigkilled_driver_and_resume(tmp_path, own_ray):
    run_dir = tmp_path / "killed"
    env = own_ray.env(dict(os.environ, PYTHONPATH=str(ROOT)))
    proc = subprocess.Popen([sys.executable, "-m", "tests.search.toy_driver", str(run_dir), "launch", "40"],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    engineer = Engineer(run_dir, FakeLLM(), tmp_path)
    try:
        engineer.until("two evaluations", lambda s: int(s.counter("gpu_evaluations")) >= 2)
        seed = engineer.read(lambda s: s.current_champion_ids()["toy"])
        from tests.search.toy_driver import SLOW_SOURCE
        data = {"source": SLOW_SOURCE.replace('"stages": 2', '"stages": 3'), "params": {"block": 16, "warps": 4,
                                                                                       "stages": 3},
                "fingerprint": engineer.read(lambda s: s.get_candidate(seed).fingerprint)}
        applied = engineer.send(EventKind.INJECT, "toy", "before the kill", data=data)
        first = engineer.outcome(applied.seq).candidate_id
        note = engineer.send(EventKind.NOTE, seed, "written while the driver lived")
        engineer.outcome(note.seq)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        own_ray.reap()  # the killed driver's local Ray (raylet, GCS) outlives it
    # Written to the dead run: applied on resume, exactly once, like the ones before the kill.
    late = engineer.send(EventKind.INJECT, "toy", "after the kill",
                         data={**data, "source": data["source"].replace('"warps": 4', '"warps": 2'),
                               "params": {"block": 16, "warps": 2, "stages": 3}})
    promote = engineer.send(EventKind.PROMOTE, seed, "after the kill")
    result = subprocess.run([sys.executable, "-m", "tests.search.toy_driver", str(run_dir), "resume", "3"],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    with RunStore.open(run_dir, readonly=True) as store:
        outcomes = read_outcomes(store.connection)
        humans = store.list_candidates(origin=Origin.HUMAN)
        assert check_consistency(store, deep=True) == []
        events = read_events(store.connection)
    assert [e.seq for e in events] == [applied.seq, note.seq, late.seq, promote.seq]
    assert sorted(c.id for c in humans) == sorted([first, outcomes[late.seq].candidate_id])
    assert store_state(run_dir, outcomes[late.seq].candidate_id).is_terminal  # evaluated first on resume
    assert outcomes[promote.seq].status.value == "applied" and outcomes[note.seq].status.value == "applied"


def store_state(run_dir: Path, cid: str) -> State:
    with RunStore.open(run_dir, readonly=True) as store:
        return store.get_candidate(cid).state
