"""Ctrl-C stops a runaway script within a second and exits 130."""

from __future__ import annotations

import signal
import time

import pytest

SPIN = """
local mode = moss.args[1]
print("spinning " .. mode)
if mode == "plain" then
  while true do end
elseif mode == "pcall" then
  while true do pcall(function() while true do end end) end
elseif mode == "recursive" then
  local function f() while true do pcall(f) end end
  f()
elseif mode == "coroutine" then
  coroutine.wrap(function() while true do end end)()
elseif mode == "xpcall" then
  while true do xpcall(function() while true do end end, function(e) return e end) end
end
"""


@pytest.mark.parametrize("mode", ["plain", "pcall", "recursive", "coroutine", "xpcall"])
def test_sigint_stops_spin_within_one_second(project, mode):
    project.script("spin", SPIN)
    p = project.popen("@spin", mode)
    try:
        line = p.stdout.readline()
        assert line.strip() == f"spinning {mode}", p.stderr.read() if p.poll() is not None else line
        time.sleep(0.3)  # let it get properly stuck
        start = time.monotonic()
        p.send_signal(signal.SIGINT)
        p.wait(timeout=5)
        elapsed = time.monotonic() - start
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130
    assert elapsed < 1.0, f"took {elapsed:.2f}s"
    assert "interrupted" in p.stderr.read()


@pytest.mark.parametrize("code", [
    'setmetatable({}, {__gc = function() while true do end end}) collectgarbage()',
    'local s = ("a"):rep(3000) print("spinning c") s:find(("a-"):rep(14) .. "b")',
], ids=["finalizer", "pattern"])
def test_sigint_stops_code_no_hook_reaches(project, code):
    """Lua runs no hook inside finalizers or C pattern matching: the watchdog still ends it."""
    project.script("stuck", 'print("spinning c")\n' + code + "\n")
    p = project.popen("@stuck")
    try:
        assert p.stdout.readline().strip() == "spinning c"
        time.sleep(0.3)
        start = time.monotonic()
        p.send_signal(signal.SIGINT)
        p.wait(timeout=10)
        elapsed = time.monotonic() - start
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130
    assert elapsed < 4.0
    assert "interrupted" in p.stderr.read()
