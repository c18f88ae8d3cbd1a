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


def functions(ctx):
    def snapshot(label=""):
        sid = _shadow(ctx).snapshot(str(label or ""))
        ctx.log("snapshot", {"id": sid, "label": label})
        return sid

    def restore(sid):
        from ..tools.sandbox import require_write

        require_write(ctx.access, "restoring a snapshot (it rewrites files)")
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
