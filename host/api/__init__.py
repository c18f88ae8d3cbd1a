"""The Lua-facing API: one module per `moss.<namespace>`, each a `functions(ctx)` table.

Adding a namespace: write host/api/NAME.py with `functions(ctx) -> {"NAME.fn": callable}`,
list it in NAMESPACES, document it in docs/lua-api.md and scripts/types/moss.lua.
"""

from __future__ import annotations

import importlib

NAMESPACES = ["ui"]


def functions(ctx) -> dict:
    out = {}
    for name in NAMESPACES:
        module = importlib.import_module(f"{__name__}.{name}")
        out.update(module.functions(ctx))
    return out
