"""The proposer's behaviours for many evaluators on one toy island: carrying a stale child's gain
forward (``optuna.carry_gains``: which gains become leads, what child a lead makes, and that the
loop runs with it, every carried child a trial told once), parents drawn with their children in
flight counted (``selection.inflight_penalty``), and TPE giving way when a structure is crowded
(``optuna.tpe_max_inflight``)."""

from __future__ import annotations

import optuna

from kernels.params import render_params, structure_fingerprint
from population.consistency import check_consistency
from population.models import Candidate, EvalResult, NewCandidate, Origin, State
from search.config import MutationMix, OptunaConfig
from search.engine.proposer import NOTE_KEY, OPERATOR_KEY, TRIAL_KEY
from search.mutation.carry import moved
from search.mutation.tuning import TRIAL_ATTR_CANDIDATE
from tests.search.engine.test_loop import config, families, make_loop  # noqa: F401 - the fixture
from tests.search.fakes import TOY_SOURCE, FakePool

FP = structure_fingerprint(TOY_SOURCE)


def _verified(loop, params: dict, ms: float, parent: Candidate | None = None, island: int = 0) -> Candidate:
    """A toy candidate (a child of ``parent`` if given) told verified at ``ms``."""
    new = NewCandidate(family="toy", island=island, origin=Origin.OPTUNA if parent else Origin.SEED,
                       parent_ids=(parent.id,) if parent else (), source=render_params(TOY_SOURCE, params),
                       params=params, fingerprint=FP, generation=parent.generation + 1 if parent else 0)
    cand = loop.run.add_candidate(new)
    loop.run.mark_running(cand.id)
    return loop.run.tell(cand.id, State.VERIFIED, result=EvalResult(candidate_id=cand.id, geomean_ms=ms)).candidate


def _island(loop) -> tuple[Candidate, Candidate]:
    """A slow parent and a faster member of the same island and structure."""
    parent = _verified(loop, {"block": 16, "warps": 4, "stages": 2}, 5.0)
    best = _verified(loop, {"block": 32, "warps": 4, "stages": 2}, 2.0)
    return parent, best


def test_moved_names_the_knobs_a_child_changed():
    assert moved({"a": 1, "b": 2, "c": True}, {"a": 1, "b": 3, "c": 1}) == {"b": 3, "c": 1}  # 1 is not True


def test_a_gain_over_an_overtaken_parent_becomes_the_familys_next_child(tmp_path, families):
    loop = make_loop(config(tmp_path, optuna=OptunaConfig(carry_gains=True)), families)
    parent, best = _island(loop)
    child = _verified(loop, {"block": 16, "warps": 2, "stages": 2}, 4.0, parent=parent)  # warps 4 -> 2 helped
    loop.proposer.told(child)
    assert loop.proposer.leads.pending("toy") == 1
    made = loop.proposer.synchronous("toy", 1, {})  # any island: the lead names its own
    assert made is not None and made.operator == "local_step" and made.proposal is not None
    assert made.new.parent_ids == (best.id,) and made.new.island == best.island
    assert made.new.params == {"block": 32, "warps": 2, "stages": 2}  # the best's point with the child's move
    assert child.id in made.note and parent.id in made.note
    # A trial of the structure's study at that point, bound when the loop stores the child.
    loop._store_child(made)
    stored = loop.run.store.list_candidates()[-1]
    trial = loop.run.store.get_json(TRIAL_KEY.format(cid=stored.id))
    frozen = loop.tuner.study("toy", FP).get_trials(deepcopy=False)[trial["number"]]
    assert frozen.params == made.new.params and frozen.user_attrs[TRIAL_ATTR_CANDIDATE] == stored.id
    assert loop.run.store.get_json(OPERATOR_KEY.format(cid=stored.id)) == "local_step"
    assert "moves over" in loop.run.store.get_json(NOTE_KEY.format(cid=stored.id))
    assert loop.proposer.leads.pending("toy") == 0 and loop.proposer.leads.carried == 1


def test_no_lead_when_the_child_leads_its_island_or_did_not_gain(tmp_path, families):
    loop = make_loop(config(tmp_path, optuna=OptunaConfig(carry_gains=True)), families)
    parent, best = _island(loop)
    slower = _verified(loop, {"block": 16, "warps": 8, "stages": 2}, 6.0, parent=parent)  # worse than its parent
    fastest = _verified(loop, {"block": 32, "warps": 2, "stages": 2}, 1.0, parent=best)  # the island's best now
    far = _verified(loop, {"block": 64, "warps": 1, "stages": 5}, 4.5, parent=parent)  # 3 moves: fine
    loop.proposer.told(slower)
    loop.proposer.told(fastest)
    assert loop.proposer.leads.pending("toy") == 0
    loop.proposer.told(far)  # its best is `fastest` now; three moves are still a step
    assert loop.proposer.leads.pending("toy") == 1


