"""Shadow snapshots (moss.tools.shadow): real git, real files, no mocks."""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from moss.errors import MossError
from moss.tools.shadow import Shadow

BIG = 6 * 1024 * 1024


@pytest.fixture(autouse=True)
def clean_git_env(tmp_path_factory, monkeypatch):
    """No user identity, no global or system git config: HOME is an empty dir."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for k in list(os.environ):
        if k.startswith("GIT_") and k != "GIT_CONFIG_NOSYSTEM":
            monkeypatch.delenv(k)
    return home


def ugit(root: Path, *args: str, check: bool = True) -> str:
    """The *user's* git in ``root`` (never lets git refresh the index on its own)."""
    env = dict(os.environ, GIT_OPTIONAL_LOCKS="0")
    proc = subprocess.run(["git", "-c", "user.name=T", "-c", "user.email=t@example.com",
                           *args], cwd=root, env=env, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise AssertionError(f"git {args}: {proc.stderr}")
    return proc.stdout


def write(root: Path, rel: str, data: bytes | str, mode: int | None = None) -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data.encode() if isinstance(data, str) else data)
    if mode is not None:
        p.chmod(mode)
    return p


def manifest(root: Path, skip: tuple[str, ...] = ()) -> dict:
    """path -> (kind, bytes or target, permission bits), for every file, symlink and
    directory under root except .git, .moss and ``skip`` (paths or dir prefixes)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = Path(dirpath).relative_to(root).as_posix()
        for name in list(dirnames):
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            full = Path(dirpath) / name
            if rel in (".git", ".moss") or _skipped(rel, skip):
                dirnames.remove(name)
            elif full.is_symlink():
                dirnames.remove(name)
                out[rel] = ("link", os.readlink(full))
            else:
                out[rel] = ("dir",)
        for name in filenames:
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            full = Path(dirpath) / name
            if _skipped(rel, skip):
                continue
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(full))
            else:
                out[rel] = ("file", full.read_bytes(), stat.S_IMODE(st.st_mode))
    return out


def _skipped(rel: str, skip: tuple[str, ...]) -> bool:
    return any(rel == s or rel.startswith(s.rstrip("/") + "/") for s in skip)


def tree_digest(path: Path) -> dict:
    """Every file under ``path`` (e.g. the user's .git) with its bytes' sha256."""
    out = {}
    for p in sorted(path.rglob("*")):
        if p.is_file() and not p.is_symlink():
            out[p.relative_to(path).as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def user_git_state(root: Path) -> dict:
    return {
        "status": ugit(root, "status", "--porcelain", "--untracked-files=all"),
        "stash": ugit(root, "stash", "list"),
        "branches": ugit(root, "branch", "-a", "-v"),
        "head": ugit(root, "rev-parse", "HEAD"),
        "head_file": (root / ".git" / "HEAD").read_bytes(),
        "index_sha": hashlib.sha256((root / ".git" / "index").read_bytes()).hexdigest(),
        "config": (root / ".git" / "config").read_bytes(),
        "all_of_dot_git": tree_digest(root / ".git"),
    }


@pytest.fixture
def project(tmp_path) -> Path:
    """A git project with a commit, a stash entry, an extra branch and a staged change."""
    root = tmp_path / "proj"
    root.mkdir()
    write(root, "README.md", "# demo\n")
    write(root, "src/app.py", "def main():\n    return 1\n")
    write(root, "src/util.py", "x = 1\n")
    write(root, "scripts/run.sh", "#!/bin/sh\necho run\n", mode=0o755)
    write(root, "docs/guide.md", "guide\n")
    write(root, "data.bin", bytes(range(256)) * 4)
    write(root, ".gitignore", "*.log\nbuild/\n")
    (root / "link").symlink_to("src/app.py")
    write(root, "app.log", "log line 1\n")
    write(root, "build/out.o", b"\x7fELF....")
    ugit(root, "init", "-q", "-b", "main")
    ugit(root, "add", "-A")
    ugit(root, "commit", "-q", "-m", "initial")
    ugit(root, "branch", "feature")
    write(root, "README.md", "# demo\nstashed change\n")
    ugit(root, "stash", "push", "-q", "-m", "wip")
    write(root, "src/util.py", "x = 2\n")
    ugit(root, "add", "src/util.py")
    return root


# ---------------------------------------------------------------------------- restore


def test_restore_returns_tree_exactly_and_leaves_users_git_alone(project):
    root = project
    git_before = user_git_state(root)
    before = manifest(root, skip=("app.log", "build"))
    sh = Shadow(root)
    sid = sh.snapshot("before edits")
    assert len(sid) == 40
    assert user_git_state(root) == git_before

    # Changes of every kind, by Python and by a shell command.
    write(root, "src/app.py", "def main():\n    return 2\n")
    write(root, "new.txt", "new\n")
    subprocess.run("echo from shell > made_by_shell.txt && sed -i 's/x = 2/x = 3/' "
                   "src/util.py && rm docs/guide.md", shell=True, cwd=root, check=True)
    (root / "README.md").chmod(0o755)
    write(root, "deep/er/nested.txt", "nested\n")
    (root / "link").unlink()
    (root / "link").symlink_to("README.md")
    write(root, "app.log", "log line 1\nlog line 2\n")           # ignored
    big = write(root, "big.bin", os.urandom(BIG))                 # oversized
    big_bytes = big.read_bytes()
    assert not (root / "docs").exists() or not (root / "docs/guide.md").exists()

    result = sh.restore(sid)

    assert manifest(root, skip=("app.log", "build", "big.bin")) == before
    assert sorted(result["reverted"]) == ["README.md", "link", "src/app.py", "src/util.py"]
    assert sorted(result["removed"]) == ["deep/er/nested.txt", "made_by_shell.txt",
                                         "new.txt"]
    assert result["restored"] == ["docs/guide.md"]
    assert not (root / "deep").exists()          # emptied directories are cleaned up
    # Ignored and oversized files are left alone and reported.
    assert (root / "app.log").read_text() == "log line 1\nlog line 2\n"
    assert (root / "build/out.o").read_bytes() == b"\x7fELF...."
    assert big.read_bytes() == big_bytes
    assert {"path": "app.log", "why": "ignored"} in result["skipped"]
    assert {"path": "big.bin", "why": "oversized"} in result["skipped"]
    assert all(s["why"] in ("ignored", "oversized") for s in result["skipped"])
    # The user's repository: status, stash, branches, index, HEAD, every byte of .git
    # (big.bin, left alone by design, is the one untracked file the user's git sees).
    assert ugit(root, "status", "--porcelain") == git_before["status"] + "?? big.bin\n"
    big.unlink()
    assert user_git_state(root) == git_before
    assert ugit(root, "stash", "list").count("wip") == 1
    assert ugit(root, "diff", "--cached", "--name-only") == "src/util.py\n"
    # The shadow repository is invisible to the user's git (ignored, not untracked).
    assert "!! .moss/" in ugit(root, "status", "--porcelain", "--ignored")
    assert sh.changed(sid) == {"modified": [], "added": [], "deleted": []}


def test_project_that_is_not_a_git_repo(tmp_path):
    root = tmp_path / "plain"
    write(root, "a.txt", "a\n")
    write(root, "sub/b.txt", "b\n")
    before = manifest(root)
    sh = Shadow(root)
    sid = sh.snapshot("start")
    write(root, "a.txt", "changed\n")
    (root / "sub/b.txt").unlink()
    write(root, "c.txt", "c\n")
    result = sh.restore(sid)
    assert manifest(root) == before
    assert result["reverted"] == ["a.txt"] and result["restored"] == ["sub/b.txt"]
    assert result["removed"] == ["c.txt"]
    assert not (root / ".git").exists()
    assert (root / ".moss" / "shadow.git").is_dir()


def test_works_without_any_git_identity(tmp_path, clean_git_env):
    root = tmp_path / "p"
    write(root, "f.txt", "1\n")
    # The user's git has no identity here: a plain `git commit` would fail.
    assert subprocess.run(["git", "config", "user.name"], cwd=root,
                          capture_output=True).returncode != 0
    assert not any(clean_git_env.iterdir())
    sh = Shadow(root)
    sid = sh.snapshot("no identity")
    write(root, "f.txt", "2\n")
    sh.restore(sid)
    assert (root / "f.txt").read_text() == "1\n"


def test_two_snapshots_restore_older_then_newer_then_backup(tmp_path):
    root = tmp_path / "p"
    write(root, "a.txt", "v1\n")
    write(root, "b.txt", "b1\n")
    sh = Shadow(root)
    state1 = manifest(root)
    s1 = sh.snapshot("one")
    write(root, "a.txt", "v2\n")
    write(root, "c.txt", "c2\n")
    state2 = manifest(root)
    s2 = sh.snapshot("two")
    write(root, "a.txt", "v3\n")
    (root / "b.txt").unlink()
    state3 = manifest(root)

    r1 = sh.restore(s1)
    assert manifest(root) == state1
    assert sorted(r1["removed"]) == ["c.txt"] and r1["restored"] == ["b.txt"]
    sh.restore(s2)
    assert manifest(root) == state2
    # Each restore saved what it replaced; the first restore's backup is state 3.
    sh.restore(r1["backup"])
    assert manifest(root) == state3
    assert [s["id"] for s in sh.list()] == [s1, s2]     # backups are not listed


def test_list_is_oldest_first_with_labels_times_and_counts(tmp_path):
    root = tmp_path / "p"
    root.mkdir()
    sh = Shadow(root)
    assert sh.list() == []
    assert not (root / ".moss").exists()          # list() creates nothing
    t0 = int(time.time())
    write(root, "a.txt", "a")
    ids = [sh.snapshot("first")]
    write(root, "b.txt", "b")
    ids.append(sh.snapshot("second: with\nnewline and \"quotes\""))
    ids.append(sh.snapshot(""))                 # nothing changed: still a new id
    listed = sh.list()
    assert [s["id"] for s in listed] == ids
    assert len(set(ids)) == 3
    assert [s["label"] for s in listed] == ["first", "second: with\nnewline and \"quotes\"",
                                            ""]
    assert [s["files"] for s in listed] == [1, 2, 2]
    assert all(t0 - 1 <= s["time"] <= time.time() + 1 for s in listed)


def test_diff_and_changed(tmp_path):
    root = tmp_path / "p"
    write(root, "keep.txt", "same\n")
    write(root, "mod.txt", "old line\n")
    write(root, "gone.txt", "bye\n")
    write(root, "tool.sh", "echo\n")
    sh = Shadow(root)
    sid = sh.snapshot("s")
    write(root, "mod.txt", "new line\n")
    write(root, "dir/fresh.txt", "fresh\n")        # untracked new file
    (root / "gone.txt").unlink()
    (root / "tool.sh").chmod(0o755)

    d = sh.diff(sid)
    assert "-old line" in d and "+new line" in d
    assert "+++ b/dir/fresh.txt" in d and "+fresh" in d
    assert "deleted file mode" in d and "-bye" in d
    assert "new mode 100755" in d
    assert "keep.txt" not in d
    only = sh.diff(sid, ["mod.txt"])
    assert "mod.txt" in only and "fresh" not in only
    assert "fresh.txt" in sh.diff(sid, [str(root / "dir")])
    assert sh.changed(sid) == {"modified": ["mod.txt", "tool.sh"],
                               "added": ["dir/fresh.txt"], "deleted": ["gone.txt"]}
    with pytest.raises(MossError) as e:
        sh.diff(sid, ["../outside"])
    assert e.value.kind == "denied"


def test_unknown_and_malformed_ids(tmp_path):
    root = tmp_path / "p"
    write(root, "a", "a")
    sh = Shadow(root)
    with pytest.raises(MossError) as e:
        sh.restore("abcdef12")                   # no repository yet
    assert e.value.kind == "not_found"
    sid = sh.snapshot("x")
    with pytest.raises(MossError) as e:
        sh.changed("0" * 40)
    assert e.value.kind == "not_found"
    with pytest.raises(MossError) as e:
        sh.restore("HEAD~1")
    assert e.value.kind == "usage"
    with pytest.raises(MossError) as e:
        sh.restore("--hard")
    assert e.value.kind == "usage"
    # The tree object of a snapshot is not a snapshot.
    tree = subprocess.run(["git", "--git-dir", str(root / ".moss/shadow.git"), "rev-parse",
                           f"{sid}^{{tree}}"], capture_output=True, text=True).stdout.strip()
    with pytest.raises(MossError):
        sh.restore(tree)
    assert sh.changed(sid[:10]) == {"modified": [], "added": [], "deleted": []}


# ---------------------------------------------------------------------------- edges


def test_inherited_git_environment_is_ignored(project, monkeypatch):
    """Run from inside a git hook, GIT_DIR and GIT_INDEX_FILE point at the user's repo."""
    root = project
    git_before = user_git_state(root)
    monkeypatch.setenv("GIT_DIR", str(root / ".git"))
    monkeypatch.setenv("GIT_INDEX_FILE", str(root / ".git" / "index"))
    monkeypatch.setenv("GIT_WORK_TREE", str(root))
    sh = Shadow(root)
    sid = sh.snapshot("in a hook")
    write(root, "src/app.py", "changed\n")
    write(root, "extra.txt", "x")
    sh.restore(sid)
    for k in ("GIT_DIR", "GIT_INDEX_FILE", "GIT_WORK_TREE"):
        monkeypatch.delenv(k)
    assert user_git_state(root) == git_before


def test_symlinked_shadow_dir_is_refused(project):
    root = project
    (root / ".moss").mkdir()
    (root / ".moss" / "shadow.git").symlink_to(root / ".git")
    git_before = user_git_state(root)
    with pytest.raises(MossError) as e:
        Shadow(root).snapshot("x")
    assert e.value.kind == "denied"
    assert user_git_state(root) == git_before


def test_oversized_files_are_never_overwritten_or_deleted(tmp_path):
    root = tmp_path / "p"
    write(root, "grows.txt", "small\n")
    sh = Shadow(root, max_file_bytes=1000)
    sid = sh.snapshot("s")
    write(root, "grows.txt", "x" * 5000)        # grew past the limit: not in a backup
    write(root, "huge.dat", "y" * 5000)         # created big
    assert sh.changed(sid) == {"modified": ["grows.txt"], "added": [], "deleted": []}
    result = sh.restore(sid)
    assert (root / "grows.txt").read_text() == "x" * 5000
    assert (root / "huge.dat").read_text() == "y" * 5000
    assert sorted(result["skipped"], key=lambda s: s["path"]) == [
        {"path": "grows.txt", "why": "oversized"}, {"path": "huge.dat", "why": "oversized"}]
    assert result["reverted"] == result["removed"] == result["restored"] == []
    sh.snapshot("later")
    assert sh.list()[-1]["files"] == 0         # big files are not stored


def test_ignore_rules_changed_since_the_snapshot(tmp_path):
    """The snapshot's .gitignore decides; nothing the backup lacks is lost."""
    root = tmp_path / "p"
    write(root, ".gitignore", "*.log\n")
    write(root, "old.log", "kept\n")
    write(root, "a.txt", "a\n")
    sh = Shadow(root)
    sid = sh.snapshot("s")
    write(root, ".gitignore", "")               # un-ignore *.log ...
    write(root, "new.log", "made after\n")      # ... so these now look like sources
    write(root, "old.log", "kept, edited\n")
    write(root, "b.txt", "b\n")
    assert sorted(sh.changed(sid)["added"]) == ["b.txt", "new.log", "old.log"]
    result = sh.restore(sid)
    assert (root / ".gitignore").read_text() == "*.log\n"
    assert result["removed"] == ["b.txt"]
    assert (root / "old.log").read_text() == "kept, edited\n"
    assert (root / "new.log").read_text() == "made after\n"
    assert {"path": "new.log", "why": "ignored"} in result["skipped"]

    # The other way: a snapshot file that is ignored now is not overwritten, and undoing
    # the restore brings back exactly the state before it.
    root2 = tmp_path / "q"
    write(root2, "a.txt", "a\n")
    sh2 = Shadow(root2)
    sid2 = sh2.snapshot("s")
    write(root2, ".gitignore", "a.txt\n")
    write(root2, "a.txt", "secret edit\n")     # ignored now: no backup holds it
    before_restore = manifest(root2)
    r = sh2.restore(sid2)
    assert (root2 / "a.txt").read_text() == "secret edit\n"
    assert {"path": "a.txt", "why": "ignored"} in r["skipped"]
    assert not (root2 / ".gitignore").exists()
    sh2.restore(r["backup"])
    assert manifest(root2) == before_restore


def test_ignored_content_in_the_way_is_never_deleted(tmp_path):
    """A snapshot file whose place is now a directory holding ignored files."""
    root = tmp_path / "p"
    write(root, ".gitignore", "*.cache\n")
    write(root, "thing", "a file\n")
    sh = Shadow(root)
    sid = sh.snapshot("s")
    (root / "thing").unlink()
    write(root, "thing/data.cache", "precious\n")
    write(root, "thing/tracked.txt", "t\n")
    result = sh.restore(sid)
    assert (root / "thing/data.cache").read_text() == "precious\n"
    assert not (root / "thing/tracked.txt").exists()
    assert {"path": "thing", "why": "obstructed"} in result["skipped"]
    assert result["removed"] == ["thing/tracked.txt"]


def test_nested_repository_is_left_alone(tmp_path):
    root = tmp_path / "p"
    write(root, "top.txt", "top\n")
    sh = Shadow(root)
    sid = sh.snapshot("s")
    nested = root / "vendor" / "lib"
    write(nested, "lib.c", "int x;\n")
    ugit(nested, "init", "-q")                     # no commit: `git add` would choke
    result = sh.restore(sid)
    assert (nested / "lib.c").exists() and (nested / ".git").is_dir()
    assert {"path": "vendor/lib", "why": "nested_repo"} in result["skipped"]
    assert result["removed"] == []


def test_gitattributes_do_not_change_bytes(tmp_path):
    """eol conversion and filters in .gitattributes must not alter restored bytes."""
    root = tmp_path / "p"
    write(root, ".gitattributes", "* text eol=crlf\n*.bin filter=lfs diff=lfs\n")
    write(root, "unix.txt", b"line1\nline2\n")
    write(root, "blob.bin", b"\x00\x01\r\n\x02")
    before = manifest(root)
    sh = Shadow(root)
    sid = sh.snapshot("s")
    write(root, "unix.txt", b"changed\n")
    (root / "blob.bin").unlink()
    sh.restore(sid)
    assert manifest(root) == before


def test_concurrent_snapshots_from_two_processes(tmp_path):
    root = tmp_path / "p"
    for i in range(50):
        write(root, f"f{i}.txt", f"{i}\n")
    code = textwrap.dedent(f"""
        import sys
        from moss.tools.shadow import Shadow
        sh = Shadow({str(root)!r})
        for i in range(5):
            sh.snapshot(sys.argv[1] + str(i))
    """)
    procs = [subprocess.Popen([sys.executable, "-c", code, tag]) for tag in ("a", "b")]
    assert [p.wait(timeout=60) for p in procs] == [0, 0]
    labels = sorted(s["label"] for s in Shadow(root).list())
    assert labels == sorted([f"a{i}" for i in range(5)] + [f"b{i}" for i in range(5)])
    fsck = subprocess.run(["git", "--git-dir", str(root / ".moss/shadow.git"), "fsck",
                           "--no-dangling"], capture_output=True, text=True)
    assert fsck.returncode == 0, fsck.stderr


def test_few_thousand_files_restore_exactly(tmp_path):
    """Correct on a tree of realistic size (speed is measured in bench/, not asserted here)."""
    root = tmp_path / "p"
    for i in range(2000):
        write(root, f"pkg{i % 20}/mod{i}.py", f"value = {i}\n" * 5)
    before = manifest(root)
    sh = Shadow(root)
    sid = sh.snapshot("big tree")
    for i in range(0, 2000, 10):
        write(root, f"pkg{i % 20}/mod{i}.py", "edited\n")
    for i in range(100):
        write(root, f"newpkg/n{i}.py", "n\n")
    sh.snapshot("after edits")
    result = sh.restore(sid)
    assert manifest(root) == before
    assert len(result["reverted"]) == 200 and len(result["removed"]) == 100
    assert sh.changed(sid) == {"modified": [], "added": [], "deleted": []}


def test_stale_git_lock_from_a_killed_run_does_not_block(tmp_path):
    root = tmp_path / "p"
    write(root, "a.txt", "a\n")
    sh = Shadow(root)
    sid = sh.snapshot("s")
    (root / ".moss/shadow.git/index.lock").write_text("")
    write(root, "a.txt", "b\n")
    sh.snapshot("after a crash")
    assert sh.restore(sid)["reverted"] == ["a.txt"]
