"""moss.access: the tool access level every primitive is checked against.

Policy (a role in Lua) chooses the level; the host enforces it for every primitive and
refuses `full` unless the user allowed it (--allow-full or [agent] allow_full = true).
"""

from __future__ import annotations

from .. import ui
from ..errors import MossError

from ..tools.sandbox import ACCESS_LEVELS as LEVELS  # weakest first; the sandbox enforces them


def functions(ctx):
    def get():
        return ctx.access

    def set_(level):
        from ..tools.sandbox import check_level

        check_level(level)
        cap = ctx.max_access
        if cap is not None and LEVELS.index(level) > LEVELS.index(cap):
            raise MossError(f"access level {level} is above this agent's limit {cap}: a child agent never "
                            f"gets more access than its parent", kind="denied")
        if level == "full" and not ctx.allow_full:
            raise MossError(
                "access level full (unrestricted shell) needs --allow-full, or [agent] allow_full = true "
                "in your user config (~/.config/moss/config.toml; a project's config cannot grant it)",
                kind="denied",
            )
        if level == "full" and ctx.access != "full":
            ui.console().print("[bold yellow]full access:[/] shell commands run unsandboxed")
        ctx.access = level
        return level

    def levels():
        return list(LEVELS)

    return {"access.get": get, "access.set": set_, "access.levels": levels}
