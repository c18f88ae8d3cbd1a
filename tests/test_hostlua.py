"""moss's own Lua that the host runs lives in .lua files shipped beside its modules
(host/hostlua.py), and an error inside one names that file and line."""

from __future__ import annotations

import pytest
from conftest import REPO
from lupa.lua54 import LuaError, LuaRuntime

from moss import hostlua


def test_an_error_in_the_hosts_own_lua_names_its_file_and_line():
    lua = LuaRuntime(encoding=None)
    differ = hostlua.run(lua, "api/session_diff.lua")  # given no `unhooked`: calling copy fails
    line = next(i for i, text in enumerate((REPO / "host/api/session_diff.lua").read_text().splitlines(), 1)
                if text.startswith("function M.copy"))
    with pytest.raises(LuaError, match=rf"^moss/api/session_diff\.lua:{line}: "):
        differ[b"copy"](lua.table())


def test_no_host_module_holds_lua_source_in_a_string():
    """A chunk of Lua in a Python string has no file:line of its own in an error: each is a
    .lua file (a one-line `return ...` the runtime needs is not a chunk)."""
    import ast

    found = []
    for path in sorted((REPO / "host").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_bytes())):
            if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
                text = node.value if isinstance(node.value, str) else node.value.decode("utf-8", "replace")
                if text.count("\n") >= 3 and ("local function" in text or "\nlocal " in text or text.startswith("local ")):
                    found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert not found, f"move this Lua to a .lua file run through host/hostlua.py: {found}"
