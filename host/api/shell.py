"""moss.shell.run: a subprocess under the session's access level."""

from __future__ import annotations

from ..errors import MossError
from .registry import primitive


def report_git(ctx, where: str, notes: list[str], log: bool = True, **data) -> None:
    """Say loudly that git metadata was created or changed: stderr and the session log."""
    if not notes:
        return
    from .. import ui

    for line in notes:
        ui.console().print(f"[bold red]git metadata:[/] {ui.escape(line)}")
    if log:  # RunManager logs its own findings
        ctx.log("git_metadata", {"where": where, "notes": list(notes), **data})


def _shell_locks(ctx, paths):
    """A command of an agent that can write (edit, full) holds the project root, or the
    paths its role declares (`locks = {"src/"}`), while it runs: other agents' edits there
    wait for it, and it waits for theirs."""
    from contextlib import nullcontext

    if ctx.access not in ("edit", "full"):
        return nullcontext()
    from ..tools.locks import parse_target
    from .locks import hold, lock_timeout

    if isinstance(paths, str):
        paths = [paths]
    if not isinstance(paths, list) or not paths:
        paths = ["."]
    return hold(ctx, [parse_target(ctx.workdir, p) for p in paths], lock_timeout(ctx), "run")


@primitive
def run(ctx, cmd, opts=None):
    from ..tools import shell
    from ..llm.providers import key_variables
    from ..tools.sandbox import setup_from_config

    opts = opts or {}
    if not isinstance(cmd, str) or not cmd.strip():
        raise MossError("run needs a command string", kind="usage")
    env = opts.get("env")
    if env is not None and not isinstance(env, dict):
        if env != []:
            raise MossError("moss.shell.run: env must be a table of NAME = value", kind="usage")
        env = {}
    from ..tools.worktree import wait_ready

    cfg = ctx.config.get("shell", {})
    wait_ready(ctx.workdir, ctx.cancelled)  # a command may write in place: never while a copy still shares a file
    locks = _shell_locks(ctx, opts.get("locks"))
    try:
        with locks:
            result = shell.run(
                cmd,
                root=ctx.workdir,
                bind_as=ctx.bind_as,
                access=ctx.access,
                cwd=opts.get("cwd"),
                timeout=float(opts.get("timeout") or cfg.get("timeout") or 120),
                max_chars=int(opts.get("max_chars") or cfg.get("max_chars") or 20000),
                env=env,
                allow_full=ctx.allow_full,
                unsandboxed_ok=ctx.unsandboxed_ok,
                cancel=lambda: ctx.cancelled() or ctx.user_interrupt(),
                stdin=opts.get("stdin"),
                setup=setup_from_config(ctx.user_config, keys=key_variables(ctx.config)),
            )
    except MossError as e:
        report_git(ctx, "shell.run", e.data.get("git") or [], cmd=cmd)
        raise
    report_git(ctx, "shell.run", result.get("git") or [], cmd=cmd)
    return result
