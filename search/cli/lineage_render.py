"""How ``qrsearch lineage`` draws a run's lineage: node labels, rich trees, Graphviz DOT."""

from __future__ import annotations

from rich.markup import escape
from rich.tree import Tree

from population.models import State
from search.inspect.view import Item, Node, RunView
from search.numbers import ms as fmt_ms, speedup as fmt_speedup

STATE_STYLE = {"verified": "green", "pending": "cyan", "running": "cyan", "rejected": "magenta",
               "failed_compile": "red", "failed_verify": "red", "crashed": "red", "timeout": "yellow"}
CURRENT_MARK, FORMER_MARK = "★", "☆"


def _fmt(x: float | None) -> str:
    return "-" if x is None else fmt_ms(x)


_speed = fmt_speedup


def node_label(node: Node, markup: bool = True) -> str:
    """``c0000011 optuna/optuna_step verified 0.452 ms 1.90x ★ champion`` (origin/operator; failures
    end with their reason)."""

    def styled(text: str, style: str) -> str:
        return f"[{style}]{escape(text)}[/]" if markup else text

    origin = node.origin
    if node.operator and node.operator != node.origin:
        origin += f"/{node.operator}"  # which of the two crossovers: crossover/llm_merge, .../param_crossover
    if node.origin == "crossover" and len(node.parent_ids) == 2:
        origin += f" (+{node.parent_ids[1]})"
    parts = [styled(node.id, "bold"), origin, styled(node.state, STATE_STYLE.get(node.state, "white"))]
    if node.fitness_ms is not None:
        parts.append(fmt_ms(node.fitness_ms, unit=True))
    if node.speedup is not None:
        parts.append(fmt_speedup(node.speedup))
    text = " ".join(parts)
    if node.failed and node.reason:
        text += " — " + styled(node.reason.splitlines()[0][:90], "dim")
    if node.human:
        text += " " + styled("[" + ", ".join(node.human) + "]", "magenta")
    if node.current:
        text += " " + styled(f"{CURRENT_MARK} champion", "bold yellow")
    elif node.champion:
        text += " " + styled(f"{FORMER_MARK} was champion", "yellow")
    return text


def item_label(item: Item, markup: bool = True) -> str:
    if item.kind in ("node", "seen"):
        assert item.node is not None
        label = node_label(item.node, markup)
        if item.edge == "second parent":
            label = ("[dim](second parent)[/] " if markup else "(second parent) ") + label
        if item.kind == "seen":
            label += " [dim](shown above)[/]" if markup else " (shown above)"
        return label
    states = ", ".join(f"{v} {k}" for k, v in item.by_state.items())
    if item.kind == "failed":
        text = f"… {item.count} failed children: {states}"
        return f"[dim red]{text}[/]" if markup else text
    extra = f", best {fmt_speedup(item.best_speedup)}" if item.best_speedup is not None else ""
    champs = f", {CURRENT_MARK} {item.champions} champion(s) inside" if item.champions else ""
    text = f"… {item.count} more below the depth limit ({states}{extra}{champs})"
    return f"[dim]{text}[/]" if markup else text


def _add(branch: Tree, item: Item) -> None:
    # Iterative, so a chain thousands deep does not hit the recursion limit.
    stack = [(branch, item)]
    while stack:
        parent, it = stack.pop()
        node = parent.add(item_label(it))
        stack.extend((node, child) for child in reversed(it.children))


def lineage_tree(view: RunView, family: str | None, depth: int | None, collapse: int) -> Tree:
    root = Tree(f"[bold]{escape(str(view.run_dir))}[/]", guide_style="dim")
    families = [view.check_family(family)] if family else view.families()
    for fam in families:
        cands = [c for c in view.candidates if c.family == fam]
        champ = view.current.get(fam)
        head = f"[bold cyan]{fam}[/] ({len(cands)} candidates"
        if champ:
            head += f"; champion {champ}, {_fmt(view.by_id[champ].fitness_ms)} ms, {_speed(view.speedup(champ))}"
        branch = root.add(head + ")")
        for item in view.family_items(fam, depth=depth, collapse=collapse):
            _add(branch, item)
    return root


def ancestry_tree(view: RunView, cid: str, depth: int | None) -> Tree:
    item = view.ancestry_item(cid, depth)
    root = Tree(f"ancestry of {item_label(item)}", guide_style="dim")
    for child in item.children:
        _add(root, child)
    if not item.children:
        root.add("[dim](a seed: no parents)[/]")
    return root


def _dot_str(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _dot_node(item: Item, nid: str) -> str:
    label = item_label(item, markup=False)
    attrs = {"label": label}
    if item.kind == "node" and item.node is not None:
        n = item.node
        attrs["fillcolor"] = ("gold" if n.current else "lightyellow" if n.champion else
                              "palegreen" if n.state == State.VERIFIED.value else
                              "mistyrose" if n.failed else "lightcyan")
        if n.champion:
            attrs["penwidth"] = "2.5"
        attrs["tooltip"] = n.reason or n.id
    else:
        attrs["fillcolor"] = "mistyrose" if item.kind == "failed" else "gray92"
        attrs["shape"] = "note"
    body = ", ".join(f"{k}={_dot_str(v)}" for k, v in attrs.items())
    return f"    {_dot_str(nid)} [{body}];"


def lineage_dot(view: RunView, family: str | None, candidate: str | None, depth: int | None,
                collapse: int) -> str:
    """Graphviz DOT of the family trees (one cluster per family) or of one candidate's ancestry."""
    lines = ["digraph lineage {", '    graph [rankdir=LR, fontname="Helvetica", fontsize=11];',
             '    node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10];',
             "    edge [color=gray40];"]
    edges: list[str] = []
    if candidate is not None:
        cid = view.resolve(candidate).id
        data = view.lineage_json(candidate=cid, depth=depth)
        for n in data["nodes"]:
            lines.append(_dot_node(Item(kind="node", node=view.node(n["id"])), n["id"]))
        for e in data["edges"]:
            style = ' [style=dashed, label="second parent"]' if e["kind"] == "second parent" else ""
            edges.append(f"    {_dot_str(e['parent'])} -> {_dot_str(e['child'])}{style};")
    else:
        families = [view.check_family(family)] if family else view.families()
        for index, fam in enumerate(families):
            lines.append(f"    subgraph {_dot_str('cluster_' + fam)} {{")
            lines.append(f"        label={_dot_str(fam)};")
            shown: set[str] = set()
            stack: list[tuple[str | None, Item]] = [(None, it) for it in view.family_items(fam, depth, collapse)]
            counter = 0
            while stack:
                parent, it = stack.pop()
                if it.kind == "node":
                    nid = it.ids[0]
                else:
                    counter += 1
                    nid = f"{it.kind}_{index}_{counter}"
                shown.add(nid)
                lines.append("    " + _dot_node(it, nid))
                if parent is not None:
                    edges.append(f"    {_dot_str(parent)} -> {_dot_str(nid)};")
                stack.extend((nid, child) for child in reversed(it.children))
            lines.append("    }")
            for cid in sorted(shown):
                cand = view.by_id.get(cid)
                if cand is not None and len(cand.parent_ids) == 2 and cand.parent_ids[1] in shown:
                    edges.append(f"    {_dot_str(cand.parent_ids[1])} -> {_dot_str(cid)} "
                                 f"[style=dashed, color=gray60];")
    return "\n".join(lines + edges + ["}"]) + "\n"
