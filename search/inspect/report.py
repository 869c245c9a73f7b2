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
import time
from pathlib import Path
from typing import Any

from search.inspect import report_plots
from search.inspect.view import RunView
from search.numbers import CPU_CAVEAT, ms as fmt_ms, on_cpu, speedup as fmt_speedup
from search.inspect.report_human import human_section

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


def _num(x: float | None, spec: str | None = None, suffix: str = "") -> str:
    """Times (no spec) in the one shared format; percentages and residuals keep their spec."""
    if x is None:
        return "-"
    return (fmt_ms(x) if spec is None else format(x, spec)) + suffix


# Set per page: on a CPU run a speedup is no verdict, so it is shown without good/bad colour.
_CPU_RUN = {"on": False}


def _speed(x: float | None) -> str:
    if x is None:
        return "-"
    cls = "dim" if _CPU_RUN["on"] else "good" if x >= 1 else "bad"
    return f'<span class="{cls}">{fmt_speedup(x)}</span>'


def _when(stamp: float | None) -> str:
    return "-" if not stamp else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp))


def _table(headers: list[str], rows: list[list[str]], numeric: set[int] | None = None) -> str:
    numeric = numeric or set()
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f'<td class="num">{c}</td>' if i in numeric else f"<td>{c}</td>"
                                    for i, c in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


# --- figures ---------------------------------------------------------------------------------------


def progress_figure(view: RunView, x: str) -> bytes:
    """``x="eval"``: best verified geomean per family over evaluations; ``"seconds"``: every
    evaluation over time per family (failures by reason, best so far on top)."""
    return report_plots.progress_figure(view) if x == "eval" else report_plots.evaluations_figure(view)


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
    families = [f for f in view.families(include_baseline=False) if view.champion_graph(f)[0]]
    if not families:
        return None
    layouts = [chain_layout(view, f) for f in families]
    heights = [max(1.0, max(p[1] for p in pos.values()) + 1) for pos, _ in layouts]
    widths = [max(p[0] for p in pos.values()) + 1 for pos, _ in layouts]
    fig, axes = report_plots.subplots(len(families), (min(22, 2.4 * max(widths) + 1.5),
                                                      sum(0.95 * h + 0.7 for h in heights)),
                                      gridspec_kw={"height_ratios": heights})
    for ax, family, (pos, edges) in zip(axes[:, 0], families, layouts):
        chain = [e.change.candidate_id for e in view.history if e.change.family == family]
        report_plots.draw_chain(ax, view, family, pos, edges)
        ax.set_xlim(-0.6, max(p[0] for p in pos.values()) + 0.6)
        ax.set_ylim(max(p[1] for p in pos.values()) + 0.6, -0.6)
        report_plots.title(ax, f"{family}: champion chain ({len(chain)} champion(s); ancestors between them in "
                               "white)", fontsize=10)
        ax.axis("off")
    return report_plots.figure_png(fig)


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
    _CPU_RUN["on"] = on_cpu(meta["device"])
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
             *([f'<p class="bad">{_e(CPU_CAVEAT)}.</p>'] if _CPU_RUN["on"] else []),
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
    parts.append(_img(figures.get("progress-time"), "every evaluation per family over time"))

    parts.append("<h2>Champion chains</h2>")
    for fam in view.families(include_baseline=False):
        entries = [e for e in view.history if e.change.family == fam]
        if not entries:
            continue
        steps = " → ".join(f'<span class="c">{_e(e.change.candidate_id)}</span> {_e(e.change.cause)} '
                           f"{fmt_ms(e.change.fitness_ms, unit=True)}" for e in entries)
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
            ["budget", _e(_kv(cfg.get("budget")))], ["mutation mix", _e(_mutation_mix(cfg))],
            ["candidates by state", _e(_kv(meta["states"]))],
            ["LLM", f"{llm['calls']} calls, {llm['errors']} errors, {llm['prompt_tokens']:,} prompt + "
                    f"{llm['completion_tokens']:,} completion tokens, ${llm['cost_usd']:.4f}; models "
                    f"{_e(', '.join(cfg['llm_models']) or '-')}"]]
    parts.append(_table(["", ""], rows))
    parts.extend(_llm_models(llm.get("models") or {}))
    parts.append(f"<footer>Generated by <code>qrsearch report</code> from {_e(view.run_dir)}; self-contained "
                 f"(no scripts, no external resources).</footer></body></html>")
    return "\n".join(parts)


def _llm_models(models: dict[str, dict[str, Any]]) -> list[str]:
    """Per model: what was asked, what came of it, what it cost (rejected answers included)."""
    if not models:
        return []
    rows = [[_e(name), str(m["requests"]), str(m["accepted"]), str(m["evaluated"]), str(m["restored_params"]),
             f"{m['rejected_total']}" + (f' <span class="dim">({_e(_kv(m["rejected"]))})</span>' if m["rejected"] else ""),
             str(m["errors"]), f"{m['prompt_tokens'] + m['completion_tokens']:,}", f"${m['cost_usd']:.4f}",
             f"paused until {_when(m['paused_until'])}" if m["paused"] else
             (f"{m['streak']} unusable in a row" if m["streak"] else "on")]
            for name, m in models.items()]
    return ["<h2>LLM models</h2>",
            _table(["model", "requests", "accepted", "evaluated", "PARAMS restored", "rejected (by reason)", "errors",
                    "tokens", "cost", "state"], rows, numeric={1, 2, 3, 4, 6, 7, 8})]


def _mutation_mix(cfg: dict[str, Any]) -> str:
    """The configured mix, without an LLM share when no LLM was configured (it never ran)."""
    mix = dict(cfg.get("mutation") or {})
    if not cfg.get("llm_models") or not cfg.get("llm_endpoint"):
        mix.pop("llm", None)
        return _kv(mix) + " (LLM mutation off)"
    return _kv(mix)


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
