"""moss.shadow: snapshots of the working tree in .moss/shadow.git, never the user's git."""

from __future__ import annotations


def _shadow(ctx):
    sh = ctx.services.get("shadow")
    if sh is None:
        from ..tools.shadow import Shadow

        cfg = ctx.config.get("shadow", {})
        sh = Shadow(ctx.root, max_file_bytes=int(cfg.get("max_file_bytes", 5_000_000)))
        ctx.services["shadow"] = sh
    return sh


def _restore_locks(ctx, sid):
    """A rollback holds the file locks of the paths it restores (host/api/locks.py)."""
    from ..tools.locks import Target
    from .locks import hold, lock_timeout

    ch = _shadow(ctx).changed(sid)
    paths = sorted({p for k in ("modified", "added", "deleted") for p in ch.get(k) or []})
    return hold(ctx, [Target(p) for p in paths], lock_timeout(ctx), "rollback")


def functions(ctx):
    def snapshot(label=""):
        sid = _shadow(ctx).snapshot(str(label or ""))
        ctx.log("snapshot", {"id": sid, "label": label})
        return sid

    def restore(sid):
        from ..tools.sandbox import require_write

        require_write(ctx.access, "restoring a snapshot (it rewrites files)")
        with _restore_locks(ctx, sid):  # what it rewrites is locked like an edit's targets
            result = _shadow(ctx).restore(sid)
        ctx.log("rollback", {"id": sid, "reverted": result.get("reverted"), "removed": result.get("removed"),
                             "restored": result.get("restored"), "skipped": result.get("skipped")})
        return result

    def list_():
        return _shadow(ctx).list()

    def diff(sid, paths=None):
        return _shadow(ctx).diff(sid, paths)

    def changed(sid):
        return _shadow(ctx).changed(sid)

    return {"shadow.snapshot": snapshot, "shadow.restore": restore, "shadow.list": list_,
            "shadow.diff": diff, "shadow.changed": changed}
