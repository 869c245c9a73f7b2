from typing import Annotated, Literal

import optuna
import pytest
from optuna.trial import TrialState
from pydantic import model_validator

from kernels.params import Choice, IntRange, ParamSpace
from search.mutation.tuning import (TRIAL_ATTR_CANDIDATE, TRIAL_ATTR_DUPLICATE, TRIAL_ATTR_LOST, TRIAL_ATTR_SKIPPED,
                           KnownOutcome, Tuner, TunerExhausted)


class Space(ParamSpace):
    block: Annotated[int, Choice(16, 32, 64)] = 32
    warps: Annotated[int, IntRange(2, 8, step=2, log=True)] = 4
    stages: Annotated[int, IntRange(1, 4)] = 2
    precision: Literal["ieee", "tf32x3"] = "ieee"

    @model_validator(mode="after")
    def _rule(self):
        if self.block == 64 and self.stages > 3:
            raise ValueError("too much shared memory")
        return self


DEFAULTS = Space().as_params()


def test_parent_point_is_told_with_its_value_then_only_new_valid_points(tmp_path):
    tuner = Tuner(tmp_path / "j.log", seed=1)
    first = tuner.ask("fam", "fp1", Space, DEFAULTS, parent_id="c0", parent_value=2.0)
    assert first.params != DEFAULTS, "the parent's point is told, not asked again"
    study = tuner.study("fam", "fp1")
    seed = study.get_trials()[0]
    assert seed.state == TrialState.COMPLETE and seed.value == 2.0 and seed.params == DEFAULTS
    assert seed.user_attrs[TRIAL_ATTR_CANDIDATE] == "c0"
    tuner.bind(first, "c1")
    tuner.tell(first.study, first.trial_number, 2.5)
    seen = {tuple(sorted(DEFAULTS.items())), tuple(sorted(first.params.items()))}
    for i in range(12):
        p = tuner.ask("fam", "fp1", Space, DEFAULTS, parent_id="c0", parent_value=2.0)
        Space(**p.params)  # always valid
        key = tuple(sorted(p.params.items()))
        assert key not in seen, "never proposes a point it already evaluated"
        seen.add(key)
        tuner.bind(p, f"c{i + 2}")
        tuner.tell(p.study, p.trial_number, 1.0 + i if i % 3 else None)
    trials = study.get_trials()
    bound = [t for t in trials if TRIAL_ATTR_CANDIDATE in t.user_attrs and TRIAL_ATTR_DUPLICATE not in t.user_attrs]
    states = [t.state for t in bound]
    assert states.count(TrialState.FAIL) == 4 and states.count(TrialState.COMPLETE) == 10
    assert tuner.trials_used("fam", "fp1") == 13  # the told seed costs no trial
    # Asks that were never evaluated are never FAIL: only evaluated candidates fail.
    assert all(TRIAL_ATTR_CANDIDATE in t.user_attrs for t in trials if t.state == TrialState.FAIL)
    assert all(t.state.is_finished() for t in trials)
    params, value = tuner.best("fam", "fp1")
    assert value == 2.0 and Space(**params)


def test_a_repeated_point_is_told_the_known_outcome_never_fail(tmp_path):
    tuner = Tuner(tmp_path / "j.log", seed=2)
    study = tuner.study("fam", "fp")
    first = tuner.ask("fam", "fp", Space, DEFAULTS)
    tuner.bind(first, "c1")
    # The sampler proposes the same point again while c1 is still running, and after it finished.
    study.enqueue_trial(first.params)
    while_running = tuner.ask("fam", "fp", Space, DEFAULTS)
    assert while_running.params != first.params
    tuner.bind(while_running, "c2")
    tuner.tell(first.study, first.trial_number, 4.0)
    study.enqueue_trial(first.params)
    tuner.ask("fam", "fp", Space, DEFAULTS)
    repeats = [t for t in study.get_trials() if t.user_attrs.get(TRIAL_ATTR_DUPLICATE) == first.trial_number]
    assert len(repeats) == 2
    assert all(t.state == TrialState.COMPLETE and t.value == 4.0 and t.user_attrs[TRIAL_ATTR_CANDIDATE] == "c1"
               for t in repeats)
    assert tuner.trials_used("fam", "fp") == 2  # c1 and c2: the repeats cost nothing


