"""Shadow captures, write brackets and rollback (moss.tools.shadow, moss.shadow): real git,
real files, real sandboxed shell commands, no mocks."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import Project

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
    directory (empty ones too) under root except .git, .moss and ``skip`` (paths or dir
    prefixes): everything a person would notice."""
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
                out[rel] = ("dir", stat.S_IMODE(os.lstat(full).st_mode))
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
    before = manifest(root)
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
    write(root, "build/out.o", b"rebuilt")                         # ignored directory
    write(root, "big.bin", os.urandom(BIG))                        # over 5 MB

    result = sh.restore(sid)

    # Everything is back: ignored files and a 6 MB file included, and docs/ (emptied
    # by the rm) is a directory again.
    assert manifest(root) == before
    assert result["reverted"] == ["README.md", "app.log", "build/out.o", "link",
                                  "src/app.py", "src/util.py"]
    assert result["removed"] == ["big.bin", "deep/", "deep/er/", "deep/er/nested.txt",
                                 "made_by_shell.txt", "new.txt"]
    assert result["restored"] == ["docs/guide.md"]
    assert result["skipped"] == [] and result["conflicts"] == []
    assert result["scope"] == "all"
    # The user's repository: status, stash, branches, index, HEAD, every byte of .git.
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
    write(root, "secret", "s\n")
    sh = Shadow(root)
    sid = sh.snapshot("s")
    write(root, "mod.txt", "new line\n")
    write(root, "dir/fresh.txt", "fresh\n")        # untracked new file
    (root / "gone.txt").unlink()
    (root / "tool.sh").chmod(0o755)
    (root / "secret").chmod(0o600)                  # not the executable bit: still a change
    (root / "empty").mkdir()

    d = sh.diff(sid)
    assert "-old line" in d and "+new line" in d
    assert "+++ b/dir/fresh.txt" in d and "+fresh" in d
    assert "deleted file mode" in d and "-bye" in d
    assert "new mode 100755" in d
    assert "keep.txt" not in d
    only = sh.diff(sid, ["mod.txt"])
    assert "mod.txt" in only and "fresh" not in only
    assert "fresh.txt" in sh.diff(sid, [str(root / "dir")])
    assert sh.changed(sid) == {"modified": ["mod.txt", "secret", "tool.sh"],
                               "added": ["dir/", "dir/fresh.txt", "empty/"],
                               "deleted": ["gone.txt"]}
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
    with pytest.raises(MossError) as e:
        sh.end_write(sid)                        # a snapshot, not an open write
    assert e.value.kind == "not_found"


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


def test_a_store_changed_since_moss_made_it_is_set_aside_not_written_through(tmp_path):
    """A store moss made, whose folders a `git pull` (or anything) later replaced with links
    out of the project and whose config now runs a command: moss moves it aside with one
    warning, makes a new one, and nothing outside is written."""
    root, outside = tmp_path / "p", tmp_path / "outside"
    write(root, "a.txt", "a\n")
    outside.mkdir()
    store = root / ".moss" / "shadow.git"
    Shadow(root).snapshot("first")
    shutil_rm(store / "refs")
    (store / "refs").symlink_to(outside)
    with open(store / "config", "a") as f:
        f.write("[core]\n\tfsmonitor = touch " + str(outside / "ran") + "\n")
    said = []
    sh = Shadow(root, notify=said.append)
    sid = sh.snapshot("second")
    write(root, "a.txt", "changed\n")
    assert sh.restore(sid)["reverted"] == ["a.txt"]
    assert os.listdir(outside) == []
    assert len(said) == 1 and said[0].startswith(
        "warning: .moss/shadow.git was not made by moss for this project (.moss/shadow.git/refs is a symlink); "
        "moved it to .moss/agent/quarantine/"), said
    aside = list((root / ".moss" / "agent" / "quarantine").iterdir())
    assert len(aside) == 1 and (aside[0] / "refs").is_symlink()
    assert [s["label"] for s in sh.list()] == ["second"]
    # a config changed by hand (or by a pull) is not the one git wrote: set aside as well
    with open(store / "config", "a") as f:
        f.write("[include]\n\tpath = " + str(outside / "more.config") + "\n")
    Shadow(root, notify=said.append).snapshot("third")
    assert len(said) == 2 and "(its config is not the one git wrote when moss made it)" in said[1], said
    assert os.listdir(outside) == []