def test_off_by_default_and_then_no_lead_is_kept(tmp_path, families):
    assert OptunaConfig().carry_gains is False
    loop = make_loop(config(tmp_path), families)
    parent, _ = _island(loop)
    loop.proposer.told(_verified(loop, {"block": 16, "warps": 2, "stages": 2}, 4.0, parent=parent))
    assert len(loop.proposer.leads) == 0


def test_a_point_asked_before_is_dropped_not_proposed_again(tmp_path, families):
    loop = make_loop(config(tmp_path, optuna=OptunaConfig(carry_gains=True)), families)
    parent, best = _island(loop)
    child = _verified(loop, {"block": 16, "warps": 2, "stages": 2}, 4.0, parent=parent)
    loop.proposer.told(child)
    loop.proposer.told(child)  # the same lead twice (two tells of one gain, or two children with one move)
    first = loop.proposer.synchronous("toy", 0, {})
    assert first is not None and first.operator == "local_step"
    second = loop.proposer.leads.propose(loop.proposer, "toy")
    assert second is None  # the point is the study's already: not asked again
    states = [t.state for t in loop.tuner.study("toy", FP).get_trials(deepcopy=False)]
    assert states.count(optuna.trial.TrialState.RUNNING) == 1


def test_a_search_with_carried_gains_stays_consistent_and_tells_every_trial(tmp_path, families):
    """Many children in flight (8 evaluators of 2 lanes on the toy landscape): leads are made and
    proposed, and each carried child is an evaluated trial like any other."""
    cfg = config(tmp_path, optuna=OptunaConfig(carry_gains=True),
                 mutation=MutationMix({"local_step": 0.6, "optuna_step": 0.3, "param_crossover": 0.1}))
    loop = make_loop(cfg, families, pool=FakePool(size=8, lanes=2), max_evals=80)
    loop.run_until_done()
    store = loop.run.store
    assert check_consistency(store, deep=True) == []
    carried = [c for c in store.list_candidates() if "moves over" in str(store.get_json(NOTE_KEY.format(cid=c.id)) or "")]
    assert carried and len(carried) == loop.proposer.leads.carried
    for cand in carried:
        trial = store.get_json(TRIAL_KEY.format(cid=cand.id))
        frozen = loop.tuner.study(cand.family, cand.fingerprint).get_trials(deepcopy=False)[trial["number"]]
        if cand.state.is_terminal:
            assert frozen.state.is_finished()


def test_a_parent_with_children_in_flight_is_drawn_less_with_an_inflight_penalty(tmp_path, families):
    """``selection.inflight_penalty`` (selection, not carrying; tested here with the same toy island):
    under the same seeded draws the best member, with 6 children in flight, wins fewer tournaments."""
    from collections import Counter

    from search.config import SelectionSettings

    picks = {}
    for penalty in (0.0, 1.0):
        loop = make_loop(config(tmp_path / str(penalty), selection=SelectionSettings(inflight_penalty=penalty)),
                         families)
        _, best = _island(loop)
        for params, ms in (({"block": 64, "warps": 4, "stages": 2}, 3.0), ({"block": 8, "warps": 4, "stages": 2}, 4.0)):
            _verified(loop, params, ms)
        loop.proposer.busy_parents = {best.id: 6}
        picks[penalty] = Counter(loop.proposer.select_parent("toy", 0).id for _ in range(400))
        best_id = best.id
    assert picks[1.0][best_id] < picks[0.0][best_id] / 2
    assert sum(picks[1.0].values()) == 400


def test_tpe_gives_way_to_the_local_step_once_a_structure_is_crowded(tmp_path, families):
    """``optuna.tpe_max_inflight`` (the proposer adapting to parallelism; tested here with the same
    toy island): past the limit of children in flight, the optuna_step declines and the next
    operator makes the child; under it, TPE asks as before."""
    cfg = config(tmp_path, optuna=OptunaConfig(tpe_max_inflight=3),
                 mutation=MutationMix({"optuna_step": 1.0, "local_step": 0.0}))
    loop = make_loop(cfg, families)
    _island(loop)
    for _ in range(3):
        assert loop.proposer.synchronous("toy", 0, {FP: 2}).operator == "optuna_step"
        assert loop.proposer.synchronous("toy", 0, {FP: 3}).operator == "local_step"
    unlimited = make_loop(config(tmp_path / "u", mutation=cfg.mutation), families)
    _island(unlimited)
    assert unlimited.proposer.synchronous("toy", 0, {FP: 50}).operator == "optuna_step"