def test_skipped_ask_is_pruned_with_its_reason(tmp_path):
    tuner = Tuner(tmp_path / "j.log", seed=4)
    p = tuner.ask("fam", "fp", Space, DEFAULTS)
    tuner.skip(p, "the same code and parameters as an existing candidate")
    trial = tuner.study("fam", "fp").get_trials()[p.trial_number]
    assert trial.state == TrialState.PRUNED and "existing candidate" in trial.user_attrs[TRIAL_ATTR_SKIPPED]
    assert tuner.trials_used("fam", "fp") == 0


def test_reconcile_settles_what_a_killed_driver_left_running(tmp_path):
    path = tmp_path / "j.log"
    tuner = Tuner(path, seed=5)
    done = tuner.ask("fam", "fp", Space, DEFAULTS)
    tuner.bind(done, "c1")  # the store finished c1, the driver died before telling Optuna
    requeued = tuner.ask("fam", "fp", Space, DEFAULTS)
    tuner.bind(requeued, "c2")  # still pending in the store: the resume evaluates it
    unstored = tuner.ask("fam", "fp", Space, DEFAULTS)
    tuner.bind(unstored, "c3")  # bound, but the store transaction never committed
    unbound = tuner.ask("fam", "fp", Space, DEFAULTS)  # asked, never bound
    tuner.skip(tuner.ask("fam", "fp", Space, DEFAULTS), "a repeat")  # written with the skip: unbound too
    tuner.ask("fam", "fp", Space, DEFAULTS)  # asked after the last write: the killed driver left no trace of it
    store = {"c1": KnownOutcome(finished=True, value=3.5), "c2": KnownOutcome(finished=False, value=None)}

    again = Tuner(path, seed=5)
    assert again.reconcile(store.get) == 3
    trials = again.study("fam", "fp").get_trials()
    assert len(trials) == unbound.trial_number + 2  # c1-c3, the unbound ask and the skipped one
    assert trials[done.trial_number].state == TrialState.COMPLETE and trials[done.trial_number].value == 3.5
    assert trials[requeued.trial_number].state == TrialState.RUNNING
    for lost in (unstored, unbound):
        assert trials[lost.trial_number].state == TrialState.FAIL
        assert trials[lost.trial_number].user_attrs[TRIAL_ATTR_LOST] is True
    assert again.reconcile(store.get) == 0  # idempotent
    again.tell(requeued.study, requeued.trial_number, 2.0)
    assert again.study("fam", "fp").get_trials()[requeued.trial_number].value == 2.0


def test_budget_per_structure(tmp_path):
    tuner = Tuner(tmp_path / "j.log", trials_per_structure=3)
    for i in range(3):
        p = tuner.ask("fam", "fp", Space, DEFAULTS)
        tuner.bind(p, f"c{i}")
    with pytest.raises(TunerExhausted, match="used its 3 trials"):
        tuner.ask("fam", "fp", Space, DEFAULTS)
    assert tuner.ask("fam", "other", Space, DEFAULTS)  # another structure has its own budget


def test_resume_continues_the_same_study(tmp_path):
    path = tmp_path / "j.log"
    tuner = Tuner(path, seed=3)
    p = tuner.ask("fam", "fp", Space, DEFAULTS)
    tuner.bind(p, "c1")
    pending = tuner.ask("fam", "fp", Space, DEFAULTS)  # in flight when the driver dies
    tuner.bind(pending, "c2")
    tuner.tell(p.study, p.trial_number, 3.0)

    again = Tuner(path, seed=3)
    again.tell(pending.study, pending.trial_number, 1.5)
    again.tell(pending.study, pending.trial_number, 9.9)  # told twice after a resume: ignored
    study = optuna.load_study(study_name="fam:fp", storage=again.storage)
    values = sorted(t.value for t in study.get_trials() if t.state == TrialState.COMPLETE)
    assert values == [1.5, 3.0]
    assert again.trials_used("fam", "fp") == 2


