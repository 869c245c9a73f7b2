"""Lineage questions over a run store: ancestors, descendants, champion chains, source diffs.

Parent links live in ``candidates.parent1/parent2`` (indexed both ways); the graph
is a DAG once crossovers join two lines, so the recursive queries use ``UNION``
(not ``UNION ALL``) to visit a shared ancestor once.  :class:`Lineage` answers the same
questions in memory over a :class:`~population.snapshot.RunSnapshot` (the read-only
commands, which ask thousands of them per view).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterator
from typing import TYPE_CHECKING

from population.models import Candidate, CandidateId, Frozen, id_sort_key
from population.store import RunStore
from population.store_rows import CAND_COLS, ChampionEntry, candidate_from_row

if TYPE_CHECKING:
    from population.snapshot import RunSnapshot

_ANCESTORS = f"""
WITH RECURSIVE anc(id) AS (
    SELECT parent1 FROM candidates WHERE id = :id AND parent1 IS NOT NULL
    UNION SELECT parent2 FROM candidates WHERE id = :id AND parent2 IS NOT NULL
    UNION SELECT c.parent1 FROM candidates c JOIN anc ON c.id = anc.id WHERE c.parent1 IS NOT NULL
    UNION SELECT c.parent2 FROM candidates c JOIN anc ON c.id = anc.id WHERE c.parent2 IS NOT NULL
)
SELECT {CAND_COLS} FROM candidates WHERE id IN (SELECT id FROM anc) ORDER BY seq DESC
"""

_DESCENDANTS = f"""
WITH RECURSIVE des(id) AS (
    SELECT :id
    UNION SELECT c.id FROM candidates c JOIN des ON c.parent1 = des.id
    UNION SELECT c.id FROM candidates c JOIN des ON c.parent2 = des.id
)
SELECT {CAND_COLS} FROM candidates WHERE id IN (SELECT id FROM des) AND id != :id ORDER BY seq
"""


class LineageTree(Frozen):
    """A descendant tree kept flat (ids to children), so that a chain thousands deep can
    be walked, compared and written to JSON without recursion."""

    root: CandidateId
    nodes: dict[CandidateId, Candidate]
    children: dict[CandidateId, tuple[CandidateId, ...]]

    def walk(self) -> Iterator[tuple[Candidate, int]]:
        """(candidate, depth) pairs, depth first, children in creation order."""
        stack = [(self.root, 0)]
        while stack:
            cid, depth = stack.pop()
            yield self.nodes[cid], depth
            stack.extend((k, depth + 1) for k in reversed(self.children.get(cid, ())))

    def size(self) -> int:
        return len(self.nodes)


def parents(store: RunStore, cid: str) -> list[Candidate]:
    return [store.get_candidate(p) for p in store.get_candidate(cid).parent_ids]


def children(store: RunStore, cid: str) -> list[Candidate]:
    rows = store.connection.execute(
        f"SELECT {CAND_COLS} FROM candidates WHERE parent1 = ? UNION "
        f"SELECT {CAND_COLS} FROM candidates WHERE parent2 = ? ORDER BY seq", (cid, cid)).fetchall()
    return [candidate_from_row(r, store.path) for r in rows]


def ancestor_ids(store: RunStore, cid: str) -> list[str]:
    """Ids of every ancestor, newest first, without building models (the fast path)."""
    store.get_candidate(cid)
    sql = _ANCESTORS.replace(f"SELECT {CAND_COLS} FROM", "SELECT id FROM")
    return [r[0] for r in store.connection.execute(sql, {"id": cid}).fetchall()]


def ancestors(store: RunStore, cid: str) -> list[Candidate]:
    """Every ancestor (through both parents of crossovers), newest first."""
    store.get_candidate(cid)
    rows = store.connection.execute(_ANCESTORS, {"id": cid}).fetchall()
    return [candidate_from_row(r, store.path) for r in rows]


def descendants(store: RunStore, cid: str) -> list[Candidate]:
    """Every descendant, oldest first."""
    store.get_candidate(cid)
    rows = store.connection.execute(_DESCENDANTS, {"id": cid}).fetchall()
    return [candidate_from_row(r, store.path) for r in rows]


def tree(store: RunStore, root_id: str) -> LineageTree:
    """The descendant tree under ``root_id``.

    A crossover child appears under its first parent only, so the result is a tree
    even where lines merge.
    """
    with store.read():
        root = store.get_candidate(root_id)
        below = descendants(store, root_id)
    return _assemble([root], [root, *below])[0]


def family_tree(store: RunStore, family: str) -> list[LineageTree]:
    """One tree per root of the family (its seeds and any candidate whose parents are elsewhere)."""
    with store.read():
        members = store.list_candidates(family=family)
    ids = {c.id for c in members}
    roots = [c for c in members if not (c.parent_ids and c.parent_ids[0] in ids)]
    return _assemble(roots, members)


def _assemble(roots: list[Candidate], cands: list[Candidate]) -> list[LineageTree]:
    kids: dict[str, list[str]] = {}
    by_id = {c.id: c for c in cands}
    root_ids = {r.id for r in roots}
    for c in cands:
        if c.parent_ids and c.parent_ids[0] in by_id and c.id not in root_ids:
            kids.setdefault(c.parent_ids[0], []).append(c.id)
    trees: list[LineageTree] = []
    for root in roots:
        nodes: dict[str, Candidate] = {}
        stack = [root.id]
        while stack:
            cid = stack.pop()
            nodes[cid] = by_id[cid]
            stack.extend(kids.get(cid, ()))
        trees.append(LineageTree(root=root.id, nodes=nodes,
                                 children={k: tuple(v) for k, v in kids.items() if k in nodes}))
    return trees


class Lineage:
    """The lineage of a snapshot, walked in memory.  A family's tree hangs every candidate under
    its first parent (a crossover under the first of its two); a candidate whose first parent is
    in another family (or absent) is a root of its own family's tree.  Walks are iterative: a
    lineage can be thousands deep."""

    def __init__(self, snapshot: RunSnapshot) -> None:
        self.by_id: dict[str, Candidate] = snapshot.by_id
        self.history: tuple[ChampionEntry, ...] = snapshot.history
        self.children: dict[str, list[str]] = {}  # first-parent children, any family, creation order
        for c in snapshot.candidates:
            if c.parent_ids and c.parent_ids[0] in self.by_id:
                self.children.setdefault(c.parent_ids[0], []).append(c.id)
        self._order = [c.id for c in snapshot.candidates]

    def roots(self, family: str) -> list[str]:
        """Roots of a family's tree: seeds, and candidates whose first parent is in another family."""
        return [cid for cid in self._order if self.by_id[cid].family == family
                and not self._in_family_tree(self.by_id[cid])]

    def _in_family_tree(self, c: Candidate) -> bool:
        return bool(c.parent_ids) and c.parent_ids[0] in self.by_id and self.by_id[c.parent_ids[0]].family == c.family

    def tree_children(self, cid: str) -> list[str]:
        """Children under ``cid`` in its family tree (a crossover hangs under its first parent)."""
        fam = self.by_id[cid].family
        return [k for k in self.children.get(cid, ()) if self.by_id[k].family == fam]

    def subtree_ids(self, cid: str) -> list[str]:
        """``cid`` and everything below it in its family tree, depth first."""
        out, stack = [], [cid]
        while stack:
            x = stack.pop()
            out.append(x)
            stack.extend(self.tree_children(x))
        return out

    def ancestor_ids(self, cid: str) -> list[str]:
        """Every ancestor through both parents, newest first (as :func:`ancestor_ids` on a store)."""
        seen: set[str] = set()
        stack = list(self.by_id[cid].parent_ids)
        while stack:
            p = stack.pop()
            if p in seen or p not in self.by_id:
                continue
            seen.add(p)
            stack.extend(self.by_id[p].parent_ids)
        return sorted(seen, key=id_sort_key, reverse=True)

    def family_trees(self, family: str) -> list[LineageTree]:
        """As :func:`family_tree` on a store: one tree per root of the family."""
        members = [c for c in self.by_id.values() if c.family == family]
        ids = {c.id for c in members}
        return _assemble([c for c in members if not (c.parent_ids and c.parent_ids[0] in ids)], members)

    def chain(self, family: str) -> list[str]:
        """The family's successive champions, oldest first."""
        return [e.change.candidate_id for e in self.history if e.change.family == family]

    def champion_graph(self, family: str) -> tuple[list[str], list[tuple[str, str]]]:
        """The champions of a family and every ancestor linking them (within the family):
        node ids in creation order and first-parent edges."""
        keep: set[str] = set()
        for cid in self.chain(family):
            x: str | None = cid
            while x is not None and x in self.by_id and x not in keep and self.by_id[x].family == family:
                keep.add(x)
                parents = self.by_id[x].parent_ids
                x = parents[0] if parents else None
        ids = sorted(keep, key=id_sort_key)
        edges = [(self.by_id[x].parent_ids[0], x) for x in ids if self.by_id[x].parent_ids
                 and self.by_id[x].parent_ids[0] in keep]
        return ids, edges


