"""host/'s import graph has no circles and no arrow running back up, but those
docs/architecture.md lists under "Known exceptions" (and this file, below).

The graph is read from the source (an AST walk; nothing is imported), by the rule
docs/architecture.md#the-import-graph states: every import statement of a module is an
arrow, at the top, inside a function (a lazy import is still a dependency) or under
`if TYPE_CHECKING:`; `from P import N` points at the module P.N when there is one, else at
P; a module's own parent packages are not arrows; a module named by a string (a registry's
entries, entry points, a zygote's preload names) is not one either.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

HOST = Path(__file__).resolve().parent.parent / "host"

# Circles that remain, each with why and where it goes. An entry whose circle is gone fails
# the test too: take it out here and in docs/architecture.md.
KNOWN_CIRCLES: dict[frozenset[str], str] = {}

# What a layer may import beyond itself: tools/ is mechanism below everything else; only
# run.py (which builds the Lua runtime) reaches into api/; only the CLI's entry points reach
# run.py.
TOOLS_MAY_USE = {"moss", "moss.errors", "moss.storage", "moss.roots", "moss.ui"}
API_USERS = {"moss.run"}
RUN_USERS = {"moss.cli", "moss.entry"}
KNOWN_CROSSINGS = {
    ("moss.api.agents", "moss.run"): "a child agent is built, and a session resumed after an interrupt, by run.py",
}


def modules(root: Path, package: str) -> dict[str, tuple[Path, bool]]:
    """Dotted name -> (file, is a package's __init__) for every .py under `root`."""
    out = {}
    for f in sorted(root.rglob("*.py")):
        parts = list(f.relative_to(root).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts.pop()
        out[".".join([package, *parts])] = (f, is_pkg)
    return out


def arrows(root: Path, package: str) -> dict[str, set[str]]:
    """Module -> the modules of `package` it imports (by the rule in the docstring above)."""
    mods = modules(root, package)

    def owner(name: str) -> str | None:  # the module a dotted name is, or is in
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, (path, is_pkg) in mods.items():
        here = mod if is_pkg else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_bytes(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = here
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                origin = (f"{base}.{node.module}" if node.module else base) if node.level else (node.module or "")
                targets = [f"{origin}.{a.name}" if f"{origin}.{a.name}" in mods else origin for a in node.names]
            else:
                continue
            for target in targets:
                if target == package or target.startswith(package + "."):
                    found = owner(target)
                    if found is not None and found != mod:
                        graph[mod].add(found)
    return graph


def circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return arrows(HOST, "moss")


def _shown(graph: dict[str, set[str]], circle) -> str:
    return "; ".join(f"{a} -> {b}" for a in sorted(circle) for b in sorted(graph[a] & set(circle)))


def test_host_has_no_import_circle_but_the_known_ones(graph):
    found = {frozenset(c) for c in circles(graph)}
    new = [_shown(graph, c) for c in found - KNOWN_CIRCLES.keys()]
    assert not new, ("host/ has a new import circle (break it: docs/architecture.md#the-import-graph): "
                     + " | ".join(new))
    gone = [sorted(c) for c in KNOWN_CIRCLES.keys() - found]
    assert not gone, f"these circles are gone: remove them from KNOWN_CIRCLES and docs/architecture.md: {gone}"


def test_no_arrow_runs_back_up_but_the_known_crossings(graph):
    crossings = set()
    for a, targets in graph.items():
        for b in targets:
            if a.startswith("moss.tools.") and not b.startswith("moss.tools.") and b not in TOOLS_MAY_USE:
                crossings.add((a, b))
            if b.startswith("moss.api") and not a.startswith("moss.api") and a not in API_USERS:
                crossings.add((a, b))
            if b == "moss.run" and a not in RUN_USERS:
                crossings.add((a, b))
    new = sorted(crossings - KNOWN_CROSSINGS.keys())
    assert not new, f"an import runs back up (docs/architecture.md#where-code-lives): {new}"
    gone = sorted(KNOWN_CROSSINGS.keys() - crossings)
    assert not gone, f"these crossings are gone: remove them from KNOWN_CROSSINGS and docs/architecture.md: {gone}"


def test_lazy_and_type_only_imports_are_arrows_and_close_a_circle(tmp_path):
    """The reader sees what the rule says it sees: a package whose modules import each other
    only inside a function, under TYPE_CHECKING, and through `from . import` is one circle;
    a name that only a string mentions is no arrow."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from .c import C\n")
    (pkg / "a.py").write_text("def f():\n    from .b import g\n    return g\n")
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.sub import C\n")
    (pkg / "sub" / "c.py").write_text("from .. import a\nC = 1\n")
    (pkg / "d.py").write_text("import importlib\nimportlib.import_module('pkg.a')\n")
    graph = arrows(pkg, "pkg")
    assert graph["pkg.a"] == {"pkg.b"} and graph["pkg.b"] == {"pkg.sub"} and graph["pkg.sub.c"] == {"pkg.a"}
    assert graph["pkg.d"] == set()
    assert circles(graph) == [{"pkg.a", "pkg.b", "pkg.sub", "pkg.sub.c"}]
