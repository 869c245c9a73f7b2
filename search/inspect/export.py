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
from search.inspect.view import RunView


class ExportError(ValueError):
    """The run holds nothing exportable, or the sources cannot be combined; one line for people."""


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


def _target_names(node: ast.AST) -> list[str]:
    return [n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del))]


def _module_level_statements(body: list[ast.stmt]) -> list[ast.stmt]:
    """Statements executed in the module's scope (inside if/try/with/for/while too)."""
    out: list[ast.stmt] = []
    stack = list(reversed(body))
    while stack:
        stmt = stack.pop()
        out.append(stmt)
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        inner: list[ast.stmt] = []
        for name in ("body", "orelse", "finalbody"):
            inner += getattr(stmt, name, []) or []
        for handler in getattr(stmt, "handlers", []) or []:
            inner += handler.body
        if isinstance(stmt, ast.Match):
            for case in stmt.cases:
                inner += case.body
        stack.extend(reversed(inner))
    return out


def module_names(tree: ast.Module) -> tuple[set[str], set[str]]:
    """(names bound at module level other than by imports, names bound by imports)."""
    bound: set[str] = set()
    imported: set[str] = set()
    for stmt in _module_level_statements(tree.body):
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for alias in stmt.names:
                if alias.name != "*":
                    imported.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(stmt.name)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Delete)):
            targets = stmt.targets if isinstance(stmt, (ast.Assign, ast.Delete)) else [stmt.target]
            for t in targets:
                bound.update(_target_names(t))
        elif isinstance(stmt, (ast.For, ast.AsyncFor)):
            bound.update(_target_names(stmt.target))
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                if item.optional_vars is not None:
                    bound.update(_target_names(item.optional_vars))
        elif isinstance(stmt, ast.Try):
            bound.update(h.name for h in stmt.handlers if h.name)
        if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for node in ast.walk(stmt):
                if isinstance(node, ast.NamedExpr):
                    bound.update(_target_names(node.target))
    for node in ast.walk(tree):  # `global x` in a function binds a module-level x
        if isinstance(node, ast.Global):
            bound.update(node.names)
    dunder = {n for n in bound if n.startswith("__") and n.endswith("__")}
    return bound - imported - dunder, imported