def champion_chain(store: RunStore, family: str) -> list[ChampionEntry]:
    """Successive champions of a family, oldest first, with when and why each took over."""
    return store.champion_history(family)


def diff(store: RunStore, child_id: str, parent_id: str | None = None, context: int = 3) -> str:
    """Unified diff from a parent's source to the child's (first parent by default).

    Parameter changes are appended as a second diff, since an Optuna child differs
    from its parent only there.
    """
    with store.read():
        child = store.get_candidate(child_id)
        if parent_id is None:
            if not child.parent_ids:
                raise ValueError(f"{child_id} has no parent to diff against")
            parent_id = child.parent_ids[0]
        parent = store.get_candidate(parent_id)
        old, new = store.source(parent.source_sha256), store.source(child.source_sha256)
    return diff_sources(parent, old, child, new, context)


def diff_sources(parent: Candidate, old: str, child: Candidate, new: str, context: int = 3) -> str:
    """Unified diff of two candidates' sources, then of their parameters when those differ."""
    out = list(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                    fromfile=f"a/{parent.id}", tofile=f"b/{child.id}", n=context))
    if parent.params != child.params:
        pa = json.dumps(parent.params, indent=1, sort_keys=True).splitlines(keepends=True)
        ch = json.dumps(child.params, indent=1, sort_keys=True).splitlines(keepends=True)
        out += difflib.unified_diff(pa, ch, fromfile=f"a/{parent.id}/params", tofile=f"b/{child.id}/params",
                                    n=context)
    return "".join(line if line.endswith("\n") else line + "\n" for line in out)
