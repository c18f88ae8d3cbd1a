"""Bad input gets a clear answer: no hang, no traceback, no unbounded memory.

Each case is run the way a user meets it: the real `moss` CLI as a subprocess (a script in
the project's .moss/scripts/ when the input arrives through a primitive). A clear answer is
an exit status, one `error:` line naming the culprit, and no Python traceback.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest


def clean_error(r, code: int = 2) -> str:
    """Assert a one-line error with exit `code` and no traceback; return the error line."""
    assert r.returncode == code, (r.returncode, r.stdout[-2000:], r.stderr[-2000:])
    assert "Traceback" not in r.stderr, r.stderr
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, r.stderr
    return errors[0]


def run_lua(project, body: str, *args, **kw):
    """Run `body` as the project script @case and return the finished process."""
    project.script("case", body)
    return project.moss("@case", *args, **kw)


# ------------------------------------------------------------------ pipes, sockets, loops

@pytest.fixture
def specials(project):
    """A project with a named pipe, a socket, a symlink loop and one ordinary file."""
    os.mkfifo(project.root / "pipe")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(project.root / "sock"))
    (project.root / "loop1").symlink_to("loop2")
    (project.root / "loop2").symlink_to("loop1")
    project.write("main.rs", "fn main() {}\n")
    yield project
    sock.close()


@pytest.mark.parametrize("target,what", [("pipe", "named pipe"), ("pipe:1-3", "named pipe"),
                                         ("pipe:2", "named pipe"), ("pipe/Foo", "named pipe"),
                                         ("sock", "socket")])
def test_view_refuses_a_pipe_or_socket_instead_of_hanging(specials, target, what):
    """Reading a FIFO blocks until someone writes to it: view must never open one."""
    line = clean_error(specials.moss("view", target, timeout=20))
    assert what in line and target.split(":")[0].split("/")[0] in line


@pytest.mark.parametrize("target", ["loop1", "loop1:1-3", "loop1/Foo"])
def test_view_of_a_symlink_loop_says_so(specials, target):
    assert "symlink loop" in clean_error(specials.moss("view", target, timeout=20))


def test_tree_and_search_walk_past_pipes_sockets_and_loops(specials):
    tree = specials.moss("view", ".", timeout=20)
    assert tree.returncode == 0 and "main.rs" in tree.stdout, tree.stderr
    found = specials.moss("text-search", "main", timeout=20)
    assert found.returncode == 0 and "main.rs:" in found.stdout, found.stderr
    for name, what in (("pipe", "named pipe"), ("loop1", "symlink loop")):
        line = clean_error(specials.moss("text-search", "main", "--only", name, timeout=20))
        assert what in line and name in line


def test_edit_and_fs_refuse_pipes_and_loops(specials):
    """A write through a pipe would block; replacing it with a file would destroy it."""
    r = run_lua(specials, """
        moss.access.set("edit")
        local function try(f, ...)
          local ok, e = pcall(f, ...)
          print(ok and "ok" or (moss.error_kind(e) .. ": " .. tostring(e.message or e):gsub("\\n.*", "")))
        end
        try(moss.edit.preview, {{target = "pipe", action = "replace", content = "x"}})
        try(moss.edit.preview, {{target = "pipe/Foo", action = "replace", content = "x"}})
        try(moss.edit.preview, {{target = "pipe", action = "create", content = "x"}})
        try(moss.edit.preview, {{target = "loop1", action = "replace", content = "x"}})
        try(moss.fs.read, "pipe")
        try(moss.fs.read, "loop1")
        try(moss.fs.write, "pipe", "x")
        try(moss.fs.write, "loop1", "x")
    """, timeout=30)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 8
    for line in lines[:3] + lines[4:5] + lines[6:7]:
        assert line.startswith("usage: ") and "pipe is a named pipe" in line, line
    for line in (lines[3], lines[5], lines[7]):
        assert line.startswith("usage: ") and "loop1 is a symlink loop" in line, line
    assert (specials.root / "pipe").is_fifo() and (specials.root / "loop1").is_symlink()


def test_fs_write_of_the_root_is_refused_and_writes_nothing_outside(project):
    """`moss.fs.write("")` used to rename a temp file over the root, from outside it."""
    (project.root / "sub").mkdir()
    before = sorted(os.listdir(project.root.parent))
    r = run_lua(project, """
        moss.access.set("edit")
        for _, p in ipairs({"", ".", "sub"}) do
          local ok, e = pcall(moss.fs.write, p, "x")
          print(ok and "ok" or (moss.error_kind(e) .. ": " .. e.message))
        end
    """)
    assert r.returncode == 0, r.stderr
    kinds = [ln.split(":")[0] for ln in r.stdout.splitlines()]
    assert kinds == ["usage", "usage", "usage"], r.stdout
    assert "project root" in r.stdout and "directory" in r.stdout
    assert sorted(os.listdir(project.root.parent)) == before


def test_view_of_a_name_too_long_for_the_os(project):
    assert clean_error(project.moss("view", "a" * 300)).startswith("error: a")
    assert "a/" * 10 in clean_error(project.moss("view", "a/" * 3000))
    clean_error(project.moss("text-search", "x", "--only", "a" * 300))


# ------------------------------------------------------------------- search stays bounded

def _peak_rss_mb(project, *args) -> tuple[float, float, str]:
    """Run moss; return (seconds, peak RSS in MB of moss and ripgrep, stdout)."""
    out = project.root.parent / "search.out"
    with open(out, "wb") as f:
        env = dict(project.env)
        t0 = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "moss", *args], cwd=project.root, env=env,
                                stdout=f, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.monotonic() - t0
    assert proc.returncode == 0
    return seconds, usage.ru_maxrss / 1024, out.read_text()


def test_search_over_a_5mb_single_line_file_stays_small(project):
    """One minified-style 5 MB line that matches `.` five million times: ripgrep's JSON
    repeated every submatch (16 s, 2.8 GB); now the line is capped and re-read in a window."""
    words = ("alpha", "beta", "gamma", "needle", "delta")
    line = " ".join(words[i % 5] for i in range(900_000))[:5_000_000]
    (project.root / "one.txt").write_text(line)
    project.write("main.rs", "fn main() { let needle = 1; }\n")
    seconds, peak, out = _peak_rss_mb(project, "text-search", ".")
    assert peak < 400, f"peak RSS {peak:.0f} MB"
    assert seconds < 30
    hit = next(ln for ln in out.splitlines() if ln.startswith("  1:") and "alpha" in ln)
    assert len(hit) < 260 and hit.endswith("…")
    assert out.rstrip().endswith("2 matches in 2 files")


# ------------------------------------------------------------------------------ config

@pytest.mark.parametrize("args", [("@agent", "what is this?"), ("config", "get", "agent.max_turns")])
def test_config_integer_beyond_64_bits_names_file_line_column(project, args):
    """lupa raised OverflowError from deep inside the runtime; the file says where."""
    project.write(".moss/config.toml", "[agent]\n# turns\nmax_turns =  99999999999999999999\n")
    line = clean_error(project.moss(*args))
    assert line.startswith("error: .moss/config.toml:3:14: agent.max_turns = 99999999999999999999")


def test_user_config_integer_beyond_64_bits_in_a_list(project):
    project.user_file("config.toml", "[agent]\nlimits = [1, 0x1F]\nsizes = [1, [2, -99999999999999999999]]\n")
    line = clean_error(project.moss("@agent", "x"))
    assert "config.toml:3:17: agent.sizes[1][1] = -99999999999999999999" in line


@pytest.mark.parametrize("value", ["9223372036854775807", "17592186044416"])
def test_a_memory_limit_no_machine_has_is_a_config_error(project, value):
    project.write(".moss/config.toml", f"[lua]\nmax_memory_mb = {value}\n")
    assert "MiB" in clean_error(project.moss("@agent", "x"))
    project.write(".moss/config.toml", "")
    assert "MiB" in clean_error(project.moss("@agent", "--memory-mb", value, "x"))


def test_an_option_beyond_64_bits_is_a_usage_error(project):
    line = clean_error(project.moss("@agent", "--max-tokens", "99999999999999999999", "x"))
    assert "99999999999999999999" in line


def test_toml_dates_reach_lua_as_iso_strings(project):
    project.write(".moss/config.toml", "[agent]\nsince = 1979-05-27T07:32:00Z\nday = 1979-05-27\n")
    r = run_lua(project, "print(moss.config.agent.since, moss.config.agent.day)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1979-05-27T07:32:00+00:00", "1979-05-27"]


@pytest.mark.parametrize("args", [("@agent", "--list-sessions"), ("@agent", "x"), ("init",),
                                  ("config", "get", "agent.max_turns"), ("config", "set", "agent.x", "1")])
def test_dot_moss_as_a_regular_file(project, args):
    """`.moss` must be a directory; a file there is named, with what to do about it."""
    import shutil

    shutil.rmtree(project.root / ".moss")
    (project.root / ".moss").write_text("not a directory\n")
    line = clean_error(project.moss(*args))
    assert ".moss is a file" in line and "rename or remove .moss" in line


def test_config_file_that_is_a_pipe_is_refused(project):
    os.mkfifo(project.root / ".moss" / "config.toml")
    line = clean_error(project.moss("@agent", "x", timeout=20))
    assert ".moss/config.toml is a named pipe" in line
