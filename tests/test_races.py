"""A folder swapped for a link while moss works on it never leads moss outside the project.

Each race of issue 22 (High items 3 and 4): a helper process (tests/swapper.py) exchanges a
real folder of the project with a symlink to a folder outside, with renameat2(RENAME_EXCHANGE),
as fast as it can, as a detached run at `edit` access could. Meanwhile moss edits, writes,
rolls back or quarantines git metadata in that folder, as root. Whatever the timing, nothing
outside is written, moved or deleted; each operation either does its work inside the project
or fails with one line naming the link.
"""

from __future__ import annotations

import os
import subprocess

import pytest
from swapper import swapping

from moss.errors import MossError
from moss.tools.gitguard import GitGuard
from moss.tools.shadow import Shadow

KEY = "-----BEGIN OPENSSH PRIVATE KEY----- not-really-a-key\n"


def listing(folder) -> dict:
    """Every file and folder under `folder` (links not followed) with its bytes: what a user
    would notice changed."""
    out = {}
    for d, dirs, files in os.walk(folder):
        for name in dirs + files:
            p = os.path.join(d, name)
            rel = os.path.relpath(p, folder)
            if os.path.islink(p):
                out[rel] = ("link", os.readlink(p))
            elif os.path.isdir(p):
                out[rel] = ("dir",)
            else:
                with open(p, "rb") as f:
                    out[rel] = ("file", f.read())
    return out


