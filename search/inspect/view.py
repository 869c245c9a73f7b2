"""A run as plain data, for ``champions``, ``lineage``, ``show``, ``report`` and ``export``.

:class:`RunView` answers every question those commands ask from one read snapshot of
the run store (:meth:`population.store.RunStore.snapshot`, read-only, so it works
while the run is still writing): champions, best per case, progress series, failure
reasons, run metadata; the lineage views are :mod:`search.inspect.lineage_view`'s and
the best-per-shape questions :mod:`search.inspect.best`'s.  Speedups come from the
snapshot (computed there once, against the champion of the ``torch_geqrf`` family of the
same run; results stored before that baseline finished have none of their own).
"""

from __future__ import annotations

import re
import time
from collections import Counter
from pathlib import Path
from typing import Any, Mapping

from kernels.floors import floors
from kernels.suites import Case, get_suite
from population.lineage import Lineage
from population.models import Candidate, EvalResult, State, id_sort_key
from population.records import BASELINE_FAMILY, LLM_STATE_KEY, NOTE_KEY, OPERATOR_KEY, TRIAL_KEY, evals_key
from population.snapshot import RunSnapshot, StoredRows, read_snapshot
from population.store import RunStore
from search.engine.llm_budget import model_ledger
from search.inspect.human_view import HumanView
from search.inspect.lineage_view import Item, LineageViews, Node
from search.inspect.sessions import session_seconds

# Re-exported: the views' users import these from here.
__all__ = ["CASE_NAME", "InspectError", "Item", "Node", "RunView", "normalize_reason"]

# A benchmark case's name: its kind, batch x n and condition number (``dense-640x512-c2``).
CASE_NAME = re.compile(r"^(?P<case>[a-z]+)-(?P<batch>\d+)x(?P<n>\d+)-c(?P<cond>[0-9.e+-]+)$")


class InspectError(ValueError):
    """A question about a run that has no answer (unknown candidate or family); one line for people."""


