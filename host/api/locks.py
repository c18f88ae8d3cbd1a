"""moss.locks: locks on a directory, a file or a symbol, shared by every agent of the
project (threads of this process and other moss processes); see host/tools/locks.py.

The Lua face is `moss.lock(target, {timeout=})` -> handle with `:release()` (defined in
host/bootstrap.lua on top of `moss.locks.acquire`/`release`). Edits, shell commands at
`edit` access and rollbacks take their locks here by themselves (`hold`).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING

from ..errors import MossError
from .registry import primitive

if TYPE_CHECKING:  # imported lazily at run time
    from ..tools.locks import Held

DEFAULT_EDIT_TIMEOUT = 120.0


def owner(ctx) -> str:
    """Who holds a lock: the agent's session id (one per agent, children included)."""
    if not ctx.session_id:
        if not getattr(ctx, "_lock_owner", None):
            import secrets

            ctx._lock_owner = "script-" + secrets.token_hex(4)
        return ctx._lock_owner
    return ctx.session_id


def lock_timeout(ctx) -> float:
    agent = ctx.config.get("agent") if isinstance(ctx.config, dict) else None
    value = (agent or {}).get("lock_timeout", DEFAULT_EDIT_TIMEOUT) if isinstance(agent, dict) else DEFAULT_EDIT_TIMEOUT
    try:
        return float(value)
    except (TypeError, ValueError):
        raise MossError(f"[agent] lock_timeout must be a number of seconds, got {value!r}", kind="config") from None


def take(ctx, targets, timeout=None, what: str = "lock"):
    """Hold `targets` (Target list) for this ctx's agent; says so while it queues."""
    from .. import ui
    from ..tools.locks import manager

    mgr = manager(ctx.workdir)
    child = getattr(ctx, "child", None)
    names = ", ".join(str(t) for t in targets)

    def on_wait(blocker):
        ui.console().print(f"[dim]›[/] {ui.escape(owner(ctx))} waits for {ui.escape(blocker['target'])}: "
                           f"{ui.escape(blocker['text'])}", highlight=False)
        ctx.log("lock_wait", {"targets": [str(t) for t in targets], "for": what, "blocker": blocker["text"]})
        if child is not None:
            child.info["waiting"] = blocker["target"]
            child.tree.changed()

    try:
        return mgr.acquire(targets, owner(ctx), getattr(ctx, "role", "") or "", timeout, on_wait=on_wait, log=ctx.log)
    except MossError as e:
        if e.kind == "locked":
            ctx.log("lock_timeout", {"targets": names, "for": what, "blocker": e.message})
        raise
    finally:
        if child is not None and child.info.get("waiting"):
            child.info["waiting"] = None
            child.tree.changed()


@contextmanager
def hold(ctx, targets, timeout=None, what: str = "lock"):
    from ..tools.locks import manager

    held = take(ctx, targets, timeout, what)
    try:
        yield held
    finally:
        manager(ctx.workdir).release(held)


@contextmanager
def for_edit(ctx, specs):
    """An edit's locks: the symbol or file locks of its targets, held until the write is on
    disk, and inside them the short write lock of each file it touches, so the
    read-apply-write of one file is never interleaved with another agent's."""
    from ..tools.locks import Target, parse_target

    targets = []
    for spec in specs:
        t = spec.get("target") if isinstance(spec, dict) else None
        if isinstance(t, str) and t.strip():
            targets.append(parse_target(ctx.workdir, t))
    timeout = lock_timeout(ctx)
    files = sorted({t.path for t in targets})
    with hold(ctx, targets, timeout, "edit"):
        with hold(ctx, [Target(f, "", "write") for f in files], timeout, "edit"):
            yield


class Handles:
    """The locks a script holds through moss.lock in one run (`ctx.services["locks"]`),
    released when the run's services close: locks never outlive their agent."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.held: dict[int, Held] = {}

    def close(self) -> None:
        from ..tools.locks import manager

        for held in list(self.held.values()):
            manager(self.ctx.workdir).release(held)
        self.held.clear()


def handles(ctx) -> Handles:
    svc = ctx.services.get("locks")
    if svc is None:
        svc = ctx.services["locks"] = Handles(ctx)
    return svc


@primitive
def acquire(ctx, target, opts=None):
    """moss.locks.acquire(target, {timeout=30}) -> id, or nil and "locked by ..." on timeout."""
    from ..tools.locks import parse_target

    opts = opts or {}
    if not isinstance(opts, dict):
        raise MossError("moss.lock: options are a table, e.g. {timeout = 30}", kind="usage")
    targets = target if isinstance(target, list) else [target]
    parsed = [parse_target(ctx.workdir, t) for t in targets]
    timeout = opts.get("timeout", 30)
    try:
        held = take(ctx, parsed, None if timeout is None or timeout < 0 else float(timeout), "moss.lock")
    except MossError as e:
        if e.kind == "locked":
            return None, e.message
        raise
    handles(ctx).held[held.id] = held  # (waits, timeouts and takeovers are logged; a plain take is not)
    return held.id


@primitive
def release(ctx, lock_id):
    from ..tools.locks import manager

    held = handles(ctx).held.pop(int(lock_id), None) if lock_id is not None else None
    if held is None:
        return False
    manager(ctx.workdir).release(held)
    return True


@primitive
def list_(ctx):
    from ..tools.locks import manager

    return manager(ctx.workdir).held()