def test_a_store_without_moss_s_record_is_set_aside_and_one_with_it_is_kept(tmp_path):
    """Ownership is a record outside the project, not something a repository can ship: a
    plain `git init --bare` store at .moss/shadow.git is set aside, while the store moss made
    is used again by a later moss process."""
    root = tmp_path / "p"
    write(root, "a.txt", "a\n")
    subprocess.run(["git", "init", "-q", "--bare", str(root / ".moss" / "shadow.git")], check=True)
    said = []
    sid = Shadow(root, notify=said.append).snapshot("mine")
    assert len(said) == 1 and "(there is no record that moss made it here)" in said[0]
    code = ("import sys; from moss.tools.shadow import Shadow; "
            "print([s['id'] for s in Shadow(sys.argv[1], notify=print).list()])")
    later = subprocess.run([sys.executable, "-c", code, str(root)], capture_output=True, text=True)
    assert later.returncode == 0 and later.stdout.strip() == repr([sid]), later.stdout + later.stderr


def test_git_against_the_store_runs_nothing_from_global_config_or_hooks(tmp_path, clean_git_env):
    """Your global git config (an fsmonitor, a hooks path) and a hook in the store itself run
    nothing when moss snapshots and rolls back."""
    root = tmp_path / "p"
    write(root, "a.txt", "a\n")
    ran = tmp_path / "ran"
    hook = "#!/bin/sh\necho \"$0\" >> " + str(ran) + "\n"
    write(tmp_path / "global-hooks", "post-index-change", hook, 0o755)
    (clean_git_env / ".gitconfig").write_text(
        f"[core]\n\tfsmonitor = {tmp_path / 'global-hooks' / 'post-index-change'}\n"
        f"\thooksPath = {tmp_path / 'global-hooks'}\n")
    sh = Shadow(root)
    sid = sh.snapshot("one")
    write(root / ".moss" / "shadow.git", "hooks/post-index-change", hook, 0o755)
    write(root, "a.txt", "b\n")
    sh.snapshot("two")
    assert sh.restore(sid)["reverted"] == ["a.txt"]
    assert not ran.exists()


def test_content_beyond_the_size_caps_is_kept_and_reported(tmp_path):
    """What was never captured cannot come back, and what is not in the backup is never
    overwritten or deleted: both are listed with the reason."""
    root = tmp_path / "p"
    write(root, "grows.txt", "small\n")
    write(root, "was_big.dat", "z" * 5000)
    sh = Shadow(root, max_file_bytes=1000)
    sid = sh.snapshot("s")
    write(root, "grows.txt", "x" * 5000)        # grew past the cap: not in the backup
    write(root, "huge.dat", "y" * 5000)         # created big
    (root / "was_big.dat").unlink()             # its content was never captured
    assert sh.changed(sid) == {"modified": ["grows.txt"], "added": ["huge.dat"],
                               "deleted": ["was_big.dat"]}
    result = sh.restore(sid)
    assert (root / "grows.txt").read_text() == "x" * 5000
    assert (root / "huge.dat").read_text() == "y" * 5000
    assert not (root / "was_big.dat").exists()
    reasons = {s["path"]: s["reason"] for s in result["skipped"]}
    assert reasons == {"grows.txt": "not_backed_up", "huge.dat": "not_backed_up",
                       "was_big.dat": "too_large"}
    assert all(s["detail"] for s in result["skipped"])
    assert result["reverted"] == result["removed"] == result["restored"] == []
    sh.snapshot("later")
    assert sh.list()[-1]["files"] == 0         # big files are not stored


def test_total_cap_keeps_project_files_and_small_ignored_files_first(tmp_path):
    """Over max_total_bytes the project's own files and small ignored files (.env) are
    captured; the bulk of an ignored build directory is not, and says so."""
    root = tmp_path / "p"
    write(root, ".gitignore", ".env\nbuild/\n")
    write(root, "src/main.py", "print('hi')\n" * 50)
    write(root, ".env", "TOKEN=abc\n")
    for i in range(5):
        write(root, f"build/blob{i}.o", os.urandom(400))
    sh = Shadow(root, max_total_bytes=1500)
    sid = sh.snapshot("s")
    write(root, "src/main.py", "broken\n")
    write(root, ".env", "TOKEN=overwritten\n")
    for i in range(5):
        write(root, f"build/blob{i}.o", b"rebuilt")
    result = sh.restore(sid)
    assert (root / "src/main.py").read_text() == "print('hi')\n" * 50
    assert (root / ".env").read_text() == "TOKEN=abc\n"
    lost = sorted(s["path"] for s in result["skipped"] if s["reason"] == "over_total")
    kept = [f"build/blob{i}.o" for i in range(5) if (root / f"build/blob{i}.o").read_bytes()
            == b"rebuilt"]
    assert lost == kept and 1 <= len(lost) <= 5    # each one that stayed is named


