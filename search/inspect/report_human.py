"""The report's section on the engineer's part in a run: focus and progress, promotions,
retirements, rechecks (per case against the record), notes, and every event with its outcome."""

from __future__ import annotations

from html import escape
from typing import Any, Callable

from search.inspect.view import RunView
from search.numbers import significant

Table = Callable[..., str]


def _n(x: float | None, spec: str | None = None) -> str:
    """Times and ratios with the three significant figures used everywhere; ``spec`` for percentages."""
    if x is None:
        return "-"
    return significant(x) if spec is None else format(x, spec)


def focus_html(view: RunView, table: Table) -> str:
    focus = view.human.focus
    if not focus:
        return ""
    target = "no target" if focus["target_pct"] is None else f"target {focus['target_pct']:g}% faster"
    head = (f"<h3>Focus</h3><p>Fitness: geomean of <b>{escape(', '.join(focus['cases']))}</b> ({target}); other "
            f"cases may regress at most {focus['max_regression_pct']:g}% against the family champion at the start"
            + (f"; <b>target reached</b> by {escape(', '.join(focus['reached']))}" if focus["reached"] else "")
            + ".</p>")
    rows = [[escape(f), escape(r["reference"]), _n(r["reference_focus_ms"]), escape(r["champion"] or "-"),
             _n(r["champion_focus_ms"]), _n(r["faster_pct"], ".1f") + "%"] for f, r in focus["families"].items()]
    return head + table(["family", "reference", "focus ms at start", "champion", "focus ms now", "faster"], rows,
                        numeric={2, 4, 5})


def recheck_html(view: RunView, table: Table) -> str:
    out = []
    for rc in view.human.rechecks():
        verdict = {True: "holds", False: "does not hold", None: rc["status"]}[rc["holds"]]
        out.append(f"<h3>Recheck #{rc['seq']} of {escape(rc['candidate'])}: {escape(verdict)}</h3>"
                   f"<p>{escape(rc['summary'])}" + (f"; re-measured as {escape(rc['remeasure'])}" if rc["remeasure"]
                                                   else "") + "</p>")
        rows = []
        for r in rc["comparison"]:
            if "recorded_ms" not in r:
                rows.append([escape(r["case"])] + ["-"] * 6 + ["no"])
                continue
            rows.append([escape(r["case"]), f"{_n(r['recorded_ms'])} ({_n(r['recorded_min_ms'])}–"
                         f"{_n(r['recorded_max_ms'])}, n={r['recorded_count'] or '-'})",
                         f"{_n(r['recheck_ms'])} ({_n(r['recheck_min_ms'])}–{_n(r['recheck_max_ms'])}, "
                         f"n={r['recheck_count'] or '-'})", f"{_n(r['geqrf_recorded_ms'])} / {_n(r['geqrf_recheck_ms'])}",
                         _n(r["ratio"]), _n(r["adjusted_ratio"]), f"{100 * r['band']:.0f}%",
                         "yes" if r["holds"] else "<b>no</b>"])
        if rows:
            out.append(table(["case", "recorded ms", "recheck ms", "torch.geqrf then / now", "median ratio",
                              "best call / drift", "noise band", "holds"], rows, numeric={4, 5, 6}))
    return "".join(out)


def human_section(view: RunView, table: Table) -> str:
    """HTML for the report (empty when the run had neither a focus nor any event)."""
    h = view.human
    if not h.events and not h.focus:
        return ""
    parts = ["<h2>The engineer in the loop</h2>", focus_html(view, table)]
    if h.events:
        facts = [("promoted", ", ".join(h.promoted_ids()) or "none"),
                 ("retired structures", ", ".join(sorted(h.retired_structures())) or "none"),
                 ("disputed results", ", ".join(sorted(h.disputed)) or "none"),
                 ("paused now", "yes" if h.paused else "no")]
        parts.append(table(["", ""], [[escape(k), escape(v)] for k, v in facts]))
        notes = [[escape(cid), escape(e.who), escape(e.text)] for cid, es in h.notes().items() for e in es]
        if notes:
            parts.append("<h3>Notes</h3>" + table(["candidate", "who", "note"], notes))
        parts.append(recheck_html(view, table))
        rows: list[list[Any]] = [[str(r["seq"]), escape(r["when"]), escape(r["who"]), escape(r["kind"]),
                                  escape(r["target"]) + (f" (undoes #{r['undoes']})" if r["undoes"] else ""),
                                  escape(r["text"]), escape(r["status"] + (f": {r['detail']}" if r["detail"] else ""))]
                                 for r in h.rows()]
        parts.append("<h3>Events</h3>" + table(["#", "when", "who", "event", "target", "why / note", "outcome"],
                                               rows, numeric={0}))
    return "".join(parts)
