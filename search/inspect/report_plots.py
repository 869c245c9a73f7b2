"""The report's plots a performance engineer reads: every evaluation over time per family
(failures marked by their reason, the best-so-far line on top), the best geomean over
evaluations, and the champion chains as boxes joined by arrows.

The y axis is fitted to the families' own verified times; torch.geqrf is given as a number
(and drawn only when it falls inside that range), so one slow or fast baseline never squeezes
the families into flat lines.
"""

from __future__ import annotations

import io
import math
from collections import Counter
from typing import Any

from population.models import Candidate, State
from search.inspect.view import RunView, normalize_reason
from search.numbers import CPU_CAVEAT, ms as fmt_ms, on_cpu, speedup as fmt_speedup
from population.records import BASELINE_FAMILY

# One marker per failure kind, so a reader tells a compile error from a wrong answer at a glance.
FAILURE_MARKERS = {State.FAILED_COMPILE.value: "s", State.FAILED_VERIFY.value: "X", State.CRASHED.value: "v",
                   State.TIMEOUT.value: "P", State.REJECTED.value: "D"}


def subplots(rows: int, figsize: tuple[float, float], **kw: Any) -> tuple[Any, Any]:
    """A figure of ``rows`` axes (an array, ``squeeze=False``) drawn by Agg.  Made without pyplot,
    whose import and figure registry a one-shot report does not need."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize)
    return fig, fig.subplots(rows, 1, squeeze=False, **kw)


DPI = 110


def figure_png(fig: Any) -> bytes:
    """The figure as a PNG cropped to what it shows.  The crop is measured, not drawn: savefig's
    ``bbox_inches="tight"`` draws the whole figure once to find it, then again to save it."""
    from matplotlib import rcParams
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig.set_dpi(DPI)
    box = fig.get_tightbbox(FigureCanvasAgg(fig).get_renderer()).padded(rcParams["savefig.pad_inches"])
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches=box, facecolor="white")
    return buf.getvalue()


def log_axis(ax: Any, limits: tuple[float, float]) -> None:
    """A log y axis over ``limits`` labelled in plain numbers ("3", "0.05"): matplotlib's own
    labels are mathtext ("5 x 10^-2"), and laying them out was a fifth of a report's figures."""
    from matplotlib.ticker import LogFormatter

    class Plain(LogFormatter):
        def __call__(self, x: float, pos: int | None = None) -> str:
            return f"{x:g}" if super().__call__(x, pos) else ""  # the ticks matplotlib labels

    ax.set_yscale("log")
    ax.set_ylim(*limits)
    ax.yaxis.set_major_formatter(Plain(10))
    ax.yaxis.set_minor_formatter(Plain(10, labelOnlyBase=False))


def title(ax: Any, text: str, **kw: Any) -> None:
    # At a fixed height: matplotlib otherwise places each title clear of the tick labels of every
    # axis it shares x with, which measures them all for every one of a report's subplots.
    ax.set_title(text, loc="left", y=1.0, **kw)


def fitted_range(values: list[float]) -> tuple[float, float] | None:
    """Log-axis limits around ``values`` with a margin (None when there is nothing to fit)."""
    finite = [v for v in values if v and v > 0 and math.isfinite(v)]
    if not finite:
        return None
    low, high = min(finite), max(finite)
    if high / low < 1.5:  # a near-constant series still gets a readable span
        mid = math.sqrt(low * high)
        low, high = mid / 1.25, mid * 1.25
    return low / 1.3, high * 1.3


def baseline_note(view: RunView) -> str:
    base = view.baseline.geomean_ms if view.baseline is not None else None
    note = f"torch.geqrf geomean {fmt_ms(base, unit=True)}" if base else "no torch.geqrf time"
    return note + (f"; {CPU_CAVEAT}" if on_cpu(view.device()) else "")


def _baseline_line(ax: Any, view: RunView, limits: tuple[float, float] | None) -> None:
    base = view.baseline.geomean_ms if view.baseline is not None else None
    if base and limits and limits[0] <= base <= limits[1]:
        ax.axhline(base, color="black", linestyle="--", linewidth=1, label=f"torch.geqrf {fmt_ms(base, unit=True)}")


