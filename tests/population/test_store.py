from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from population.consistency import check_consistency
from population.errors import (InvalidTransition, RunStoreError, StoreCorrupt, StoreExists, StoreForeign, StoreLocked,
                               StoreNotFound, StoreReadOnly, StoreTooNew)
from population.models import EvalResult, NewCandidate, Origin, State
from population.run import Run, load_population
from population.store import RunStore
from population.store_schema import DB_NAME
from tests.population.conftest import CONFIG


def seed(run: Run, family: str = "a", source: str = "def k(): pass\n", fp: str = "s0", island: int = 0):
    return run.add_candidate(NewCandidate(family=family, island=island, origin=Origin.SEED, source=source,
                                          fingerprint=fp))


def child(run: Run, parent_id: str, source: str, fp: str = "s0", params: dict | None = None, island: int = 0):
    return run.add_candidate(NewCandidate(family="a", island=island, origin=Origin.LLM, parent_ids=(parent_id,),
                                          source=source, fingerprint=fp, params=params or {}))


def ok(cid: str, ms: float) -> EvalResult:
    return EvalResult(candidate_id=cid, geomean_ms=ms, device="cpu")


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def filled_store(tmp_path: Path, n: int = 60) -> Path:
    run = Run.create(tmp_path / "r", CONFIG)
    s = seed(run)
    run.tell(s.id, State.VERIFIED, result=ok(s.id, 5.0))
    for i in range(n):
        c = child(run, s.id, f"def k(): return {i}  # {'x' * 200}\n", params={"i": i})
        run.tell(c.id, State.VERIFIED, result=ok(c.id, 1.0 + i % 7))
    run.close()  # last close checkpoints the WAL into the main file
    assert not (tmp_path / "r" / f"{DB_NAME}-wal").exists()
    return tmp_path / "r"


# --- creation and opening ------------------------------------------------------------------

def test_create_refuses_an_existing_store_and_leaves_it_alone(tmp_path: Path) -> None:
    d = filled_store(tmp_path)
    before = digest(d / DB_NAME)
    with pytest.raises(StoreExists, match=str(d / DB_NAME)):
        RunStore.create(d, "{}")
    assert digest(d / DB_NAME) == before


def test_open_missing_names_the_file(tmp_path: Path) -> None:
    # A directory that does not exist is reported as such, not as a missing run.sqlite.
    with pytest.raises(StoreNotFound, match="no such run directory") as missing_dir:
        RunStore.open(tmp_path / "nope")
    assert DB_NAME not in str(missing_dir.value)
    (tmp_path / "empty").mkdir()
    with pytest.raises(StoreNotFound, match=str(tmp_path / "empty" / DB_NAME)):
        RunStore.open(tmp_path / "empty")


