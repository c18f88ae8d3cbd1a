"""moss's own Lua, run by the host (not a script): the files shipped beside these modules
(`convert.lua`, `unhooked.lua`, `api/session_diff.lua`), each compiled under its own chunk name,
`@moss/PATH`, so an error in one names its file and line. Scripts never reach them: the
host calls what they return."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


@functools.cache
def source(path: str) -> bytes:
    """The text of host/PATH (read once per process)."""
    return (HERE / path).read_bytes()


def run(lua: Any, path: str, *args: Any) -> Any:
    """host/PATH run as a chunk of `lua` (a lupa LuaRuntime) with `args`; what it returns."""
    return lua.execute(source(path), *args, name=f"@moss/{path}", mode="t")
