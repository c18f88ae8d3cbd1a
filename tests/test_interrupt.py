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


def wait_until_spinning(p, cpu_s: float = 0.1, timeout: float = 10.0) -> None:
    """Until process `p` has burnt `cpu_s` more seconds of CPU: it is stuck in its loop (a
    wall-clock sleep would prove nothing on a loaded machine)."""
    import os

    def cpu() -> float:
        fields = open(f"/proc/{p.pid}/stat").read().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime

    start, deadline = cpu(), time.monotonic() + timeout
    while cpu() - start < cpu_s and time.monotonic() < deadline:
        time.sleep(0.02)
    assert cpu() - start >= cpu_s, "the script never started spinning"


@pytest.mark.parametrize("mode", ["plain", "pcall", "recursive", "coroutine", "xpcall"])
def test_sigint_stops_spin_within_one_second(project, mode):
    project.script("spin", SPIN)
    p = project.popen("@spin", mode)
    try:
        line = p.stdout.readline()
        assert line.strip() == f"spinning {mode}", p.stderr.read() if p.poll() is not None else line
        wait_until_spinning(p)
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
        wait_until_spinning(p)
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


def test_ctrl_c_of_an_agent_leaves_a_true_state_and_the_session_resumes(project, api):
    """Ctrl-C while the model thinks: exit 130; the checkpoint and the listing say
    "interrupted" (not "running"), no running marker is left behind, `moss say` to the
    session is refused naming that state, and --resume goes on to an answer."""
    import json
    import shutil
    import subprocess

    from conftest import FIXTURES
    from fakeapi import slow

    from moss.sessions import read_checkpoint

    shutil.copytree(FIXTURES / "rustcrate", project.root, dirs_exist_ok=True)
    subprocess.run(["git", "init", "-q"], cwd=project.root, check=True)
    api.push("$(view Cargo.toml)", slow("$(answer never seen)", delay=30))
    p = project.popen("@agent", "--provider", "anthropic", "--v1", "-n", "What is this?", env=api.env())
    try:
        deadline = time.monotonic() + 30
        while len(api.requests) < 2 and time.monotonic() < deadline:  # turn 2 waits for the model
            time.sleep(0.05)
        assert len(api.requests) == 2, p.stderr.read() if p.poll() is not None else "no second request"
        p.send_signal(signal.SIGINT)
        p.wait(timeout=10)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130
    agent = project.root / ".moss" / "agent"
    [ckpt] = agent.glob("session-*.json")
    sid = ckpt.stem[len("session-"):]
    saved = read_checkpoint(ckpt)
    assert saved["reason"] == "interrupted" and saved["success"] is False and saved["turn"] == 1
    assert saved["done"] is False  # resumable as it is

    def ends() -> list[str]:  # the session's end records, as `moss sessions show` lists them
        log = agent / "logs" / f"{sid}.jsonl"
        return [e["reason"] for e in map(json.loads, log.read_text().splitlines()) if e["event"] == "session_end"]

    assert ends() == ["interrupted"]
    assert not list((agent / "running").glob("*.json"))
    listed = project.moss("sessions", "list")
    assert [ln.split("\t")[4] for ln in listed.stdout.splitlines()[1:]] == ["interrupted"]
    said = project.moss("say", "-s", sid, "hello")
    assert said.returncode == 2 and "interrupted" in said.stderr

    api.replies.clear()
    api.push("$(answer A Rust crate.)")
    r = project.moss("@agent", "--provider", "anthropic", "--resume", sid, "-n", "--output-format", "json",
                     env=api.env())
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["reason"] == "answered"
    assert ends() == ["interrupted", "answered"]  # one end per run of the session
    listed = project.moss("sessions", "list")
    assert [ln.split("\t")[4] for ln in listed.stdout.splitlines()[1:]] == ["answered"]
