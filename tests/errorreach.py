"""Which error kinds each moss.* primitive's Python can raise, read from the source.

A static call graph over host/: from the function each `host/api/NAME.py` registers
(a top-level `@primitive def fn(ctx, ...)` is moss.NAME.fn), follow the calls it makes to
functions of host/ and collect every `MossError(..., kind="...")` (and its subclasses with a fixed
kind) on the way. Calls are resolved where the source says what they are: a nested or
module function, an imported name or module (through a package that re-exports it),
`self.method`, and a method of an object whose class can be seen (`Cls(...)`, a function
annotated or built to return one, a local variable holding either, a module-level one made
by `Cls(...)`). Calls made inside a `try` whose handler catches every moss error without
raising are not followed. What it cannot resolve it leaves out, so what it finds is a floor:
each kind listed here has a path from the primitive to a raise (`why`).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

# exception classes of the host and the kind each always carries (None: given by kind=)
ERROR_CLASSES = {"MossError": None, "ConfigError": "config", "UsageError": "usage", "LuaScriptError": None,
                 "CorruptCheckpoint": "config", "LockTimeout": "locked", "UnsafePath": "denied"}
_CATCH_ALL = {"MossError", "Exception", "BaseException"}


@dataclass(eq=False)
class _Fn:
    mod: str
    qual: str  # "functions.read", "Shadow.snapshot"
    node: ast.FunctionDef | ast.AsyncFunctionDef
    cls: str | None
    parent: _Fn | None
    kinds: set[str] = field(default_factory=set)
    calls: list[ast.Call] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.mod}:{self.qual}"


def _swallows(t: ast.Try) -> bool:
    """A handler catches every moss error and raises nothing."""
    for h in t.handlers:
        names = h.type.elts if isinstance(h.type, ast.Tuple) else [h.type]
        if h.type is None or any(isinstance(x, ast.Name) and x.id in _CATCH_ALL for x in names):
            if not any(isinstance(r, ast.Raise) for r in ast.walk(h)):
                return True
    return False


def _own_nodes(fn: _Fn):
    """The nodes of a function's body, not of the functions and classes it defines."""
    stack: list[ast.AST] = list(fn.node.body)
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Try) and _swallows(n):
            stack.extend([*n.handlers, *n.orelse, *n.finalbody])
            continue
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        yield n
        stack.extend(ast.iter_child_nodes(n))


