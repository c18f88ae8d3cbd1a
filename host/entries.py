"""The entry points the host calls on an agent script, declared once.

An agent script (moss's scripts/agent.lua, or a project's .moss/scripts/agent.lua that
overrides it) returns a table of functions. The host calls only the entries named here, with
the arguments documented in docs/agent.md ("Entry points an agent script provides"); it never
reads what a session holds. A script without an entry the host needs gets one error naming
the entry and that section.
"""

from __future__ import annotations

import re

from .errors import MossError

DOC = 'docs/agent.md, "Entry points an agent script provides"'

# name -> who calls it (docs/agent.md has the arguments and return values of each)
ENTRIES = {
    "main": "`moss @agent ARGS`",
    "child": "moss.spawn (in the child agent's thread)",
    "sessions": "`moss sessions list` and `moss sessions show`",
    "serve": "`moss mcp serve` (run_agent, resume_session)",
    "interrupted": "an interrupt or a parent's cancel (optional)",
}
OPTIONAL = ("interrupted",)

NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def check_name(name: str, what: str = "entry") -> str:
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise MossError(f"{what} name {name!r} refused: a Lua identifier, e.g. child", kind="usage")
    return name


def find(module, name: str, shown: str, *, required: bool = True):
    """The Lua function `name` of the table a script returned; MossError (usage) naming the
    entry and the doc when it is missing and required, None when optional and missing."""
    from lupa import lua54

    fn = module[name.encode()] if lua54.lua_type(module) == "table" else None
    if fn is not None and lua54.lua_type(fn) == "function":
        return fn
    if not required:
        return None
    got = "does not return a table of entries" if lua54.lua_type(module) != "table" else \
        ("has no `" + name + "` entry" if fn is None else f"has a `{name}` that is not a function")
    who = ENTRIES.get(name)
    raise MossError(f"{shown} {got}" + (f": moss calls it for {who}" if who else "") +
                    f"; the entries an agent script provides are in {DOC}", kind="usage")
