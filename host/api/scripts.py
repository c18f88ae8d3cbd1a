"""moss.scripts: what Lua modules exist where (for listing roles, machines, ...)."""

from __future__ import annotations

import re

from ..errors import MossError
from ..roots import display_path

DIR_RE = re.compile(r"^[A-Za-z0-9_-]+(/[A-Za-z0-9_-]+)*$")


def functions(ctx):
    def list_(folder):
        """Modules directly under FOLDER in every root: first root wins, shadowed ones noted."""
        if not isinstance(folder, str) or not DIR_RE.match(folder):
            raise MossError(f"bad folder {folder!r}: use names like 'roles' or 'machines'", kind="usage")
        seen: dict[str, dict] = {}
        for root in ctx.runtime.roots.roots:
            d = root.path / folder
            if not d.is_dir():
                continue
            for p in sorted(d.glob("*.lua")):
                entry = seen.get(p.stem)
                if entry:
                    entry["overrides"].append(root.name)
                    continue
                seen[p.stem] = {"name": p.stem, "module": folder.replace("/", ".") + "." + p.stem,
                                "origin": root.name, "path": display_path(p), "overrides": []}
        return sorted(seen.values(), key=lambda e: e["name"])

    return {"scripts.list": list_}
