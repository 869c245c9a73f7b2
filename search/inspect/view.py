"""A run as plain data, for ``champions``, ``lineage``, ``show``, ``report`` and ``export``.

:class:`RunView` reads a run store once (one read snapshot, read-only, so it works
while the run is still writing) and answers every question those commands ask:
champions, best per case, lineage nodes with speedups and champion marks, progress
series, failure reasons, run metadata.  Speedups are computed here, at display
time, against the champion of the ``torch_geqrf`` family of the same run (results
stored before that baseline finished have none of their own).
"""

from __future__ import annotations

import json
import math
import re
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernels.floors import floors
from kernels.suites import Case, get_suite
from population.models import Candidate, EvalResult, Origin, State, id_sort_key, result_from_json
from population.store import RunStore
from population.store_rows import ChampionEntry
from search.engine.llm_budget import STATE_KEY as LLM_MODEL_STATE_KEY
from search.engine.llm_budget import model_ledger
from search.inspect.human_view import HumanView
from search.engine.loop import STATUS_KEY
from search.engine.proposer import NOTE_KEY, TRIAL_KEY
from search.inspect.sessions import session_seconds
from search.speedup import BASELINE_FAMILY, with_speedups

SESSIONS_KEY = "driver/sessions"
_CASE_NAME = re.compile(r"^(?P<case>[a-z]+)-(?P<batch>\d+)x(?P<n>\d+)-c(?P<cond>[0-9.e+-]+)$")


class InspectError(ValueError):
    """A question about a run that has no answer (unknown candidate or family); one line for people."""


def case_shape(name: str, suite: dict[str, Case] | None = None) -> tuple[int, int] | None:
    """(batch, n) of a benchmark case, from its suite or else from its name (``dense-640x512-c2``)."""
    if suite and name in suite:
        return suite[name].batch, suite[name].n
    m = _CASE_NAME.match(name)
    return (int(m["batch"]), int(m["n"])) if m else None


def _gm(values: list[float]) -> float | None:
    vals = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    if not vals or len(vals) != len(values):
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


@dataclass(frozen=True)
class Node:
    """One candidate as the lineage views show it."""

    id: str
    family: str
    origin: str
    state: str
    reason: str
    parent_ids: tuple[str, ...]
    generation: int
    fitness_ms: float | None
    speedup: float | None
    champion: bool  # was champion of its family at some point
    current: bool  # is the champion now
    told_seq: int | None
    human: tuple[str, ...] = ()  # the engineer's marks: promoted, disputed, retired, notes

    @property
    def failed(self) -> bool:
        return State(self.state).is_failure

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "family": self.family, "origin": self.origin, "state": self.state,
                "reason": self.reason, "parent_ids": list(self.parent_ids), "generation": self.generation,
                "fitness_ms": self.fitness_ms, "speedup": self.speedup, "champion": self.champion,
                "current_champion": self.current, "told_seq": self.told_seq, "human": list(self.human)}


@dataclass
class Item:
    """One line of a displayed lineage tree: a node, a collapsed run of failed leaves,
    or the descendants hidden below the depth limit."""

    kind: str  # "node" | "failed" | "hidden" | "seen"
    node: Node | None = None
    children: list["Item"] = field(default_factory=list)
    ids: tuple[str, ...] = ()
    by_state: dict[str, int] = field(default_factory=dict)
    champions: int = 0
    best_speedup: float | None = None
    edge: str = "parent"  # for ancestry: "parent" | "second parent"

    @property
    def count(self) -> int:
        return len(self.ids)


