"""The Lua-facing API: one module per `moss.<namespace>`, each a `functions(ctx)` table.

Adding a namespace: write host/api/NAME.py with `functions(ctx) -> {"NAME.fn": callable}`
(every module here is picked up), and document it in docs/lua-api.md and
scripts/types/moss.lua (tests/test_api_docs.py checks both).
"""

from __future__ import annotations

import importlib
import pkgutil

from ..errors import MossError

NAMESPACES = sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))

# Primitives that only read, and so may run side by side in moss.parallel.
READ_ONLY = {"code.view", "code.search"}


def functions(ctx) -> dict:
    out = {}
    for name in NAMESPACES:
        module = importlib.import_module(f"{__name__}.{name}")
        out.update(module.functions(ctx))

    def parallel(calls):
        """Run read-only primitives concurrently: {{"code.view", "src"}, ...} -> results in order.

        Each result is {ok=true, value=...} or {ok=false, error=message, kind=kind}.
        """
        jobs = []
        for call in calls or []:
            if not isinstance(call, list) or not call or not isinstance(call[0], str):
                raise ValueError('moss.parallel expects a list of {"namespace.fn", args...}')
            name = call[0]
            safe = name in READ_ONLY or (name == "shell.run" and ctx.access == "read-shell")
            if not safe:
                raise MossError(f"{name} cannot run in moss.parallel (only read-only primitives can)", kind="usage")
            jobs.append((out[name], call[1:]))

        def one(job):
            fn, args = job
            try:
                return {"ok": True, "value": fn(*args)}
            except MossError as e:
                return {"ok": False, "error": e.message, "kind": e.kind}
            except Exception as e:
                return {"ok": False, "error": f"{type(e).__name__}: {e}", "kind": "internal"}

        if len(jobs) <= 1:
            return [one(j) for j in jobs]
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=min(8, len(jobs))) as pool:
            return list(pool.map(one, jobs))

    out["parallel"] = parallel
    return out
