"""Candidate files side by side in one module: each candidate's module-level names get a
per-candidate suffix (``custom_kernel_c0000042``), applied to names only (loads, stores, calls,
``global`` statements; never attribute names, never a local that shadows a global), its top-level
imports are collected for merging, and the result is checked against a tree-level renaming
(:func:`prepare`).  Used by ``qrsearch export --composite`` (:mod:`search.inspect.export`)."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field


class ExportError(ValueError):
    """The run holds nothing exportable, or the sources cannot be combined; one line for people."""


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
