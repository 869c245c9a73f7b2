"""Lineage as the inspection commands show it: nodes, display items, trees, ancestry, lineage JSON.

The walks themselves are :class:`population.lineage.Lineage`'s, in memory over the run's
snapshot; this module turns them into what ``lineage``, ``show``, ``export`` and the
report display (a node's speedup, champion and human marks; failed leaves collapsed;
what lies below a depth limit summarised).  :class:`LineageViews` is mixed into
:class:`search.inspect.view.RunView`, which provides the attributes it declares.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from population.lineage import Lineage
from population.models import Candidate, Origin, State, id_sort_key

if TYPE_CHECKING:
    from search.inspect.human_view import HumanView


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
    operator: str | None = None  # the mutation operator that made it (none for seeds and old stores)

    @property
    def failed(self) -> bool:
        return State(self.state).is_failure

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "family": self.family, "origin": self.origin, "state": self.state,
                "reason": self.reason, "parent_ids": list(self.parent_ids), "generation": self.generation,
                "fitness_ms": self.fitness_ms, "speedup": self.speedup, "champion": self.champion,
                "current_champion": self.current, "told_seq": self.told_seq, "human": list(self.human),
                "operator": self.operator}


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



class LineageViews:
    """The lineage views of a run (mixed into ``RunView``)."""

    # Provided by RunView (search/inspect/view.py), the one class that mixes this in.
    run_dir: Path
    lineage: Lineage
    by_id: dict[str, Candidate]
    current: Mapping[str, str]
    told: Mapping[str, int]
    ever_champion: set[str]
    human: HumanView
    speedup: Callable[[str], float | None]
    resolve: Callable[[str], Candidate]
    check_family: Callable[[str], str]
    families: Callable[..., list[str]]
    operators: Mapping[str, str]

    def node(self, cid: str) -> Node:
        c = self.by_id[cid]
        return Node(id=c.id, family=c.family, origin=c.origin.value, state=c.state.value, reason=c.reason,
                    parent_ids=tuple(c.parent_ids), generation=c.generation, fitness_ms=c.fitness_ms,
                    speedup=self.speedup(cid), champion=cid in self.ever_champion,
                    current=self.current.get(c.family) == cid, told_seq=self.told.get(cid),
                    human=self.human_marks(c), operator=self.operators.get(cid))

    def human_marks(self, c: Candidate) -> tuple[str, ...]:
        h = self.human
        notes = len(h.notes().get(c.id, []))
        marks = [("promoted", c.id in h.promoted_ids()), ("disputed", c.id in h.disputed),
                 ("retired structure", f"{c.family}/{c.fingerprint}" in h.retired_structures()),
                 (f"{notes} note{'s' if notes > 1 else ''}", notes > 0)]
        return tuple(name for name, on in marks if on)


    def roots(self, family: str) -> list[str]:
        """Roots of a family's tree: seeds, and candidates whose first parent is in another family."""
        return self.lineage.roots(family)

    def tree_children(self, cid: str) -> list[str]:
        """Children under ``cid`` in its family tree (a crossover hangs under its first parent)."""
        return self.lineage.tree_children(cid)

    def subtree_ids(self, cid: str) -> list[str]:
        return self.lineage.subtree_ids(cid)

    def ancestor_ids(self, cid: str) -> list[str]:
        """Every ancestor through both parents, newest first."""
        return self.lineage.ancestor_ids(cid)

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
        # The best speedup below is the fastest verified candidate's (lowest fitness): within a
        # family every candidate is timed on the same cases, so the geomean of the speedups is
        # the baseline's geomean over the candidate's, and the fastest has the best.  One result
        # read, not one per hidden candidate (50,000 of them took 14 s).
        # (Those whose result has no overall speedup, a screen-only measurement, are passed over.)
        # A migrant shows its original's result, so it ranks by its original's fitness: its own is
        # what the original's was when it was copied, and a later measurement may have replaced that.
        shown = {k: self._shown_fitness(k) for k in ids if self.by_id[k].state is State.VERIFIED}
        fastest = sorted((k for k, f in shown.items() if f is not None), key=lambda k: (shown[k], k))
        best = next((s for s in map(self.speedup, fastest) if s is not None), None)
        return Item(kind="hidden", ids=tuple(ids), champions=sum(k in self.ever_champion for k in ids),
                    by_state=dict(Counter(self.by_id[k].state.value for k in ids).most_common()),
                    best_speedup=best)

    def _shown_fitness(self, cid: str) -> float | None:
        """The fitness of the candidate whose result ``cid`` shows (a migrant's original's)."""
        cand = self.by_id[cid]
        while cand.origin is Origin.MIGRATION and cand.parent_ids and cand.parent_ids[0] in self.by_id:
            cand = self.by_id[cand.parent_ids[0]]
        return cand.fitness_ms

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
                                    "chain": self.lineage.chain(fam),
                                    "nodes": nodes}
        return out

    def champion_graph(self, family: str) -> tuple[list[str], list[tuple[str, str]]]:
        """The champions of a family and every ancestor linking them (within the family):
        node ids in creation order and first-parent edges, for the report's chain graph."""
        return self.lineage.champion_graph(family)