def _function_locals(fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> tuple[set[str], set[str]]:
    """(names local to the function, names it declares global)."""
    args = fn.args
    local = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
    local.update(a.arg for a in (args.vararg, args.kwarg) if a is not None)
    declared: set[str] = set()
    if isinstance(fn, ast.Lambda):
        return local, declared
    stack: list[ast.AST] = list(fn.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            local.add(node.name)
            stack.extend(node.decorator_list)
            if not isinstance(node, ast.ClassDef):
                stack.extend(d for d in [*node.args.defaults, *node.args.kw_defaults] if d is not None)
            continue
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            continue  # their own scopes
        if isinstance(node, ast.Global):
            declared.update(node.names)
        elif isinstance(node, ast.Nonlocal):
            local.update(node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            local.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            local.update(a.asname or a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            local.add(node.name)
        elif isinstance(node, ast.NamedExpr):
            local.update(_target_names(node.target))
        stack.extend(ast.iter_child_nodes(node))
    return local - declared, declared


@dataclass
class _Edit:
    line: int  # 1-based
    start: int  # byte offset in the line
    end: int
    new: str


@dataclass
class _Renamer:
    """Finds every occurrence of a module-level name (scope-aware) and renames it on the tree
    (``apply=True``) while recording text edits."""

    mapping: dict[str, str]
    lines: list[bytes]
    edits: list[_Edit] = field(default_factory=list)

    def visit(self, node: ast.AST, shadow: frozenset[str]) -> None:
        stack: list[tuple[ast.AST, frozenset[str]]] = [(node, shadow)]
        while stack:
            node, shadow = stack.pop()
            stack.extend(self._step(node, shadow))

    def _rename(self, name: str, shadow: frozenset[str]) -> str | None:
        return self.mapping.get(name) if name not in shadow else None

    def _def_name(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef, shadow: frozenset[str]) -> None:
        new = self._rename(node.name, shadow)
        if new is None:
            return
        line = self.lines[node.lineno - 1]
        kw = b"class" if isinstance(node, ast.ClassDef) else b"def"
        m = re.compile(rb"\b" + kw + rb"\s+(" + re.escape(node.name.encode()) + rb")\b").search(line, node.col_offset)
        if m is None:
            raise ExportError(f"cannot find the name of {node.name} on line {node.lineno}")
        self.edits.append(_Edit(node.lineno, m.start(1), m.end(1), new))
        node.name = new

    def _step(self, node: ast.AST, shadow: frozenset[str]) -> list[tuple[ast.AST, frozenset[str]]]:
        out: list[tuple[ast.AST, frozenset[str]]] = []
        if isinstance(node, ast.Name):
            new = self._rename(node.id, shadow)
            if new is not None:
                self.edits.append(_Edit(node.lineno, node.col_offset, node.end_col_offset or 0, new))
                node.id = new
            return out
        if isinstance(node, ast.Global):
            renamed = [self.mapping.get(n, n) for n in node.names]
            if renamed != node.names:
                for n in node.names:
                    if n in self.mapping:
                        self._global_edit(node, n, self.mapping[n])
                node.names = renamed
            return out
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self._def_name(node, shadow)
            local, declared = _function_locals(node)
            inner = (shadow | local) - declared
            out += [(d, shadow) for d in node.decorator_list]
            out += [(d, shadow) for d in [*node.args.defaults, *node.args.kw_defaults] if d is not None]
            for a in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs, node.args.vararg,
                      node.args.kwarg]:
                if a is not None and a.annotation is not None:
                    out.append((a.annotation, shadow))
            if node.returns is not None:
                out.append((node.returns, shadow))
            out += [(s, frozenset(inner)) for s in node.body]
            return out
        if isinstance(node, ast.Lambda):
            local, _ = _function_locals(node)
            out += [(d, shadow) for d in [*node.args.defaults, *node.args.kw_defaults] if d is not None]
            out.append((node.body, shadow | local))
            return out
        if isinstance(node, ast.ClassDef):
            self._def_name(node, shadow)
            out += [(d, shadow) for d in [*node.decorator_list, *node.bases, *node.keywords]]
            class_local: set[str] = set()
            for stmt in node.body:
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                class_local.update(_target_names(stmt))
            for stmt in node.body:  # methods do not see the class scope
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    out.append((stmt, shadow))
                else:
                    out.append((stmt, shadow | class_local))
            return out
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            targets: set[str] = set()
            for gen in node.generators:
                targets.update(_target_names(gen.target))
            inner = shadow | targets
            for i, gen in enumerate(node.generators):
                out.append((gen.iter, shadow if i == 0 else inner))
                out.append((gen.target, inner))
                out += [(cond, inner) for cond in gen.ifs]
            elts = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
            out += [(e, inner) for e in elts]
            return out
        return [(child, shadow) for child in ast.iter_child_nodes(node)]

    def _global_edit(self, node: ast.Global, name: str, new: str) -> None:
        # A global statement holds only the keyword, names and commas: every whole-word match is the name.
        pattern = re.compile(rb"\b" + re.escape(name.encode()) + rb"\b")
        last = node.end_lineno or node.lineno
        for lineno in range(node.lineno, last + 1):
            line = self.lines[lineno - 1]
            lo = node.col_offset + len(b"global") if lineno == node.lineno else 0
            hi = node.end_col_offset if lineno == last and node.end_col_offset else len(line)
            for m in pattern.finditer(line, lo, hi):
                self.edits.append(_Edit(lineno, m.start(), m.end(), new))


@dataclass
class Part:
    """One candidate made ready to sit in a shared module."""

    cid: str
    family: str
    body: str  # renamed source without its top-level imports, docstring and __main__ block
    imports: list[str]  # top-level import statements, as text
    bindings: dict[str, str]  # name bound by an import -> what it binds
    docstring: str
    kernel: str  # the renamed custom_kernel
    from_text: bool = True  # renamed on the text (comments kept), else rendered from the tree


def _binding(stmt: ast.Import | ast.ImportFrom) -> dict[str, str]:
    out = {}
    for alias in stmt.names:
        if isinstance(stmt, ast.Import):
            name = alias.asname or alias.name.split(".")[0]
            out[name] = alias.name if alias.asname else alias.name.split(".")[0]
        else:
            out[alias.asname or alias.name] = f"{'.' * stmt.level}{stmt.module or ''}:{alias.name}"
    return out


def prepare(source: str, cid: str, family: str = "") -> Part:
    """Rename a candidate's module-level names with the suffix ``_<cid>`` and split off its imports."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise ExportError(f"{cid}: syntax error at line {exc.lineno}: {exc.msg}") from None
    names, _ = module_names(tree)
    if "custom_kernel" not in names:
        raise ExportError(f"{cid} defines no custom_kernel")
    suffix = "_" + re.sub(r"\W", "_", cid)
    mapping = {n: n + suffix for n in names}
    lines = source.encode("utf-8").splitlines(keepends=True)
    renamer = _Renamer(mapping, lines)
    drop: list[tuple[int, int]] = []  # line spans to remove (1-based, inclusive)
    imports: list[str] = []
    bindings: dict[str, str] = {}
    docstring = ""
    body = tree.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        docstring = body[0].value.value
        drop.append((body[0].lineno, body[0].end_lineno or body[0].lineno))
        body = body[1:]
    kept: list[ast.stmt] = []
    for stmt in body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            imports.append(ast.unparse(stmt))
            for name, target in _binding(stmt).items():
                if bindings.get(name, target) != target:
                    raise ExportError(f"{cid} binds {name} to both {bindings[name]} and {target}")
                bindings[name] = target
            drop.append((stmt.lineno, stmt.end_lineno or stmt.lineno))
        elif _is_main_guard(stmt):
            drop.append((stmt.lineno, stmt.end_lineno or stmt.lineno))
        else:
            kept.append(stmt)
    for stmt in kept:
        renamer.visit(stmt, frozenset())
    expected = ast.dump(ast.Module(body=kept, type_ignores=[]))
    text = _apply(lines, renamer.edits, drop)
    from_text = _spans_are_whole_lines(lines, [s for s in body if s not in kept]) and _same_tree(text, expected)
    if not from_text:
        text = "\n\n".join(ast.unparse(s) for s in kept) + "\n"  # comments lost, meaning kept
    return Part(cid=cid, family=family, body=text.strip("\n") + "\n", imports=imports, bindings=bindings,
                docstring=docstring, kernel=mapping["custom_kernel"], from_text=from_text)


def _is_main_guard(stmt: ast.stmt) -> bool:
    if not isinstance(stmt, ast.If) or not isinstance(stmt.test, ast.Compare):
        return False
    parts = [stmt.test.left, *stmt.test.comparators]
    return any(isinstance(p, ast.Name) and p.id == "__name__" for p in parts) and any(
        isinstance(p, ast.Constant) and p.value == "__main__" for p in parts)


def _spans_are_whole_lines(lines: list[bytes], stmts: list[ast.stmt]) -> bool:
    """Each removed statement alone on its lines (no ``import a; x = 1``)."""
    for s in stmts:
        first, last = lines[s.lineno - 1], lines[(s.end_lineno or s.lineno) - 1]
        if first[:s.col_offset].strip() or last[s.end_col_offset or 0:].strip():
            return False
    return True


def _same_tree(text: str, expected: str) -> bool:
    try:
        return ast.dump(ast.parse(text)) == expected
    except SyntaxError:
        return False


def _apply(lines: list[bytes], edits: list[_Edit], drop: list[tuple[int, int]]) -> str:
    out = list(lines)
    for e in sorted(edits, key=lambda e: (e.line, e.start), reverse=True):
        line = out[e.line - 1]
        out[e.line - 1] = line[:e.start] + e.new.encode("utf-8") + line[e.end:]
    for lo, hi in drop:
        for i in range(lo - 1, hi):
            out[i] = b""
    text = b"".join(out).decode("utf-8")
    return re.sub(r"\n{4,}", "\n\n\n", text)


# --- composing ----------------------------------------------------------------------------------------


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
             "  batch x n    candidate   family                  ms (geomean)   torch.geqrf ms   speedup"]
    for r in plan.routes:
        speed = f"{r.baseline_ms / r.geomean_ms:.2f}x" if r.baseline_ms else "-"
        base = f"{r.baseline_ms:.4g}" if r.baseline_ms else "-"
        lines.append(f"  {f'{r.batch}x{r.n}':<11}  {r.candidate:<10}  {r.family:<22}  {r.geomean_ms:>13.4g}  "
                     f"{base:>15}  {speed:>8}")
    base_gm = view.baseline.geomean_ms if view.baseline else None
    speed = f"{base_gm / plan.fallback_ms:.2f}x" if base_gm else "-"
    lines.append(f"  {'other':<11}  {plan.fallback:<10}  {plan.fallback_family:<22}  {plan.fallback_ms:>13.4g}  "
                 f"{(f'{base_gm:.4g}' if base_gm else '-'):>15}  {speed:>8}   (fallback; suite geomean)")
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
        labels[cid] = f"family {cand.family}, {cand.origin.value}, {cand.fitness_ms:.4g} ms suite geomean"
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
        out.append(f"    ({r.batch}, {r.n}): {r.candidate!r},  # {r.family}, {r.geomean_ms:.4g} ms")
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
