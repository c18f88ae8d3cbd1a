"""moss's Lua (scripts/) passes luacheck under .luacheckrc, whose globals are what moss's Lua
runtime gives a script: a script that reaches for `io`, `debug` or an undeclared global fails
the lint before it fails at run time."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from ciskips import in_ci

ROOT = Path(__file__).resolve().parent.parent
LUACHECK = shutil.which("luacheck")

pytestmark = pytest.mark.skipif(
    LUACHECK is None and not in_ci(),
    reason="luacheck is not installed (Debian: lua-check; .ci/run installs it)")


def luacheck(*paths: str | Path) -> subprocess.CompletedProcess[str]:
    assert LUACHECK, "luacheck is not installed: CI installs lua-check (.ci/run)"
    return subprocess.run([LUACHECK, "--formatter", "plain", "--codes", "--config", str(ROOT / ".luacheckrc"),
                           *map(str, paths)], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_scripts_have_no_warnings():
    r = luacheck("scripts")
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr


def test_what_the_runtime_lacks_is_reported(tmp_path):
    bad = tmp_path / "bad.lua"
    bad.write_text('local f = io.open("x")\nlocal d = debug.traceback()\n'
                   'print(os.execute("ls"), string.dump(print), f, d)\nundeclared_global = 1\n')
    r = luacheck(bad)
    assert r.returncode != 0
    for what in ("bad.lua:1:11: (W113) accessing undefined variable 'io'",
                 "bad.lua:2:11: (W113) accessing undefined variable 'debug'",
                 "bad.lua:3:7: (W143) accessing undefined field 'execute' of global 'os'",
                 "bad.lua:3:25: (W143) accessing undefined field 'dump' of global 'string'",
                 "bad.lua:4:1: (W111) setting non-standard global variable 'undeclared_global'"):
        assert what in r.stdout, (what, r.stdout)
    # what a script may use is not reported
    good = tmp_path / "good.lua"
    good.write_text('print(os.time(), string.format("%d", 1), moss.fs.read("x"), package.loaded)\n')
    assert luacheck(good).returncode == 0, luacheck(good).stdout