SCATTER_POINTS = 2000  # points per family in a scatter plot; more are sampled evenly in time


def sampled(items: list[Any], limit: int) -> list[Any]:
    """At most ``limit`` of ``items`` (in their order), evenly spaced, the first and last kept: a
    scatter of 50,000 evaluations takes seconds to draw and reads no better than 2,000."""
    if len(items) <= limit:
        return items
    step = (len(items) - 1) / (limit - 1)
    return [items[round(i * step)] for i in range(limit)]


def shown_note(items: list[Any], shown: list[Any]) -> str:
    return "" if len(shown) == len(items) else f", {len(shown)} shown"


def evaluations_figure(view: RunView) -> bytes:
    """Every finished evaluation per family against minutes since the run started: verified
    ones at their geomean, failures in a band under the axis by kind, best so far on top."""
    families = view.families(include_baseline=False)
    t0 = view.started() or 0.0
    fig, axes = subplots(max(1, len(families)), (9, 2.9 * max(1, len(families)) + 0.6), sharex=True)
    finished = view.finished_by_family()
    for ax, family in zip(axes[:, 0], families):
        done = finished[family]
        by_state: dict[State, list[Candidate]] = {}
        for c in done:
            by_state.setdefault(c.state, []).append(c)
        minutes = {c.id: max(0.0, view.finished_at(c.id) - t0) / 60 for c in done}
        ok = [c for c in by_state.get(State.VERIFIED, []) if c.fitness_ms]
        limits = fitted_range([c.fitness_ms for c in ok])  # type: ignore[misc]  # each family its own range
        shown = sampled(ok, SCATTER_POINTS)
        ax.scatter([minutes[c.id] for c in shown], [c.fitness_ms for c in shown], s=18, color="#1f77b4",
                   alpha=0.75, label=f"verified ({len(ok)}{shown_note(ok, shown)})", zorder=2)
        floor = limits[0] * 1.08 if limits else 1.0  # the failure band sits just above the axis bottom
        for state, marker in FAILURE_MARKERS.items():
            failed = by_state.get(State(state), [])
            if not failed:
                continue
            top = Counter(normalize_reason(c.reason or "")[0] for c in failed).most_common(1)[0][0]
            marks = sampled(failed, SCATTER_POINTS // 4)
            ax.scatter([minutes[c.id] for c in marks], [floor] * len(marks), marker=marker, s=30,
                       color="#b3261e", alpha=0.8, zorder=3,
                       label=f"{state} ({len(failed)}{shown_note(failed, marks)}): {top[:48]}")
        best: list[tuple[float, float]] = []
        for c in ok:
            if not best or c.fitness_ms < best[-1][1]:  # type: ignore[operator]
                best.append((minutes[c.id], c.fitness_ms))  # type: ignore[arg-type]
        if best:
            end = max(minutes.values())
            xs = [b[0] for b in best] + [end]
            ys = [b[1] for b in best] + [best[-1][1]]
            speed = view.speedup(view.current[family]) if family in view.current else None
            ax.step(xs, ys, where="post", color="#ff7f0e", linewidth=2.2, zorder=5,
                    label=f"best so far {fmt_ms(ys[-1], unit=True)}" + (f", {fmt_speedup(speed)}" if speed else ""))
        _baseline_line(ax, view, limits)
        if limits:
            log_axis(ax, limits)
        if not done:
            ax.text(0.5, 0.5, "no finished evaluation", ha="center", va="center", transform=ax.transAxes)
        title(ax, f"{family}: {len(done)} evaluations", fontsize=10)
        ax.set_ylabel("geomean ms")
        ax.grid(True, which="both", alpha=0.3)
        if done:
            ax.legend(loc="upper right", fontsize=7.5)
    axes[-1, 0].set_xlabel("minutes since the run started")
    fig.suptitle(f"every evaluation ({view.bench_suite_name or 'bench suite'}); {baseline_note(view)}", fontsize=10)
    return figure_png(fig)


def progress_figure(view: RunView) -> bytes:
    """Best verified geomean per family against the run's evaluation number."""
    from matplotlib import colormaps

    series = view.progress()
    fig, axes = subplots(1, (9, 4.6))
    ax = axes[0, 0]
    colors = colormaps["tab10"]
    values = [p["best_ms"] for f, points in series.items() if f != BASELINE_FAMILY for p in points]
    limits = fitted_range(values)
    for i, (family, points) in enumerate((f, p) for f, p in series.items() if f != BASELINE_FAMILY):
        if not points:
            continue
        # The step line changes only where the best improved: those points and the last draw the
        # same line as every evaluation's (50,000 of them took seconds to lay out).
        points = [p for p in points[:-1] if p["improved"]] + points[-1:]
        xs = [p["eval"] for p in points]
        ys = [p["best_ms"] for p in points]
        speed = view.speedup(points[-1]["candidate"])
        label = f"{family} (best {fmt_ms(ys[-1], unit=True)}" + (f", {fmt_speedup(speed)})" if speed else ")")
        ax.step(xs, ys, where="post", color=colors(i % 10), label=label, linewidth=2, zorder=4)
        imp = [(x, p["best_ms"]) for x, p in zip(xs, points) if p["improved"]]
        ax.scatter([a for a, _ in imp], [b for _, b in imp], color=colors(i % 10), s=22, zorder=5)
    _baseline_line(ax, view, limits)
    if limits:
        log_axis(ax, limits)
        ax.legend(loc="best", fontsize=9)
    else:
        ax.text(0.5, 0.5, "no verified candidate yet", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("evaluations (whole run)")
    ax.set_ylabel(f"best geomean ms ({view.bench_suite_name or 'bench suite'})")
    ax.set_title(f"best verified geomean per family; {baseline_note(view)}", fontsize=10, y=1.0)
    ax.grid(True, which="both", alpha=0.3)
    return figure_png(fig)


def draw_chain(ax: Any, view: RunView, family: str, pos: dict[str, tuple[float, float]],
               edges: list[tuple[str, str]]) -> None:
    """Boxes for the champions and their linking ancestors, then an arrow per parent edge
    clipped at the two boxes (so every edge shows, however wide the boxes are)."""
    chain = [e.change.candidate_id for e in view.history if e.change.family == family]
    rank = {cid: i + 1 for i, cid in enumerate(chain)}
    cause = {e.change.candidate_id: e.change.cause for e in view.history}
    boxes = {}
    for cid, (x, y) in pos.items():
        cand = view.by_id[cid]
        speed = view.speedup(cid)
        lines = [cid, f"{cand.origin.value}, {fmt_ms(cand.fitness_ms, unit=True)}" if cand.fitness_ms
                 else cand.origin.value]
        if speed is not None:
            lines.append(f"{fmt_speedup(speed)} torch.geqrf")
        if cid in rank:
            lines.insert(0, f"★ #{rank[cid]} {cause.get(cid, '')}".rstrip())
        current = view.current.get(family) == cid
        face = "#ffd84d" if current else "#fff4c2" if cid in rank else "#ffffff"
        boxes[cid] = ax.text(x, y, "\n".join(lines), ha="center", va="center", fontsize=8, zorder=3,
                             bbox={"boxstyle": "round,pad=0.35", "facecolor": face,
                                   "edgecolor": "#b08900" if cid in rank else "#59636e",
                                   "linewidth": 2 if current else 1.2})
    for a, b in edges:
        ax.annotate("", xy=pos[b], xytext=pos[a], zorder=4,
                    arrowprops={"arrowstyle": "-|>", "color": "#36404a", "lw": 1.4, "shrinkA": 2, "shrinkB": 2,
                                "patchA": boxes[a].get_bbox_patch(), "patchB": boxes[b].get_bbox_patch(),
                                "connectionstyle": "arc3,rad=0.0"})  # drawn after the boxes: clipped at them