def test_restore_never_writes_through_a_symlink(tmp_path):
    """A directory replaced by a symlink to somewhere else: the restore puts the
    directory back and leaves the place the link pointed to alone."""
    root = tmp_path / "p"
    outside = tmp_path / "outside"
    write(outside, "a.py", "outside, must not change\n")
    write(root, "src/a.py", "inside\n")
    before = manifest(root)
    sh = Shadow(root)
    sid = sh.snapshot("s")
    shutil_rm(root / "src")
    (root / "src").symlink_to(outside)
    result = sh.restore(sid)
    assert (outside / "a.py").read_text() == "outside, must not change\n"
    assert manifest(root) == before
    assert result["reverted"] == ["src/"] and result["restored"] == ["src/a.py"]


def test_content_not_in_the_backup_in_the_way_is_never_deleted(tmp_path):
    """A snapshot file whose place is now a directory holding a file too big to capture."""
    root = tmp_path / "p"
    write(root, "thing", "a file\n")
    sh = Shadow(root, max_file_bytes=100)
    sid = sh.snapshot("s")
    (root / "thing").unlink()
    write(root, "thing/data.bin", "x" * 500)
    write(root, "thing/small.txt", "t\n")
    result = sh.restore(sid)
    assert (root / "thing/data.bin").read_text() == "x" * 500
    assert not (root / "thing/small.txt").exists()
    reasons = {s["path"]: s["reason"] for s in result["skipped"]}
    assert reasons == {"thing/data.bin": "not_backed_up", "thing/": "not_empty"}
    assert result["removed"] == ["thing/small.txt"]


def test_nested_repository_files_are_restored_and_its_git_never_touched(tmp_path):
    root = tmp_path / "p"
    nested = root / "vendor" / "lib"
    write(nested, "lib.c", "int x;\n")
    ugit(nested, "init", "-q")
    ugit(nested, "add", "-A")
    ugit(nested, "commit", "-q", "-m", "v1")
    before, nested_git = manifest(root), tree_digest(nested / ".git")
    sh = Shadow(root)
    sid = sh.snapshot("s")
    write(nested, "lib.c", "int y;\n")
    write(nested, "new.c", "new\n")
    write(nested, ".git/description", "the nested repo's own business\n")
    nested_git_after = tree_digest(nested / ".git")
    result = sh.restore(sid)
    assert manifest(root, skip=("vendor/lib/.git",)) == {
        k: v for k, v in before.items() if not k.startswith("vendor/lib/.git")}
    assert tree_digest(nested / ".git") == nested_git_after != nested_git
    assert result["reverted"] == ["vendor/lib/lib.c"]
    assert result["removed"] == ["vendor/lib/new.c"]


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
    """Correct on a tree of realistic size (the report in the docs gives the timings)."""
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
    assert len(result["reverted"]) == 200 and len(result["removed"]) == 101
    assert sh.changed(sid) == {"modified": [], "added": [], "deleted": []}


def test_edits_to_files_skipped_by_the_stat_memo_are_still_seen(tmp_path, monkeypatch):
    """Once files are a few seconds old a capture stops showing them to git; a
    same-size rewrite, a chmod and another process's capture must all still count.
    (The margin is cut from 3 s to 0.3 s here, so the files age in 0.4 s, not 3.2.)"""
    from moss.tools.shadow import capture

    monkeypatch.setattr(capture, "_RACY_NS", 300_000_000)
    root = tmp_path / "p"
    for i in range(20):
        write(root, f"f{i}.txt", f"content {i:02}\n")
    before = manifest(root)
    sh = Shadow(root)
    sid = sh.snapshot("s")
    time.sleep(0.4)                         # older than the racy margin now
    sh.snapshot("aged")                     # files are now skipped when unchanged
    write(root, "f1.txt", "CONTENT 01\n")   # same size
    (root / "f2.txt").chmod(0o755)
    other = Shadow(root)                    # another process moves the shadow index
    write(root, "f3.txt", "content XX\n")
    other.snapshot("other")
    w = sh.begin_write("w")
    write(root, "f4.txt", "content YY\n")
    assert sh.end_write(w)["changed"] == ["f4.txt"]
    assert sh.changed(sid)["modified"] == ["f1.txt", "f2.txt", "f3.txt", "f4.txt"]
    sh.restore(sid)
    assert manifest(root) == before