def test_mismatched_parameters_are_not_tunable(tmp_path):
    tuner = Tuner(tmp_path / "j.log")
    with pytest.raises(TunerExhausted, match="do not match"):
        tuner.ask("fam", "fp", Space, {"block": 32, "new_knob": 1})


def test_the_journal_is_written_in_batches_in_optunas_own_format(tmp_path):
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    path = tmp_path / "j.log"
    tuner = Tuner(path, seed=6)
    p = tuner.ask("fam", "fp", Space, DEFAULTS)
    assert tuner.journal.pending > 1 and path.read_bytes() == b""  # the study and its trial, none written yet
    tuner.bind(p, "c1")
    assert tuner.journal.pending == 0
    tuner.tell(p.study, p.trial_number, 2.5)
    plain = JournalStorage(JournalFileBackend(str(path)))  # what optuna-dashboard uses
    trial = optuna.load_study(study_name="fam:fp", storage=plain).get_trials()[p.trial_number]
    assert trial.state == TrialState.COMPLETE and trial.value == 2.5 and trial.user_attrs["candidate_id"] == "c1"
    with path.open("ab") as f:
        f.write(b'{"op_code": 5, "worker')  # a line torn by a killed writer
    again = Tuner(path, seed=6)
    assert not path.read_bytes().endswith(b'"worker')  # cut, so that the next line starts afresh
    q = again.ask("fam", "fp", Space, DEFAULTS)
    again.bind(q, "c2")
    asked = [t for t in Tuner(path).study("fam", "fp").get_trials() if TRIAL_ATTR_DUPLICATE not in t.user_attrs]
    assert [t.user_attrs.get("candidate_id") for t in asked] == ["c1", "c2"]


def test_every_study_names_its_metric_for_the_dashboard(tmp_path):
    """optuna-dashboard reads the journal; a study without metric names shows "Objective 0"."""
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    tuner = Tuner(tmp_path / "j.log", seed=1)
    for fp, parent in (("fp1", "c0"), ("fp2", "c1")):
        asked = tuner.ask("fam", fp, Space, DEFAULTS, parent_id=parent, parent_value=2.0)
        tuner.bind(asked, f"child-of-{parent}")  # the journal is written when the driver binds
    storage = JournalStorage(JournalFileBackend(str(tmp_path / "j.log")))  # as the dashboard opens it
    names = {s.study_name: s for s in optuna.get_all_study_summaries(storage)}
    assert set(names) == {"fam:fp1", "fam:fp2"}
    for name in names:
        assert optuna.load_study(study_name=name, storage=storage).metric_names == ["geomean_ms"]


def test_the_kept_index_agrees_with_a_scan_of_every_trial(tmp_path):
    """trials_used and asked are kept up to date as trials are added (not recounted per ask):
    after asks, local-step asks, repeats, skips, enqueued points and binds, they are what a scan
    of every trial gives, and a fresh tuner on the same journal agrees."""
    from search.mutation.tuning import _evaluated, point_key

    path = tmp_path / "j.log"
    tuner = Tuner(path, seed=5)
    n = 0
    for i in range(40):
        if i % 4 == 1:
            params = dict(DEFAULTS, stages=1 + i % 3, warps=2 if i % 8 == 1 else 8)
            p = tuner.ask_at("fam", "fp", Space, DEFAULTS, params, parent_id="c0", parent_value=2.0)
        else:
            p = tuner.ask("fam", "fp", Space, DEFAULTS, parent_id="c0", parent_value=2.0)
        if p is None:
            continue
        if i % 5 == 3:
            tuner.skip(p, "not new")
            continue
        n += 1
        tuner.bind(p, f"c{n}")
        if i % 3:
            tuner.tell(p.study, p.trial_number, 1.0 + i)
    study = tuner.study("fam", "fp")
    study.enqueue_trial(dict(DEFAULTS, block=16, stages=4))  # waiting: not asked yet
    tuner.flush()
    trials = study.get_trials(deepcopy=False)
    assert tuner.trials_used("fam", "fp") == sum(_evaluated(t) for t in trials) == n
    assert tuner.asked("fam", "fp") == {point_key(t.params) for t in trials}
    again = Tuner(path, seed=5)
    assert again.trials_used("fam", "fp") == n
    assert again.asked("fam", "fp") == tuner.asked("fam", "fp")


