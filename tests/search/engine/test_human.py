"""The human in the loop with fake evaluators and a fake LLM: every event kind, applied by
the loop from the store, with what it must change (and must not)."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3

import pytest

import kernels.families
from kernels.params import render_params, structure_fingerprint
from population.consistency import check_consistency
from population.events import EventKind, EventWriter, new_event, read_outcomes
from population.models import CaseOutcome, CaseStatus, EvalResult, NewCandidate, Origin, State
from population.run import Run
from population.store import RunStore
from search.config import EvaluationConfig, FamilySpec, FocusConfig, MaturationSettings, MutationMix, RunConfig
from search.run.driver import create_run
from search.engine.loop import SearchLoop
from search.mutation.tuning import Tuner
from tests.search.fakes import TOY_SOURCE, FakeLLMPool, FakePool, default_judge, toy_time, toy_registry
from kernels.params import read_params

INJECTED = TOY_SOURCE.replace("    return torch.geqrf(A)", "    A = A.contiguous()  # hand-written: FAST\n    return torch.geqrf(A)")


@pytest.fixture()
def families(monkeypatch):
    fams = toy_registry()
    monkeypatch.setattr(kernels.families, "FAMILIES", fams, raising=False)
    return fams


def config(tmp_path, **kw):
    base = dict(name="h", runs_dir=str(tmp_path), seed=3, families=[FamilySpec(name="toy", islands=1, island_size=6)],
                evaluation=EvaluationConfig(verify_suite="smoke-quick", bench_suite="smoke-bench", device="cpu"),
                mutation=MutationMix({"llm_edit": 0.0, "optuna_step": 1.0, "param_crossover": 0.0, "llm_merge": 0.0}),
                maturation=MaturationSettings(tuning_budget=3))
    base.update(kw)
    return RunConfig(**base)


def make_loop(cfg, families, pool=None, llm=None, max_evals=60, run=None):
    run = run or create_run(cfg, families)
    logs: list[str] = []
    loop = SearchLoop(cfg, run, pool or FakePool(), Tuner(cfg.run_dir / "optuna.journal", seed=cfg.seed), families,
                      llm=llm, log=logs.append, max_evals=max_evals)
    loop.logs = logs
    return loop


def send(loop, kind, target="", text="", **kw):
    with EventWriter(loop.run.store.run_dir) as writer:
        event = writer.append(new_event(kind, target, text, who="tester", **kw))
    loop.human._next_poll = 0.0  # the driver polls every second; a test need not wait for it
    return event


def steps(loop, n):
    for _ in range(n):
        loop.step(timeout=0)


def inject_data(source, fingerprint=None):
    return {"source": source, "params": read_params(source), "fingerprint": fingerprint or structure_fingerprint(source)}


def outcome(loop, seq):
    return read_outcomes(loop.run.store.connection)[seq]


def test_inject_is_evaluated_in_the_next_slot_and_tuned(tmp_path, families):
    loop = make_loop(config(tmp_path), families)
    loop.start()
    steps(loop, 4)
    event = send(loop, EventKind.INJECT, "toy", "a faster idea", data=inject_data(INJECTED))
    before = len(loop.pool.submitted)
    steps(loop, 1)
    cid = outcome(loop, event.seq).candidate_id
    assert cid and loop.pool.submitted[before] == cid  # the very next evaluation slot
    steps(loop, 12)
    cand = loop.run.store.get_candidate(cid)
    assert cand.origin is Origin.HUMAN and cand.state is State.VERIFIED and cand.fingerprint != \
        structure_fingerprint(TOY_SOURCE)
    tuned = [c for c in loop.run.store.list_candidates(origin=Origin.OPTUNA) if c.parent_ids == (cid,)]
    assert tuned, "a new structure with a PARAMS block is tuned"
    assert check_consistency(loop.run.store, deep=True) == []


def test_refused_inject_loses_nothing(tmp_path, families):
    loop = make_loop(config(tmp_path), families)
    loop.start()
    event = send(loop, EventKind.INJECT, "torch_geqrf", data=inject_data(INJECTED))
    count = loop.run.store.count_candidates()
    steps(loop, 1)
    assert outcome(loop, event.seq).status.value == "refused"
    assert loop.run.store.count_candidates() >= count  # the loop goes on; nothing was added for the event
    assert not loop.run.store.list_candidates(origin=Origin.HUMAN)


def test_note_reaches_the_next_llm_prompt(tmp_path, families):
    llm = FakeLLMPool(lambda messages: "no edit")
    loop = make_loop(config(tmp_path, mutation=MutationMix({"llm_edit": 1.0, "optuna_step": 1.0, "param_crossover": 0.0, "llm_merge": 0.0})), families, llm=llm)
    loop.start()
    steps(loop, 4)
    target = loop.run.champion("toy").id
    assert not any("split the panel" in m[1]["content"] for m in llm.prompts)
    send(loop, EventKind.NOTE, target, "split the panel: tried, slower at n=64")
    seen = len(llm.prompts)
    steps(loop, 3)
    later = [m[1]["content"] for m in llm.prompts[seen:]]
    assert later and all("split the panel: tried, slower at n=64" in p for p in later)
    assert f"on {target}" in later[0] and "tester" in later[0]


def test_retire_stops_a_structure_being_chosen_and_undo_restores_it(tmp_path, families):
    loop = make_loop(config(tmp_path), families)
    loop.start()
    steps(loop, 3)
    inj = send(loop, EventKind.INJECT, "toy", data=inject_data(INJECTED))
    steps(loop, 3)
    seed_fp = structure_fingerprint(TOY_SOURCE)
    retire = send(loop, EventKind.RETIRE, f"toy/{seed_fp}", "dead end")
    steps(loop, 1)
    first_after = loop.run.store.next_seq()
    steps(loop, 10)
    made = [c for c in loop.run.store.list_candidates(family="toy") if int(c.id[1:]) >= first_after]
    assert made and all(c.fingerprint != seed_fp for c in made), "a retired structure is neither tuned nor a parent"
    assert {c.parent_ids[0] for c in made if c.parent_ids} <= {
        c.id for c in loop.run.store.list_candidates(family="toy") if c.fingerprint != seed_fp}
    assert outcome(loop, inj.seq).status.value == "applied"
    send(loop, EventKind.RETIRE, f"toy/{seed_fp}", undoes=retire.seq)
    steps(loop, 1)
    assert loop.proposer.retired == frozenset()


def test_pause_finishes_in_flight_work_then_waits(tmp_path, families):
    pool = FakePool(size=2)
    loop = make_loop(config(tmp_path), families, pool=pool)
    loop.start()
    steps(loop, 3)
    send(loop, EventKind.PAUSE)
    steps(loop, 1)  # applies the pause; the work in flight completes in this step's poll next time
    steps(loop, 1)
    submitted = len(pool.submitted)
    steps(loop, 5)
    assert len(pool.submitted) == submitted and not pool.inflight()
    assert loop.status().human["paused"] is True and not loop.finished
    send(loop, EventKind.UNPAUSE)
    steps(loop, 2)
    assert len(pool.submitted) > submitted and loop.status().human["paused"] is False


def _tamper(run_dir, cid, factor):
    """Divide the recorded per-case times of one candidate (in a copy of the store)."""
    db = sqlite3.connect(run_dir / "run.sqlite")
    (body,) = db.execute("SELECT body FROM results WHERE candidate_id = ?", (cid,)).fetchone()
    data = json.loads(body)
    for case in data["cases"]:
        for key in ("median_ms", "min_ms", "max_ms"):
            case[key] = case[key] / factor
    db.execute("UPDATE results SET body = ? WHERE candidate_id = ?", (json.dumps(data), cid))
    db.commit()
    db.close()


def test_recheck_of_a_tampered_record_does_not_hold_and_disputes_it(tmp_path, families):
    cfg = config(tmp_path)
    loop = make_loop(cfg, families, max_evals=8)
    loop.run_until_done()
    champion = loop.run.champion("toy").id
    loop.run.close()
    copy = tmp_path / "copy"
    shutil.copytree(cfg.run_dir, copy)
    _tamper(copy, champion, 20.0)
    results = {}
    for name, run_dir in (("honest", cfg.run_dir), ("tampered", copy)):
        run = Run.open(run_dir)
        again = make_loop(cfg.model_copy(update={"runs_dir": str(run_dir.parent), "name": run_dir.name}), families,
                          run=run, max_evals=12)
        again.start()
        event = send(again, EventKind.RECHECK, champion, data={"cases": []})
        steps(again, 3)
        results[name] = (outcome(again, event.seq), again)
    honest, _ = results["honest"]
    tampered, loop2 = results["tampered"]
    assert honest.status.value == "done" and honest.data["holds"] is True, honest.detail
    assert tampered.status.value == "done" and tampered.data["holds"] is False, tampered.detail
    assert all(not row["holds"] and row["adjusted_ratio"] > 10 for row in tampered.data["cases"])
    # Disputed: it lost the title and is re-measured as a new human candidate of the same code.
    assert loop2.run.champion("toy").id != champion
    remeasure = loop2.run.store.get_candidate(tampered.candidate_id)
    assert remeasure.origin is Origin.HUMAN and remeasure.parent_ids == (champion,)
    assert loop2.run.population.family("toy").is_disputed(champion)
    assert check_consistency(loop2.run.store, deep=True) == []
    assert int(loop2.run.store.counter("gpu_evaluations")) >= 8  # rechecks are not counted as evaluations


def test_a_disputed_result_is_never_crowned_again(tmp_path, families):
    loop = make_loop(config(tmp_path), families)
    loop.start()
    steps(loop, 6)
    champion = loop.run.champion("toy")
    rivals = [m for m in loop.run.population.family("toy").members() if m.id != champion.id]
    changes = loop.run.dispute(champion.id)
    assert rivals and [c.cause for c in changes] == ["disputed"]
    assert loop.run.champion("toy").id == min(rivals, key=lambda m: m.fitness_ms).id
    # Reopened from the store, the family still knows the dispute.
    from population.run import load_population
    assert load_population(loop.run.store).family("toy").is_disputed(champion.id)
    crowned = len(loop.run.store.champion_history("toy"))
    steps(loop, 10)
    later = loop.run.store.champion_history("toy")[crowned:]
    assert all(e.change.candidate_id != champion.id for e in later)
    assert loop.run.champion("toy").id != champion.id
    assert check_consistency(loop.run.store, deep=True) == []


def focus_judge(request):
    """The focused case improves with the toy landscape; warps=16 makes dense-4x32 1.5x slower."""
    if request.family == "torch_geqrf" or ":recheck:" in request.candidate_id:
        return default_judge(request)
    params = read_params(request.source)
    cases = []
    for c in request.bench_cases:
        ms = toy_time(params, request.source) if c.name == "dense-8x16-c1" else 1.0
        if c.name == "dense-4x32-c1" and params.get("warps") == 16:
            ms = 1.5
        cases.append(CaseOutcome(case=c.name, status=CaseStatus.OK, median_ms=ms, min_ms=ms, max_ms=ms, count=3))
    from population.outcomes import geomean
    from search.evaluate.worker import EvalOutcome

    result = EvalResult(candidate_id=request.candidate_id, cases=tuple(cases),
                        geomean_ms=geomean(c.median_ms for c in cases), device="fake")
    return EvalOutcome(candidate_id=request.candidate_id, state=State.VERIFIED, result=result, busy_s=0.01)


def test_focused_run_stops_at_its_target_and_rejects_a_regression(tmp_path, families):
    focus = FocusConfig(cases=["dense-8x16-c1"], target_pct=80.0, max_regression_pct=2.0)
    loop = make_loop(config(tmp_path, focus=focus), families, pool=FakePool(judge=focus_judge), max_evals=200)
    loop.start()
    steps(loop, 3)
    regressing = render_params(TOY_SOURCE, {"block": 32, "warps": 16, "stages": 3})
    event = send(loop, EventKind.INJECT, "toy", data=inject_data(regressing))
    loop.run_until_done()
    cid = read_outcomes(loop.run.store.connection)[event.seq].candidate_id
    rejected = loop.run.store.get_candidate(cid)
    assert rejected.state is State.REJECTED and rejected.reason.startswith("focus: dense-4x32-c1 50.0% slower")
    assert loop.stop_requested.startswith("focus target reached"), loop.stop_requested
    status = loop.status().focus
    row = status["families"]["toy"]
    assert row["faster_pct"] >= 80.0 and status["reached"] == ["toy"]
    champ = loop.run.champion("toy")
    result = loop.run.store.get_result(champ.id)
    times = {c.case: c.median_ms for c in result.cases}
    assert champ.fitness_ms == pytest.approx(times["dense-8x16-c1"]) != result.geomean_ms
    assert check_consistency(loop.run.store, deep=True) == []
    assert loop.stats.evaluations < 200


def test_events_written_to_a_stopped_run_apply_once_on_resume(tmp_path, families):
    cfg = config(tmp_path)
    loop = make_loop(cfg, families, max_evals=6)
    loop.run_until_done()
    loop.run.close()
    with EventWriter(cfg.run_dir) as writer:
        inj = writer.append(new_event(EventKind.INJECT, "toy", who="tester", data=inject_data(INJECTED)))
        writer.append(new_event(EventKind.PROMOTE, "c0000002", "reviewed", who="tester"))
    for round_ in range(2):
        run = Run.open(cfg.run_dir)
        again = make_loop(cfg, families, run=run, max_evals=9 + 3 * round_)
        again.run_until_done()
        humans = run.store.list_candidates(origin=Origin.HUMAN)
        assert [c.id for c in humans] == [read_outcomes(run.store.connection)[inj.seq].candidate_id]
        assert humans[0].state is State.VERIFIED
        run.close()


def cli(*args, code=0):
    from typer.testing import CliRunner

    from search.cli.app import app

    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exit_code == code, (result.output, result.exception)
    if code or "--json" in args:
        return result.output
    return " ".join(result.output.split())  # rich wraps lines at the terminal width


def test_commands_on_a_stopped_run_validate_record_and_show(tmp_path, families):
    cfg = config(tmp_path)
    loop = make_loop(cfg, families, max_evals=10)
    loop.run_until_done()
    run_dir = cfg.run_dir
    champion = loop.run.champion("toy").id
    other = next(c.id for c in loop.run.store.list_candidates(family="toy", state=State.VERIFIED) if c.id != champion)
    failed = loop.run.store.list_candidates(state=State.PENDING)
    loop.run.close()
    bad = tmp_path / "bad.py"
    bad.write_text("import subprocess\n\ndef custom_kernel(A):\n    return subprocess.run(['true'])\n")
    good = tmp_path / "good.py"
    good.write_text(INJECTED)
    # Bad input: one line each, exit 1, nothing written.
    for args in ([run_dir, "inject", bad, "--family", "toy"], [run_dir, "inject", good, "--family", "nope"],
                 [run_dir, "note", "c999", "x"], [run_dir, "recheck", champion, "--cases", "nope"],
                 [run_dir, "promote", other, "--undo"], [run_dir, "retire", "zzzz"]):
        out = cli(args[1], args[0], *args[2:], code=1)
        assert out.startswith("error:") and len(out.strip().splitlines()) <= 2, out
    with EventWriter(run_dir) as writer:
        assert writer.events() == []
    # export --family takes the promoted candidate, and says so; --undo gives the champion back.
    out = cli("promote", run_dir, other, "--note", "reviewed the timings")
    assert "applies when the run resumes" in out
    out = cli("export", run_dir, "--family", "toy", "-o", tmp_path / "x.py")
    assert f"candidate {other}, promoted by" in out and "reviewed the timings" in out
    out = cli("export", run_dir, "--composite", "-o", tmp_path / "comp.py")
    assert f"promoted candidates only: {other}" in out
    cli("promote", run_dir, other, "--undo", "--note", "changed my mind")
    out = cli("export", run_dir, "--family", "toy", "-o", tmp_path / "x.py")
    assert f"candidate {champion}, the family champion" in out
    data = json.loads(cli("note", run_dir, champion, "looks launch-bound", "--json"))
    assert data["event"]["kind"] == "note" and data["running"] is False
    out = cli("inject", run_dir, good, "--family", "toy", "--note", "contiguous first")
    assert re.match(r"candidate c\d+: injected into toy by .*; first when the run resumes", out), out
    cli("retire", run_dir, other, "--note", "dead end")
    cli("recheck", run_dir, champion)
    cli("pause", run_dir)
    status = json.loads(cli("status", run_dir, "--json"))
    # The inject is applied at once (its candidate waits, pending); the other six wait for a resume.
    assert status["human"]["paused"] is True and status["human"]["unapplied"] == 6
    cli("unpause", run_dir)
    shown = json.loads(cli("show", run_dir, champion, "--json"))
    kinds = [e["kind"] for e in shown["human"]["events"]]
    assert "note" in kinds and "recheck" in kinds
    tree = cli("lineage", run_dir, "--family", "toy")
    assert "1 note" in tree and "retired structure" in tree
    cli("report", run_dir, "-o", tmp_path / "r" / "report.html", "--no-png")
    html = (tmp_path / "r" / "report.html").read_text()
    assert "The engineer in the loop" in html and "looks launch-bound" in html and "changed my mind" in html
    assert not failed


def test_inject_on_a_stopped_run_returns_the_id_and_the_resume_runs_it_first_and_once(tmp_path, families):
    cfg = config(tmp_path)
    loop = make_loop(cfg, families, max_evals=6)
    loop.run_until_done()
    waiting = render_params(TOY_SOURCE, {"block": 32, "warps": 8, "stages": 2})  # older, and still pending
    loop.run.add_candidate(NewCandidate(family="toy", origin=Origin.SEED, source=waiting, params=read_params(waiting),
                                        fingerprint=structure_fingerprint(waiting)))
    loop.run.close()
    good = tmp_path / "good.py"
    good.write_text(INJECTED)
    data = json.loads(cli("inject", cfg.run_dir, good, "--family", "toy", "--json"))
    cid = data["candidate_id"]
    assert cid and data["running"] is False and data["applies"].startswith("first when the run resumes")
    with RunStore.open(cfg.run_dir, readonly=True) as store:
        cand = store.get_candidate(cid)
        assert cand.state is State.PENDING and cand.origin is Origin.HUMAN
        assert read_outcomes(store.connection)[data["event"]["seq"]].candidate_id == cid
    run = Run.open(cfg.run_dir)
    again = make_loop(cfg, families, run=run, max_evals=8)
    again.start()
    again.step(timeout=0)
    assert again.pool.submitted[0] == cid  # the engineer's candidate goes first
    again.run_until_done()
    assert [c.id for c in run.store.list_candidates(origin=Origin.HUMAN)] == [cid]  # not injected a second time
    assert run.store.get_candidate(cid).state is State.VERIFIED
    run.close()


def test_a_malformed_event_is_refused_and_the_run_goes_on(tmp_path, families):
    loop = make_loop(config(tmp_path), families)
    loop.start()
    bad = send(loop, EventKind.INJECT, "toy", data={"params": {}})  # no source
    good = send(loop, EventKind.NOTE, "c0000001", "still listening")
    steps(loop, 2)
    assert outcome(loop, bad.seq).status.value == "refused" and "source" in outcome(loop, bad.seq).detail
    assert outcome(loop, good.seq).status.value == "applied"
    assert not loop.run.store.list_candidates(origin=Origin.HUMAN)
    assert check_consistency(loop.run.store) == []
