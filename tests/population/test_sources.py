from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from population.consistency import check_consistency
from population.errors import StoreCorrupt
from population.models import NewCandidate, Origin, State, source_hash
from population.run import Run
from population.snapshot import read_snapshot
from population import sources
from population.sources import MIN_DELTA_TEXT, _common_head, _common_tail, delta_against, join
from population.store import RunStore
from population.store_schema import DB_NAME, SCHEMA_VERSION
from tests.population.conftest import CONFIG
from tests.population.test_store import digest, ok, seed


def _file(rng: random.Random, lines: int = 400) -> str:
    return "".join(f"x{i} = {rng.randrange(10**6)}  # {'y' * rng.randrange(60)}\n" for i in range(lines))


def _edited(rng: random.Random, text: str) -> str:
    """The text with one line changed, added or removed (as a tuner's or an LLM's child)."""
    lines = text.splitlines(keepends=True)
    i = rng.randrange(len(lines))
    kind = rng.choice(["change", "add", "drop"])
    if kind == "change":
        lines[i] = f"changed = {rng.random()}\n"
    elif kind == "add":
        lines.insert(i, f"added = {rng.random()}\n")
    else:
        del lines[i]
    return "".join(lines)


def test_a_delta_joins_back_to_the_text_exactly() -> None:
    rng = random.Random(7)
    base = _file(rng)
    cases = [base, base + "tail\n", "head\n" + base, base[:-1], base.replace("x3 =", "x3 :=", 1),
             base[: len(base) // 2] + base[len(base) // 2 + 1:]]
    cases += [_edited(rng, base) for _ in range(200)]
    for text in cases:
        delta = delta_against("b", base, text)
        assert delta is not None, "a one-line difference is kept as a delta"
        assert join(base, delta) == text
        assert len(delta.middle) <= 200
    # A text that shares little, or is short, is kept whole.
    assert delta_against("b", base, _file(random.Random(8))) is None
    assert delta_against("b", base[:MIN_DELTA_TEXT - 1], base[:MIN_DELTA_TEXT - 2]) is None
    # Repeated characters at the seam: the head and tail never overlap.
    same = "a" * 10_000
    for text in (same + "a", same[:-1], "a" * 5_000 + "b" + "a" * 5_000):
        delta = delta_against("b", same, text)
        assert delta is not None and join(same, delta) == text


def _head_by_char(a: str, b: str) -> int:
    i = 0
    while i < min(len(a), len(b)) and a[i] == b[i]:
        i += 1
    return i


def _tail_by_char(a: str, b: str, limit: int) -> int:
    j = 0
    while j < limit and a[len(a) - 1 - j] == b[len(b) - 1 - j]:
        j += 1
    return j


@pytest.mark.parametrize("chunk", [4096, 7, 1])
def test_the_common_head_and_tail_are_those_found_a_character_at_a_time(monkeypatch, chunk: int) -> None:
    """The chunked search with its halving step finds exactly the prefix and suffix a character-by-
    character walk finds: a difference at a chunk's first or last character, texts that end inside
    a chunk or share all of one, and a tail bounded by ``limit``."""
    monkeypatch.setattr(sources, "_CHUNK", chunk)
    rng = random.Random(11)
    for _ in range(400):
        size = rng.choice([0, 1, 2, 7, 8, 9, 63, 4095, 4096, 4097, 9000])
        a = "".join(rng.choice("ab") for _ in range(size))
        b = list(a)
        for _ in range(rng.randrange(3)):  # zero to two changes, anywhere
            if b:
                b[rng.randrange(len(b))] = rng.choice("abc")
        if rng.random() < 0.3:
            b = b[:rng.randrange(len(b) + 1)] if rng.random() < 0.5 else b + list("ab" * rng.randrange(5))
        text = "".join(b)
        head = _common_head(a, text)
        assert head == _head_by_char(a, text), (size, chunk)
        for limit in {min(len(a), len(text)) - head, rng.randrange(min(len(a), len(text)) + 1)}:
            assert _common_tail(a, text, limit) == _tail_by_char(a, text, limit), (size, chunk, limit)


def _child(run: Run, parent_id: str, source: str) -> str:
    return run.add_candidate(NewCandidate(family="a", island=0, origin=Origin.OPTUNA, parent_ids=(parent_id,),
                                          source=source, fingerprint="s0", params={})).id


def _lineage(tmp_path: Path, n: int = 30) -> tuple[Path, dict[str, str]]:
    """A seed of 20-odd KB and a chain of children, each one edit from its parent."""
    rng = random.Random(3)
    run = Run.create(tmp_path / "r", CONFIG)
    text = _file(rng)
    s = seed(run, source=text)
    run.tell(s.id, State.VERIFIED, result=ok(s.id, 5.0))
    texts, parent = {s.id: text}, s.id
    for _ in range(n):
        text = _edited(rng, text)
        parent = _child(run, parent, text)
        texts[parent] = text
    run.close()
    return tmp_path / "r", texts


def test_children_are_stored_as_their_difference_and_read_back_exactly(tmp_path: Path) -> None:
    d, texts = _lineage(tmp_path)
    seed_len = len(next(iter(texts.values())))
    with RunStore.open(d, readonly=True) as store:
        for cand in store.list_candidates():
            assert store.source(cand.source_sha256) == texts[cand.id]
        conn = store.connection
        whole = conn.execute("SELECT sum(length(text)) FROM blobs").fetchone()[0]
        deltas = conn.execute("SELECT count(*) FROM source_deltas").fetchone()[0]
        # A grandchild's base is its grandparent's whole text, never a delta; as the edits spread, a
        # text that differs from its base over more than a quarter is kept whole and is the next base.
        assert conn.execute("SELECT count(*) FROM source_deltas WHERE base IN (SELECT sha256 FROM source_deltas)"
                            ).fetchone()[0] == 0
        assert deltas >= 20 and whole <= (len(texts) - deltas) * 1.1 * seed_len
        assert whole < 0.4 * sum(map(len, texts.values()))
        snap = read_snapshot(store)
        by_sha = {c.source_sha256: texts[c.id] for c in store.list_candidates()}
        assert {sha: snap.sources[sha] for sha in by_sha} == by_sha
        assert snap.sources.load_all() == by_sha == store.sources()
        assert check_consistency(store, deep=True) == []


def test_a_tampered_delta_is_caught_by_the_deep_check(tmp_path: Path) -> None:
    d, _ = _lineage(tmp_path, n=3)
    with RunStore.open(d) as store:
        with store.transaction():
            store.connection.execute("UPDATE source_deltas SET middle = middle || 'x' WHERE rowid = 1")
        assert any("does not hash" in p for p in check_consistency(store, deep=True))


def test_a_parent_and_child_rolled_back_are_stored_again_whole_and_as_a_delta(tmp_path: Path) -> None:
    """The reader keeps the whole texts it read; one whose row a rollback took is named by no candidate."""
    rng = random.Random(5)
    text = _file(rng)
    edited = _edited(rng, text)
    with Run.create(tmp_path / "r", CONFIG) as run:
        with pytest.raises(RuntimeError):
            with run.transaction():
                s = seed(run, source=text)
                _child(run, s.id, edited)
                raise RuntimeError("the driver fails before the commit")
        assert run.store.connection.execute("SELECT count(*) FROM blobs").fetchone()[0] == 0
        s = seed(run, source=text)
        c = _child(run, s.id, edited)
        assert run.store.source(run.store.get_candidate(c).source_sha256) == edited
        assert run.store.connection.execute("SELECT count(*) FROM source_deltas").fetchone()[0] == 1
        assert check_consistency(run.store, deep=True) == []


def _as_schema_1(d: Path) -> None:
    """What a store written before the deltas looks like."""
    conn = sqlite3.connect(d / DB_NAME)
    conn.execute("DROP TABLE source_deltas")
    conn.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()


def test_a_schema_1_store_is_read_as_it_is_and_migrated_by_its_writer(tmp_path: Path) -> None:
    rng = random.Random(9)
    text = _file(rng)
    with Run.create(tmp_path / "r", CONFIG) as run:
        s = seed(run, source=text)
        run.tell(s.id, State.VERIFIED, result=ok(s.id, 5.0))
    d = tmp_path / "r"
    _as_schema_1(d)
    before = digest(d / DB_NAME)
    with RunStore.open(d, readonly=True) as store:
        assert store.source(source_hash(text)) == text and check_consistency(store, deep=True) == []
    assert digest(d / DB_NAME) == before  # a reader migrates nothing
    with Run.open(d) as run:
        version = run.store.connection.execute("PRAGMA user_version").fetchone()[0]
        assert version == SCHEMA_VERSION == 2
        child_text = _edited(rng, text)
        c = _child(run, s.id, child_text)
        assert run.store.connection.execute("SELECT count(*) FROM source_deltas").fetchone()[0] == 1
        assert run.store.source(run.store.get_candidate(c).source_sha256) == child_text
    # A header that says 1 over a meta row that says otherwise is not ours to guess at.
    conn = sqlite3.connect(d / DB_NAME)
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()
    with pytest.raises(StoreCorrupt, match="disagrees"):
        RunStore.open(d, readonly=True)
