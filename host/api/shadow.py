"""moss.shadow: captures of the working tree in .moss/shadow.git (never the user's git),
write brackets that record which session changed what, and exact, owned rollbacks."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import MossError
from .registry import primitive

if TYPE_CHECKING:  # imported where a store is made, not at start-up
    from ..tools.shadow import Shadow


def _megabytes(cfg: dict, key: str, default: int) -> int:
    """``[shadow] KEY`` in megabytes (MiB) as bytes; a readable error when it is not a
    non-negative number."""
    from ..tools.shadow import MB

    value = cfg.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise MossError(f"[shadow] {key} must be a non-negative number of megabytes, "
                        f"not {value!r}", kind="config")
    return int(value * MB)


def _shadow(ctx) -> "Shadow":
    sh = ctx.services.get("shadow")
    if sh is None:
        sh = ctx.services["shadow"] = new_shadow(ctx)
    return sh


def new_shadow(ctx) -> "Shadow":
    """A Shadow of this agent's tree with the [shadow] limits (the service `_shadow` keeps; a
    thread of its own, such as an isolated child's copy being completed, makes another)."""
    from ..tools.shadow import Shadow

    cfg = ctx.config.get("shadow") or {}
    if not isinstance(cfg, dict):
        raise MossError("[shadow] must be a table", kind="config")
    # an isolated child's copy gets a store of its own, borrowing its starting point's objects
    wt = getattr(ctx.child, "worktree", None)
    borrow = (wt.objects,) if wt is not None else ()
    return Shadow(ctx.workdir, max_file_bytes=_megabytes(cfg, "max_file_mb", 50),
                  max_total_bytes=_megabytes(cfg, "max_total_mb", 200), borrow=borrow)


def _restore_locks(ctx, sid):
    """A rollback holds the file locks of the paths it restores (host/api/locks.py)."""
    from ..tools.locks import Target
    from .locks import hold, lock_timeout

    ch = _shadow(ctx).changed(sid)
    paths = sorted({p for k in ("modified", "added", "deleted") for p in ch.get(k) or []})
    return hold(ctx, [Target(p) for p in paths], lock_timeout(ctx), "rollback")


@primitive
def snapshot(ctx, label=""):
    sid = _shadow(ctx).snapshot(str(label or ""), session=ctx.tree_id)
    ctx.log("snapshot", {"id": sid, "label": label})
    return sid


@primitive
def begin_write(ctx, label=""):
    """Capture before a write; the bound session will own what the write changes."""
    from ..tools.worktree import wait_ready

    wait_ready(ctx.workdir, ctx.cancelled)  # a write follows: an isolated child's copy must be whole first
    wid = _shadow(ctx).begin_write(str(label or ""), session=ctx.tree_id)
    ctx.log("snapshot", {"id": wid, "label": label})
    return wid


@primitive
def end_write(ctx, wid):
    result = _shadow(ctx).end_write(wid)
    ctx.log("write", {"id": result["id"], "changed": result["changed"],
                      "not_captured": result["not_captured"]})
    return result


@primitive
def restore(ctx, sid):
    from ..tools.sandbox import require_write
    from ..tools.worktree import wait_ready

    require_write(ctx.access, "restoring a snapshot (it rewrites files)")
    wait_ready(ctx.workdir, ctx.cancelled)
    with _restore_locks(ctx, sid):  # what it rewrites is locked like an edit's targets
        result = _shadow(ctx).restore(sid, session=ctx.tree_id)
    ctx.log("rollback", {"id": sid, **{k: result[k] for k in (
        "reverted", "removed", "restored", "skipped", "conflicts", "scope", "backup")}})
    return result


@primitive
def list_(ctx):
    return _shadow(ctx).list()


@primitive
def diff(ctx, sid, paths=None):
    return _shadow(ctx).diff(sid, paths)


@primitive
def changed(ctx, sid):
    return _shadow(ctx).changed(sid)