@pytest.fixture(autouse=True)
def user_data(tmp_path, monkeypatch):
    """moss in this process keeps user state (a snapshot store's ownership record) in a temp
    folder, never in the real ~/.local/share."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))


@pytest.fixture
def swapped(project, tmp_path):
    """The project with a folder `d` and a link `d-link` to a folder outside (`victim`), which
    a swapper exchanges; the outside folder holds a file of its own."""
    victim = tmp_path / "outside" / "victim"
    victim.mkdir(parents=True)
    (victim / "keep.txt").write_text("the user's own file\n")
    (project.root / "d").mkdir()
    (project.root / "d" / "log.txt").write_text("start\n")
    os.symlink(victim, project.root / "d-link")
    return project, victim


def test_edits_and_fs_writes_into_a_folder_swapped_for_a_link_never_land_outside(swapped):
    """moss.edit.apply (create and append) and moss.fs.write into `d`, 300 times, while `d`
    keeps turning into a link to a folder outside: the outside folder is exactly as it was,
    and each write either landed in the project or failed with one line naming the link."""
    project, victim = swapped
    before = listing(victim)
    project.script("writer", """
        moss.access.set("edit")
        local wrote, refused = 0, 0
        for i = 1, 300 do
          local ok, e
          if i % 3 == 0 then
            ok, e = pcall(moss.fs.write, "d/w" .. i .. ".txt", "x")
          elseif i % 3 == 1 then
            ok, e = pcall(moss.edit.apply, { { target = "d/e" .. i .. ".txt", action = "create", content = "x" } })
          else
            ok, e = pcall(moss.edit.apply, { { target = "d/log.txt", action = "append", content = "line " .. i } })
          end
          if ok then wrote = wrote + 1
          else
            refused = refused + 1
            print("refused\\t" .. moss.error_kind(e) .. "\\t" .. (tostring(e.message or e):gsub("\\n.*", "")))
          end
        end
        print(wrote, refused)
    """)
    with swapping(project.root / "d", project.root / "d-link"):
        r = project.moss("@writer", timeout=300)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert listing(victim) == before
    *refusals, counts = r.stdout.splitlines()
    wrote, refused = map(int, counts.split())
    assert wrote + refused == 300 and wrote > 0
    assert len(refusals) == refused
    for line in refusals:
        _, kind, message = line.split("\t")
        # confine saw the link (it leads outside) or saw it change while it resolved the path,
        # the walk met it (a symlink on the way), the edit's own check saw the file change, or
        # the file was not in `d` when the edit looked (`d` was the link then)
        assert kind in ("denied", "conflict", "not_found"), line
        assert any(why in message for why in ("symlink", "outside the project", "changed on disk",
                                              "changed while moss resolved it", "no file at the start of")), line


def test_a_rollback_into_a_folder_swapped_for_a_link_never_writes_outside(swapped):
    """A shadow restore puts `d/log.txt` back again and again while `d` keeps turning into a
    link: it writes only inside the project (reverted, or skipped as obstructed, or refused
    in one line because the tree kept changing), and the outside folder stays as it was."""
    project, victim = swapped
    root = project.root
    sh = Shadow(root)
    sid = sh.snapshot("before")
    before = listing(victim)
    outcomes = set()
    with swapping(root / "d", root / "d-link"):
        for i in range(25):
            _change_log_in_the_real_folder(root, f"changed {i}\n")
            try:
                result = sh.restore(sid)
            except MossError as e:  # the capture before the restore saw the tree change
                assert e.kind == "io" and "kept changing while it was captured" in e.message, e.message
                outcomes.add("refused")
                continue
            outcomes.add("reverted" if result["reverted"] else "skipped" if result["skipped"] else "none")
            for s in result["skipped"]:  # what it could not put back is named, with why
                assert s["reason"] in ("unreadable", "not_backed_up", "not_empty", "obstructed", "failed"), s
    assert listing(victim) == before
    assert outcomes & {"reverted", "skipped"}


def _change_log_in_the_real_folder(root, text: str) -> None:
    """Rewrite log.txt in whichever of `d` and `d-link` is the real folder now (opened without
    following a link, so the test itself never writes outside)."""
    for name in ("d", "d-link"):
        try:
            dfd = os.open(root / name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fd = os.open("log.txt", os.O_WRONLY | os.O_TRUNC | os.O_CREAT, 0o644, dir_fd=dfd)
            os.write(fd, text.encode())
            os.close(fd)
            return
        except OSError:
            continue  # removed by the last restore meanwhile
        finally:
            os.close(dfd)


def _plant_bare_repo(dfd: int, name: str) -> None:
    """`git init --bare NAME` in the folder `dfd`, made through the descriptor (so it lands in
    the real folder whatever the swapper did to its name)."""
    try:
        os.mkdir(name, dir_fd=dfd)
    except FileExistsError:
        return  # still there: moss left it alone last time
    fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dfd)
    try:
        os.mkdir("objects", dir_fd=fd)
        os.mkdir("refs", dir_fd=fd)
        h = os.open("HEAD", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=fd)
        os.write(h, b"ref: refs/heads/main\n")
        os.close(h)
        c = os.open("config", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=fd)
        os.write(c, b"[core]\n\tfsmonitor = touch /tmp/pwned\n")
        os.close(c)
    finally:
        os.close(fd)


def test_quarantine_never_moves_a_home_folder_into_the_project(tmp_path):
    """The agent makes a decoy bare repository `x/.ssh` while a background process swaps `x`
    for a link to a home folder. The guard that moves new git metadata into quarantine moves
    only decoys: the home's `.ssh` stays where it is, with its key, and nothing of it reaches
    the project; a decoy it cannot move safely is reported in one line."""
    root = tmp_path / "project"
    (root / "x").mkdir(parents=True)
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text(KEY)
    (home / ".ssh" / "config").write_text("Host *\n")
    before = listing(home)
    os.symlink(home, root / "x-link")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    guard = GitGuard(root)
    assert guard.check() == []  # the baseline: the project's own .git
    xfd = os.open(root / "x", os.O_RDONLY | os.O_DIRECTORY)
    notes: list[str] = []
    try:
        with swapping(root / "x", root / "x-link"):
            for _ in range(300):
                _plant_bare_repo(xfd, ".ssh")
                notes += guard.check()
    finally:
        os.close(xfd)
    assert listing(home) == before
    hits = [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs
            if not os.path.islink(os.path.join(d, f)) and KEY.encode() in open(os.path.join(d, f), "rb").read()]
    assert hits == []
    # the real folder goes by both names in turn; each finding is one line
    assert all("\n" not in n and n.startswith(("x/.ssh: a bare git repository appeared",
                                              "x-link/.ssh: a bare git repository appeared")) for n in notes), notes
    moved = [n for n in notes if "so moss moved it to .moss/agent/quarantine/" in n]
    assert moved, notes
    for q in (root / ".moss" / "agent" / "quarantine").iterdir():
        (held,) = os.listdir(q)
        assert held in ("x__.ssh.quarantined", "x-link__.ssh.quarantined")
        assert sorted(os.listdir(q / held)) == ["HEAD.disabled", "config.disabled", "objects", "refs"]
