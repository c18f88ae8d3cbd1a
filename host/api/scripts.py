"""moss.scripts: what Lua modules exist where (for listing roles, machines, ...)."""

from __future__ import annotations

import os
import re

from ..errors import MossError
from ..roots import display_str
from .registry import primitive

DIR_RE = re.compile(r"^[A-Za-z0-9_-]+(/[A-Za-z0-9_-]+)*$")


@primitive
def list_(ctx, folder, opts=None):
    """Modules directly under FOLDER in every root: first root wins, shadowed ones noted;
    with `untrusted`, also the untrusted project's own (listed, never read)."""
    if not isinstance(folder, str) or not DIR_RE.match(folder):
        raise MossError(f"bad folder {folder!r}: use names like 'roles' or 'machines'", kind="usage")
    seen: dict[str, dict] = {}
    for root in ctx.runtime.roots.roots:  # every child agent lists roles at start: strings, not pathlib
        d = os.path.join(str(root.path), folder)
        try:
            names = sorted(n for n in os.listdir(d) if n.endswith(".lua") and not n.startswith("."))
        except OSError:  # absent, not a folder, unreadable: nothing from this root (as glob)
            continue
        for n in names:
            stem = n[:-4]
            entry = seen.get(stem)
            if entry:
                entry["overrides"].append(root.name)
                continue
            seen[stem] = {"name": stem, "module": folder.replace("/", ".") + "." + stem,
                          "origin": root.name, "path": display_str(os.path.join(d, n)), "overrides": []}
    out = sorted(seen.values(), key=lambda e: e["name"])
    trust = ctx.trust
    if isinstance(opts, dict) and opts.get("untrusted") and trust is not None and not trust.trusted:
        out += _waiting(ctx, folder, seen)
    return out


def _waiting(ctx, folder: str, in_use: dict[str, dict]) -> list[dict]:
    """The untrusted project's modules under FOLDER: names only (nothing of them is read
    before trust), each with what it would override once trusted."""
    d = os.path.join(str(ctx.root), ".moss", "scripts", folder)
    try:
        names = sorted(n for n in os.listdir(d) if n.endswith(".lua") and not n.startswith("."))
    except OSError:
        return []
    out = []
    for n in names:
        stem, used = n[:-4], in_use.get(n[:-4])
        out.append({"name": stem, "module": folder.replace("/", ".") + "." + stem, "origin": "project",
                    "path": display_str(os.path.join(d, n)), "trusted": False,
                    "overrides": [used["origin"], *used["overrides"]] if used else []})
    return out


@primitive
def below(ctx, module, under=None):
    """`module` from the first root below `under` (default: below the root require uses)."""
    rt = ctx.runtime
    roots = rt.roots
    if under is None:
        try:
            under = roots.locate(module, what="module")[2]
        except MossError as e:
            if e.kind == "not_found":
                return None
            raise
    names = [r.name for r in roots.roots]
    if under not in names:
        raise MossError(f"no script root {under!r}; the roots are {', '.join(names)}", kind="usage")
    try:
        path, shown, origin = roots.locate(module, what="module", after=under)
    except MossError as e:
        if e.kind == "not_found":
            return None
        raise
    fn = rt.load_file(path, shown, origin)
    return fn, origin