class Graph:
    def __init__(self, host: Path):
        self.mods: dict[str, ast.Module] = {}
        self.pkgs: set[str] = set()
        for p in sorted(host.rglob("*.py")):
            parts = list(p.relative_to(host).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
                self.pkgs.add(".".join(parts))
            self.mods[".".join(parts)] = ast.parse(p.read_text(encoding="utf-8"), str(p))
        self.funcs: dict[tuple[str, str], _Fn] = {}
        self.classes: dict[str, set[str]] = {}
        self.bases: dict[tuple[str, str], list[str]] = {}  # (module, class) -> its base classes' names
        self.imports: dict[str, dict[str, tuple]] = {}
        for mod, tree in self.mods.items():
            self.imports[mod] = self._imports(mod, tree)
            self._defs(mod, tree.body, "", None, None)
            for n in ast.walk(tree):
                if isinstance(n, ast.ClassDef):
                    self.classes.setdefault(n.name, set()).add(mod)
        for fn in self.funcs.values():
            for n in _own_nodes(fn):
                if isinstance(n, ast.Call):
                    name = n.func.id if isinstance(n.func, ast.Name) else \
                        n.func.attr if isinstance(n.func, ast.Attribute) else None
                    if name in ERROR_CLASSES:
                        given = [kw.value.value for kw in n.keywords
                                 if kw.arg == "kind" and isinstance(kw.value, ast.Constant)]
                        kind = given[0] if given else ERROR_CLASSES[name]
                        if kind:
                            fn.kinds.add(kind)
                    fn.calls.append(n)

    # ---- reading ------------------------------------------------------------------------
    def _imports(self, mod: str, tree: ast.Module) -> dict[str, tuple]:
        table: dict[str, tuple] = {}
        for n in ast.walk(tree):
            if not isinstance(n, ast.ImportFrom):
                continue
            if n.level == 0:
                if not (n.module or "").startswith("moss"):
                    continue
                base = (n.module or "")[5:]
            else:
                parts = mod.split(".") if mod else []
                if mod not in self.pkgs:
                    parts = parts[:-1]
                parts = parts[:len(parts) - (n.level - 1)] if n.level > 1 else parts
                base = ".".join([*parts, *([n.module] if n.module else [])])
            for a in n.names:
                full = f"{base}.{a.name}".strip(".")
                table[a.asname or a.name] = ("mod", full) if full in self.mods else ("name", base, a.name)
        return table

    def _defs(self, mod, body, prefix, cls, parent):
        for n in body:
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                fn = _Fn(mod, prefix + n.name, n, cls, parent)
                self.funcs[(mod, fn.qual)] = fn
                self._defs(mod, n.body, fn.qual + ".", None, fn)
            elif isinstance(n, ast.ClassDef):
                self.bases[(mod, prefix + n.name)] = [b.id if isinstance(b, ast.Name) else b.attr
                                                      for b in n.bases if isinstance(b, (ast.Name, ast.Attribute))]
                self._defs(mod, n.body, f"{prefix}{n.name}.", n.name, parent)
            elif isinstance(n, (ast.If, ast.Try, ast.With, ast.For, ast.While, ast.ExceptHandler)):
                for part in ("body", "orelse", "finalbody", "handlers"):
                    self._defs(mod, getattr(n, part, None) or [], prefix, cls, parent)

    # ---- resolving ----------------------------------------------------------------------
    def _class(self, mod: str, name: str, depth: int = 0) -> tuple[str, str] | None:
        if name in ERROR_CLASSES or depth > 4:
            return None
        if mod in self.classes.get(name, ()):
            return mod, name
        imp = self.imports.get(mod, {}).get(name)
        return self._class(imp[1], imp[2], depth + 1) if imp and imp[0] == "name" else None

    def _named(self, fn: _Fn, name: str) -> list[_Fn]:
        scope: _Fn | None = fn
        while scope is not None:
            if (fn.mod, f"{scope.qual}.{name}") in self.funcs:
                return [self.funcs[(fn.mod, f"{scope.qual}.{name}")]]
            scope = scope.parent
        if (fn.mod, name) in self.funcs:
            return [self.funcs[(fn.mod, name)]]
        cls = self._class(fn.mod, name)
        if cls:
            return [self.funcs[(cls[0], f"{cls[1]}.__init__")]] if (cls[0], f"{cls[1]}.__init__") in self.funcs else []
        imp = self.imports[fn.mod].get(name)
        found = self._defined(imp[1], imp[2]) if imp and imp[0] == "name" else None
        return [found] if found is not None else []

    def _defined(self, mod: str, name: str, depth: int = 0) -> _Fn | None:
        """The function `mod.name` is: defined there, or imported there from where it is (a
        package's face re-exporting its modules' functions)."""
        if (mod, name) in self.funcs:
            return self.funcs[(mod, name)]
        imp = self.imports.get(mod, {}).get(name)
        if imp is None or imp[0] != "name" or depth > 4:
            return None
        return self._defined(imp[1], imp[2], depth + 1)

    def _returns(self, fn: _Fn) -> tuple[str, str] | None:
        r = fn.node.returns
        if isinstance(r, ast.Constant) and isinstance(r.value, str):
            r = ast.parse(r.value, mode="eval").body
        if isinstance(r, ast.Name) and (cls := self._class(fn.mod, r.id)):
            return cls
        made = {self._class(fn.mod, n.func.id) for n in _own_nodes(fn)
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)} - {None}
        return made.pop() if len(made) == 1 else None

    def _type(self, fn: _Fn, expr: ast.expr, depth: int) -> tuple[str, str] | None:
        if depth > 3:
            return None
        if isinstance(expr, ast.Call):
            if isinstance(expr.func, ast.Name) and (cls := self._class(fn.mod, expr.func.id)):
                return cls
            targets = self._resolve(fn, expr, depth + 1)
            return self._returns(targets[0]) if len(targets) == 1 else None
        if isinstance(expr, ast.Name):
            for n in _own_nodes(fn):
                if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == expr.id for t in n.targets):
                    return self._type(fn, n.value, depth + 1)
            return self._global(fn.mod, expr.id, depth)
        return None

    def _global(self, mod: str, name: str, depth: int) -> tuple[str, str] | None:
        """The class of a module-level `NAME = Cls(...)` (or `NAME: T = Cls(...)`) of `mod`, or
        of the one it imports as NAME (a registry made where its interface is)."""
        for n in self.mods[mod].body:
            if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in n.targets) or \
                    isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and n.target.id == name:
                v = n.value
                return self._class(mod, v.func.id) if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) \
                    else None
        imp = self.imports.get(mod, {}).get(name)
        return self._global(imp[1], imp[2], depth + 1) if imp and imp[0] == "name" and depth < 3 \
            and imp[1] in self.mods else None

    def _resolve(self, fn: _Fn, call: ast.Call, depth: int = 0) -> list[_Fn]:
        f = call.func
        if isinstance(f, ast.Name):
            return self._named(fn, f.id)
        if not isinstance(f, ast.Attribute):
            return []
        if isinstance(f.value, ast.Name):
            imp = self.imports[fn.mod].get(f.value.id)
            if imp and imp[0] == "mod":
                found = self._defined(imp[1], f.attr)
                return [found] if found is not None else []
            if f.value.id in ("self", "cls"):
                scope: _Fn | None = fn
                while scope is not None and scope.cls is None:
                    scope = scope.parent
                if scope is not None:
                    found = self._method(scope.mod, scope.qual.rsplit(".", 1)[0], f.attr)
                    if found is None:  # a mixin calling a sibling's method: any class of its package
                        pkg = scope.mod.rsplit(".", 1)[0] + "."
                        found = next((g for (m, q), g in self.funcs.items() if m.startswith(pkg) and
                                      g.cls is not None and q.endswith("." + f.attr)), None)
                    return [found] if found is not None else []
        cls = self._type(fn, f.value, depth) if depth < 3 else None
        found = self._method(cls[0], cls[1], f.attr) if cls else None
        return [found] if found is not None else []

    def _method(self, mod: str, cls: str, attr: str, depth: int = 0) -> _Fn | None:
        """`cls.attr` as Python finds it: the class, then its bases (depth first)."""
        if (mod, f"{cls}.{attr}") in self.funcs:
            return self.funcs[(mod, f"{cls}.{attr}")]
        if depth > 6:
            return None
        for base in self.bases.get((mod, cls), []):
            where = self._class(mod, base)
            if where is not None and (got := self._method(where[0], where[1], attr, depth + 1)) is not None:
                return got
        return None

    # ---- the answer -----------------------------------------------------------------------
    def reach(self, fn: _Fn) -> dict[str, list[str]]:
        """Every kind `fn` can raise, each with one call path to a raise of it."""
        why: dict[str, list[str]] = {}
        seen: set[int] = set()
        stack: list[tuple[_Fn, list[str]]] = [(fn, [])]
        while stack:
            g, path = stack.pop()
            if id(g) in seen:
                continue
            seen.add(id(g))
            path = [*path, g.label]
            for kind in g.kinds:
                why.setdefault(kind, path)
            for call in g.calls:
                stack.extend((h, path) for h in self._resolve(g, call))
        return why

    def primitives(self) -> dict[str, _Fn]:
        """Each primitive registered in host/api and the function behind it: a top-level function
        of host/api/NAME.py marked `@primitive` is moss.NAME.<its name> (a trailing `_` dropped),
        as host/api/registry.py's `primitive` names it."""
        out = {}
        for mod in sorted(m for m in self.mods if m.startswith("api.")):
            for n in self.mods[mod].body:
                if isinstance(n, ast.FunctionDef) and any(_marks_primitive(d) for d in n.decorator_list):
                    out[f"{mod[len('api.'):]}.{n.name.removesuffix('_')}"] = self.funcs[(mod, n.name)]
        return out


def _marks_primitive(decorator: ast.expr) -> bool:
    """`@primitive` or `@primitive(...)`."""
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return isinstance(target, ast.Name) and target.id == "primitive"


def reachable_kinds(host: Path) -> dict[str, dict[str, list[str]]]:
    """{"fs.read": {"io": [call path], ...}, ...} for every primitive registered in host/api."""
    g = Graph(host)
    return {name: g.reach(fn) for name, fn in g.primitives().items()}