class RunView:
    """Everything the inspection commands need, read from a run store in one snapshot."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        with RunStore.open(self.run_dir, readonly=True, integrity=False) as store:
            with store.read():
                self._load(store)
        self._finish()

    # --- loading --------------------------------------------------------------------------

    def _load(self, store: RunStore) -> None:
        self.config: dict[str, Any] = json.loads(store.config_json() or "{}")
        self.candidates: list[Candidate] = store.list_candidates()
        conn = store.connection
        self.told: dict[str, int] = {cid: seq for cid, seq in conn.execute(
            "SELECT id, told_seq FROM candidates WHERE told_seq IS NOT NULL")}
        self.own_results: dict[str, EvalResult] = {
            cid: result_from_json(body) for cid, body in conn.execute("SELECT candidate_id, body FROM results")}
        self.history: list[ChampionEntry] = store.champion_history()
        self.current: dict[str, str] = store.current_champion_ids()
        self.counters: dict[str, int | float] = store.counters()
        self.status: dict[str, Any] = store.get_json(STATUS_KEY) or {}
        self.sessions: list[dict[str, Any]] = store.get_json(SESSIONS_KEY, []) or []
        self.notes: dict[str, str] = {}
        self.trials: dict[str, Any] = {}
        note_prefix, trial_prefix = NOTE_KEY.split("{")[0], TRIAL_KEY.split("{")[0]
        self.llm_calls: list[dict[str, Any]] = []
        self.llm_states: dict[str, Any] = {}  # per model: streak, back-off, pause (search.engine.llm_budget)
        llm_state_prefix = LLM_MODEL_STATE_KEY.split("{")[0]
        for key, value in conn.execute("SELECT key, value FROM kv WHERE key LIKE 'llm/%' OR key LIKE 'optuna/%'"):
            if key.startswith(note_prefix):
                self.notes[key[len(note_prefix):]] = json.loads(value)
            elif key.startswith(trial_prefix):
                self.trials[key[len(trial_prefix):]] = json.loads(value)
            elif key.startswith("llm/call/"):
                self.llm_calls.append(json.loads(value))
            elif key.startswith(llm_state_prefix):
                self.llm_states[key[len(llm_state_prefix):]] = json.loads(value)
        self.sources: dict[str, str] = {sha: text for sha, text in conn.execute("SELECT sha256, text FROM blobs")}
        self.human = HumanView.load(store)  # the engineer's events (search/inspect/human_view.py)

    def _finish(self) -> None:
        self.by_id: dict[str, Candidate] = {c.id: c for c in self.candidates}
        self.ever_champion: set[str] = {e.change.candidate_id for e in self.history}
        base_id = self.current.get(BASELINE_FAMILY)
        self.baseline_id: str | None = base_id
        self.baseline: EvalResult | None = self.own_results.get(base_id) if base_id else None
        self.results: dict[str, EvalResult] = {}
        for cid, result in self.own_results.items():
            self.results[cid] = with_speedups(result, self.baseline) if self.baseline else result
        evaluation = self.config.get("evaluation", {}) or {}
        self.bench_suite_name: str = evaluation.get("bench_suite", "")
        self.verify_suite_name: str = evaluation.get("verify_suite", "")
        try:
            self.bench_cases: dict[str, Case] = {c.name: c for c in get_suite(self.bench_suite_name)}
        except KeyError:
            self.bench_cases = {}
        self.children: dict[str, list[str]] = defaultdict(list)
        for c in self.candidates:
            if c.parent_ids and c.parent_ids[0] in self.by_id:
                self.children[c.parent_ids[0]].append(c.id)

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
        cand = self.by_id[cid]
        while cand.origin is Origin.MIGRATION and cand.parent_ids and cand.parent_ids[0] in self.by_id:
            cand = self.by_id[cand.parent_ids[0]]
        return cand

    def result(self, cid: str) -> EvalResult | None:
        """The measurement behind a candidate (a migrant's original's), with speedups."""
        return self.results.get(self.original(cid).id)

    def speedup(self, cid: str) -> float | None:
        result = self.result(cid)
        return result.speedup if result is not None and self.by_id[cid].state is State.VERIFIED else None

    def source(self, cid: str) -> str:
        sha = self.by_id[cid].source_sha256
        return self.sources[sha]

    def node(self, cid: str) -> Node:
        c = self.by_id[cid]
        return Node(id=c.id, family=c.family, origin=c.origin.value, state=c.state.value, reason=c.reason,
                    parent_ids=tuple(c.parent_ids), generation=c.generation, fitness_ms=c.fitness_ms,
                    speedup=self.speedup(cid), champion=cid in self.ever_champion,
                    current=self.current.get(c.family) == cid, told_seq=self.told.get(cid),
                    human=self.human_marks(c))

    def human_marks(self, c: Candidate) -> tuple[str, ...]:
        h = self.human
        notes = len(h.notes().get(c.id, []))
        marks = [("promoted", c.id in h.promoted_ids()), ("disputed", c.id in h.disputed),
                 ("retired structure", f"{c.family}/{c.fingerprint}" in h.retired_structures()),
                 (f"{notes} note{'s' if notes > 1 else ''}", notes > 0)]
        return tuple(name for name, on in marks if on)

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
                "evaluations": int(self.counters.get(f"evals/{family}", 0)),
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
        rows = []
        for name in self.case_names():
            best: tuple[float, tuple, Candidate, Any] | None = None
            for c in self.verified(families):
                outcome = next((o for o in self.results[c.id].cases if o.case == name), None)
                if outcome is None or outcome.status.value != "ok" or not outcome.median_ms:
                    continue
                key = (outcome.median_ms, id_sort_key(c.id))
                if best is None or key < best[:2]:
                    best = (outcome.median_ms, id_sort_key(c.id), c, outcome)
            row: dict[str, Any] = {"case": name, "baseline_ms": base.get(name), "candidate": None}
            if best is not None:
                _, _, cand, outcome = best
                b = base.get(name)
                row.update(candidate=cand.id, family=cand.family, median_ms=outcome.median_ms,
                           min_ms=outcome.min_ms, max_ms=outcome.max_ms,
                           speedup=b / outcome.median_ms if b else None, residuals=dict(outcome.residuals))
                case = self.bench_cases.get(name)
                if case is not None and on_gpu:
                    fl = floors(case)
                    row.update(fp32_floor_frac=fl.fp32_floor_ms / outcome.median_ms,
                               tf32_floor_frac=fl.tf32_floor_ms / outcome.median_ms)
                else:
                    row.update(fp32_floor_frac=None, tf32_floor_frac=None)
            rows.append(row)
        return rows

    # --- run-level facts -------------------------------------------------------------------

    def device(self) -> str:
        devices = Counter(r.device for r in self.own_results.values() if r.device)
        return devices.most_common(1)[0][0] if devices else ""

    def device_is_gpu(self) -> bool:
        dev = self.device().lower()
        return bool(dev) and dev not in ("cpu", "fake") and not dev.startswith("cpu")

    def versions(self) -> dict[str, str]:
        for r in ([self.baseline] if self.baseline else []) + list(self.own_results.values()):
            if r is not None and r.versions:
                return dict(r.versions)
        return {}

    def started(self) -> float | None:
        starts = [s["started"] for s in self.sessions if isinstance(s, dict) and s.get("started")]
        if starts:
            return min(starts)
        return min((c.created_at for c in self.candidates), default=None)

    def finished_at(self, cid: str) -> float:
        result = self.own_results.get(cid)
        if result is not None and result.finished_at:
            return result.finished_at
        return self.by_id[cid].updated_at

    def metadata(self) -> dict[str, Any]:
        counters = self.counters
        states = Counter(c.state.value for c in self.candidates)
        started = self.started()
        updated = self.status.get("updated")
        state = self.status.get("state", "created")
        elapsed = session_seconds(self.sessions, updated)
        if state == "running" and (updated is None or time.time() - updated > 30):
            state = "stopped (no heartbeat)"
        cfg = self.config
        llm = cfg.get("llm", {}) or {}
        models: Counter = Counter(call.get("model", "?") for call in self.llm_calls)
        return {
            "run_dir": str(self.run_dir), "name": cfg.get("name"), "state": state,
            "stop_reason": self.status.get("stop_reason"), "started": started, "last_update": updated,
            "elapsed_minutes": None if elapsed is None else elapsed / 60,
            "sessions": len(self.sessions), "device": self.device(), "versions": self.versions(),
            "candidates": len(self.candidates), "states": dict(sorted(states.items())),
            "evaluations": int(counters.get("gpu_evaluations", 0)),
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
            "llm": {"calls": int(counters.get("llm_calls", 0)), "errors": int(counters.get("llm_errors", 0)),
                    "prompt_tokens": int(counters.get("llm_prompt_tokens", 0)),
                    "completion_tokens": int(counters.get("llm_completion_tokens", 0)),
                    "cost_usd": float(counters.get("llm_cost_usd", 0.0)), "by_model": dict(models),
                    "models": model_ledger(counters, self.llm_states)},
        }

    # --- progress and failures ----------------------------------------------------------------

    def progress(self) -> dict[str, list[dict[str, Any]]]:
        """Per family, the best verified geomean so far after each of its finished evaluations:
        ``{family: [{eval, seconds, best_ms, candidate, improved}]}`` (eval = the run's
        evaluation number, seconds since the run started)."""
        t0 = self.started() or 0.0
        out: dict[str, list[dict[str, Any]]] = {}
        for family in self.families():
            finished = sorted((c for c in self.candidates if c.family == family and c.id in self.told),
                              key=lambda c: self.told[c.id])
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

    # --- lineage ---------------------------------------------------------------------------

    def roots(self, family: str) -> list[str]:
        """Roots of a family's tree: seeds, and candidates whose first parent is in another family."""
        return [c.id for c in self.candidates if c.family == family
                and not (c.parent_ids and c.parent_ids[0] in self.by_id
                         and self.by_id[c.parent_ids[0]].family == family)]

    def tree_children(self, cid: str) -> list[str]:
        """Children under ``cid`` in its family tree (a crossover hangs under its first parent)."""
        fam = self.by_id[cid].family
        return [k for k in self.children.get(cid, ()) if self.by_id[k].family == fam]

    def subtree_ids(self, cid: str) -> list[str]:
        out, stack = [], [cid]
        while stack:
            x = stack.pop()
            out.append(x)
            stack.extend(self.tree_children(x))
        return out

    def ancestor_ids(self, cid: str) -> list[str]:
        """Every ancestor through both parents, newest first."""
        seen: set[str] = set()
        stack = list(self.by_id[cid].parent_ids)
        while stack:
            p = stack.pop()
            if p in seen or p not in self.by_id:
                continue
            seen.add(p)
            stack.extend(self.by_id[p].parent_ids)
        return sorted(seen, key=id_sort_key, reverse=True)

    def family_items(self, family: str, depth: int | None = None, collapse: int = 2) -> list[Item]:
        """The family's trees as display items: runs of ``collapse`` or more failed leaves
        among a node's children become one item, and what lies below ``depth`` one item."""
        return [self._item(r, 0, depth, collapse) for r in self.roots(family)]

    def _item(self, root: str, level0: int, depth: int | None, collapse: int) -> Item:
        # Iterative (pre-order through an explicit stack): a lineage can be thousands deep.
        top = Item(kind="node", node=self.node(root), ids=(root,))
        stack: list[tuple[Item, str, int]] = [(top, root, level0)]
        while stack:
            item, cid, level = stack.pop()
            kids = self.tree_children(cid)
            if depth is not None and level >= depth:
                if kids:
                    item.children.append(self._hidden([k for kid in kids for k in self.subtree_ids(kid)]))
                continue
            expand: list[tuple[Item, str, int]] = []
            run: list[str] = []
            for kid in [*kids, None]:
                if kid is not None and self.by_id[kid].state.is_failure and not self.tree_children(kid):
                    run.append(kid)
                    continue
                if collapse and len(run) >= collapse:
                    states = Counter(self.by_id[k].state.value for k in run)
                    item.children.append(Item(kind="failed", ids=tuple(run), by_state=dict(states.most_common())))
                    run = []
                for k in [*run, *([kid] if kid is not None else [])]:
                    child = Item(kind="node", node=self.node(k), ids=(k,))
                    item.children.append(child)
                    expand.append((child, k, level + 1))
                run = []
            stack.extend(reversed(expand))
        return top

    def _hidden(self, ids: list[str]) -> Item:
        speeds = [s for s in (self.speedup(k) for k in ids) if s is not None]
        return Item(kind="hidden", ids=tuple(ids), champions=sum(k in self.ever_champion for k in ids),
                    by_state=dict(Counter(self.by_id[k].state.value for k in ids).most_common()),
                    best_speedup=max(speeds) if speeds else None)

    def ancestry_item(self, cid: str, depth: int | None = None) -> Item:
        """The candidate with its parents as children, their parents below them, and so on
        (an ancestor reached twice through crossovers is shown once, then marked ``seen``)."""
        seen: set[str] = set()
        top = Item(kind="node", node=self.node(cid), ids=(cid,), edge="self")
        stack: list[tuple[Item, str, int]] = [(top, cid, 0)]
        while stack:  # pre-order, so the first occurrence in display order is the full one
            item, x, level = stack.pop()
            if x in seen:
                item.kind = "seen"
                continue
            seen.add(x)
            parents = [p for p in self.by_id[x].parent_ids if p in self.by_id]
            if depth is not None and level >= depth:
                above: set[str] = set()
                for p in parents:
                    above.add(p)
                    above.update(self.ancestor_ids(p))
                if above:
                    item.children.append(self._hidden(sorted(above, key=id_sort_key)))
                continue
            expand = []
            for i, p in enumerate(parents):
                child = Item(kind="node", node=self.node(p), ids=(p,), edge="parent" if i == 0 else "second parent")
                item.children.append(child)
                expand.append((child, p, level + 1))
            stack.extend(reversed(expand))
        return top

    def lineage_json(self, family: str | None = None, candidate: str | None = None,
                     depth: int | None = None) -> dict[str, Any]:
        """Lineage as data, uncollapsed: nodes with their tree children, roots, and for the
        ancestry of a candidate its ancestors (newest first) and every parent edge."""
        if candidate is not None:
            cid = self.resolve(candidate).id
            anc = self.ancestor_ids(cid)
            if depth is not None:
                keep, frontier = {cid}, [cid]
                for _ in range(depth):
                    frontier = [p for x in frontier for p in self.by_id[x].parent_ids if p in self.by_id]
                    keep.update(frontier)
                anc = [a for a in anc if a in keep]
            ids = [cid, *anc]
            edges = [{"parent": p, "child": x, "kind": "parent" if i == 0 else "second parent"}
                     for x in ids for i, p in enumerate(self.by_id[x].parent_ids) if p in ids]
            return {"run_dir": str(self.run_dir), "candidate": cid, "ancestors": anc,
                    "nodes": [self.node(x).to_json() for x in ids], "edges": edges}
        families = [self.check_family(family)] if family else self.families()
        out: dict[str, Any] = {"run_dir": str(self.run_dir), "families": {}}
        for fam in families:
            nodes: list[dict[str, Any]] = []
            roots = self.roots(fam)
            stack = [(r, 0) for r in reversed(roots)]
            while stack:
                x, level = stack.pop()
                data = self.node(x).to_json()
                kids = self.tree_children(x)
                data["depth"] = level
                if depth is not None and level >= depth:
                    data["children"] = []
                    data["hidden_descendants"] = sum(len(self.subtree_ids(k)) for k in kids)
                else:
                    data["children"] = kids
                    stack.extend((k, level + 1) for k in reversed(kids))
                nodes.append(data)
            out["families"][fam] = {"roots": roots, "champion": self.current.get(fam),
                                    "chain": [e.change.candidate_id for e in self.history if e.change.family == fam],
                                    "nodes": nodes}
        return out

    def champion_graph(self, family: str) -> tuple[list[str], list[tuple[str, str]]]:
        """The champions of a family and every ancestor linking them (within the family):
        node ids in creation order and first-parent edges, for the report's chain graph."""
        chain = [e.change.candidate_id for e in self.history if e.change.family == family]
        keep: set[str] = set()
        for cid in chain:
            x: str | None = cid
            while x is not None and x in self.by_id and x not in keep and self.by_id[x].family == family:
                keep.add(x)
                parents = self.by_id[x].parent_ids
                x = parents[0] if parents else None
        ids = sorted(keep, key=id_sort_key)
        edges = [(self.by_id[x].parent_ids[0], x) for x in ids if self.by_id[x].parent_ids
                 and self.by_id[x].parent_ids[0] in keep]
        return ids, edges


