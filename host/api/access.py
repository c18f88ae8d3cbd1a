"""moss.access: the tool access level every primitive is checked against.

Policy (a role in Lua) chooses the level; the host enforces it for every primitive and
refuses `full` unless the user allowed it (--allow-full or [agent] allow_full = true).

The user's [trust] max_access holds what a trusted project chose, here, whatever its Lua does:
a level above it is refused when the caller says a config key chose it and that key came from
the project's .moss/config.toml (`opts.chosen_by`, checked against the trust record), and in any
session where a project file replaces one of moss's or the user's own scripts or modules
(Context.project_code).
"""

from __future__ import annotations

from .. import ui
from ..errors import MossError
from ..tools.sandbox import ACCESS_LEVELS as LEVELS  # weakest first; the sandbox enforces them
from .registry import primitive


@primitive
def get(ctx):
    return ctx.access


@primitive
def set_(ctx, level, opts=None):
    from ..tools.sandbox import check_level

    check_level(level)
    _within_trust(ctx, level, opts if isinstance(opts, dict) else {})
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


@primitive
def levels(ctx):
    return list(LEVELS)


def _within_trust(ctx, level: str, opts: dict) -> None:
    """Refuse `level` above the user's [trust] max_access when the project chose it."""
    limit = ctx.trust_cap
    if limit is None or LEVELS.index(level) <= LEVELS.index(limit):
        return
    key = opts.get("chosen_by")
    if isinstance(key, str) and key in ctx.project_keys:
        what = opts.get("what") if isinstance(opts.get("what"), str) else "this session"
        raise MossError(f"{what} needs access {level}, but it was chosen by the project's {key} and your "
                        f"[trust] max_access is {limit}; choose it yourself with a flag, or raise max_access "
                        f"in your user config", kind="config")
    if ctx.project_code:
        raise MossError(f"access level {level} is above your [trust] max_access {limit}: this session runs the "
                        f"project's own {ctx.project_code} in place of moss's or yours; raise max_access in your user "
                        f"config (~/.config/moss/config.toml) to allow it", kind="denied")
