"""moss.tools.shell.run under each access level: real bubblewrap, real processes."""

from __future__ import annotations

import os
import shutil
import socket
import re
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from moss.errors import MossError
from moss.tools.shell import run

C = {"LC_ALL": "C", "LANG": "C"}  # stable error messages ("Read-only file system")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    proj = tmp_path / "proj"
    (proj / "sub").mkdir(parents=True)
    (proj / "README").write_text("hello\n")
    return proj.resolve()


@pytest.fixture
def outside_tmp():
    """A host directory the sandbox shows read-only: outside /tmp and the home (which it
    replaces by empty tmpfs mounts). Removed after."""
    where = "/var/tmp"
    if not os.access(where, os.W_OK):
        pytest.skip("needs a writable /var/tmp")
    base = Path(tempfile.mkdtemp(prefix=".moss-test-", dir=where)).resolve()
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def server():
    """A TCP server on 127.0.0.1 in the host's network namespace."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    yield srv.getsockname()[1]
    srv.close()


def connect_cmd(port: int) -> str:
    return (f"{sys.executable} -c \"import socket; "
            f"socket.create_connection(('127.0.0.1', {port}), timeout=3); print('connected')\"")


def leftover(tag: str) -> list[int]:
    """Pids of live processes whose command line is `sleep <tag>`."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if argv[:2] == [b"sleep", tag.encode()] and state != "Z":
            pids.append(int(entry))
    return pids


def wait_gone(tag: str, within: float = 1.5) -> list[int]:
    end = time.monotonic() + within
    while (pids := leftover(tag)) and time.monotonic() < end:
        time.sleep(0.05)
    return pids


# --- read-only ---------------------------------------------------------------------------

def test_read_only_refuses_and_runs_nothing(root):
    with pytest.raises(MossError) as info:
        run("touch marker", root=root, access="read-only")
    assert info.value.kind == "denied"
    assert str(info.value).startswith("run is not allowed at access level read-only")
    assert not (root / "marker").exists()


def test_unknown_level_is_usage_error(root):
    with pytest.raises(MossError) as info:
        run("true", root=root, access="root")
    assert info.value.kind == "usage"


# --- read-shell --------------------------------------------------------------------------

@pytest.mark.needs_sandbox
def test_read_shell_cannot_write_project(root):
    r = run("touch x; echo done", root=root, access="read-shell", env=C)
    assert r["sandbox"] == "bwrap-ro"
    assert r["stdout"] == "done\n"
    assert "Read-only file system" in r["stderr"]
    assert not (root / "x").exists()
    # Reading works and cwd is the project root.
    r = run("pwd; cat README", root=root, access="read-shell")
    assert r["stdout"] == f"{root}\nhello\n" and r["code"] == 0


@pytest.mark.needs_sandbox
def test_read_shell_private_tmp(root):
    name = f"/tmp/moss-leak-{uuid.uuid4().hex}"
    r = run(f"echo secret > {name} && cat {name} && echo $TMPDIR", root=root, access="read-shell")
    assert r["code"] == 0 and r["stdout"] == "secret\n/tmp\n"
    assert not os.path.exists(name)


@pytest.mark.needs_sandbox
def test_read_shell_cannot_write_elsewhere_even_as_root(root, outside_tmp):
    r = run(f"mount -o remount,rw / 2>/dev/null; touch {outside_tmp}/f", root=root,
            access="read-shell", env=C)
    assert r["code"] != 0 and "Read-only file system" in r["stderr"]
    assert not (outside_tmp / "f").exists()


@pytest.mark.needs_sandbox
def test_read_shell_has_no_network(root, server):
    r = run(connect_cmd(server), root=root, access="read-shell", timeout=10)
    assert r["code"] != 0 and "connected" not in r["stdout"]
    assert "Error" in r["stderr"]  # ConnectionRefusedError / OSError: network unreachable
    # Control: the same command reaches the server without the sandbox.
    r = run(connect_cmd(server), root=root, access="full", allow_full=True, timeout=10)
    assert r["code"] == 0 and r["stdout"] == "connected\n"


