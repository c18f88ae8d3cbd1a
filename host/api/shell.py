"""moss.shell.run: a subprocess under the session's access level."""

from __future__ import annotations


def functions(ctx):
    def run(cmd, opts=None):
        from ..tools import shell

        opts = opts or {}
        if not isinstance(cmd, str) or not cmd.strip():
            raise ValueError("run needs a command string")
        cfg = ctx.config.get("shell", {})
        return shell.run(
            cmd,
            root=ctx.root,
            access=ctx.access,
            cwd=opts.get("cwd"),
            timeout=float(opts.get("timeout") or cfg.get("timeout") or 120),
            max_chars=int(opts.get("max_chars") or cfg.get("max_chars") or 20000),
            allow_full=ctx.allow_full,
            unsandboxed_ok=ctx.unsandboxed_ok,
            cancel=ctx.cancelled,
            stdin=opts.get("stdin"),
        )

    return {"shell.run": run}
