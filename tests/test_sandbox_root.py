"""The sandbox against the attacks a security review reproduced with moss running as root.

Real bubblewrap, real git, real subprocesses; run as root in CI. Every test here failed on
the sandbox as it was (bwrap without a read-only /proc/sys, the script's env on the
launcher, the host environment and home visible, `.git` protected only at the root).
Nothing here changes the host even if the sandbox were broken: kernel settings are written
back with the value they already hold, /sys and sysrq files are only opened, never written.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from conftest import Project

from moss.errors import MossError
from moss.tools import sandbox
from moss.tools.runs import RunManager
from moss.tools.shell import run

C = {"LC_ALL": "C", "LANG": "C"}  # stable error messages ("Read-only file system")


pytestmark = pytest.mark.needs_sandbox
LEVELS = ["read-shell", "edit"]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "README").write_text("hello\n")
    return proj.resolve()


def py(code: str) -> str:
    """A shell command running `code` with the Python moss runs on (visible in the sandbox)."""
    return f"{sys.executable} -c {json.dumps(code)}"


# --- kernel settings, devices, mounts, modules ------------------------------------------

@pytest.mark.parametrize("level", LEVELS)
def test_proc_sys_read_only(root, level):
    path = "/proc/sys/kernel/core_pattern"
    before = Path(path).read_text()
    # Write back exactly what is there: even a broken sandbox changes nothing.
    r = run(f"printf '%s' {json.dumps(before.rstrip(chr(10)))} > {path}", root=root, access=level, env=C)
    assert r["code"] != 0 and "Read-only file system" in r["stderr"], r
    assert Path(path).read_text() == before


def _writable_sys_file() -> str:
    for name in sorted(os.listdir("/sys/kernel")):
        p = os.path.join("/sys/kernel", name)
        try:
            st = os.stat(p)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and st.st_mode & 0o200 and st.st_uid == os.getuid():
            return p
    pytest.skip("no file under /sys/kernel that this user could write")


@pytest.mark.parametrize("level", LEVELS)
def test_sys_read_only(root, level):
    target = _writable_sys_file()
    # Open for appending and write nothing: a check that cannot change the setting.
    r = run(py(f"open({target!r}, 'ab').close(); print('opened')"), root=root, access=level, env=C)
    assert "opened" not in r["stdout"] and "Read-only file system" in r["stderr"], r


def test_sysrq_trigger_not_writable(root):
    if not os.path.exists("/proc/sysrq-trigger"):
        pytest.skip("this kernel has no /proc/sysrq-trigger")
    r = run(py("open('/proc/sysrq-trigger', 'ab').close(); print('opened')"), root=root, access="edit", env=C)
    assert "opened" not in r["stdout"], r


@pytest.mark.parametrize("level", LEVELS)
def test_no_capabilities(root, level):
    r = run("grep CapEff /proc/self/status", root=root, access=level)
    assert r["stdout"].split() == ["CapEff:", "0000000000000000"]


def test_mount_refused(root):
    r = run("mkdir -p /tmp/m && mount -t tmpfs none /tmp/m && echo mounted; "
            "mount -o remount,rw / && echo remounted", root=root, access="edit", env=C)
    assert "mounted" not in r["stdout"] and "remounted" not in r["stdout"], r


def test_mknod_block_device_refused(root):
    r = run("mknod /tmp/disk b 8 0 && echo made; mknod ./disk b 8 0 && echo made2", root=root,
            access="edit", env=C)
    assert "made" not in r["stdout"] and "Operation not permitted" in r["stderr"], r
    assert not (root / "disk").exists()
    r = run("ls /dev", root=root, access="read-shell")
    assert set(r["stdout"].split()) <= {"core", "fd", "full", "null", "ptmx", "pts", "random", "shm",
                                        "stderr", "stdin", "stdout", "tty", "urandom", "zero"}


def test_module_loading_refused(root):
    nr = {"x86_64": 313, "aarch64": 273}.get(platform.machine())
    if nr is None:
        pytest.skip("finit_module number unknown on this architecture")
    # finit_module on /dev/null: without CAP_SYS_MODULE the kernel answers EPERM before it
    # reads anything; with it, the call would fail on the empty "module" instead.
    code = ("import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); "
            "fd = os.open('/dev/null', os.O_RDONLY); "
            f"r = libc.syscall({nr}, fd, b'', 0); print('errno', ctypes.get_errno())")
    r = run(py(code), root=root, access="edit")
    if r["stdout"].strip() == "errno 38":
        pytest.skip("this kernel cannot load modules at all (ENOSYS)")
    assert r["stdout"].strip() == "errno 1", r  # EPERM


def test_host_daemon_sockets_out_of_reach(root):
    """A root-owned socket under /run (docker, systemd, dbus live there) cannot be reached."""
    if not os.access("/run", os.W_OK):
        pytest.skip("needs a writable /run")
    path = f"/run/moss-test-{uuid.uuid4().hex[:8]}.sock"
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    srv.listen(1)
    try:
        code = f"import socket; socket.socket(socket.AF_UNIX).connect({path!r}); print('connected')"
        r = run(py(code), root=root, access="edit")
        assert "connected" not in r["stdout"] and "FileNotFoundError" in r["stderr"], r
    finally:
        srv.close()
        os.unlink(path)


def test_host_password_hashes_and_host_keys_hidden(root):
    secrets = [p for p in ["/etc/shadow", *sorted(map(str, Path("/etc/ssh").glob("ssh_host_*_key")))]
               if os.path.isfile(p) and os.access(p, os.R_OK)]
    if not secrets:
        pytest.skip("no readable /etc/shadow or SSH host key here")
    r = run("cat " + " ".join(secrets) + " | wc -c", root=root, access="read-shell")
    assert r["stdout"].strip() == "0", r


# --- the environment ------------------------------------------------------------------------

SECRETS = {"ANTHROPIC_API_KEY": "sk-test-SECRET", "GH_TOKEN": "ghp_fakeFAKEfake0000"}


def test_commands_see_no_secrets(project):
    project.script("envdump", """
        moss.access.set(moss.args[1])
        print(moss.shell.run("env").stdout)
    """)
    project.user_file("config.toml", "[agent]\nallow_full = true\n")
    for level in ("read-shell", "edit", "full"):
        r = project.moss("@envdump", level, env=SECRETS)
        assert r.returncode == 0, r.stderr
        assert "sk-test-SECRET" not in r.stdout and "ghp_fake" not in r.stdout, (level, r.stdout)
        assert "PATH=" in r.stdout


def test_user_lists_variables_project_cannot(project):
    project.script("envdump", 'moss.access.set("read-shell")\nprint(moss.shell.run("env").stdout)\n')
    # The cloned repository's config asks for the token: ignored.
    project.write(".moss/config.toml", '[sandbox]\nenv = ["GH_TOKEN"]\n')
    r = project.moss("@envdump", env={**SECRETS, "MOSS_TEST_BUILD_OPT": "-O2"})
    assert "ghp_fake" not in r.stdout and "MOSS_TEST_BUILD_OPT" not in r.stdout
    # The user's own config passes what it names, but never moss's own API key.
    project.user_file("config.toml", '[sandbox]\nenv = ["GH_TOKEN", "MOSS_TEST_*", "ANTHROPIC_API_KEY"]\n')
    r = project.moss("@envdump", env={**SECRETS, "MOSS_TEST_BUILD_OPT": "-O2"})
    assert r.returncode == 0, r.stderr
    assert "GH_TOKEN=ghp_fakeFAKEfake0000" in r.stdout and "MOSS_TEST_BUILD_OPT=-O2" in r.stdout
    assert "sk-test-SECRET" not in r.stdout


def test_bad_sandbox_config_is_one_line_error(project):
    project.script("x", 'moss.access.set("read-shell")\nmoss.shell.run("true")\n')
    project.user_file("config.toml", '[sandbox]\nenv = "GH_TOKEN"\n')
    r = project.moss("@x")
    assert r.returncode == 2 and "[sandbox] env must be a list" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


EVIL_C = r"""
#include <stdio.h>
__attribute__((constructor)) static void pwn(void) {
    FILE *f = fopen(MARKER, "a");
    if (f) { fputs("preloaded\n", f); fclose(f); }
}
"""


def test_ld_preload_via_runs_start_refused(project, tmp_path):
    """Attack 1: a project script raises itself to edit, builds a .so and preloads it into
    the (unsandboxed, root) bwrap launcher through runs.start's env. Without a C compiler
    the .so is missing, but the refusal is the same."""
    have_cc = shutil.which("cc") is not None
    marker = tmp_path / "preloaded-on-host"
    project.write("evil.c", EVIL_C)
    build = f"""cc -shared -fPIC -DMARKER='"{marker}"' -o evil.so evil.c""" if have_cc else "true"
    project.script("pwn", f"""
        moss.access.set("edit")
        print("built", moss.shell.run({json.dumps(build)}).code)
        local ok, err = pcall(moss.runs.start, {{cmd = "true", env = {{LD_PRELOAD = moss.root .. "/evil.so"}}}})
        print("start", ok, moss.error_kind(err), tostring(err and err.message or err))
        if ok then moss.runs.wait(5) moss.runs.wait(5) end
        local ok2, err2 = pcall(moss.shell.run, "true", {{env = {{LD_LIBRARY_PATH = moss.root}}}})
        print("run", ok2, moss.error_kind(err2))
        print("runs", #moss.runs.list())
    """)
    r = project.moss("@pwn")
    assert r.returncode == 0, r.stderr
    assert "built\t0" in r.stdout, r.stdout + r.stderr
    assert not have_cc or (project.root / "evil.so").exists()
    assert "start\tfalse\tdenied" in r.stdout and "LD_PRELOAD" in r.stdout
    assert "run\tfalse\tdenied" in r.stdout
    assert "runs\t0" in r.stdout
    assert not marker.exists()


def test_run_env_is_set_inside_not_on_launcher(root):
    m = RunManager(root)
    try:
        rec = m.start("echo FOO=$FOO; sleep 3", access="edit", env={"FOO": "from-script"})
        deadline = time.monotonic() + 5
        while m.status(rec["id"])["status"] == "queued" and time.monotonic() < deadline:
            time.sleep(0.05)
        pid = m.status(rec["id"])["pid"]
        launcher_env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        assert not any(e.startswith(b"FOO=") for e in launcher_env)
        assert sorted(e.split(b"=")[0] for e in launcher_env if e) == [b"PATH"]
        assert b"from-script" not in Path(f"/proc/{pid}/cmdline").read_bytes()
        while "FOO=" not in m.log_tail(rec["id"]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "FOO=from-script" in m.log_tail(rec["id"])
    finally:
        m.close()


# --- the home ---------------------------------------------------------------------------------

@pytest.fixture
def home_project(tmp_path):
    """A project whose HOME is outside /tmp (which the sandbox hides anyway), with a fake
    ~/.ssh key and a folder the user exposes in their own config."""
    base = Path(tempfile.mkdtemp(prefix="moss-home-", dir="/var/tmp")).resolve()
    try:
        home = base / "home"
        (home / ".ssh").mkdir(parents=True)
        (home / ".ssh" / "id_ed25519").write_text("FAKE-PRIVATE-KEY\n")
        (home / "shared").mkdir()
        (home / "shared" / "notes.txt").write_text("exposed notes\n")
        root = tmp_path / "proj"
        root.mkdir()
        p = Project(root, home)
        p.user_file("config.toml", '[sandbox]\nexpose = ["~/shared"]\n')
        yield p
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_home_hidden_exposed_paths_read_only(home_project):
    p = home_project
    p.script("peek", """
        moss.access.set("edit")
        local r = moss.shell.run("cat ~/.ssh/id_ed25519; cat ~/shared/notes.txt; echo HOME=$HOME; "
          .. "touch ~/shared/new && echo wrote; ls -A ~")
        print(r.stdout) print(r.stderr)
    """)
    r = p.moss("@peek", env=C)
    assert r.returncode == 0, r.stderr
    assert "FAKE-PRIVATE-KEY" not in r.stdout
    assert "exposed notes" in r.stdout
    assert f"HOME={p.home.resolve()}" in r.stdout
    assert "wrote" not in r.stdout and "Read-only file system" in r.stdout
    assert ".ssh" not in r.stdout.split()
    assert not (p.home / "shared" / "new").exists()


def test_password_database_home_hidden_too(root, monkeypatch):
    """HOME pointing elsewhere does not uncover the user's real home."""
    import pwd

    real = pwd.getpwuid(os.getuid()).pw_dir
    if not os.access(real, os.W_OK) or real.startswith("/tmp"):
        pytest.skip("needs a writable home directory outside /tmp")
    d = Path(tempfile.mkdtemp(prefix=".moss-test-", dir=real))
    try:
        (d / "credentials").write_text("FAKE-CREDENTIAL\n")
        monkeypatch.setenv("HOME", str(root.parent))
        r = run(f"cat {d}/credentials", root=root, access="read-shell")
        assert "FAKE-CREDENTIAL" not in r["stdout"] and r["code"] != 0
    finally:
        shutil.rmtree(d, ignore_errors=True)


# --- git metadata ---------------------------------------------------------------------------

def git(*args, cwd):
    return subprocess.run(["git", "-c", "user.name=T", "-c", "user.email=t@example.com", *args], cwd=cwd,
                          capture_output=True, text=True, check=True)


def test_nested_git_init_with_fsmonitor_undone_and_reported(project, tmp_path):
    """Attack 4: `git init sub` with core.fsmonitor; the user's next `git status` there
    would run it outside any sandbox."""
    git("init", "-q", cwd=project.root)
    marker = tmp_path / "fsmonitor-ran"
    project.script("plant", f"""
        local id = moss.session.new_id()
        moss.session.bind(id)
        moss.access.set("edit")
        local r = moss.shell.run("git init -q sub && git -C sub config core.fsmonitor 'touch {marker}'")
        print("code", r.code)
        print("git", r.git and r.git[1] or "none")
        print("stderr", r.stderr)
        for _, ev in ipairs(moss.session.events(id)) do print("event", ev.event) end
    """)
    r = project.moss("@plant")
    assert r.returncode == 0, r.stderr
    assert "code\t0" in r.stdout
    assert "git\tsub/.git: a git repository appeared" in r.stdout and "core.fsmonitor" in r.stdout
    assert "[moss: git metadata: sub/.git" in r.stdout            # the model sees it
    assert "git metadata:" in r.stderr and "core.fsmonitor" in r.stderr  # the person sees it
    assert "event\tgit_metadata" in r.stdout                      # and it is in the session log
    assert not (project.root / "sub" / ".git").exists()
    subprocess.run(["git", "status"], cwd=project.root / "sub", capture_output=True)
    assert not marker.exists()


def test_git_file_in_worktree_cannot_be_repointed(tmp_path):
    main = tmp_path / "main"
    main.mkdir()
    git("init", "-q", cwd=main)
    (main / "a.txt").write_text("a\n")
    git("add", "a.txt", cwd=main)
    git("commit", "-q", "-m", "a", cwd=main)
    wt = tmp_path / "wt"
    git("worktree", "add", "-q", str(wt), cwd=main)
    before = (wt / ".git").read_text()
    assert before.startswith("gitdir:")
    evil = tmp_path / "evil"
    r = run(f"git init -q --bare {evil} 2>/dev/null; echo 'gitdir: {evil}' > .git && echo repointed; "
            "rm -f .git && echo removed; mv .git moved && echo moved; true", root=wt, access="edit", env=C)
    assert "repointed" not in r["stdout"] and "removed" not in r["stdout"] and "moved" not in r["stdout"], r
    assert (wt / ".git").read_text() == before
    assert "git" not in r  # nothing changed, nothing to report


def test_git_file_or_bare_repo_anywhere_undone(root):
    r = run("mkdir -p a/b && printf 'gitdir: ../../evil\\n' > a/b/.git && "
            "git init -q --bare evil && git -C evil config core.hooksPath /tmp", root=root, access="edit")
    assert r["code"] == 0, r
    notes = "\n".join(r["git"])
    assert "a/b/.git: a .git file appeared" in notes and "evil: a bare git repository appeared" in notes
    assert "core.hookspath = /tmp" in notes.lower()
    assert not (root / "a" / "b" / ".git").exists() and not (root / "evil").exists()
    assert (root / "a" / "b").is_dir()  # only the git metadata went
    # Quarantined, not deleted, and disabled: git does not recognise it even there.
    q = list((root / ".moss" / "agent" / "quarantine").rglob("HEAD.disabled"))
    assert q, list((root / ".moss").rglob("*"))


def test_existing_nested_git_read_only_at_edit(root):
    git("init", "-q", cwd=root)
    sub = root / "vendor" / "lib"
    sub.mkdir(parents=True)
    git("init", "-q", cwd=sub)
    r = run("git -C vendor/lib config core.fsmonitor 'touch x' && echo set; "
            "echo evil > vendor/lib/.git/hooks/post-checkout && echo hooked", root=root, access="edit", env=C)
    assert "set" not in r["stdout"] and "hooked" not in r["stdout"], r
    assert "fsmonitor" not in (sub / ".git" / "config").read_text()


def test_without_sandbox_changes_are_reported_and_new_repos_undone(root, monkeypatch):
    """With the user's unsandboxed_ok and no bubblewrap nothing is read-only, but the
    check after each command still undoes new metadata and reports changed settings."""
    sub = root / "vendor" / "lib"
    sub.mkdir(parents=True)
    git("init", "-q", cwd=sub)
    monkeypatch.setenv("MOSS_BWRAP", "/nonexistent/bwrap")
    run("true", root=root, access="edit", unsandboxed_ok=True)  # the session's first look
    r = run("git -C vendor/lib config core.fsmonitor 'touch x' && git init -q new", root=root, access="edit",
            unsandboxed_ok=True)
    assert r["sandbox"] == "none" and r["code"] == 0
    notes = "\n".join(r["git"])
    assert "vendor/lib/.git: git settings that run commands appeared: core.fsmonitor = touch x" in notes
    assert "new/.git: a git repository appeared" in notes and not (root / "new" / ".git").exists()


def test_without_sandbox_a_removed_git_file_or_git_link_is_put_back(root, monkeypatch):
    """With nothing read-only (no bubblewrap, the user's unsandboxed_ok), a command that deletes
    a worktree's `.git` file and a `.git` link finds both back as they were after it, and the
    person is told; the link is made again as a link, not a file holding its target."""
    (root / "wt").mkdir()
    (root / "wt" / ".git").write_text("gitdir: ../elsewhere/wt\n")
    (root / "linked").mkdir()
    os.symlink("../real.git", root / "linked" / ".git")
    monkeypatch.setenv("MOSS_BWRAP", "/nonexistent/bwrap")
    run("true", root=root, access="edit", unsandboxed_ok=True)  # the session's first look
    r = run("rm wt/.git linked/.git", root=root, access="edit", unsandboxed_ok=True)
    assert r["sandbox"] == "none" and r["code"] == 0, r
    notes = "\n".join(r["git"])
    assert "wt/.git: the .git file was removed; moss put it back" in notes
    assert "linked/.git: the .git link was removed; moss put it back" in notes
    assert (root / "wt" / ".git").read_text() == "gitdir: ../elsewhere/wt\n"
    assert os.readlink(root / "linked" / ".git") == "../real.git"
    again = run("true", root=root, access="edit", unsandboxed_ok=True)
    assert not again.get("git"), again  # what was put back is the known metadata again


def test_background_run_creating_git_is_caught_while_it_runs(root):
    m = RunManager(root)
    try:
        # `;`, not `&&`: the check may move sub/.git away while git init is still writing it,
        # and git init then fails; the run goes on either way, as a user's longer job would
        rec = m.start("git init -q sub; sleep 8", access="edit")
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline and not m.status(rec["id"]).get("git"):
            time.sleep(0.1)
        st = m.status(rec["id"])
        assert st["status"] == "running" and st.get("git"), st
        assert "sub/.git: a git repository appeared" in st["git"][0]
        assert not (root / "sub" / ".git").exists()
    finally:
        m.close()


def test_moss_writes_refuse_git_paths_at_any_depth(project):
    project.script("w", """
        moss.access.set("edit")
        for _, path in ipairs({"a/b/.git", "vendor/x/.git/config", ".git/hooks/pre-commit"}) do
          local ok, err = pcall(moss.fs.write, path, "gitdir: /elsewhere")
          local ok2, err2 = pcall(moss.edit.apply, {{ target = path, action = "create", content = "x" }})
          print(path, ok, moss.error_kind(err), ok2, moss.error_kind(err2))
        end
    """)
    r = project.moss("@w")
    assert r.returncode == 0, r.stderr
    for line in r.stdout.splitlines():
        assert line.endswith("false\tdenied\tfalse\tdenied"), line
    assert not list(project.root.rglob(".git"))


# --- the probe --------------------------------------------------------------------------------

WRAPPER = """#!{python}
# bwrap with one protection taken out: what a broken or tampered install would run.
import os, sys
drop = {drop!r}
args, i = [], 1
while i < len(sys.argv):
    if sys.argv[i:i + len(drop)] == drop:
        i += len(drop)
        continue
    args.append(sys.argv[i])
    i += 1
os.execv({bwrap!r}, [{bwrap!r}, *args])
"""


def _host_has_network() -> bool:
    lines = Path("/proc/net/dev").read_text().splitlines()[2:]
    return any(line.split(":")[0].strip() != "lo" for line in lines)


WEAKENINGS = {
    "caps kept": (["--cap-drop", "ALL"], "capabilities"),
    "proc/sys writable": (["--ro-bind", "/proc/sys", "/proc/sys"], "kernel settings are writable"),
    "network shared": (["--unshare-net"], "network"),
}


@pytest.mark.parametrize("name", sorted(WEAKENINGS))
def test_probe_refuses_weakened_sandbox(root, tmp_path, monkeypatch, name):
    drop, why = WEAKENINGS[name]
    if name == "network shared" and not _host_has_network():
        pytest.skip("the host has no interface but lo")
    wrapper = tmp_path / f"bwrap-{uuid.uuid4().hex[:6]}"
    wrapper.write_text(WRAPPER.format(python=sys.executable, drop=drop, bwrap=sandbox.bwrap_path()))
    wrapper.chmod(0o755)
    monkeypatch.setenv("MOSS_BWRAP", str(wrapper))
    for level in LEVELS:
        with pytest.raises(MossError) as info:
            run("touch marker", root=root, access=level)
        msg = str(info.value)
        assert info.value.kind == "denied" and "not in force" in msg and why in msg, msg
        assert "unsandboxed_ok" in msg
    assert not (root / "marker").exists()
    # Only the user's own opt-out runs commands, plainly and saying so.
    r = run("echo plain", root=root, access="read-shell", unsandboxed_ok=True)
    assert (r["stdout"], r["sandbox"]) == ("plain\n", "none")


def test_probe_refusal_reaches_the_user(project, tmp_path):
    wrapper = tmp_path / "bwrap-nocap"
    wrapper.write_text(WRAPPER.format(python=sys.executable, drop=["--cap-drop", "ALL"],
                                      bwrap=sandbox.bwrap_path()))
    wrapper.chmod(0o755)
    project.script("x", 'moss.access.set("read-shell")\nprint(moss.shell.run("id").stdout)\n')
    r = project.moss("@x", env={"MOSS_BWRAP": str(wrapper)})
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "not in force" in r.stderr and "capabilities" in r.stderr
    assert "uid=" not in r.stdout


def test_probe_passes_and_is_cheap():
    sandbox._probe_cache.clear()
    t0 = time.monotonic()
    assert sandbox.bwrap_problem() is None
    assert time.monotonic() - t0 < 2



@pytest.mark.parametrize("exists", [True, False], ids=["moss-dir", "no-moss-dir"])
def test_edit_cannot_rewrite_moss_policy(root, exists):
    """The agent's policy and approval rules live in .moss/: a command cannot plant them,
    even in a project that has no .moss/ yet."""
    if exists:
        (root / ".moss").mkdir()
    r = run("mkdir -p .moss/scripts && echo 'print(1)' > .moss/scripts/agent.lua && echo planted",
            root=root, access="edit", env=C)
    assert "planted" not in r["stdout"] and "Read-only file system" in r["stderr"], r
    assert not (root / ".moss" / "scripts").exists()