@pytest.mark.needs_sandbox
def test_cwd_inside_root(root):
    r = run("pwd", root=root, access="read-shell", cwd="sub")
    assert r["stdout"] == f"{root / 'sub'}\n"
    for bad in ("..", "/etc", ".git"):
        with pytest.raises(MossError) as info:
            run("pwd", root=root, access="read-shell", cwd=bad)
        assert info.value.kind == "denied"
    with pytest.raises(MossError) as info:
        run("pwd", root=root, access="read-shell", cwd="missing")
    assert info.value.kind == "not_found"


# --- edit --------------------------------------------------------------------------------

@pytest.mark.needs_sandbox
def test_edit_writes_project_only(root, tmp_path):
    sibling = tmp_path / "sibling"
    sibling.mkdir()
    r = run(f"touch x sub/y && touch {sibling}/z", root=root, access="edit", env=C)
    assert r["sandbox"] == "bwrap-project"
    assert (root / "x").exists() and (root / "sub" / "y").exists()
    assert r["code"] != 0
    assert not (sibling / "z").exists()


@pytest.mark.needs_sandbox
def test_edit_cannot_write_outside_root(tmp_path, outside_tmp):
    proj = outside_tmp / "proj"
    other = outside_tmp / "other"
    proj.mkdir()
    other.mkdir()
    r = run("touch inside; touch ../other/f", root=proj, access="edit", env=C)
    assert (proj / "inside").exists()
    assert "Read-only file system" in r["stderr"]
    assert not (other / "f").exists()


@pytest.mark.needs_sandbox
def test_edit_has_no_network(root, server):
    r = run(connect_cmd(server), root=root, access="edit", timeout=10)
    assert r["code"] != 0 and "connected" not in r["stdout"]


# --- full --------------------------------------------------------------------------------

def test_full_refused_without_allow_full(root):
    with pytest.raises(MossError) as info:
        run("touch marker", root=root, access="full")
    assert info.value.kind == "denied" and "explicitly allowed" in str(info.value)
    assert not (root / "marker").exists()


def test_full_with_allow_full(root, tmp_path):
    r = run(f"touch marker {tmp_path}/outside", root=root, access="full", allow_full=True)
    assert r["code"] == 0 and r["sandbox"] == "none"
    assert (root / "marker").exists() and (tmp_path / "outside").exists()


# --- no bubblewrap -----------------------------------------------------------------------

@pytest.mark.parametrize("level", ["read-shell", "edit"])
def test_missing_bwrap_fails_closed(root, monkeypatch, level):
    monkeypatch.setenv("MOSS_BWRAP", "/nonexistent/bwrap")
    with pytest.raises(MossError) as info:
        run("touch marker", root=root, access=level)
    msg = str(info.value)
    assert info.value.kind == "denied"
    assert "bubblewrap" in msg and "apt-get install bubblewrap" in msg
    assert not (root / "marker").exists()


def test_missing_bwrap_unsandboxed_ok(root, monkeypatch):
    monkeypatch.setenv("MOSS_BWRAP", "/nonexistent/bwrap")
    r = run("echo plain", root=root, access="read-shell", unsandboxed_ok=True)
    assert r == {**r, "stdout": "plain\n", "code": 0, "sandbox": "none"}


def test_broken_bwrap_fails_closed(root, monkeypatch):
    # A bwrap that exists but cannot build its sandbox (here: always exits 1).
    monkeypatch.setenv("MOSS_BWRAP", shutil.which("false"))
    with pytest.raises(MossError) as info:
        run("touch marker", root=root, access="edit")
    assert "cannot create its sandbox" in str(info.value) and "bubblewrap" in str(info.value)
    assert not (root / "marker").exists()


# --- process handling --------------------------------------------------------------------

@pytest.mark.parametrize("level", ["full", pytest.param("edit", marks=pytest.mark.needs_sandbox)])
def test_timeout_kills_process_group(root, level):
    tag = f"{30 + uuid.uuid4().int % 1000 / 1000:.3f}"
    t0 = time.monotonic()
    r = run(f"echo started; echo err >&2; sh -c 'sleep {tag} & sleep {tag}'", root=root,
            access=level, allow_full=True, timeout=1)
    elapsed = time.monotonic() - t0
    assert r["timed_out"] is True and r["code"] is None
    assert elapsed < 1 + 2.5
    assert r["stdout"] == "started\n"
    assert r["stderr"].startswith("err\n") and "timed out" in r["stderr"]
    assert wait_gone(tag) == []


