"""Compiled chunks shared between runtimes (host/runtime.py, _Chunks): a built-in module is
compiled once per process and its bytecode reused by the next runtime, but never for a
changed source, never for project or user scripts, and scripts still load text only."""

from __future__ import annotations

import pytest

from moss.roots import ScriptRoots
from moss.runtime import CHUNKS, LuaScriptError, Runtime


@pytest.fixture
def builtin(tmp_path):
    d = tmp_path / "builtin"
    (d / "lib").mkdir(parents=True)
    CHUNKS.clear()
    yield d
    CHUNKS.clear()


def _rt(tmp_path, builtin, project=True):
    return Runtime(ScriptRoots(tmp_path / "proj", env={"XDG_CONFIG_HOME": str(tmp_path / "cfg")}, builtin=builtin,
                               project=project))


def test_a_changed_source_is_compiled_again_not_served_from_the_cache(tmp_path, builtin):
    mod = builtin / "lib" / "m.lua"
    mod.write_text("return 1\n")
    assert _rt(tmp_path, builtin).execute('return require("lib.m")') == 1
    assert _rt(tmp_path, builtin).execute('return require("lib.m")') == 1  # from the dump
    assert len(CHUNKS._by_file) == 1
    mod.write_text("return 2\n")  # same size, same second: only the content tells
    assert _rt(tmp_path, builtin).execute('return require("lib.m")') == 2
    mod.write_text("return 1\n")
    assert _rt(tmp_path, builtin).execute('return require("lib.m")') == 1


def test_errors_from_a_cached_chunk_keep_file_and_line(tmp_path, builtin):
    (builtin / "lib" / "bad.lua").write_text("local M = {}\nfunction M.f()\n  error('boom')\nend\nreturn M\n")
    for _ in range(2):  # compiled, then loaded from the dump
        with pytest.raises(LuaScriptError) as e:
            _rt(tmp_path, builtin).execute('require("lib.bad").f()')
        assert "bad.lua:3: boom" in e.value.message


def test_a_syntax_error_is_reported_each_time_and_never_cached(tmp_path, builtin):
    (builtin / "lib" / "syn.lua").write_text("return (\n")
    for _ in range(2):
        with pytest.raises(LuaScriptError) as e:
            _rt(tmp_path, builtin).execute('return require("lib.syn")')
        assert "syn.lua:" in e.value.message
    assert not CHUNKS._by_file


def test_project_modules_are_not_cached(tmp_path, builtin):
    proj = tmp_path / "proj" / ".moss" / "scripts" / "lib"
    proj.mkdir(parents=True)
    (proj / "p.lua").write_text("return 'project'\n")
    assert _rt(tmp_path, builtin).execute('return require("lib.p")') == b"project"
    assert not CHUNKS._by_file


def test_scripts_still_cannot_load_binary_chunks(tmp_path, builtin):
    (builtin / "lib" / "m.lua").write_text("return function() return 7 end\n")
    rt = _rt(tmp_path, builtin)
    assert rt.execute('return string.dump') is None
    rt.execute('require("lib.m")')
    dump = next(iter(CHUNKS._by_file.values()))[1]
    assert dump.startswith(b"\x1bLua")
    for code in ("local b = ... return load(b, 'x', 'b')", "local b = ... return load(b)",
                 "local b = ... return load(b, 'x', 'bt', {})"):
        fn, err = rt.call(rt.load(code, "t.lua"), dump)
        assert fn is None and b"binary" in err