def test_the_file_a_write_just_changed_is_checked_by_its_bytes_and_a_hidden_rewrite_still_counts(tmp_path,
                                                                                              monkeypatch):
    """Just after a write, the file it changed is too new for its lstat to prove it unchanged
    (a rewrite in the same timestamp tick keeps it). The next write's "before" capture hashes
    such a file itself instead of starting git: unchanged, the capture starts no git process at
    all; rewritten with the same size while the lstat the capture remembers cannot tell (as on a
    file system whose timestamps are coarse), the new bytes are still what a rollback brings back."""
    from moss.tools.shadow import capture

    root = tmp_path / "p"
    write(root, "a.txt", "one\n")
    write(root, "b.txt", "two\n")
    sh = Shadow(root)
    sh.snapshot("s")
    w = sh.begin_write("w")
    write(root, "a.txt", "ONE\n")
    assert sh.end_write(w)["changed"] == ["a.txt"]

    started = []
    real_run = subprocess.run
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: started.append(a[0]) or real_run(*a, **k))
    w = sh.begin_write("w2")
    assert started == []                    # a.txt is racy, its bytes are the indexed ones
    sh.end_write(w)
    monkeypatch.setattr(subprocess, "run", real_run)

    write(root, "a.txt", "1NE\n")            # same size; make the remembered lstat match it
    memo = sh._memo[1]
    memo["a.txt"] = (capture._stat_key(os.lstat(root / "a.txt")), memo["a.txt"][1])
    after = sh.snapshot("after")
    write(root, "a.txt", "gone\n")
    sh.restore(after)
    assert (root / "a.txt").read_text() == "1NE\n"


def test_stale_git_lock_from_a_killed_run_does_not_block(tmp_path):
    root = tmp_path / "p"
    write(root, "a.txt", "a\n")
    sh = Shadow(root)
    sid = sh.snapshot("s")
    (root / ".moss/shadow.git/index.lock").write_text("")
    write(root, "a.txt", "b\n")
    sh.snapshot("after a crash")
    assert sh.restore(sid)["reverted"] == ["a.txt"]


def shutil_rm(path: Path) -> None:
    import shutil

    shutil.rmtree(path)


# ------------------------------------------------- the issue "Nothing lost, ever", via Lua
#
# Each test drives moss the way a user's script does: `moss @NAME` runs a project script
# from .moss/scripts that brackets real sandboxed shell commands with
# moss.shadow.begin_write/end_write and rolls back with moss.shadow.restore.

WRITE_LUA = """
-- moss @w SESSION CMD: run CMD as one recorded write of SESSION ("-": no session)
moss.access.set("edit")
if moss.args[1] ~= "-" then moss.session.bind(moss.args[1]) end
local w = moss.shadow.begin_write("run " .. moss.args[2])
local r = moss.shell.run(moss.args[2])
local done = moss.shadow.end_write(w)
print(moss.json.encode({ write = w, code = r.code, stderr = r.stderr, changed = done.changed,
  not_captured = done.not_captured }))
"""
EDIT_LUA = """
-- moss @e SESSION PATH TEXT: append TEXT to PATH with moss.edit, as one recorded write
moss.access.set("edit")
if moss.args[1] ~= "-" then moss.session.bind(moss.args[1]) end
local w = moss.shadow.begin_write("edit " .. moss.args[2])
moss.edit.apply({ { target = moss.args[2], action = "append", content = moss.args[3] } })
print(moss.json.encode(moss.shadow.end_write(w)))
"""
SNAP_LUA = """
if moss.args[1] ~= "-" then moss.session.bind(moss.args[1]) end
print(moss.shadow.snapshot("start"))
"""
ROLLBACK_LUA = """
moss.access.set("edit")
if moss.args[1] ~= "-" then moss.session.bind(moss.args[1]) end
print(moss.json.encode(moss.shadow.restore(moss.args[2])))
"""