def test_create_needs_json_config(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        RunStore.create(tmp_path / "r", "not json")
    assert not (tmp_path / "r").exists()


def test_create_ignores_the_leftovers_of_a_killed_creator(tmp_path: Path) -> None:
    d = tmp_path / "r"
    d.mkdir()
    (d / ".run.sqlite.4242.tmp").write_bytes(b"half a database")
    with RunStore.create(d, '{"x": 1}') as store:
        assert store.config_json() == '{"x": 1}'
    assert not (d / ".run.sqlite.4242.tmp").exists()


def test_a_run_is_resumable_from_the_moment_create_returns(tmp_path: Path) -> None:
    Run.create(tmp_path / "r", CONFIG).close()  # as if killed before its first commit
    with Run.open(tmp_path / "r" / DB_NAME) as run:  # the file's own path works too
        assert run.population.snapshot() == Run(run.store, type(run.population)(CONFIG)).population.snapshot()


def test_a_bare_store_is_not_mistaken_for_a_population_run(tmp_path: Path) -> None:
    RunStore.create(tmp_path / "r", "{}").close()
    with pytest.raises(RunStoreError, match="not a population run"):
        Run.open(tmp_path / "r")
    RunStore.open(tmp_path / "r").close()  # the failed Run.open released the writer lock


@pytest.mark.parametrize("readonly", [False, True])
@pytest.mark.parametrize("content", [b"", b"SQLite format 3\x00" + b"\x00" * 20, b"hello, I am a text file\n" * 10])
def test_garbage_is_reported_as_corrupt_and_never_touched(tmp_path: Path, content: bytes, readonly: bool) -> None:
    d = tmp_path / "r"
    d.mkdir()
    (d / DB_NAME).write_bytes(content)
    with pytest.raises(StoreCorrupt, match=str(d / DB_NAME)):
        RunStore.open(d, readonly=readonly)
    assert (d / DB_NAME).read_bytes() == content
    assert not (d / f"{DB_NAME}-wal").exists()


@pytest.mark.parametrize("readonly", [False, True])
@pytest.mark.parametrize("fraction", [0.1, 0.5, 0.9])
def test_truncated_store_is_reported_as_corrupt_and_never_touched(tmp_path: Path, fraction: float,
                                                                  readonly: bool) -> None:
    d = filled_store(tmp_path)
    db = d / DB_NAME
    data = db.read_bytes()
    cut = data[: int(len(data) * fraction) // 4096 * 4096 or 100]
    db.write_bytes(cut)
    with pytest.raises(StoreCorrupt, match=str(db)):
        RunStore.open(d, readonly=readonly)
    assert db.read_bytes() == cut


def test_foreign_sqlite_file_is_recognised(tmp_path: Path) -> None:
    d = tmp_path / "r"
    d.mkdir()
    conn = sqlite3.connect(d / DB_NAME)
    conn.execute("CREATE TABLE candidates(id TEXT)")
    conn.commit()
    conn.close()
    before = digest(d / DB_NAME)
    with pytest.raises(StoreForeign, match="another application"):
        RunStore.open(d)
    assert digest(d / DB_NAME) == before


def test_newer_schema_is_refused_without_writing(tmp_path: Path) -> None:
    d = filled_store(tmp_path)
    conn = sqlite3.connect(d / DB_NAME)
    conn.execute("PRAGMA user_version = 99")
    conn.commit()
    conn.close()
    before = digest(d / DB_NAME)
    for readonly in (False, True):
        with pytest.raises(StoreTooNew, match=r"schema version 99 .*" + "upgrade"):
            RunStore.open(d, readonly=readonly)
    assert digest(d / DB_NAME) == before


def test_one_writer_at_a_time_but_readers_are_welcome(tmp_path: Path) -> None:
    d = filled_store(tmp_path)
    with RunStore.open(d) as writer:
        with pytest.raises(StoreLocked, match=str(d / DB_NAME)):
            RunStore.open(d)
        with RunStore.open(d, readonly=True) as reader:
            assert reader.count_candidates() == writer.count_candidates() == 61
            with pytest.raises(StoreReadOnly):
                reader.set_json("x", 1)
    with RunStore.open(d):  # the lock went with the writer
        pass


def test_reader_sees_only_commits_while_a_writer_is_mid_transaction(tmp_path: Path) -> None:
    d = filled_store(tmp_path)
    run = Run.open(d)
    try:
        with run.transaction():
            s = seed(run, source="uncommitted\n")
            run.tell(s.id, State.VERIFIED, result=ok(s.id, 0.5))
            # Another process-like reader opens now, while the write transaction is open.
            with RunStore.open(d, readonly=True) as reader:
                assert reader.find_candidate(s.id) is None
                assert check_consistency(reader) == []
                pop = load_population(reader)
                assert pop.champion("a").fitness_ms == 1.0  # type: ignore[union-attr]
        with RunStore.open(d, readonly=True) as reader:
            assert reader.get_candidate(s.id).state is State.VERIFIED
            assert load_population(reader).champion("a").id == s.id  # type: ignore[union-attr]
    finally:
        run.close()


# --- records ---------------------------------------------------------------------------

def test_sources_are_stored_once(run: Run) -> None:
    s = seed(run)
    child(run, s.id, "def k(): pass\n", params={"bm": 64})
    child(run, s.id, "def k(): return 2\n")
    assert run.store.connection.execute("SELECT count(*) FROM blobs").fetchone()[0] == 2
    assert run.source(s) == "def k(): pass\n"


def test_results_are_stored_once_and_repeats_are_idempotent(run: Run) -> None:
    s = seed(run)
    first = run.tell(s.id, State.VERIFIED, result=ok(s.id, 2.0))
    again = run.tell(s.id, State.VERIFIED, result=ok(s.id, 2.0))
    assert not first.already_recorded and again.already_recorded
    assert run.store.counter("evaluations") == 1
    assert run.store.connection.execute("SELECT count(*) FROM results").fetchone()[0] == 1
    with pytest.raises(InvalidTransition):
        run.tell(s.id, State.VERIFIED, result=ok(s.id, 1.0))
    with pytest.raises(InvalidTransition):
        run.tell(s.id, State.CRASHED, reason="late crash report")
    assert run.store.put_result(ok(s.id, 2.0)) is False
    assert check_consistency(run.store) == []


def test_tell_validates_before_writing(run: Run) -> None:
    s = seed(run)
    with pytest.raises(ValueError, match="geomean_ms"):
        run.tell(s.id, State.VERIFIED, result=EvalResult(candidate_id=s.id, error="no timing"))
    with pytest.raises(ValueError, match="not"):
        run.tell(s.id, State.VERIFIED, result=ok("c0000099", 1.0))
    with pytest.raises(InvalidTransition):
        run.tell(s.id, State.RUNNING)
    with pytest.raises(KeyError):
        run.add_candidate(NewCandidate(family="zzz", origin=Origin.SEED, source="x", fingerprint="f"))
    with pytest.raises(IndexError):
        seed(run, island=5)
    assert run.store.get_candidate(s.id).state is State.PENDING
    assert run.store.counter("evaluations") == 0 and run.store.count_candidates() == 1


def test_failure_reason_comes_from_the_error_text(run: Run) -> None:
    s = seed(run)
    res = EvalResult(candidate_id=s.id, error="CompilationError: bad tl.dot\n  at line 3")
    report = run.tell(s.id, State.FAILED_COMPILE, result=res)
    assert report.candidate.reason == "CompilationError: bad tl.dot"
    assert run.store.get_result(s.id).error == res.error  # type: ignore[union-attr]
    assert run.store.counter("failures") == 1 and run.champion("a") is None


def test_requeue_turns_running_back_to_pending_in_creation_order(run: Run) -> None:
    cs = [seed(run, source=f"s{i}\n") for i in range(4)]
    run.mark_running(cs[2].id)
    run.mark_running(cs[0].id)
    run.tell(cs[1].id, State.REJECTED, reason="static check")
    queued = run.requeue_inflight()
    assert [c.id for c in queued] == [cs[0].id, cs[2].id, cs[3].id]
    assert all(c.state is State.PENDING for c in queued)


def test_recent_attempts_are_newest_first_with_outcomes(run: Run) -> None:
    s = seed(run)
    run.tell(s.id, State.VERIFIED, result=ok(s.id, 3.0))
    a = child(run, s.id, "a\n", fp="x")
    b = child(run, s.id, "b\n", fp="y")
    c = child(run, s.id, "c\n", fp="x")
    run.tell(c.id, State.FAILED_VERIFY, result=EvalResult(candidate_id=c.id, error="orth residual 1e-2"))
    run.tell(a.id, State.TIMEOUT, reason="> 60 s")
    run.tell(b.id, State.VERIFIED, result=ok(b.id, 2.0))
    got = run.store.recent_attempts("a", limit=10)
    assert [x.candidate.id for x in got] == [b.id, a.id, c.id, s.id]
    only_x = run.store.recent_attempts("a", limit=10, structure="x")
    assert [(x.candidate.id, x.candidate.state, x.candidate.reason) for x in only_x] == [
        (a.id, State.TIMEOUT, "> 60 s"), (c.id, State.FAILED_VERIFY, "orth residual 1e-2")]
    assert only_x[1].result.error == "orth residual 1e-2" and only_x[0].result is None  # type: ignore[union-attr]
    assert len(run.store.recent_attempts("a", limit=2)) == 2
    failed = run.store.recent_attempts("a", states=[State.TIMEOUT, State.FAILED_VERIFY])
    assert [x.candidate.id for x in failed] == [a.id, c.id]


def test_counters_kv_and_rng_states_persist(tmp_path: Path) -> None:
    run = Run.create(tmp_path / "r", CONFIG, run_config_json='{"search": {"llm": "x"}}')
    run.add_counters({"tokens": 1200, "money_usd": 0.25})
    run.select_parent("a", 0)  # the stream is saved with the next commit, not before
    run.add_counters({"tokens": 300, "money_usd": 0.5})
    run.set_json("optuna.studies", {"a": "study-a"})
    run.select_parent("b", 0)  # never followed by a commit: a resume replays it
    run.close()
    with RunStore.open(tmp_path / "r", readonly=True) as store:
        assert store.counters() == {"money_usd": 0.75, "tokens": 1500}
        assert store.get_json("optuna.studies") == {"a": "study-a"}
        assert store.get_json("missing", default=[]) == []
        assert set(store.get_rng_states()) == {"select/a"}
        assert store.config_json() == '{"search": {"llm": "x"}}'


def test_a_failed_transaction_leaves_store_and_population_as_they_were(run: Run) -> None:
    s = seed(run)
    run.tell(s.id, State.VERIFIED, result=ok(s.id, 3.0))
    c = child(run, s.id, "faster\n")
    before_pop, before_rows = run.population.snapshot(), run.store.count_candidates()
    with pytest.raises(RuntimeError):
        with run.transaction():
            run.tell(c.id, State.VERIFIED, result=ok(c.id, 1.0))
            assert run.champion("a").id == c.id  # type: ignore[union-attr]
            raise RuntimeError("driver died mid-transaction")
    assert run.population.snapshot() == before_pop
    assert run.store.get_candidate(c.id).state is State.PENDING
    assert run.store.count_candidates() == before_rows and check_consistency(run.store) == []
    run.tell(c.id, State.VERIFIED, result=ok(c.id, 1.0))
    assert run.champion("a").id == c.id  # type: ignore[union-attr]


def test_add_family_persists(tmp_path: Path) -> None:
    from population.config import FamilyConfig
    run = Run.create(tmp_path / "r", CONFIG)
    run.add_family(FamilyConfig(name="c", islands=2))
    s = seed(run, family="c")
    run.tell(s.id, State.VERIFIED, result=ok(s.id, 1.0))
    snap = run.population.snapshot()
    run.close()
    with Run.open(tmp_path / "r") as again:
        assert again.population.snapshot() == snap and again.champion("c").id == s.id  # type: ignore[union-attr]


def test_consistency_check_catches_tampering(tmp_path: Path) -> None:
    d = filled_store(tmp_path, n=5)
    with RunStore.open(d) as store:
        assert check_consistency(store, deep=True) == []
        store.set_counter("evaluations", 99)
        with store.transaction():
            store.connection.execute("UPDATE blobs SET text = 'edited' WHERE rowid = 1")
            store.connection.execute("UPDATE structures SET evals = evals + 1")
        problems = check_consistency(store, deep=True)
    assert any("counter evaluations" in p for p in problems)
    assert any("does not hash" in p for p in problems)
    assert any("structure whose evaluation count" in p for p in problems)


def test_a_failed_commit_does_not_forget_unsaved_rng_state(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    from population.rng import rng_state_to_json
    s = seed(run)
    run.tell(s.id, State.VERIFIED, result=ok(s.id, 1.0))
    run.select_parent("a", 0)
    real = run.store._execute

    def failing_commit(sql: str, params=()):  # type: ignore[no-untyped-def]
        if sql == "COMMIT":
            monkeypatch.setattr(run.store, "_execute", real)
            raise sqlite3.OperationalError("disk I/O error")
        return real(sql, params)
    monkeypatch.setattr(run.store, "_execute", failing_commit)
    with pytest.raises(sqlite3.OperationalError):
        run.set_json("x", 1)  # the RNG state was flushed inside this transaction, then lost
    assert not run.store.connection.in_transaction and run.store.get_json("x") is None
    run.set_json("x", 2)
    assert run.store.rng_state("select/a") == rng_state_to_json(run.population.family("a").rng)


def test_requeue_one_lost_evaluation(run: Run) -> None:
    s = seed(run)
    with pytest.raises(InvalidTransition):
        run.requeue(s.id)  # pending already
    run.mark_running(s.id)
    assert run.requeue(s.id).state is State.PENDING
    assert run.store.get_candidate(s.id).state is State.PENDING
    run.tell(s.id, State.CRASHED, reason="lost three times")
    with pytest.raises(InvalidTransition):
        run.requeue(s.id)


def test_a_migrants_measurement_is_its_originals(tmp_path: Path) -> None:
    from population.config import FamilyConfig, MigrationConfig, PopulationConfig
    config = PopulationConfig(families=(FamilyConfig(name="a", islands=2, migration=MigrationConfig(interval=1)),))
    with Run.create(tmp_path / "r", config) as run:
        s = seed(run)
        report = run.tell(s.id, State.VERIFIED, result=ok(s.id, 2.0))
        (migrant,) = report.migrants
        assert run.store.get_candidate(migrant.id).origin is Origin.MIGRATION and run.store.is_member(migrant.id)
        assert run.store.get_result(migrant.id) is None
        assert run.store.evaluated_result(migrant.id) == ok(s.id, 2.0)
        assert run.store.evaluated_result(s.id) == ok(s.id, 2.0)


# --- candidate rows: trusted when they pass the checks, validated when they do not ------------

def _tamper(d: Path, sql: str) -> None:
    """Edit the file behind the store's back (as a person with the sqlite3 shell might)."""
    db = sqlite3.connect(d / DB_NAME)
    db.execute(sql)
    db.commit()
    db.close()


def test_checked_rows_build_what_validation_builds(tmp_path: Path) -> None:
    from population.store_rows import CAND_COLS, candidate_from_row

    d = filled_store(tmp_path, n=8)
    # Params of every kind a JSON scalar takes, and a failure with its reason.
    _tamper(d, """UPDATE candidates SET params = '{"a":1,"b":2.5,"c":"x","d":true,"e":null}' WHERE seq = 3""")
    _tamper(d, "UPDATE candidates SET state = 'crashed', reason = 'segfault', fitness_ms = NULL WHERE seq = 4")
    with RunStore.open(d, readonly=True) as store:
        fast = store.list_candidates()
        validated = [candidate_from_row(r, store.path)
                     for r in store.connection.execute(f"SELECT {CAND_COLS} FROM candidates ORDER BY seq")]
    assert fast == validated and len(fast) == 9
    for a, b in zip(fast, validated):
        assert a.model_dump() == b.model_dump() and a.model_fields_set == b.model_fields_set
        assert [type(v) for v in a.params.values()] == [type(v) for v in b.params.values()]
    assert fast[2].params == {"a": 1, "b": 2.5, "c": "x", "d": True, "e": None}
    with pytest.raises(ValueError):
        fast[0].state = State.CRASHED  # type: ignore[misc]  # as frozen as a validated one


@pytest.mark.parametrize("edit", [
    "state = 'verifed', fitness_ms = NULL",  # not a state
    "origin = 'mutant'",  # not an origin
    "origin = 'crossover'",  # one parent where a crossover has two
    "parent1 = NULL",  # an LLM edit without its parent
    "parent1 = id",  # its own parent
    "id = 'c 7'",  # a character an id never has
    "family = ''",
    "island = -1",
    "generation = -2",
    "source_sha256 = upper(source_sha256)",
    "fingerprint = ''",
    "params = '[1, 2]'",  # not an object
    """params = '{"i": [1]}'""",  # not a scalar
    """params = '{"i": NaN}'""",
    """params = '{"i": 1e999}'""",  # infinite once read
    "params = '{'",
    "params = '{} {}'",  # two documents
    "state = 'failed_verify', fitness_ms = NULL, reason = ''",  # a failure without its reason
    "state = 'failed_verify', fitness_ms = NULL, reason = ' \u2003 '",  # whitespace only, not ASCII's
    "fitness_ms = 1e999",
])
def test_a_candidate_row_edited_out_of_shape_is_a_corrupt_store(tmp_path: Path, edit: str) -> None:
    d = filled_store(tmp_path, n=8)
    _tamper(d, f"UPDATE candidates SET {edit}, member = 0 WHERE seq = 5")
    with RunStore.open(d, readonly=True) as store:
        with pytest.raises(StoreCorrupt, match=r"candidate row '[^']*' does not validate") as caught:
            store.list_candidates()
    said = str(caught.value)
    assert said.startswith(str(d / DB_NAME)) and "\n" not in said and "config.yaml" in said


def test_rows_the_checks_doubt_but_the_model_accepts_are_read(tmp_path: Path) -> None:
    # A failure whose reason has no ASCII letter or digit: the row check sends it to validation,
    # which accepts it; the candidate reads as any other.
    d = filled_store(tmp_path, n=3)
    _tamper(d, "UPDATE candidates SET state = 'failed_verify', fitness_ms = NULL, reason = '¿?', member = 0 "
               "WHERE seq = 2")
    with RunStore.open(d, readonly=True) as store:
        cands = store.list_candidates()
    assert cands[1].state is State.FAILED_VERIFY and cands[1].reason == "¿?"


def test_a_lazy_transaction_begins_at_its_first_write_and_commits_nothing_when_it_wrote_nothing(tmp_path, monkeypatch):
    from population.store_file import StoreFile

    run = Run.create(tmp_path / "r", CONFIG)
    store = run.store
    sent: list[str] = []
    original = StoreFile._execute

    def execute(self, sql, params=()):
        if sql in ("BEGIN IMMEDIATE", "COMMIT"):
            sent.append(sql)
        return original(self, sql, params)

    monkeypatch.setattr(StoreFile, "_execute", execute)
    with run.transaction(lazy=True):
        assert store.counter("x") == 0
    assert sent == []  # read only: no transaction at all
    with run.transaction(lazy=True):
        store.add_counters({"x": 1})
        with run.transaction():  # joins the outer one
            store.add_counters({"y": 2})
    assert sent == ["BEGIN IMMEDIATE", "COMMIT"] and (store.counter("x"), store.counter("y")) == (1, 2)
    with pytest.raises(RuntimeError):
        with run.transaction(lazy=True):
            store.add_counters({"x": 1})
            raise RuntimeError("after the first write")
    assert store.counter("x") == 1  # rolled back whole
    run.close()
    reopened = RunStore.open(tmp_path / "r", readonly=True)
    assert (reopened.counter("x"), reopened.counter("y")) == (1, 2)
    reopened.close()