def test_a_tell_finds_its_trial_by_study_and_number_and_never_tells_twice(tmp_path):
    """Trial numbers count per study, trial ids over the whole journal: asks of two studies
    interleaved, each tell lands on its own study's trial; a second tell (a resume's) changes nothing."""
    tuner = Tuner(tmp_path / "j.log", seed=4)
    asked = []
    for i in range(6):
        fp = "fpA" if i % 2 else "fpB"
        p = tuner.ask("fam", fp, Space, DEFAULTS)
        tuner.bind(p, f"c{i}")
        asked.append(p)
    told = [10.0, 11.0, None, 13.0, float("nan"), 15.0]  # None: a failure; NaN is never a value
    for p, value in zip(asked, told):
        tuner.tell(p.study, p.trial_number, value)
    tuner.tell(asked[0].study, asked[0].trial_number, 99.0)
    for i, (p, value) in enumerate(zip(asked, told)):
        trial = tuner._load(p.study).get_trials()[p.trial_number]
        assert trial.user_attrs[TRIAL_ATTR_CANDIDATE] == f"c{i}"
        if value is None or value != value:
            assert trial.state == TrialState.FAIL and trial.value is None
        else:
            assert trial.state == TrialState.COMPLETE and trial.value == value
    # What the journal holds is what a fresh reader of it sees (a resume, optuna-dashboard).
    again = Tuner(tmp_path / "j.log", seed=4)
    for p, value in zip(asked, told):
        trial = again._load(p.study).get_trials()[p.trial_number]
        assert trial.state == (TrialState.COMPLETE if value == value and value is not None else TrialState.FAIL)


def test_tpe_asks_draw_valid_new_points_without_pruned_retries(tmp_path):
    # The best points sit against the space's rule (block 64 allows at most 3 stages): left to
    # itself TPE keeps drawing block 64 with 4 stages, each an ask pruned as invalid and asked again.
    tuner = Tuner(tmp_path / "j.log", seed=2, trials_per_structure=60)
    for i in range(50):
        p = tuner.ask("fam", "fp1", Space, DEFAULTS, parent_id="c0", parent_value=5.0)
        tuner.bind(p, f"c{i + 1}")
        tuner.tell(p.study, p.trial_number, 1.0 if p.params["block"] == 64 else 3.0 - 0.1 * p.params["stages"])
    trials = tuner.study("fam", "fp1").get_trials()
    sampled = trials[11:]  # after the told seed and TPE's ten random start-up trials
    invalid = [t for t in sampled if str(t.user_attrs.get(TRIAL_ATTR_SKIPPED, "")).startswith("invalid")]
    assert not invalid  # 5 when the tuner's asks take Optuna's best candidate, valid or not
    assert sum(t.params["block"] == 64 for t in sampled if t.state == TrialState.COMPLETE) >= 10


def test_a_point_outside_the_studys_distributions_is_not_asked(tmp_path):
    """A local step or a carried lead names a point valid in the space; one the study's distributions
    do not hold (a value no Choice lists) gets no trial and writes nothing."""
    tuner = Tuner(tmp_path / "j.log", seed=3)
    inside = tuner.ask_at("fam", "fp", Space, DEFAULTS, dict(DEFAULTS, stages=3), parent_id="c0", parent_value=2.0)
    assert inside is not None and inside.params["stages"] == 3
    before = len(tuner.study("fam", "fp").get_trials())
    assert tuner.ask_at("fam", "fp", Space, DEFAULTS, dict(DEFAULTS, block=48)) is None
    assert tuner.ask_at("fam", "fp", Space, DEFAULTS, dict(DEFAULTS, stages=9)) is None
    assert len(tuner.study("fam", "fp").get_trials()) == before