def normalize_reason(reason: str) -> tuple[str, str | None]:
    """(reason with its case name and candidate ids taken out, the case name) for grouping."""
    line = (reason or "").strip().splitlines()[0] if reason and reason.strip() else "(no reason)"
    case = None
    m = re.match(r"^(verify|bench) (\S+?): (.*)$", line)
    if m and _CASE_NAME.match(m[2]):
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


def route_groups(view: RunView) -> dict[tuple[int, int], list[str]]:
    """Benchmark cases grouped by input shape (batch, n), in suite order."""
    groups: dict[tuple[int, int], list[str]] = {}
    for name in view.case_names():
        shape = case_shape(name, view.bench_cases)
        if shape is not None:
            groups.setdefault(shape, []).append(name)
    return groups


def best_per_shape(view: RunView, families: list[str] | None = None,
                   only: set[str] | None = None) -> list[dict[str, Any]]:
    """Per input shape, the verified candidate with the smallest geomean over that shape's
    cases (every one of them passed and timed); ties go to the older candidate."""
    rows = []
    base = {o.case: o.median_ms for o in view.baseline.cases} if view.baseline else {}
    for shape, names in route_groups(view).items():
        best: tuple[float, tuple, str] | None = None
        for c in view.verified(families, only):
            times = {o.case: o.median_ms for o in view.results[c.id].cases
                     if o.status.value == "ok" and o.median_ms}
            gm = _gm([times.get(n) for n in names])  # type: ignore[misc]
            if gm is None:
                continue
            key = (gm, id_sort_key(c.id), c.id)
            if best is None or key < best:
                best = key
        base_gm = _gm([base.get(n) for n in names]) if base else None  # type: ignore[misc]
        rows.append({"batch": shape[0], "n": shape[1], "cases": names,
                     "candidate": best[2] if best else None,
                     "family": view.by_id[best[2]].family if best else None,
                     "geomean_ms": best[0] if best else None, "baseline_ms": base_gm,
                     "speedup": base_gm / best[0] if best and base_gm else None})
    return rows


def best_overall(view: RunView, families: list[str] | None = None, only: set[str] | None = None) -> Candidate | None:
    """The verified candidate with the best geomean over the whole benchmark suite.

    Only candidates timed on every case qualify (a family timed on its size domain does not);
    ``only``: just these ids (e.g. the promoted ones); without one among ``families``, the torch.geqrf reference, which is timed on every case."""
    names = set(view.case_names())

    def whole(c: Candidate) -> bool:
        return names <= {o.case for o in view.results[c.id].cases if o.status.value == "ok" and o.median_ms}

    cands = [c for c in view.verified(families, only) if whole(c)]
    if not cands and view.baseline_id is not None:
        cands = [c for c in view.verified([BASELINE_FAMILY]) if whole(c)]
    return min(cands, key=lambda c: (c.fitness_ms, id_sort_key(c.id))) if cands else None
