"""Mutation operators as plugins, and the queue that carries candidates with their sources."""

from __future__ import annotations

from typing import Iterator, Mapping

import pytest

import population.models
from kernels.params import render_params
from population.consistency import check_consistency
from population.models import NewCandidate, Origin
from search.config import ConfigError, MutationMix, RunConfig
from search.mutation import operators
from search.engine.loop import SearchLoop
from search.mutation.operators import Child, ProposalContext
from search.engine.proposer import OPERATOR_KEY
from tests.search.engine.test_loop import config, families, make_loop  # noqa: F401 - the fixture
from tests.search.fakes import FakeLLMPool, FakePool


class ToyStages:
    """A toy immediate operator: the parent with its ``stages`` parameter moved up by one."""

    name = "toy_stages"
    description = "the parent, one stage more (a test's plugin)"
    origin = Origin.OPTUNA  # one parent
    needs_llm = False
    default_weight = 0.0

    def propose(self, ctx: ProposalContext, family: str, island: int,
                inflight: Mapping[str, int]) -> Child | None:
        parent = ctx.run.select_parent(family, island, ctx.retired)
        stages = parent.params.get("stages") if parent is not None else None
        if parent is None or not isinstance(stages, int):
            return None
        params = {**parent.params, "stages": stages % 6 + 1}
        new = NewCandidate(family=family, island=island, parent_ids=(parent.id,), origin=self.origin,
                           source=render_params(ctx.run.source(parent), params), params=params,
                           fingerprint=parent.fingerprint, generation=parent.generation + 1)
        return Child(new=new) if ctx.fresh(new) else None


@pytest.fixture()
def toy_operator() -> Iterator[ToyStages]:
    op = ToyStages()
    operators.register(op)  # the one registry line a new operator needs
    yield op
    operators.unregister(op.name)


def _children(loop: SearchLoop) -> list[tuple[str, str]]:
    store = loop.run.store
    return [(c.origin.value, store.get_json(OPERATOR_KEY.format(cid=c.id)))
            for c in store.list_candidates() if c.origin not in (Origin.SEED, Origin.MIGRATION)]


def test_a_new_operator_is_one_module_and_one_registry_line(tmp_path, families, toy_operator):
    cfg = config(tmp_path, mutation=MutationMix(toy_stages=1.0))
    loop = make_loop(cfg, families, max_evals=12)
    loop.run_until_done()
    children = _children(loop)
    assert children and set(children) == {("optuna", "toy_stages")}
    store = loop.run.store
    made = [c for c in store.list_candidates() if c.origin is Origin.OPTUNA]
    assert any(c.state.is_terminal for c in made) and check_consistency(store, deep=True) == []
    # The config reference lists it with the built-ins.
    assert "toy_stages" in [row[0] for row in MutationMix.reference()]


def test_unknown_operator_is_a_one_line_config_error():
    with pytest.raises(ConfigError) as info:
        RunConfig.from_yaml_text("mutation: {optuna_step: 1, toy_stages: 1}", "run.yaml")
    assert "mutation: unknown mutation operator 'toy_stages'; registered: optuna_step," in str(info.value)


def test_old_keys_map_onto_the_operators_with_a_warning():
    with pytest.warns(FutureWarning, match="deprecated"):
        mix = MutationMix(llm=0.4, optuna=0.5)
    # crossover (omitted: its old default 0.1) weighed both two-parent operators.
    assert mix.weights == {"llm_edit": 0.4, "optuna_step": 0.5, "param_crossover": 0.1, "llm_merge": 0.1}
    # The defaults of the old keys did not move; the default mix adds the local step beside them.
    assert MutationMix().weights == {**mix.weights, "local_step": 0.5}
    with pytest.raises(ConfigError, match="cannot be mixed"):
        RunConfig.from_yaml_text("mutation: {llm: 1, optuna_step: 1}")
    # What a run stores is the new spelling, which loads back unchanged and without a warning.
    assert RunConfig.model_validate_json(RunConfig(mutation=mix).model_dump_json()).mutation == mix


def test_the_two_crossovers_have_distinct_names_and_one_lineage_kind():
    ops = operators.registry()
    assert list(ops)[:len(operators.BUILTIN)] == list(operators.BUILTIN)
    assert ops["param_crossover"].origin is ops["llm_merge"].origin is Origin.CROSSOVER
    assert not ops["param_crossover"].needs_llm and ops["llm_merge"].needs_llm and ops["llm_edit"].needs_llm
    with pytest.raises(ValueError, match="registered already"):
        operators.register(ops["llm_edit"])


def test_operator_names_replace_the_old_keys_without_changing_a_draw(tmp_path, families):
    def sequence(run_dir, mix):
        loop = make_loop(config(run_dir, mutation=mix), families, llm=FakeLLMPool(lambda m: "no edit"), max_evals=20)
        loop.run_until_done()
        return [(c.origin, c.parent_ids, c.params, c.state) for c in loop.run.store.list_candidates()], loop

    with pytest.warns(FutureWarning):
        old_mix = MutationMix(llm=0.3, optuna=0.8, crossover=0.2)
    old, loop = sequence(tmp_path / "old", old_mix)
    new, _ = sequence(tmp_path / "new", MutationMix(optuna_step=0.8, param_crossover=0.2, llm_merge=0.2, llm_edit=0.3))
    assert old == new
    recorded = set(_children(loop))
    assert {("optuna", "optuna_step"), ("llm", "llm_edit")} <= recorded
    assert recorded <= {("optuna", "optuna_step"), ("crossover", "param_crossover"), ("crossover", "llm_merge"),
                        ("llm", "llm_edit")}
    calls = [loop.run.store.get_json(f"llm/call/{n:06d}") for n in range(1, int(loop.run.store.counter("llm_calls")) + 1)]
    assert calls and {c["operator"] for c in calls} <= {"llm_edit", "llm_merge"}


