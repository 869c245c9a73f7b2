"""``qrsearch report``: one self-contained HTML file about a run, readable offline.

No scripts, no fonts, no external resources: CSS is inline and the plots are PNGs
(matplotlib, Agg backend) embedded as ``data:`` URIs; the same PNGs are also written
beside the HTML file for people who prefer images.  Content: champions, best geomean
per family over evaluations and over time, the champion chain of each family as a
graph, the best candidate per benchmark case (speedup vs torch.geqrf, fraction of
the H200 floors when measured on a GPU), failure reasons, and the run's metadata.
"""

from __future__ import annotations

import base64
import html
import io
import time
from pathlib import Path
from typing import Any

from search.inspect_data import RunView
from search.report_human import human_section
from search.speedup import BASELINE_FAMILY

CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 24px auto; max-width: 1200px;
       color: #1d232a; background: #ffffff; padding: 0 16px; line-height: 1.4; }
h1 { font-size: 26px; margin-bottom: 4px; } h1 code { font-size: 24px; } h2 { font-size: 20px; margin-top: 32px; border-bottom: 2px solid #e3e7ec;
 padding-bottom: 4px; } h3 { font-size: 16px; margin-bottom: 6px; }
.sub { color: #5b6673; margin-top: 0; }
table { border-collapse: collapse; margin: 8px 0 16px; font-size: 13px; }
th, td { border: 1px solid #d5dbe1; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #eef2f6; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr:nth-child(even) td { background: #f8fafc; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; margin: 12px 0; }
.card { border: 1px solid #d5dbe1; border-radius: 8px; padding: 10px 14px; min-width: 160px; background: #f8fafc; }
.card .v { font-size: 22px; font-weight: 600; } .card .k { color: #5b6673; font-size: 12px; }
.good { color: #137333; } .bad { color: #b3261e; } .dim { color: #7a8591; }
.chain { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 13px; margin: 4px 0 12px; }
.chain span.c { background: #fff4c2; border: 1px solid #e0c64a; border-radius: 4px; padding: 1px 5px; }
img { max-width: 100%; border: 1px solid #e3e7ec; border-radius: 6px; }
code, .mono { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 12px; }
footer { margin-top: 40px; color: #7a8591; font-size: 12px; }
"""


def _e(x: Any) -> str:
    return html.escape("" if x is None else str(x))


def _num(x: float | None, spec: str = ".4g", suffix: str = "") -> str:
    return "-" if x is None else format(x, spec) + suffix


def _speed(x: float | None) -> str:
    if x is None:
        return "-"
    cls = "good" if x >= 1 else "bad"
    return f'<span class="{cls}">{x:.2f}x</span>'


def _when(stamp: float | None) -> str:
    return "-" if not stamp else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp))


def _table(headers: list[str], rows: list[list[str]], numeric: set[int] | None = None) -> str:
    numeric = numeric or set()
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f'<td class="num">{c}</td>' if i in numeric else f"<td>{c}</td>"
                                    for i, c in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


# --- figures ---------------------------------------------------------------------------------------


def _figure_png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight", facecolor="white")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return buf.getvalue()


def progress_figure(view: RunView, x: str) -> bytes:
    """Best verified geomean per family against evaluations (``x="eval"``) or seconds (``"seconds"``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = view.progress()
    fig, ax = plt.subplots(figsize=(9, 4.6))
    colors = plt.get_cmap("tab10")
    plotted = 0
    for i, (family, points) in enumerate((f, p) for f, p in series.items() if f != BASELINE_FAMILY):
        if not points:
            continue
        xs = [p[x] / (60 if x == "seconds" else 1) for p in points]
        ys = [p["best_ms"] for p in points]
        speed = view.speedup(points[-1]["candidate"])
        label = f"{family} (best {ys[-1]:.4g} ms" + (f", {speed:.2f}x)" if speed else ")")
        ax.step(xs, ys, where="post", color=colors(i % 10), label=label, linewidth=2)
        imp = [(xx, p["best_ms"]) for xx, p in zip(xs, points) if p["improved"]]
        ax.scatter([a for a, _ in imp], [b for _, b in imp], color=colors(i % 10), s=22, zorder=3)
        plotted += 1
    if view.baseline is not None and view.baseline.geomean_ms:
        ax.axhline(view.baseline.geomean_ms, color="black", linestyle="--", linewidth=1,
                   label=f"torch.geqrf ({view.baseline.geomean_ms:.4g} ms)")
    if plotted or view.baseline is not None:
        ax.set_yscale("log")
        ax.legend(loc="best", fontsize=9)
    else:
        ax.text(0.5, 0.5, "no verified candidate yet", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("evaluations (whole run)" if x == "eval" else "minutes since the run started")
    ax.set_ylabel(f"best geomean ms ({view.bench_suite_name or 'bench suite'})")
    ax.set_title("best verified geomean per family over " + ("evaluations" if x == "eval" else "time"))
    ax.grid(True, which="both", alpha=0.3)
    return _figure_png(fig)


def chain_layout(view: RunView, family: str) -> tuple[dict[str, tuple[float, float]], list[tuple[str, str]]]:
    """Positions (depth, row) for the champion graph of a family: a tree by first parent,
    leaves on successive rows, parents centred on their children."""
    ids, edges = view.champion_graph(family)
    kids: dict[str, list[str]] = {}
    for a, b in edges:
        kids.setdefault(a, []).append(b)
    roots = [i for i in ids if not any(b == i for _, b in edges)]
    pos: dict[str, tuple[float, float]] = {}
    row = [0.0]

    def place(cid: str, depth: int) -> float:
        stack: list[tuple[str, int, bool]] = [(cid, depth, False)]
        while stack:
            x, d, done = stack.pop()
            children = kids.get(x, [])
            if not children:
                pos[x] = (d, row[0])
                row[0] += 1
            elif done:
                ys = [pos[k][1] for k in children]
                pos[x] = (d, (min(ys) + max(ys)) / 2)
            else:
                stack.append((x, d, True))
                stack.extend((k, d + 1, False) for k in reversed(children))
        return pos[cid][1]

    for r in roots:
        place(r, 0)
    return pos, edges


def chains_figure(view: RunView) -> bytes | None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    families = [f for f in view.families(include_baseline=False) if view.champion_graph(f)[0]]
    if not families:
        return None
    layouts = [chain_layout(view, f) for f in families]
    heights = [max(1.0, max(p[1] for p in pos.values()) + 1) for pos, _ in layouts]
    widths = [max(p[0] for p in pos.values()) + 1 for pos, _ in layouts]
    fig, axes = plt.subplots(len(families), 1, figsize=(min(22, 2.4 * max(widths) + 1.5),
                                                       sum(0.95 * h + 0.7 for h in heights)),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    cause = {e.change.candidate_id: e.change.cause for e in view.history}
    for ax, family, (pos, edges) in zip(axes[:, 0], families, layouts):
        chain = [e.change.candidate_id for e in view.history if e.change.family == family]
        rank = {cid: i + 1 for i, cid in enumerate(chain)}
        for a, b in edges:
            (x0, y0), (x1, y1) = pos[a], pos[b]
            ax.annotate("", xy=(x1 - 0.36, y1), xytext=(x0 + 0.36, y0),
                        arrowprops={"arrowstyle": "->", "color": "#59636e", "lw": 1.2})
        for cid, (x, y) in pos.items():
            cand = view.by_id[cid]
            speed = view.speedup(cid)
            lines = [cid, f"{cand.origin.value}, {cand.fitness_ms:.4g} ms" if cand.fitness_ms else cand.origin.value]
            if speed is not None:
                lines.append(f"{speed:.2f}x torch.geqrf")
            if cid in rank:
                lines.insert(0, f"★ #{rank[cid]} {cause.get(cid, '')}".rstrip())
            current = view.current.get(family) == cid
            face = "#ffd84d" if current else "#fff4c2" if cid in rank else "#ffffff"
            ax.text(x, y, "\n".join(lines), ha="center", va="center", fontsize=8,
                    bbox={"boxstyle": "round,pad=0.35", "facecolor": face,
                          "edgecolor": "#b08900" if cid in rank else "#9aa5b1", "linewidth": 2 if current else 1})
        ax.set_xlim(-0.6, max(p[0] for p in pos.values()) + 0.6)
        ax.set_ylim(max(p[1] for p in pos.values()) + 0.6, -0.6)
        ax.set_title(f"{family}: champion chain ({len(chain)} champion(s); ancestors between them in white)",
                     fontsize=10, loc="left")
        ax.axis("off")
    return _figure_png(fig)


# --- the page ---------------------------------------------------------------------------------------


def _img(png: bytes | None, alt: str) -> str:
    if png is None:
        return '<p class="dim">(nothing to plot yet)</p>'
    data = base64.b64encode(png).decode("ascii")
    return f'<img alt="{_e(alt)}" src="data:image/png;base64,{data}">'


def render_html(view: RunView, figures: dict[str, bytes | None]) -> str:
    meta = view.metadata()
    champions = view.champions()
    cases = view.best_per_case()
    failures = view.failures()
    name = meta.get("name") or view.run_dir.name
    searched = [c for c in champions if not c["baseline"]]
    best = max((c for c in searched if c.get("speedup")), key=lambda c: c["speedup"], default=None)
    llm = meta["llm"]
    cards = [
        ("state", _e(meta["state"]) + (f' <span class="dim">({_e(meta["stop_reason"])})</span>'
                                        if meta.get("stop_reason") else "")),
        ("evaluations", str(meta["evaluations"])),
        ("candidates", str(meta["candidates"])),
        ("failures", str(failures["total"])),
        ("best speedup vs torch.geqrf", _speed(best["speedup"]) + f' <span class="dim">{_e(best["family"])}</span>'
         if best else "-"),
        ("elapsed", _num(meta["elapsed_minutes"], ".1f", " min")),
        ("LLM tokens / cost", f"{llm['prompt_tokens'] + llm['completion_tokens']:,} / ${llm['cost_usd']:.2f}"),
    ]
    parts = [f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
             f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
             f"<title>qrsearch report: {_e(name)}</title><style>{CSS}</style></head><body>",
             f"<h1>qrsearch run <code>{_e(name)}</code></h1>",
             f'<p class="sub">{_e(meta["run_dir"])} · {_e(meta["device"] or "?")} · '
             f'{_e(view.bench_suite_name)} · report written {_when(time.time())}</p>',
             '<div class="cards">' + "".join(f'<div class="card"><div class="v">{v}</div><div class="k">{_e(k)}</div>'
                                             f"</div>" for k, v in cards) + "</div>"]

    parts.append("<h2>Champions</h2>")
    rows = []
    for c in champions:
        res = c.get("max_residuals") or {}
        rows.append([_e(c["family"]) + (' <span class="dim">(baseline)</span>' if c["baseline"] else ""),
                     f"★ {_e(c['champion'])}" if c["champion"] else "-", _e(c.get("origin") or "-"),
                     _num(c.get("geomean_ms")), _speed(c.get("speedup")), _e(c.get("cause") or "-"),
                     str(c["champion_changes"]), str(c["candidates"]), str(c["verified"]), str(c["failed"]),
                     _num(res.get("factor"), ".3g"), _num(res.get("orth"), ".3g")])
    parts.append(_table(["family", "champion", "origin", "geomean ms", "speedup", "cause", "changes", "candidates",
                         "verified", "failed", "max factor", "max orth"], rows, numeric={3, 4, 6, 7, 8, 9, 10, 11}))

    parts.append("<h2>Progress</h2>")
    parts.append(_img(figures.get("progress-evals"), "best geomean per family over evaluations"))
    parts.append(_img(figures.get("progress-time"), "best geomean per family over time"))

    parts.append("<h2>Champion chains</h2>")
    for fam in view.families(include_baseline=False):
        entries = [e for e in view.history if e.change.family == fam]
        if not entries:
            continue
        steps = " → ".join(f'<span class="c">{_e(e.change.candidate_id)}</span> {_e(e.change.cause)} '
                           f"{e.change.fitness_ms:.4g} ms" for e in entries)
        parts.append(f'<h3>{_e(fam)}</h3><div class="chain">{steps}</div>')
    parts.append(_img(figures.get("champions"), "champion chain per family"))

    parts.append("<h2>Best candidate per benchmark case</h2>")
    on_gpu = view.device_is_gpu()
    rows = []
    for r in cases:
        res = r.get("residuals") or {}
        rows.append([_e(r["case"]), _e(r.get("candidate") or "-"), _e(r.get("family") or "-"), _num(r.get("median_ms")),
                     _num(r.get("baseline_ms")), _speed(r.get("speedup")),
                     _num(None if r.get("fp32_floor_frac") is None else 100 * r["fp32_floor_frac"], ".1f", "%"),
                     _num(None if r.get("tf32_floor_frac") is None else 100 * r["tf32_floor_frac"], ".1f", "%"),
                     _num(res.get("factor"), ".3g"), _num(res.get("orth"), ".3g")])
    parts.append(_table(["case", "candidate", "family", "median ms", "torch.geqrf ms", "speedup", "FP32 floor",
                         "TF32 floor", "factor", "orth"], rows, numeric={3, 4, 5, 6, 7, 8, 9}))
    parts.append('<p class="dim">Floors: the H200 speed of light for the case (FP32 SIMT or TF32 tensor-core '
                 "arithmetic, or memory traffic, whichever is larger) over the measured time"
                 + ("" if on_gpu else "; shown only for runs measured on a GPU") + ".</p>")

    parts.append(human_section(view, _table))  # focus, promotions, retirements, rechecks, notes (report_human.py)
    parts.append("<h2>Failures</h2>")
    if failures["total"]:
        parts.append("<p>" + ", ".join(f"{_e(k)}: <b>{v}</b>" for k, v in failures["by_state"].items()) + "</p>")
        rows = [[str(g["count"]), _e(g["state"]), f'<span class="mono">{_e(g["reason"])}</span>',
                 _e(", ".join(g["families"])), _e(", ".join(g["cases"][:6]) or "-"), _e(", ".join(g["examples"]))]
                for g in failures["reasons"]]
        parts.append(_table(["count", "state", "reason", "families", "cases", "examples"], rows, numeric={0}))
    else:
        parts.append("<p>none</p>")

    parts.append("<h2>Run</h2>")
    cfg = meta["config"]
    rows = [["run directory", _e(meta["run_dir"])], ["state", _e(meta["state"])],
            ["started / last update", f"{_when(meta['started'])} / {_when(meta['last_update'])}"],
            ["sessions", str(meta["sessions"])], ["device", _e(meta["device"] or "?")],
            ["versions", _e(", ".join(f"{k} {v}" for k, v in meta["versions"].items()) or "-")],
            ["torch.geqrf baseline", f"{_e(meta['baseline']['candidate'] or '-')}, "
                                     f"{_num(meta['baseline']['geomean_ms'])} ms geomean"],
            ["families", _e(", ".join(cfg["families"] or []))], ["seed", _e(cfg["seed"])],
            ["suites", f"verify {_e(cfg['verify_suite'])}, bench {_e(cfg['bench_suite'])}"],
            ["budget", _e(_kv(cfg.get("budget")))], ["mutation mix", _e(_kv(cfg.get("mutation")))],
            ["candidates by state", _e(_kv(meta["states"]))],
            ["LLM", f"{llm['calls']} calls, {llm['errors']} errors, {llm['prompt_tokens']:,} prompt + "
                    f"{llm['completion_tokens']:,} completion tokens, ${llm['cost_usd']:.4f}; models "
                    f"{_e(', '.join(cfg['llm_models']) or '-')}"]]
    parts.append(_table(["", ""], rows))
    parts.append(f"<footer>Generated by <code>qrsearch report</code> from {_e(view.run_dir)}; self-contained "
                 f"(no scripts, no external resources).</footer></body></html>")
    return "\n".join(parts)


def _kv(data: Any) -> str:
    if not isinstance(data, dict):
        return "-" if data is None else str(data)
    return ", ".join(f"{k} {v}" for k, v in data.items())


def write_report(view: RunView, output: Path, pngs: bool = True) -> list[Path]:
    """Write the HTML (and the PNG plots beside it); returns the paths written, the HTML first."""
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    figures: dict[str, bytes | None] = {
        "progress-evals": progress_figure(view, "eval"),
        "progress-time": progress_figure(view, "seconds"),
        "champions": chains_figure(view),
    }
    output.write_text(render_html(view, figures), encoding="utf-8")
    written = [output]
    if pngs:
        for key, png in figures.items():
            if png is None:
                continue
            path = output.with_name(f"{output.stem}-{key}.png")
            path.write_bytes(png)
            written.append(path)
    return written