def test_timeout_escalates_to_sigkill(root):
    tag = f"{40 + uuid.uuid4().int % 1000 / 1000:.3f}"
    t0 = time.monotonic()
    r = run(f"trap '' TERM; sleep {tag}", root=root, access="full", allow_full=True,
            timeout=0.5)
    elapsed = time.monotonic() - t0
    assert r["timed_out"] and 2.4 < elapsed < 4.0
    assert wait_gone(tag) == []


def test_both_streams_and_exit_code(root):
    r = run("echo out; echo err >&2; exit 7", root=root, access="full", allow_full=True)
    assert (r["stdout"], r["stderr"], r["code"], r["timed_out"], r["truncated"]) == \
        ("out\n", "err\n", 7, False, False)
    assert r["cmd"] == "echo out; echo err >&2; exit 7" and r["duration"] >= 0


@pytest.mark.needs_sandbox
def test_exit_code_through_sandbox(root):
    r = run("echo out; echo err >&2; exit 7", root=root, access="read-shell")
    assert (r["stdout"], r["stderr"], r["code"]) == ("out\n", "err\n", 7)


def test_binary_output_tolerated(root):
    r = run("head -c 4096 /dev/urandom; printf '\\377\\376' >&2", root=root, access="full",
            allow_full=True)
    assert r["code"] == 0 and isinstance(r["stdout"], str) and "\ufffd" in r["stderr"]


def test_output_capped_head_and_tail(root):
    script = "import sys; sys.stdout.write('A' * 5000 + 'B' * 5000)"
    r = run(f"{sys.executable} -c \"{script}\"", root=root, access="full", allow_full=True,
            max_chars=1000)
    out = r["stdout"]
    assert r["truncated"] and len(out) <= 1000
    assert out.startswith("A" * 400) and out.endswith("B" * 400)
    assert "characters cut" in out
    cut = int(re.search(r"\[([\d,]+) characters cut", out).group(1).replace(",", ""))
    assert cut + out.count("A") + out.count("B") == 10000


@pytest.mark.parametrize("level", ["full", pytest.param("edit", marks=pytest.mark.needs_sandbox)])
def test_huge_output_bounded(root, level):
    t0 = time.monotonic()
    r = run("yes moss | head -c 200000000; echo END", root=root, access=level,
            allow_full=True, max_chars=2000, timeout=30)
    assert r["code"] == 0 and r["truncated"]
    assert len(r["stdout"]) <= 2000
    assert r["stdout"].startswith("moss\nmoss\n") and r["stdout"].endswith("moss\nEND\n")
    assert "bytes cut" in r["stdout"]
    assert time.monotonic() - t0 < 10


def test_stdin_not_inherited_and_given(root):
    r = run("cat", root=root, access="full", allow_full=True, timeout=5)
    assert r["stdout"] == "" and not r["timed_out"]
    r = run("cat; echo", root=root, access="full", allow_full=True, stdin="hello")
    assert r["stdout"] == "hello\n"


def test_env_added(root):
    r = run("echo $MOSS_T", root=root, access="full", allow_full=True, env={"MOSS_T": "v1"})
    assert r["stdout"] == "v1\n"


def test_cancel_interrupts(root):
    tag = f"{50 + uuid.uuid4().int % 1000 / 1000:.3f}"
    t0 = time.monotonic()
    with pytest.raises(MossError) as info:
        run(f"echo partial; sleep {tag}", root=root, access="full", allow_full=True,
            cancel=lambda: time.monotonic() - t0 > 0.3)
    assert info.value.kind == "interrupted"
    assert info.value.data["stdout"] == "partial\n"
    assert time.monotonic() - t0 < 2
    assert wait_gone(tag) == []


def test_background_job_holding_output_does_not_hang(root):
    t0 = time.monotonic()
    r = run("echo hi; sleep 5 &", root=root, access="full", allow_full=True, timeout=30)
    assert r["stdout"] == "hi\n" and r["code"] == 0 and not r["timed_out"]
    assert time.monotonic() - t0 < 3
