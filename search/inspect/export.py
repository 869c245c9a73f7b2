"""``qrsearch export``: take the winners of a run away as one standalone candidate file.

``--family F`` / ``--candidate ID`` write that candidate's source unchanged: a
candidate file is already standalone (torch and triton only, ``custom_kernel``).

``--composite`` builds one file out of several candidates.  Each candidate's
module-level names (functions, ``@triton.jit`` kernels, ``PARAMS`` and other
globals) get a per-candidate suffix (``custom_kernel_c0000042``), applied to the
names only (loads, stores, calls, ``global`` statements; never attribute names, and
never a local that shadows a global), so the candidates' code sits side by side in
one module, which Triton needs (it reads kernels' sources and globals from a real
module).  Top-level imports are merged and kept once.  A dispatcher
``custom_kernel(data)`` then routes on the input's (batch, n):

* a shape of the benchmark suite goes to the verified candidate with the best
  geomean time over that shape's cases (each of them passed and was timed);
* any other shape goes to the fallback: the verified candidate with the best geomean
  over the whole suite (verified on every case).

The renaming is done on the text, so comments survive; the result is checked by
comparing its syntax tree with one renamed on the tree itself, and the tree's
rendering is used when they differ.  The file passes the static screen that
``qrsearch verify`` applies (checked here before it is written).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from kernels.harness.screen import screen_source
from population.models import State
from search.inspect.best import best_overall, best_per_shape
from search.inspect.namespacing import ExportError, Part, prepare
from search.inspect.view import RunView
from search.numbers import ms as fmt_ms, speedup as fmt_speedup

__all__ = ["ExportError", "Part", "Plan", "Route", "compose", "export_candidate", "export_composite", "family_choice",
           "plan_composite", "prepare", "promoted"]


# --- single candidates -------------------------------------------------------------------------


def promoted(view: RunView, families: list[str] | None = None) -> list[str]:
    """Verified candidates an engineer promoted (``qrsearch promote``), most recent promotion first;
    a promoted result that a later recheck disputed is left out (its re-measurement may be promoted)."""
    ok = {c.id for c in view.verified(families)}
    return [cid for cid in view.human.promoted_ids() if cid in ok and cid not in view.human.disputed]


def family_choice(view: RunView, family: str) -> tuple[str, str]:
    """(id, why) of what ``export --family`` takes: the latest promoted candidate, else the champion."""
    chosen = promoted(view, [family])
    if chosen:
        event = next(e for e in reversed(view.human.promotions()) if e.target == chosen[0])
        why = f": {event.text}" if event.text else ""
        return chosen[0], f"promoted by {event.who} (event #{event.seq}{why}) rather than the champion " \
                          f"{view.current.get(family, '-')}"
    if family not in view.current:
        raise ExportError(f"family {family} has no verified champion yet in {view.run_dir}")
    skipped = [cid for cid in view.human.promoted_ids() if cid in view.human.disputed
               and view.by_id[cid].family == family]
    return view.current[family], "the family champion (no promoted candidate" + (
        f"; promoted {', '.join(skipped)} did not hold on recheck)" if skipped else ")")


def export_candidate(view: RunView, ref: str) -> tuple[str, str]:
    """(source, id) of a family's promoted candidate or champion (``ref`` a family; see
    :func:`family_choice`) or of a candidate, unchanged."""
    if ref in view.families():
        ref = family_choice(view, ref)[0]
    cand = view.resolve(ref)
    if cand.state is not State.VERIFIED:
        raise ExportError(f"{cand.id} is {cand.state.value}, not verified: {cand.reason or 'no result yet'}")
    return view.source(cand.id), cand.id


# --- renaming ---------------------------------------------------------------------------------------


@dataclass
class Route:
    batch: int
    n: int
    candidate: str
    family: str
    geomean_ms: float
    baseline_ms: float | None
    cases: list[str]


@dataclass
class Plan:
    routes: list[Route]
    fallback: str
    fallback_family: str
    fallback_ms: float
    kernels: list[str]  # candidate ids in the file, in order
    promoted: list[str] = field(default_factory=list)  # non-empty: only these promoted candidates were eligible


def plan_composite(view: RunView, families: list[str] | None = None) -> Plan:
    if families is not None:
        for f in families:
            view.check_family(f)
    # Promoted candidates, where an engineer promoted any, are the only ones taken (Plan.promoted says so).
    only = set(promoted(view, families)) or None
    fallback = best_overall(view, families, only)
    if fallback is None:
        raise ExportError(f"no verified candidate in {view.run_dir}"
                          + (f" among families {', '.join(families)}" if families else ""))
    routes = [Route(batch=r["batch"], n=r["n"], candidate=r["candidate"], family=r["family"],
                    geomean_ms=r["geomean_ms"], baseline_ms=r["baseline_ms"], cases=r["cases"])
              for r in best_per_shape(view, families, only) if r["candidate"] is not None]
    kernels = [fallback.id] + [r.candidate for r in routes if r.candidate != fallback.id]
    return Plan(routes=routes, fallback=fallback.id, fallback_family=fallback.family,
                fallback_ms=float(fallback.fitness_ms or 0), kernels=list(dict.fromkeys(kernels)),
                promoted=sorted(only or ()))


def _docstring(view: RunView, plan: Plan) -> str:
    lines = [f"Composite QR kernel exported by qrsearch from {view.run_dir.name} "
             f"({view.bench_suite_name} on {view.device() or '?'}).",
             "",
             "custom_kernel(data) routes on the input's (batch, n): a benchmark shape goes to the verified",
             "candidate with the best geomean time over that shape's cases; any other shape goes to the",
             "fallback, the candidate with the best geomean over the whole suite (verified on every case).",
             "",
             "  batch x n    candidate   family                  ms (geomean)   torch.geqrf ms      speedup"]
    for r in plan.routes:
        speed = fmt_speedup(r.baseline_ms / r.geomean_ms) if r.baseline_ms else "-"
        lines.append(f"  {f'{r.batch}x{r.n}':<11}  {r.candidate:<10}  {r.family:<22}  {fmt_ms(r.geomean_ms):>13}  "
                     f"{fmt_ms(r.baseline_ms or None):>15}  {speed:>11}")
    base_gm = view.baseline.geomean_ms if view.baseline else None
    speed = fmt_speedup(base_gm / plan.fallback_ms) if base_gm and plan.fallback_ms else "-"
    lines.append(f"  {'other':<11}  {plan.fallback:<10}  {plan.fallback_family:<22}  {fmt_ms(plan.fallback_ms):>13}  "
                 f"{fmt_ms(base_gm or None):>15}  {speed:>11}   (fallback; suite geomean)")
    lines += ["", "Times were measured in the run (the cases of each shape: "
              + "; ".join(f"{r.batch}x{r.n}: {', '.join(r.cases)}" for r in plan.routes) + ").",
              "Each candidate's module-level names carry its id as a suffix; needs only torch and triton."]
    if plan.promoted:
        lines.append("Only candidates an engineer promoted were eligible: " + ", ".join(plan.promoted) + ".")
    return "\n".join(lines)


def export_composite(view: RunView, families: list[str] | None = None) -> tuple[str, Plan]:
    """(file text, plan): one standalone file routing each benchmark shape to its best candidate."""
    plan = plan_composite(view, families)
    labels = {}
    for cid in plan.kernels:
        cand = view.by_id[cid]
        labels[cid] = f"family {cand.family}, {cand.origin.value}, {fmt_ms(cand.fitness_ms)} ms suite geomean"
    return compose(plan, {cid: view.source(cid) for cid in plan.kernels}, _docstring(view, plan), labels), plan


def compose(plan: Plan, sources: Mapping[str, str], docstring: str, labels: Mapping[str, str] | None = None) -> str:
    """The composite file: imports once, each candidate renamed, then the dispatcher."""
    labels = labels or {}
    families = {r.candidate: r.family for r in plan.routes} | {plan.fallback: plan.fallback_family}
    parts = [prepare(sources[cid], cid, families.get(cid, "")) for cid in plan.kernels]
    future: list[str] = []
    imports: list[str] = []
    bound: dict[str, tuple[str, str]] = {}
    for part in parts:
        for name, target in part.bindings.items():
            if name in bound and bound[name][0] != target:
                raise ExportError(f"{bound[name][1]} and {part.cid} bind {name} to different modules "
                                  f"({bound[name][0]} and {target}); export them separately")
            bound[name] = (target, part.cid)
        for imp in part.imports:
            bucket = future if imp.startswith("from __future__") else imports
            if imp not in bucket:
                bucket.append(imp)
    rule = f"# {'=' * 76}"
    safe_doc = docstring.replace("\\", "\\\\").replace('"""', "'''")
    out = ['"""' + safe_doc + '\n"""', ""]
    if future:
        out += future + [""]
    out += imports + ["", ""]
    for part in parts:
        head = (part.docstring.strip().splitlines() or [""])[0]
        out += [rule, f"# {part.cid}" + (f": {labels[part.cid]}" if part.cid in labels else "")]
        if head:
            out.append(f"# {head}")
        body = re.sub(r"(?m)^(\s*)# qrsearch: params\s*$", rf"\1# params of {part.cid}", part.body)
        body = re.sub(r"(?m)^(\s*)# qrsearch: end params\s*$", rf"\1# end of the params of {part.cid}", body)
        out += [rule, "", body, ""]
    out += [rule, "# dispatcher", rule, "", "ROUTES = {"]
    for r in plan.routes:
        out.append(f"    ({r.batch}, {r.n}): {r.candidate!r},  # {r.family}, {fmt_ms(r.geomean_ms)} ms")
    out += ["}", f"FALLBACK = {plan.fallback!r}  # {plan.fallback_family}, best suite geomean", "_KERNELS = {"]
    out += [f"    {p.cid!r}: {p.kernel}," for p in parts]
    out += ["}", "", "",
            "def route(data):",
            '    """The id of the candidate that handles an input of this shape."""',
            "    if data.dim() != 3:",
            "        return FALLBACK",
            "    return ROUTES.get((int(data.shape[0]), int(data.shape[-1])), FALLBACK)",
            "", "",
            "def custom_kernel(data):",
            "    return _KERNELS[route(data)](data)",
            ""]
    text = "\n".join(out)
    try:
        ast.parse(text)
    except SyntaxError as exc:
        raise ExportError(f"the composite does not parse (line {exc.lineno}: {exc.msg}); this is a bug") from None
    problems = screen_source(text)
    if problems:
        raise ExportError("the composite fails the static screen: " + "; ".join(problems))
    return text