@pytest.fixture
def user(tmp_path, clean_git_env):
    """A project with the four scripts above, run through the real `moss` CLI."""
    root = tmp_path / "proj"
    root.mkdir()
    p = Project(root, clean_git_env)
    for name, text in (("w", WRITE_LUA), ("e", EDIT_LUA), ("snap", SNAP_LUA),
                       ("rollback", ROLLBACK_LUA)):
        p.script(name, text)
    return p


def last_json(r: subprocess.CompletedProcess) -> dict:
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    return {k: (v if v != {} else []) for k, v in out.items()}   # Lua's {} is a list here


def run_write(user, session: str, cmd: str) -> dict:
    res = last_json(user.moss("@w", session, cmd))
    assert res["code"] == 0, res
    return res


def snap(user, session: str = "-") -> str:
    r = user.moss("@snap", session)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def rollback(user, session: str, sid: str) -> dict:
    return last_json(user.moss("@rollback", session, sid))


@pytest.mark.needs_sandbox
def test_issue2_mv_then_symlink_rollback_loses_nothing(user):
    """`mv src lib && ln -s lib src`, then a rollback: the old code unlinked both and
    lost src/main.py (it looked through the symlink when deciding what to skip)."""
    write(user.root, "src/main.py", "print('main')\n")
    write(user.root, "src/util/helpers.py", "def h(): pass\n")
    before = manifest(user.root)
    sid = snap(user, "s1")
    run_write(user, "s1", "mv src lib && ln -s lib src")
    assert (user.root / "src").is_symlink()
    result = rollback(user, "s1", sid)
    assert manifest(user.root) == before
    assert (user.root / "src/main.py").read_text() == "print('main')\n"
    assert not (user.root / "lib").exists()
    assert result["skipped"] == [] and result["conflicts"] == []
    assert result["restored"] == ["src/main.py", "src/util/", "src/util/helpers.py"]
    assert result["reverted"] == ["src/"]
    assert result["removed"] == ["lib/", "lib/main.py", "lib/util/", "lib/util/helpers.py"]


@pytest.mark.needs_sandbox
def test_issue3_append_then_gitignore_is_reverted(user):
    """A file the agent appended to and then added to .gitignore used to keep the
    change (ignored files were neither captured nor restored)."""
    write(user.root, "notes.txt", "original notes\n")
    write(user.root, ".gitignore", "*.log\n")
    before = manifest(user.root)
    sid = snap(user, "s1")
    edited = last_json(user.moss("@e", "s1", "notes.txt", "agent's addition\n"))
    assert edited["changed"] == ["notes.txt"]
    run_write(user, "s1", "echo notes.txt >> .gitignore")
    result = rollback(user, "s1", sid)
    assert manifest(user.root) == before
    assert (user.root / "notes.txt").read_text() == "original notes\n"
    assert result["reverted"] == [".gitignore", "notes.txt"]


@pytest.mark.needs_sandbox
def test_issue3_overwritten_ignored_env_comes_back(user):
    """A gitignored .env overwritten by a shell command was never captured, so it was
    lost; it is captured before the command now, permissions included."""
    write(user.root, ".gitignore", ".env\n")
    write(user.root, ".env", "API_KEY=the-only-copy\n", mode=0o600)
    before = manifest(user.root)
    sid = snap(user, "s1")
    run_write(user, "s1", "echo API_KEY= > .env && chmod 644 .env")
    result = rollback(user, "s1", sid)
    assert (user.root / ".env").read_text() == "API_KEY=the-only-copy\n"
    assert stat.S_IMODE((user.root / ".env").stat().st_mode) == 0o600
    assert manifest(user.root) == before
    assert result["reverted"] == [".env"]


@pytest.mark.needs_sandbox
def test_issue3_empty_directories_are_restored_and_removed(user):
    write(user.root, "keep.txt", "k\n")
    (user.root / "cache/empty").mkdir(parents=True)
    (user.root / "uploads").mkdir()
    before = manifest(user.root)
    sid = snap(user, "s1")
    run_write(user, "s1", "rm -r cache uploads && mkdir -p made/by/agent")
    result = rollback(user, "s1", sid)
    assert manifest(user.root) == before
    assert result["restored"] == ["cache/", "cache/empty/", "uploads/"]
    assert result["removed"] == ["made/", "made/by/", "made/by/agent/"]


