"""The Lua-facing API: one module per `moss.<namespace>`, each primitive a top-level function.

Adding a primitive: write it in host/api/NAME.py as a top-level function that takes the run's
context first and the script's arguments after, marked `@primitive` (host/api/registry.py):

    from .registry import primitive

    @primitive
    def start(ctx, spec):        # moss.runs.start(spec), in host/api/runs.py
        ...

Its name is its module's and its own (a trailing `_` dropped, for names Python keeps:
`def list_(ctx)` is moss.runs.list). `@primitive(lua_args=True)`: it takes its tables as raw
Lua values, unconverted (moss.session.save diffs the session table itself). What a
namespace's primitives share in one run (a run manager, a cache, the locks a script holds)
lives in `ctx.services`, made on first use by a function of the module (`manager(ctx)` in
runs.py), never in a closure; a service with a `close()` is closed when its run ends. Every module here is a namespace, but declare.py and registry.py.

Declare it in host/api/declarations.lua (its `---@errors` too: tests/test_api_docs.py names any
kind its code can raise that the list lacks) and run `python -m moss.api` to make the editor
stubs and the docs' tables from the declaration. Registration is held to the declaration when
the API is first prepared (`preload`, or the first `functions`): a registered function that no
declaration names, or a declared primitive with no function here or in host/bootstrap.lua,
stops it with a RuntimeError naming each. An event it logs (`ctx.log(EVENT, {...})`) is
declared in host/api/events.lua. Every primitive runs behind `_guarded`: its arguments are
checked against the declaration first (a misfit is kind `usage`), and anything its body raises
that is not a moss error is kind `internal`, with the traceback in the session log.
"""

from __future__ import annotations

import traceback
from functools import partial

from ..errors import MossError
from ..ui import is_broken_pipe
from . import declare
from .registry import primitives

# Primitives that only read, and so may run side by side in moss.parallel.
READ_ONLY = {"code.view", "code.search"}


def _guarded(ctx, name: str, fn, check):
    """`fn` bound to `ctx`, with its declared argument check first and host faults named as such."""
    def guarded(*args):
        if check is not None:
            check(args)
        try:
            return fn(ctx, *args)
        except (MossError, KeyboardInterrupt):
            raise
        except Exception as e:  # a bug in moss, not the script's mistake
            if is_broken_pipe(e):  # not a bug: `| head` stopped reading (Runtime ends quietly)
                raise
            ctx.log("internal_error", {"primitive": f"moss.{name}", "error": f"{type(e).__name__}: {e}",
                                       "traceback": traceback.format_exc(limit=20)})
            raise MossError(f"internal error: {type(e).__name__}: {e}", kind="internal") from e
    guarded.__name__ = getattr(fn, "__name__", name)
    guarded.__doc__ = fn.__doc__
    if getattr(fn, "lua_args", False):
        guarded.lua_args = True  # type: ignore[attr-defined]  # read by Runtime._wrap_primitive
    return guarded


def preload() -> None:
    """What `functions` does first that needs no context: import every namespace, read the
    declaration, hold the registration to it (host/api/registry.py) and make its argument
    checks. A zygote does it once (host/zygote.py), so that no process forked from it does it
    again (~10 ms of CPU each)."""
    primitives()
    declare.checkers()


def functions(ctx) -> dict:
    """Every primitive bound to `ctx`, by name (what host/runtime.py installs as moss.*)."""
    fns = primitives()
    checks = declare.checkers()
    from .locks import handles

    # made before any other service, so that when the run ends the locks a script still holds
    # are released first (closing runs or MCP servers can take seconds)
    handles(ctx)
    out = {name: _guarded(ctx, name, fn, checks.get(name)) for name, fn in fns.items()}
    out["parallel"] = partial(parallel, ctx, out)
    return out


def parallel(ctx, primitives: dict, calls):
    """Run read-only primitives concurrently: {{"code.view", "src"}, ...} -> results in order.

    Each result is {ok=true, value=...} or {ok=false, error=message, kind=kind}.
    `primitives`: this run's, as `functions` made them.
    """
    jobs = []
    for call in calls or []:
        if not isinstance(call, list) or not call or not isinstance(call[0], str):
            raise MossError('moss.parallel expects a list of {"namespace.fn", args...}', kind="usage")
        name = call[0]
        safe = name in READ_ONLY or (name == "shell.run" and ctx.access == "read-shell")
        if not safe:
            raise MossError(f"{name} cannot run in moss.parallel (only read-only primitives can)", kind="usage")
        jobs.append((primitives[name], call[1:]))
    if len(jobs) <= 1:
        return [_one(j) for j in jobs]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(8, len(jobs))) as pool:
        return list(pool.map(_one, jobs))


def _one(job) -> dict:
    fn, args = job
    try:
        return {"ok": True, "value": fn(*args)}
    except MossError as e:
        return {"ok": False, "error": e.message, "kind": e.kind}
    except Exception as e:
        return {"ok": False, "error": f"{type(e).__name__}: {e}", "kind": "internal"}