class RunView(LineageViews):
    """Everything the inspection commands need, from one snapshot of a run store."""

    def __init__(self, run_dir: Path, snapshot: RunSnapshot | None = None) -> None:
        self.run_dir = Path(run_dir)
        if snapshot is None:
            with RunStore.open(self.run_dir, readonly=True, integrity=False) as store:
                snapshot = read_snapshot(store)
        snap = self.snapshot = snapshot
        # The snapshot's records under the names the commands have always used.
        self.config: dict[str, Any] = snap.config
        self.candidates: list[Candidate] = list(snap.candidates)
        self.told = snap.told
        self.own_results = snap.stored_results  # as stored; ``results`` has the speedups
        self.results: Mapping[str, EvalResult] = snap.results
        self.history = list(snap.history)
        self.current = snap.current
        self.counters = snap.counters
        self.status = snap.status
        self.sessions = snap.sessions
        self.llm_calls = snap.llm_calls
        self.notes: dict[str, str] = snap.entries(NOTE_KEY)
        self.trials: dict[str, Any] = snap.entries(TRIAL_KEY)
        self.operators: dict[str, str] = {k: str(v) for k, v in snap.entries(OPERATOR_KEY).items() if v}
        self.llm_states: dict[str, Any] = snap.entries(LLM_STATE_KEY)  # per model: streak, back-off, pause
        self.sources = snap.sources
        self.human = HumanView.from_snapshot(snap)  # the engineer's events (search/inspect/human_view.py)
        self.by_id: dict[str, Candidate] = snap.by_id
        self.lineage = Lineage(snap)
        self.children = self.lineage.children
        self.ever_champion: set[str] = {e.change.candidate_id for e in self.history}
        self.baseline_id: str | None = snap.baseline_id
        self.baseline: EvalResult | None = snap.baseline
        evaluation = self.config.get("evaluation", {}) or {}
        self._scanned: tuple[dict[str, float | None], list[tuple[str, str, str, float | None]]] | None = None
        self._by_family: dict[str, list[Candidate]] | None = None
        self.bench_suite_name: str = evaluation.get("bench_suite", "")
        self.verify_suite_name: str = evaluation.get("verify_suite", "")
        try:
            self.bench_cases: dict[str, Case] = {c.name: c for c in get_suite(self.bench_suite_name)}
        except KeyError:
            self.bench_cases = {}

    # --- single candidates ------------------------------------------------------------------

    def resolve(self, ref: str) -> Candidate:
        """A candidate by id (``c0000012``, ``c12`` or ``12``) or a family name (its champion)."""
        ref = ref.strip()
        if ref in self.by_id:
            return self.by_id[ref]
        m = re.fullmatch(r"c?(\d+)", ref)
        if m:
            cid = f"c{int(m[1]):07d}"
            if cid in self.by_id:
                return self.by_id[cid]
        if ref in self.current:
            return self.by_id[self.current[ref]]
        raise InspectError(f"no candidate or family {ref!r} in {self.run_dir} "
                           f"({len(self.candidates)} candidates; families: {', '.join(self.families()) or 'none'})")

    def original(self, cid: str) -> Candidate:
        """A migrant copy's original (same code, measured once); anything else itself."""
        return self.snapshot.original(cid)

    def result(self, cid: str) -> EvalResult | None:
        """The measurement behind a candidate (a migrant's original's), with speedups."""
        return self.snapshot.result(cid)

    def speedup(self, cid: str) -> float | None:
        result = self.result(cid)
        return result.speedup if result is not None and self.by_id[cid].state is State.VERIFIED else None

    def source(self, cid: str) -> str:
        return self.snapshot.source(cid)

    # --- families and champions -------------------------------------------------------------

    def families(self, include_baseline: bool = True) -> list[str]:
        """Families in the config's order (then any other in the store), the baseline first."""
        names = [f["name"] for f in self.config.get("families", []) if isinstance(f, dict) and "name" in f]
        for c in self.candidates:
            if c.family not in names:
                names.append(c.family)
        ordered = ([BASELINE_FAMILY] if BASELINE_FAMILY in names else []) + [n for n in names if n != BASELINE_FAMILY]
        return ordered if include_baseline else [n for n in ordered if n != BASELINE_FAMILY]

    def check_family(self, family: str) -> str:
        if family not in self.families():
            raise InspectError(f"no family {family!r} in {self.run_dir}; families: {', '.join(self.families())}")
        return family

    def champions(self) -> list[dict[str, Any]]:
        """Champion per family (the baseline included, with speedup 1), with its times and residuals."""
        out = []
        for family in self.families():
            cands = [c for c in self.candidates if c.family == family]
            states = Counter(c.state.value for c in cands)
            cid = self.current.get(family)
            history = [e for e in self.history if e.change.family == family]
            row: dict[str, Any] = {
                "family": family, "baseline": family == BASELINE_FAMILY, "champion": cid,
                "candidates": len(cands), "verified": states.get(State.VERIFIED.value, 0),
                "failed": sum(v for k, v in states.items() if State(k).is_failure),
                "in_flight": sum(v for k, v in states.items() if State(k).is_in_flight),
                "evaluations": int(self.counters.get(evals_key(family), 0)),
                "champion_changes": len(history), "chain": [e.change.candidate_id for e in history],
            }
            if cid is not None:
                champ, result = self.by_id[cid], self.result(cid)
                last = history[-1] if history else None
                row.update(origin=champ.origin.value, fitness_ms=champ.fitness_ms,
                           geomean_ms=result.geomean_ms if result else None,
                           speedup=result.speedup if result else None,
                           cause=last.change.cause if last else None,
                           since=last.at if last else None,
                           max_residuals=_max_residuals(result), cases=_cases_json(result))
            out.append(row)
        return out

    def verified(self, families: list[str] | None = None, only: set[str] | None = None) -> list[Candidate]:
        """Verified candidates with a result of their own (migrant copies are the same code);
        ``only``: just these ids (e.g. the promoted ones)."""
        return [c for c in self.candidates if c.state is State.VERIFIED and c.id in self.results
                and (families is None or c.family in families) and (only is None or c.id in only)]

    def case_names(self) -> list[str]:
        """Benchmark cases in suite order (from the suite, else from the first full result)."""
        if self.bench_cases:
            return list(self.bench_cases)
        for c in self.verified():
            return [o.case for o in self.results[c.id].cases]
        return []

    def best_per_case(self, families: list[str] | None = None) -> list[dict[str, Any]]:
        """Fastest verified candidate per benchmark case (searched families unless told otherwise),
        with the torch.geqrf time, speedup, residuals, and the fraction of the H200 floors reached."""
        families = families if families is not None else self.families(include_baseline=False)
        base = {o.case: o.median_ms for o in self.baseline.cases} if self.baseline else {}
        on_gpu = self.device_is_gpu()
        # One pass over the stored results (times only), then speedups for the winners: the
        # speedups of every result for every case cost 18 s on a 50,000-candidate store.
        times = self._scan()[1]
        candidates = {c.id: c for c in self.verified(families)}
        fastest: dict[str, tuple[tuple[float, tuple], Candidate]] = {}
        seen: set[tuple[str, str]] = set()
        for cid, case_name, status, median_ms in times:
            c = candidates.get(cid)
            if c is None or (cid, case_name) in seen:
                continue  # a case's first outcome is the candidate's (as the per-case lookups read it)
            seen.add((cid, case_name))
            if status != "ok" or not median_ms:
                continue
            key = (median_ms, id_sort_key(cid))
            held = fastest.get(case_name)
            if held is None or key < held[0]:
                fastest[case_name] = (key, c)
        rows = []
        for name in self.case_names():
            row: dict[str, Any] = {"case": name, "baseline_ms": base.get(name), "candidate": None}
            if name in fastest:
                cand = fastest[name][1]  # from ``results``: its speedup is the snapshot's
                outcome = next(o for o in self.results[cand.id].cases if o.case == name)
                row.update(candidate=cand.id, family=cand.family, median_ms=outcome.median_ms,
                           min_ms=outcome.min_ms, max_ms=outcome.max_ms,
                           speedup=outcome.speedup, residuals=dict(outcome.residuals))
                case = self.bench_cases.get(name)
                if case is not None and on_gpu:
                    fl = floors(case)
                    ms = outcome.median_ms or fastest[name][0][0]
                    row.update(fp32_floor_frac=fl.fp32_floor_ms / ms, tf32_floor_frac=fl.tf32_floor_ms / ms)
                else:
                    row.update(fp32_floor_frac=None, tf32_floor_frac=None)
            rows.append(row)
        return rows

    # --- run-level facts -------------------------------------------------------------------

    def device(self) -> str:
        devices = Counter({name: count for name, count in self.snapshot.devices.items() if name})
        return devices.most_common(1)[0][0] if devices else ""

    def device_is_gpu(self) -> bool:
        dev = self.device().lower()
        return bool(dev) and dev not in ("cpu", "fake") and not dev.startswith("cpu")

    def versions(self) -> dict[str, str]:
        if self.baseline is not None and self.baseline.versions:
            return dict(self.baseline.versions)
        for cid in self.own_results:  # read one by one: the first with versions will do
            if self.own_results[cid].versions:
                return dict(self.own_results[cid].versions)
        return {}

    def started(self) -> float | None:
        return self.snapshot.started()

    def finished_at(self, cid: str) -> float:
        finished = self._finished_times().get(cid)
        return finished if finished else self.by_id[cid].updated_at

    def _finished_times(self) -> dict[str, float | None]:
        return self._scan()[0]

    def _scan(self) -> tuple[dict[str, float | None], list[tuple[str, str, str, float | None]]]:
        """Each result's finished_at, and (id, case, status, median_ms) of each of its cases, read
        once for all.  SQLite extracts them from the stored JSON when the results are a store's:
        parsing every result took 5 s of a report on a 50,000-candidate store."""
        if self._scanned is None:
            stored = self.own_results
            finished: dict[str, float | None] = {}
            times: list[tuple[str, str, str, float | None]] = []
            if isinstance(stored, StoredRows):
                for cid, (at,), cases in stored.scan(["$.finished_at"], "$.cases", ["$.case", "$.status",
                                                                                     "$.median_ms"]):
                    finished[cid] = at
                    times += [(cid, case, status, ms) for case, status, ms in cases]
            else:
                for cid, r in stored.items():
                    finished[cid] = r.finished_at
                    times += [(cid, o.case, o.status.value, o.median_ms) for o in r.cases]
            self._scanned = (finished, times)
        return self._scanned

    def metadata(self) -> dict[str, Any]:
        counters = self.snapshot.run_counters
        states = Counter(c.state.value for c in self.candidates)
        started = self.started()
        updated = self.status.updated
        state = self.status.shown_state(time.time())
        elapsed = session_seconds(self.sessions, updated)
        cfg = self.config
        llm = cfg.get("llm", {}) or {}
        models: Counter = Counter(call.model for call in self.llm_calls)
        return {
            "run_dir": str(self.run_dir), "name": cfg.get("name"), "state": state,
            "stop_reason": self.status.stop_reason, "started": started, "last_update": updated,
            "elapsed_minutes": None if elapsed is None else elapsed / 60,
            "sessions": len(self.sessions), "device": self.device(), "versions": self.versions(),
            "candidates": len(self.candidates), "states": dict(sorted(states.items())),
            "evaluations": counters.gpu_evaluations,
            "baseline": {"candidate": self.baseline_id,
                         "geomean_ms": self.baseline.geomean_ms if self.baseline else None},
            "config": {
                "seed": cfg.get("seed"),
                "families": [f.get("name") for f in cfg.get("families", []) if isinstance(f, dict)],
                "verify_suite": self.verify_suite_name, "bench_suite": self.bench_suite_name,
                "budget": cfg.get("budget"), "mutation": cfg.get("mutation"),
                "llm_models": [m.get("name") for m in llm.get("models", []) if isinstance(m, dict)],
                "llm_endpoint": llm.get("base_url"),
            },
            "llm": {"calls": counters.llm_calls, "errors": counters.llm_errors,
                    "prompt_tokens": counters.llm_prompt_tokens,
                    "completion_tokens": counters.llm_completion_tokens,
                    "cost_usd": float(counters.llm_cost_usd), "by_model": dict(models),
                    "models": model_ledger(self.counters, self.llm_states)},
        }

    # --- progress and failures ----------------------------------------------------------------

    def progress(self) -> dict[str, list[dict[str, Any]]]:
        """Per family, the best verified geomean so far after each of its finished evaluations:
        ``{family: [{eval, seconds, best_ms, candidate, improved}]}`` (eval = the run's
        evaluation number, seconds since the run started)."""
        t0 = self.started() or 0.0
        out: dict[str, list[dict[str, Any]]] = {}
        for family, finished in self.finished_by_family().items():
            best: float | None = None
            best_id: str | None = None
            series = []
            for c in finished:
                improved = c.state is State.VERIFIED and c.fitness_ms is not None and (best is None
                                                                                       or c.fitness_ms < best)
                if improved:
                    best, best_id = c.fitness_ms, c.id
                if best is not None:
                    series.append({"eval": self.told[c.id], "seconds": max(0.0, self.finished_at(c.id) - t0),
                                   "best_ms": best, "candidate": best_id, "improved": improved})
            out[family] = series
        return out

    def finished_by_family(self) -> dict[str, list[Candidate]]:
        """Each family's finished candidates in the order they finished (every family, the
        baseline first; one pass over the candidates, not one per family)."""
        if self._by_family is None:
            out: dict[str, list[Candidate]] = {f: [] for f in self.families()}
            for c in self.candidates:
                if c.id in self.told:
                    out[c.family].append(c)
            for finished in out.values():
                finished.sort(key=lambda c: self.told[c.id])
            self._by_family = out
        return self._by_family

    def failures(self) -> dict[str, Any]:
        """Failure counts per state, and reasons grouped (case names and ids taken out)."""
        by_state: Counter = Counter()
        groups: dict[tuple[str, str], dict[str, Any]] = {}
        for c in self.candidates:
            if not c.state.is_failure:
                continue
            by_state[c.state.value] += 1
            pattern, case = normalize_reason(c.reason)
            g = groups.setdefault((c.state.value, pattern), {"state": c.state.value, "reason": pattern,
                                                            "count": 0, "examples": [], "cases": [],
                                                            "families": []})
            g["count"] += 1
            if len(g["examples"]) < 5:
                g["examples"].append(c.id)
            if case and case not in g["cases"]:
                g["cases"].append(case)
            if c.family not in g["families"]:
                g["families"].append(c.family)
        reasons = sorted(groups.values(), key=lambda g: (-g["count"], g["state"], g["reason"]))
        return {"total": sum(by_state.values()), "by_state": dict(by_state.most_common()), "reasons": reasons}


def normalize_reason(reason: str) -> tuple[str, str | None]:
    """(reason with its case name and candidate ids taken out, the case name) for grouping."""
    line = (reason or "").strip().splitlines()[0] if reason and reason.strip() else "(no reason)"
    case = None
    m = re.match(r"^(verify|bench) (\S+?): (.*)$", line)
    if m and CASE_NAME.match(m[2]):
        case = m[2]
        line = f"{m[1]} <case>: {m[3]}"
    line = re.sub(r"\bc\d{7,}\b", "<id>", line)
    line = re.sub(r"0x[0-9a-fA-F]{6,}", "0x…", line)
    return line[:300], case


def _max_residuals(result: EvalResult | None) -> dict[str, float]:
    out: dict[str, float] = {}
    if result is None:
        return out
    for o in result.cases:
        for k, v in o.residuals.items():
            if v is not None and (k not in out or not (v <= out[k])):
                out[k] = v
    return out


def _cases_json(result: EvalResult | None) -> list[dict[str, Any]]:
    if result is None:
        return []
    return [{"case": o.case, "status": o.status.value, "median_ms": o.median_ms, "baseline_ms": o.baseline_ms,
             "speedup": o.speedup, "residuals": dict(o.residuals)} for o in result.cases]