@pytest.mark.needs_sandbox
def test_issue3_file_over_5mb_is_restored(user):
    data = os.urandom(BIG)
    write(user.root, "model.bin", data)
    sid = snap(user, "s1")
    run_write(user, "s1", "echo truncated > model.bin")
    result = rollback(user, "s1", sid)
    assert (user.root / "model.bin").read_bytes() == data
    assert result["reverted"] == ["model.bin"] and result["skipped"] == []


@pytest.mark.needs_sandbox
def test_issue3_what_cannot_be_restored_is_listed_by_path_and_reason(user):
    """Instead of "N file(s) reverted": every path, and each one left alone with why.
    [shadow] max_file_mb comes from the project config."""
    user.write(".moss/config.toml", "[shadow]\nmax_file_mb = 1\n")
    write(user.root, "small.txt", "s\n")
    write(user.root, "data.bin", os.urandom(2 * 1024 * 1024))   # over the 1 MB cap
    sid = snap(user, "s1")
    w = run_write(user, "s1", "echo changed > small.txt && echo gone > data.bin && touch new")
    # Told at the time of the write, not only at the rollback.
    assert w["changed"] == ["data.bin", "new", "small.txt"]
    assert [(n["path"], n["reason"]) for n in w["not_captured"]] == [("data.bin", "too_large")]
    result = rollback(user, "s1", sid)
    assert result["reverted"] == ["small.txt"] and result["removed"] == ["new"]
    assert [(s["path"], s["reason"]) for s in result["skipped"]] == [("data.bin", "too_large")]
    assert "max_file_mb" in result["skipped"][0]["detail"]
    assert (user.root / "data.bin").read_text() == "gone\n"      # left alone, and said so


def test_bad_shadow_config_is_a_config_error(user):
    user.write(".moss/config.toml", "[shadow]\nmax_total_mb = \"lots\"\n")
    r = user.moss("@snap", "-")
    assert r.returncode == 2 and "max_total_mb" in r.stderr


@pytest.mark.needs_sandbox
def test_issue4_a_rollback_keeps_another_sessions_finished_work(user):
    """Sessions A and B in one project: B edits b.py and answers; A's later rollback
    reverts only A's own change (the old code reverted b.py too)."""
    write(user.root, "a.py", "a = 1\n")
    write(user.root, "b.py", "b = 1\n")
    sid_a = snap(user, "sessA")
    run_write(user, "sessB", "echo 'b = 2  # B, finished' > b.py")
    run_write(user, "sessA", "echo 'a = 2  # A, failing' > a.py && touch a_junk.txt")
    result = rollback(user, "sessA", sid_a)
    assert (user.root / "a.py").read_text() == "a = 1\n"
    assert not (user.root / "a_junk.txt").exists()
    assert (user.root / "b.py").read_text() == "b = 2  # B, finished\n"
    assert result["scope"] == "session"
    assert result["reverted"] == ["a.py"] and result["removed"] == ["a_junk.txt"]
    assert result["conflicts"] == []


@pytest.mark.needs_sandbox
def test_issue4_a_path_both_sessions_changed_is_a_conflict_not_overwritten(user):
    """A touched b.py, then B changed it and finished: A's rollback keeps B's b.py and
    names it as a conflict with B."""
    write(user.root, "b.py", "b = 1\n")
    sid_a = snap(user, "sessA")
    run_write(user, "sessA", "echo 'b = 10  # A' > b.py")
    run_write(user, "sessB", "echo 'b = 2  # B' > b.py")
    result = rollback(user, "sessA", sid_a)
    assert (user.root / "b.py").read_text() == "b = 2  # B\n"
    assert result["conflicts"] == [{"path": "b.py", "session": "sessB",
                                    "reason": "session sessB changed it after this "
                                              "session did"}]
    assert result["reverted"] == []


# ------------------------------------------------- ownership, via the Python API


def test_session_rollback_goes_back_to_before_its_own_first_change(tmp_path):
    """B changed b.py first, A changed it later: A's rollback brings back B's version,
    not the one at A's snapshot."""
    root = tmp_path / "p"
    write(root, "b.py", "v0\n")
    sh = Shadow(root)
    sid = sh.snapshot("A start", session="A")
    w = sh.begin_write("B edits", session="B")
    write(root, "b.py", "v1 by B\n")
    sh.end_write(w)
    w = sh.begin_write("A edits", session="A")
    write(root, "b.py", "v2 by A\n")
    sh.end_write(w)
    result = sh.restore(sid, session="A")
    assert (root / "b.py").read_text() == "v1 by B\n"
    assert result["reverted"] == ["b.py"] and result["conflicts"] == []


