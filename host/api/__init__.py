"""The Lua-facing API: one module per `moss.<namespace>`, each a `functions(ctx)` table.

Adding a primitive: write it in host/api/NAME.py (`functions(ctx) -> {"NAME.fn": callable}`;
every module here is picked up), declare it in host/api/declarations.lua (its `---@errors`
too: tests/test_api_docs.py names any kind its code can raise that the list lacks), and run
`python -m moss.api` to make the editor stubs and the docs' tables from the
declaration (tests/test_api_docs.py checks that each primitive is declared and that the
generated files are current). An event it logs (`ctx.log(EVENT, {...})`) is declared in
host/api/events.lua. Every primitive runs behind `_guarded`: its arguments are
checked against the declaration first (a misfit is kind `usage`), and anything its body
raises that is not a moss error is kind `internal`, with the traceback in the session log.
"""

from __future__ import annotations

import importlib
import pkgutil
import traceback

from ..errors import MossError
from ..ui import is_broken_pipe
from . import declare

# every module here is a namespace, but declare.py (the declaration's reader and generator)
NAMESPACES = sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_") and m.name != "declare")

# Primitives that only read, and so may run side by side in moss.parallel.
READ_ONLY = {"code.view", "code.search"}


def _guarded(ctx, name: str, fn, check):
    """`fn` with its declared argument check first and host faults named as such."""
    def primitive(*args):
        if check is not None:
            check(args)
        try:
            return fn(*args)
        except (MossError, KeyboardInterrupt):
            raise
        except Exception as e:  # a bug in moss, not the script's mistake
            if is_broken_pipe(e):  # not a bug: `| head` stopped reading (Runtime ends quietly)
                raise
            ctx.log("internal_error", {"primitive": f"moss.{name}", "error": f"{type(e).__name__}: {e}",
                                       "traceback": traceback.format_exc(limit=20)})
            raise MossError(f"internal error: {type(e).__name__}: {e}", kind="internal") from e
    primitive.__name__ = getattr(fn, "__name__", name)
    primitive.__doc__ = fn.__doc__
    if getattr(fn, "lua_args", False):
        primitive.lua_args = True  # type: ignore[attr-defined]  # read by Runtime._wrap_primitive
    return primitive


def preload() -> None:
    """What `functions` does first that needs no context: import every namespace, read the
    declaration and make its argument checks. A zygote does it once (host/zygote.py), so that
    no process forked from it does it again (~10 ms of CPU each)."""
    for name in NAMESPACES:
        importlib.import_module(f"{__name__}.{name}")
    declare.checkers()


def functions(ctx) -> dict:
    out = {}
    for name in NAMESPACES:
        module = importlib.import_module(f"{__name__}.{name}")
        out.update(module.functions(ctx))
    checks = declare.checkers()
    for name, fn in out.items():
        out[name] = _guarded(ctx, name, fn, checks.get(name))

    def parallel(calls):
        """Run read-only primitives concurrently: {{"code.view", "src"}, ...} -> results in order.

        Each result is {ok=true, value=...} or {ok=false, error=message, kind=kind}.
        """
        jobs = []
        for call in calls or []:
            if not isinstance(call, list) or not call or not isinstance(call[0], str):
                raise MossError('moss.parallel expects a list of {"namespace.fn", args...}', kind="usage")
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
