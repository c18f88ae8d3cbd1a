"""The Lua sandbox: every escape from tech-facts §1.2-1.3, tried from a real script file."""

from __future__ import annotations

import os

import pytest

from moss.roots import ScriptRoots
from moss.runtime import LuaScriptError, Runtime

ESCAPES = {
    "python_builtins": 'return python.builtins.__import__("os").getcwd()',
    "python_eval": "return python.eval(\"__import__('os').getpid()\")",
    "os_execute": 'return os.execute("touch pwned")',
    "os_remove": 'return os.remove("victim.txt")',
    "os_exit": "return os.exit(3)",
    "os_getenv": 'return os.getenv("HOME")',
    "io_open": 'return io.open("/etc/hostname"):read("a")',
    "io_popen": 'return io.popen("id"):read("a")',
    "debug_getupvalue": "return debug.getupvalue(moss.ui.print, 1)",
    "debug_sethook": "return debug.sethook()",
    "package_loadlib": 'return package.loadlib("libc.so.6", "system")',
    "dofile": 'return dofile("/etc/passwd")',
    "loadfile": 'return loadfile("/etc/passwd")',
    "string_dump": "return string.dump(function() end)",
    "function_globals": "return moss.ui.print.__globals__",
    "function_item": 'return moss.ui.print["__globals__"]',
}


@pytest.mark.parametrize("name", sorted(ESCAPES))
def test_escape_refused_from_script_file(project, name):
    (project.root / "victim.txt").write_text("keep me")
    project.script("escape", ESCAPES[name] + "\n")
    r = project.moss("@escape")
    assert r.returncode == 1, (r.stdout, r.stderr)
    # A clean Lua error naming the script file and line, not a Python traceback or a crash.
    assert ".moss/scripts/escape.lua:1:" in r.stderr
    assert "Traceback (most recent call last)" not in r.stderr
    assert not (project.root / "pwned").exists()
    assert (project.root / "victim.txt").read_text() == "keep me"
    assert "/bin/bash" not in r.stdout and "root:" not in r.stdout


def test_binary_chunks_and_frozen_metatables(project):
    project.script(
        "probe",
        r'''
        local f, err = load("\27Lua\84\0")
        print("binary", f, err)
        print("string mt", getmetatable(""))
        print("dump", string.dump)
        local ok, e = pcall(setmetatable, "", {})
        print("setmt", ok)
        ''',
    )
    r = project.moss("@probe")
    assert r.returncode == 0, r.stderr
    assert "binary\tnil\tattempt to load a binary chunk (mode is 't')" in r.stdout
    assert "string mt\tfalse" in r.stdout
    assert "dump\tnil" in r.stdout
    assert "setmt\tfalse" in r.stdout


def test_python_objects_are_opaque(tmp_path):
    """Even if a Python object reached Lua, no attribute or item of it is readable."""
    rt = Runtime(ScriptRoots(tmp_path))

    def leaked():
        return 1

    rt.lua.globals()[b"leak"] = leaked
    gen = (i for i in range(3))
    rt.lua.globals()[b"gen"] = gen
    for code in ("return leak.__globals__", 'return leak["__globals__"]', "return gen.gi_frame",
                 'return gen["gi_frame"]', "leak.x = 1", "return getmetatable(leak)"):
        try:
            value = rt.execute(code, "leak.lua")
        except LuaScriptError as e:
            assert "not accessible" in str(e) or "attempt" in str(e)
        else:
            assert value in (None, False), code


def test_require_traversal_refused(project, tmp_path):
    outside = tmp_path / "outside.lua"
    outside.write_text("return 'outside code ran'")
    os.symlink(outside, project.root / ".moss" / "scripts" / "sneaky.lua")
    project.script(
        "req",
        """
        for _, name in ipairs({"../outside", "/etc/passwd", "a/../../b", "sneaky"}) do
          local ok, err = pcall(require, name)
          print(name, ok, tostring(err):match("refused") and "refused" or tostring(err))
        end
        """,
    )
    r = project.moss("@req")
    assert r.returncode == 0, r.stderr
    for name in ("../outside", "/etc/passwd", "a/../../b", "sneaky"):
        assert f"{name}\tfalse\trefused" in r.stdout
    assert "outside code ran" not in r.stdout


def test_memory_cap_has_clear_error(project):
    project.script("bomb", "local t = {} for i = 1, 1e9 do t[i] = ('x'):rep(1000) .. i end\n")
    r = project.moss("@bomb", "--memory-mb", "32")
    assert r.returncode == 1
    assert "Lua memory limit of 32 MiB exceeded" in r.stderr


def test_memory_cap_from_config(project):
    project.write(".moss/config.toml", "[lua]\nmax_memory_mb = 24\n")
    project.script("bomb", "local s = ('x'):rep(64 * 1024 * 1024)\n")
    r = project.moss("@bomb")
    assert "Lua memory limit of 24 MiB exceeded" in r.stderr


def test_object_identity_stress(tmp_path):
    """lupa #294: other runtimes hand back the wrong Python object; lua54 must not."""
    calls = {"a": 0, "b": 0}

    def fa(x):
        calls["a"] += 1
        return ["a", x]

    def fb(x):
        calls["b"] += 1
        return {"b": x}

    rt = Runtime(ScriptRoots(tmp_path), {"t.a": fa, "t.b": fb})
    bad = rt.execute(
        """
        local bad = 0
        for i = 1, 100000 do
          local junk = {i, tostring(i), {i}}
          local x = moss.t.a(i)
          local y = moss.t.b(i)
          if x[1] ~= "a" or x[2] ~= i or y.b ~= i then bad = bad + 1 end
          if i % 997 == 0 then collectgarbage("step") end
        end
        return bad
        """,
        "identity.lua",
    )
    assert bad == 0
    assert calls == {"a": 100000, "b": 100000}