def test_a_hand_edit_after_the_sessions_write_is_a_conflict(tmp_path):
    root = tmp_path / "p"
    write(root, "f.py", "v0\n")
    sh = Shadow(root)
    sid = sh.snapshot("start", session="A")
    w = sh.begin_write("A edits", session="A")
    write(root, "f.py", "v1 by A\n")
    sh.end_write(w)
    write(root, "f.py", "v2 by the user, by hand\n")
    result = sh.restore(sid, session="A")
    assert (root / "f.py").read_text() == "v2 by the user, by hand\n"
    assert [(c["path"], c.get("session")) for c in result["conflicts"]] == [("f.py", None)]


def test_an_unclosed_write_is_still_owned(tmp_path):
    """A command that crashed before end_write: its changes still belong to the session
    (closed at the next begin_write or at the rollback)."""
    root = tmp_path / "p"
    write(root, "f.py", "v0\n")
    sh = Shadow(root)
    sid = sh.snapshot("start", session="A")
    sh.begin_write("crashes", session="A")
    write(root, "f.py", "half-written\n")
    write(root, "g.py", "new\n")
    # A new process (the session resumed) does the rollback.
    result = Shadow(root).restore(sid, session="A")
    assert (root / "f.py").read_text() == "v0\n" and not (root / "g.py").exists()
    assert result["scope"] == "session"


def test_a_journal_line_torn_by_a_killed_process_costs_nothing_after_it(tmp_path):
    """The record after a torn line must survive: were A's write lost, its rollback
    would take the user's later hand edit of g.py for A's and revert it."""
    root = tmp_path / "p"
    write(root, "f.py", "v0\n")
    write(root, "g.py", "g0\n")
    sh = Shadow(root)
    sid = sh.snapshot("start", session="A")
    w = sh.begin_write("edit", session="A")
    write(root, "f.py", "v1\n")
    with open(root / ".moss/shadow.git/moss-journal.jsonl", "a") as f:
        f.write('{"op": "write", "session": "B", "pa')      # another process, killed
    sh.end_write(w)
    write(root, "g.py", "g1 by the user\n")
    result = sh.restore(sid, session="A")
    assert result["reverted"] == ["f.py"]
    assert (root / "g.py").read_text() == "g1 by the user\n"


def test_end_write_reports_changes_and_is_idempotent(tmp_path):
    root = tmp_path / "p"
    write(root, "f.py", "v0\n")
    sh = Shadow(root)
    w = sh.begin_write("edit", session="A")
    write(root, "f.py", "v1\n")
    (root / "d").mkdir()
    first = sh.end_write(w)
    assert first["changed"] == ["d/", "f.py"] and first["not_captured"] == []
    assert sh.end_write(w) == first
    assert Shadow(root).end_write(w[:12]) == first


def test_undoing_a_session_rollback_with_its_backup(tmp_path):
    root = tmp_path / "p"
    write(root, "f.py", "v0\n")
    sh = Shadow(root)
    sid = sh.snapshot("start", session="A")
    w = sh.begin_write("edit", session="A")
    write(root, "f.py", "v1\n")
    write(root, "new.py", "n\n")
    sh.end_write(w)
    after_edit = manifest(root)
    r = sh.restore(sid, session="A")
    assert (root / "f.py").read_text() == "v0\n"
    sh.restore(r["backup"], session="A")
    assert manifest(root) == after_edit


def test_session_without_recorded_writes_restores_everything(tmp_path):
    """A script that only calls snapshot() (no write brackets) keeps today's behaviour."""
    root = tmp_path / "p"
    write(root, "f.py", "v0\n")
    sh = Shadow(root)
    sid = sh.snapshot("start", session="old-style")
    write(root, "f.py", "v1\n")
    result = sh.restore(sid, session="old-style")
    assert result["scope"] == "all" and result["reverted"] == ["f.py"]
    # A second rollback later in the same session still covers everything.
    write(root, "f.py", "v2\n")
    write(root, "g.py", "new\n")
    again = sh.restore(sid, session="old-style")
    assert again["scope"] == "all" and again["removed"] == ["g.py"]
    assert (root / "f.py").read_text() == "v0\n"
