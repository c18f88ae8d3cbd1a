"""Locks on directories, files and symbols: what conflicts, queueing and timeouts, and two
real moss processes sharing the lock files (a dead owner's lock is taken over)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from moss.errors import MossError
from moss.tools.locks import LockManager, Target, conflicts, parse_target

HOLDER = r"""
import sys, time
from moss.tools.locks import manager, parse_target
root, target = sys.argv[1], sys.argv[2]
m = manager(root)
h = m.acquire([parse_target(root, target)], "holder01", "auditor", timeout=10)
print("held", flush=True)
sys.stdin.readline()   # hold until told (or killed)
m.release(h)
print("released", flush=True)
sys.stdin.readline()
"""


def T(text, root=None):
    return Target(*text.split("|")) if "|" in text else Target(text)


@pytest.mark.parametrize("a, b, clash", [
    ("src", "src/main.rs", True),                 # a directory covers everything under it
    ("", "src/main.rs|Cli/run", True),           # the project root covers all
    ("src/main.rs", "src/main.rs|Cli/run", True),  # a file covers its symbols
    ("src/main.rs|Cli/run", "src/main.rs|Cli/new", False),  # two symbols of one file do not
    ("src/main.rs|Cli", "src/main.rs|Cli/run", True),  # a symbol covers its children
    ("src/a.rs", "src/b.rs", False),
    ("src", "srcx/a.rs", False),                 # a prefix of a name is not a parent
])
def test_what_conflicts(a, b, clash):
    assert conflicts(T(a), T(b)) is clash
    assert conflicts(T(b), T(a)) is clash


def test_write_locks_only_meet_write_locks_of_the_same_file():
    w = Target("src/main.rs", "", "write")
    assert conflicts(w, Target("src/main.rs", "", "write"))
    assert not conflicts(w, Target("src/main.rs"))  # symbol holders still write one after the other
    assert not conflicts(w, Target("src/other.rs", "", "write"))


def test_targets_resolve_the_file_part_and_stay_inside(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src/main.rs").write_text("fn main() {}\n")
    assert parse_target(tmp_path, "src/main.rs/Cli/run") == Target("src/main.rs", "Cli/run")
    assert parse_target(tmp_path, "src/") == Target("src")
    assert parse_target(tmp_path, "./src/new.rs") == Target("src/new.rs")
    assert parse_target(tmp_path, ".") == Target("")
    with pytest.raises(MossError) as e:
        parse_target(tmp_path, "../elsewhere")
    assert e.value.kind == "denied"


def test_timeout_names_the_holder_and_waiters_queue_in_order(tmp_path):
    m = LockManager(tmp_path)
    a = m.acquire([Target("f.py")], "sess-a", "refactorer")
    with pytest.raises(MossError) as e:
        m.acquire([Target("f.py", "g")], "sess-b", "explorer", timeout=0.2)
    assert e.value.kind == "locked"
    assert e.value.message.startswith("locked by sess-a (refactorer) since ")
    # the same owner never waits for itself
    m.release(m.acquire([Target("f.py", "g")], "sess-a", "refactorer", timeout=0))

    order = []

    def take(owner, queued):
        h = m.acquire([Target("f.py")], owner, "", timeout=5, on_wait=lambda _blocker: queued.set())
        order.append(owner)
        m.release(h)

    # each waiter is started once the one before it has queued (its on_wait was heard)
    threads = []
    for i in range(4):
        queued = threading.Event()
        threads.append(threading.Thread(target=take, args=(f"w{i}", queued)))
        threads[-1].start()
        assert queued.wait(5), f"w{i} never queued"
    assert order == []  # all queued behind sess-a
    m.release(a)
    for t in threads:
        t.join()
    assert order == ["w0", "w1", "w2", "w3"]
    assert not list((tmp_path / ".moss/agent/locks").glob("*.json"))  # nothing left behind


def _lock_script(project, timeout):
    project.script("lockit", f"""
        moss.session.bind("locker01")
        local t0 = os.clock()
        local l, err = moss.lock("calc.py/f", {{ timeout = {timeout} }})
        if not l then print("NO", err) return 1 end
        print("YES")
        l:release()
    """)
    project.write("calc.py", "def f():\n    return 1\n")


def _holder(project, target="calc.py"):
    p = subprocess.Popen([sys.executable, "-c", HOLDER, str(project.root), target], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, env=project.env)
    assert p.stdout.readline().strip() == "held"
    return p


def test_two_processes_contend_for_one_file_lock(project):
    _lock_script(project, 0.5)
    holder = _holder(project)
    try:
        r = project.moss("@lockit")
        assert r.returncode == 1, r.stderr
        assert r.stdout.startswith("NO\tlocked by holder01 (auditor, pid %d) since " % holder.pid)
        # a waiter in the other process gets the lock once the holder lets go
        _lock_script(project, 20)
        log = project.root / ".moss/agent/logs/locker01.jsonl"

        def waits():  # lock_wait events so far (the refused attempt above logged one)
            return log.read_text().count('"lock_wait"') if log.exists() else 0

        before = waits()
        waiter = project.popen("@lockit")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and waiter.poll() is None and waits() == before:
            time.sleep(0.05)
        assert waits() == before + 1  # it queued behind the holder (its lock_wait is logged) ...
        assert waiter.poll() is None  # ... and is still waiting
        t0 = time.monotonic()
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == "released"
        out, err = waiter.communicate(timeout=30)
        assert out.strip() == "YES", err
        assert time.monotonic() - t0 < 5  # a bounded poll, not the whole timeout
    finally:
        holder.kill()
        holder.wait()


def test_a_dead_processs_lock_is_taken_over_and_logged(project):
    _lock_script(project, 5)
    holder = _holder(project, "calc.py")
    os.kill(holder.pid, signal.SIGKILL)
    holder.wait()
    assert list((project.root / ".moss/agent/locks").glob("*.json"))  # its lock file is still there
    t0 = time.monotonic()
    r = project.moss("@lockit")
    assert r.stdout.strip() == "YES", r.stderr
    assert time.monotonic() - t0 < 5
    events = [json.loads(ln) for ln in (project.root / ".moss/agent/logs/locker01.jsonl").read_text().splitlines()]
    takeover = [e for e in events if e["event"] == "lock_takeover"]
    assert takeover and takeover[0]["dead_pid"] == holder.pid and takeover[0]["dead_session"] == "holder01"
    assert takeover[0]["session"] == "locker01"


def test_lock_from_lua_covers_a_directory_but_not_a_sibling(project):
    project.write("src/a.py", "x = 1\n")
    project.write("lib/b.py", "y = 1\n")
    project.script("dirs", """
        moss.session.bind("dirs0001")
        local l = assert(moss.lock("src/", { timeout = 1 }))
        print(#moss.locks.list())
        l:release()
        print(#moss.locks.list(), l:release())
    """)
    holder = _holder(project, "src/")
    try:
        r = project.moss("@dirs")
        assert r.returncode == 1 and "locked by holder01" in r.stderr  # assert() failed: src/ is held
        project.script("dirs", """
            moss.session.bind("dirs0001")
            local l = assert(moss.lock("lib/b.py", { timeout = 1 }))
            print("ok")
        """)
        assert project.moss("@dirs").stdout.strip() == "ok"
    finally:
        holder.kill()
        holder.wait()