def test_queued_candidates_are_not_read_back(tmp_path, families, monkeypatch):
    cfg = config(tmp_path)
    loop = make_loop(cfg, families, pool=FakePool(size=4), max_evals=30)
    loop.start()  # the four seeds (reference, toy x2, toy2): their sources are read here, once
    assert len(loop.queue) == 4
    store = loop.run.store
    reads = {"source": 0, "find_candidate": 0}
    for name in reads:
        real = getattr(store, name)

        def counted(*args, _real=real, _name=name):
            reads[_name] += 1
            return _real(*args)
        monkeypatch.setattr(store, name, counted)
    loop._dispatch()
    assert len(loop.pool.inflight()) == 4 and not loop.queue
    # One read each, inside the store's pending -> running check; no source read at all.
    assert reads == {"source": 0, "find_candidate": 4}
    monkeypatch.setattr(store, "find_candidate", lambda cid: pytest.fail("in-flight counts read the store"))
    counts = loop._inflight_by_structure()
    assert sum(counts.values()) == 4 and len(counts) == 2  # the reference's structure and the toy file's


def test_the_baseline_is_parsed_once_and_a_source_hashed_once(tmp_path, families, monkeypatch):
    loop = make_loop(config(tmp_path), families, max_evals=6)
    loop.run_until_done()
    first = loop.proposer.baseline_result()
    assert first is not None
    monkeypatch.setattr(loop.run.store, "get_result", lambda cid: pytest.fail("the baseline was read again"))
    assert loop.proposer.baseline_result() is first

    hashed: list[str] = []
    real = population.models.source_hash
    monkeypatch.setattr(population.models, "source_hash", lambda text: hashed.append(text) or real(text))
    new = NewCandidate(family="toy", origin=Origin.SEED, source="def custom_kernel(A):\n    return A\n",
                       fingerprint="x")
    assert loop.proposer.fresh(new) and not loop.proposer.fresh(new)
    cand = loop.run.add_candidate(new)
    assert len(hashed) == 1 and cand.source_sha256 == real(new.source)
    # A copy with another source gets its own hash, not the original's.
    assert new.model_copy(update={"source": "y"}).source_sha256 == real("y")


def test_param_crossover_renders_a_parents_point_once(monkeypatch):
    """Converged mates give the same few mixes over and over: each (parent text, params) is
    rendered and hashed once (untried), then passed over, and a fresh mix still comes out."""
    import random
    from types import SimpleNamespace
    from typing import Annotated

    from kernels.params import Choice, ParamSpace
    from population.models import Candidate, State, canonical_params, candidate_id, source_hash
    from search.mutation.operators import param_crossover as pc

    class Space(ParamSpace):
        a: Annotated[int, Choice(1, 2)] = 1
        b: Annotated[int, Choice(1, 2)] = 1

    source = "# qrsearch: params\nPARAMS = {\"a\": 1, \"b\": 1}\n# qrsearch: end params\n"

    def cand(seq, params):
        return Candidate(id=candidate_id(seq), family="f", island=0, origin="seed", source_sha256=source_hash(source),
                         params=params, fingerprint="s", created_at=0.0, updated_at=0.0, state=State.VERIFIED,
                         fitness_ms=1.0)

    a, b = cand(1, {"a": 1, "b": 1}), cand(2, {"a": 2, "b": 2})
    renders = []
    real_render = pc.render_params
    monkeypatch.setattr(pc, "render_params", lambda s, p: renders.append(dict(p)) or real_render(s, p))
    seen: set = set()
    tried: set = set()

    def fresh(new):
        key = (new.source_sha256, canonical_params(new.params))
        return not (key in seen or seen.add(key))

    def untried(sha, params):
        key = (sha, canonical_params(params))
        return not (key in tried or tried.add(key))

    states: dict = {}
    ctx = SimpleNamespace(
        run=SimpleNamespace(select_parent=lambda *_: a, population=SimpleNamespace(members=lambda *_: [a, b]),
                            source=lambda _c: source),
        families={"f": SimpleNamespace(space=Space)}, rng=random.Random(3), fresh=fresh, untried=untried,
        retired=frozenset(), operator_state=lambda name, make: states.setdefault(name, make()),
        select_parent=lambda *_: a)
    children = [pc.OPERATOR.propose(ctx, "f", 0, {}) for _ in range(30)]
    made = [c.new.params for c in children if c is not None]
    # Every mix of the two parents once, and neither parent's own point (it is a candidate already).
    assert sorted(map(canonical_params, made)) == sorted(map(canonical_params, [{"a": 1, "b": 2}, {"a": 2, "b": 1}]))
    assert len(renders) == 2, "no mix rendered twice"
    # The pair is spent: later draws neither render nor validate anything.
    monkeypatch.setattr(Space, "__init__", lambda *a, **k: pytest.fail("a spent pair was drawn from"))
    assert pc.OPERATOR.propose(ctx, "f", 0, {}) is None and len(renders) == 2


def test_a_crossover_mask_is_drawn_once_and_never_a_parents_own():
    import random

    from search.mutation.operators.param_crossover import draw

    rng = random.Random(0)
    drawn: set[int] = set()
    while (mask := draw(rng, 4, drawn)) is not None:
        assert mask not in drawn and 0 < mask < 15
        drawn.add(mask)
    assert drawn == set(range(1, 15))  # all 14 mixes of a pair differing on four knobs
    assert draw(rng, 1, set()) is None  # one differing knob: each mix is a parent
