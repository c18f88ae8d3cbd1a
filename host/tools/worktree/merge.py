"""Merging a child's change into a tree: path by path, three-way, against where it started.

For each path the child changed, three versions: *base* (what the path held when the child
started: its copy's starting point), *child* (what its copy holds now) and *tree* (what the
tree being merged into holds now).

- the tree still holds the base (nobody else changed it): the child's version is put there;
- the tree already holds the child's version: nothing to do;
- both changed a text file: ``git merge-file``; a clean merge is written, a conflicting one is
  *not*: the file is left as it is in the tree and the conflict is reported with its hunks
  (the regions as ``<<<<<<< tree`` / ``=======`` / ``>>>>>>> child`` would mark them, with
  a few lines around each);
- anything else both changed (a binary file, a link, a file one side deleted, a path both
  added differently) is a conflict, reported with its reason, the tree's version kept.

Never merged, whatever the child's copy holds: ``.moss/`` at the top (moss's own: config,
scripts, sessions) and anything named ``.git`` (reason ``refused``). Writes go through
host/tools/safefs.py from the tree's root descriptor: a file is replaced atomically, never
written through a link, and a path with a link on its way is reported (``blocked``), not
followed. Permission bits: a file the child modified keeps the tree's (a ``.env`` at 0600
stays so), with the executable bit as the child left it; a new file gets 0644 or 0755.
"""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
from pathlib import Path

from ...errors import MossError
from .. import safefs
from ..safefs import UnsafePath
from . import changes as ch

MAX_BYTES = 64 * 1024 * 1024   # a file larger than this is not compared or merged (a conflict)
CONTEXT = 3                    # lines shown around a conflict region
MAX_HUNKS = 20
MAX_HUNK_CHARS = 4000
FILE, EXEC, LINK, GITLINK = "100644", "100755", "120000", "160000"


def refused(path: str) -> str | None:
    """Why the merge never writes `path`, or None."""
    parts = path.split("/")
    if parts[0] == ".moss":
        return "moss's own folder (.moss/) is never merged"
    if ".git" in parts:
        return "git metadata (.git) is never merged"
    if any(p in ("", ".", "..") for p in parts):
        return "not a plain path inside the tree"
    return None


def merge(home: Path, copy: Path, target: Path, changed: list[dict]) -> dict:
    """Merge the child's `changed` paths ({path, status}, from changes.diff) into `target`.
    Returns ``{applied: [path], conflicts: [{path, reason, detail?, hunks?}]}``."""
    applied: list[str] = []
    conflicts: list[dict] = []
    paths = []
    for c in changed:
        never = refused(c["path"])
        if never:
            conflicts.append({"path": c["path"], "reason": "refused", "detail": never})
        else:
            paths.append(c["path"])
    old, new = ch.entries(home, copy, paths)
    content = ch.blobs(home, copy, {e[1] for e in (*old.values(), *new.values()) if e[0] != GITLINK})
    scratch = home / "merge"
    scratch.mkdir(exist_ok=True)
    with safefs.Tree(target) as tree:
        # deletions first (a folder or link the child replaced by a file must be gone before
        # the file is written), each path judged just before it is changed
        for p in sorted(paths, key=lambda p: (new.get(p) is not None, p)):
            plan = _plan(tree, p, old.get(p), new.get(p), content, scratch)
            why: dict | None = plan[1] if plan[0] == "conflict" else None
            if why is None:
                blocked = _apply(tree, p, plan, copy)
                why = {"reason": "blocked", "detail": blocked} if blocked else None
            if why:
                conflicts.append({"path": p, **why})
            else:
                applied.append(p)
    return {"applied": sorted(applied), "conflicts": sorted(conflicts, key=lambda c: c["path"])}


def _blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _ours(tree: safefs.Tree, path: str):
    """What the tree holds at `path`: None (nothing), (mode, blob id, bytes, perm) for a file
    or a link, or ("odd", why) for what cannot be compared."""
    try:
        st = tree.lstat(path)
    except (UnsafePath, NotADirectoryError) as e:
        return ("odd", getattr(e, "message", None) or "a link or a file on its way")
    if st is None:
        return None
    if stat.S_ISLNK(st.st_mode):
        with tree.parent(path) as (dfd, name):
            data = os.fsencode(os.readlink(name, dir_fd=dfd))
        return (LINK, _blob_id(data), data, 0)
    if not stat.S_ISREG(st.st_mode):
        return ("odd", "a folder" if stat.S_ISDIR(st.st_mode) else "not a regular file")
    if st.st_size > MAX_BYTES:
        return ("odd", f"larger than {MAX_BYTES // (1024 * 1024)} MB")
    data = tree.read_bytes(path, MAX_BYTES)
    mode = EXEC if st.st_mode & 0o100 else FILE
    return (mode, _blob_id(data), data, stat.S_IMODE(st.st_mode))


def _plan(tree, path: str, base, child, content: dict, scratch: Path):
    """What to do at `path`: ("write", mode, data, perm) / ("delete",) / ("same",) /
    ("conflict", {reason, detail?, hunks?})."""
    if GITLINK in ((base or ("",))[0], (child or ("",))[0]):
        return ("conflict", {"reason": "nested repository", "detail": "a nested git repository is not merged"})
    ours = _ours(tree, path)
    if ours is not None and ours[0] == "odd":
        return ("conflict", {"reason": "blocked", "detail": ours[1]})
    now = None if ours is None else (ours[0], ours[1])
    if now == child:
        return ("same",)
    if now == base:  # nobody else changed it: the child's version goes there
        if child is None:
            return ("delete",)
        perm = ours[3] if ours is not None else 0
        return ("write", child[0], content[child[1]], perm)
    if base is None:
        return ("conflict", {"reason": "added in both", "detail": "the tree has a different file there"})
    if child is None:
        return ("conflict", {"reason": "deleted by the child", "detail": "the tree changed it since"})
    if ours is None:
        return ("conflict", {"reason": "deleted in the tree", "detail": "the child changed it"})
    if LINK in (base[0], child[0], ours[0]):
        return ("conflict", {"reason": "both changed", "detail": "a symbolic link"})
    return _three_way(path, ours, base, child, content, scratch)


def _three_way(path: str, ours, base, child, content: dict, scratch: Path):
    files = []
    for i, data in enumerate((ours[2], content[base[1]], content[child[1]])):
        f = scratch / f"{i}"
        f.write_bytes(data)
        files.append(str(f))
    r = subprocess.run(["git", "merge-file", "-p", "-L", "tree", "-L", "start", "-L", "child", *files],
                       capture_output=True, env={"PATH": os.environ.get("PATH", ""), "LC_ALL": "C",
                                                 "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull})
    if r.returncode < 0 or r.returncode >= 128 or b"\0" in r.stdout[:8192]:
        return ("conflict", {"reason": "both changed", "detail": "a binary file"})
    if r.returncode > 0:
        return ("conflict", {"reason": "both changed", "detail": f"{r.returncode} conflicting region(s)",
                             "hunks": hunks(r.stdout.decode("utf-8", "replace"))})
    mode = child[0] if base[0] != child[0] else ours[0]
    return ("write", mode, r.stdout, ours[3])


def hunks(text: str) -> list[str]:
    """The conflict regions of a merge-file output, each with CONTEXT lines around it, headed
    by the line it starts at in the tree's file."""
    lines = text.split("\n")
    out: list[str] = []
    i, tree_line = 0, 1
    while i < len(lines) and len(out) < MAX_HUNKS:
        if not lines[i].startswith("<<<<<<< "):
            tree_line += 1
            i += 1
            continue
        j, mine, in_tree = i + 1, 0, True
        while j < len(lines) and not lines[j].startswith(">>>>>>> "):
            if lines[j].startswith("======="):
                in_tree = False
            elif in_tree:
                mine += 1
            j += 1
        body = "\n".join([f"@@ tree line {tree_line} @@", *lines[max(0, i - CONTEXT):min(len(lines), j + 1 + CONTEXT)]])
        out.append(body if len(body) <= MAX_HUNK_CHARS else body[:MAX_HUNK_CHARS] + "\n…")
        tree_line += mine
        i = j + 1
    return out


def _apply(tree: safefs.Tree, path: str, plan, copy: Path) -> str | None:
    """Carry out one plan; None, or why it could not be done (the tree left as it was)."""
    kind = plan[0]
    try:
        if kind == "same":
            return None
        if kind == "delete":
            tree.unlink(path)
            _prune(tree, path, copy)
            return None
        _, mode, data, perm = plan
        if mode == LINK:
            with tree.parent(path, create=True) as (dfd, name):
                safefs.replace_at(dfd, name, data, symlink=True, sync=False)
            return None
        if perm:  # the tree's permission bits, the executable bit as the child left it
            perm = (perm | 0o111) if mode == EXEC else (perm & ~0o111)
        else:
            perm = 0o755 if mode == EXEC else 0o644
        tree.write_atomic(path, data, perm, create_dirs=True, sync=False)
        return None
    except UnsafePath as e:
        return e.message
    except (MossError, OSError) as e:
        return getattr(e, "message", None) or getattr(e, "strerror", None) or str(e)


def _prune(tree: safefs.Tree, path: str, copy: Path) -> None:
    """After a deletion: the folders above it the child no longer has, if now empty."""
    parts = path.split("/")[:-1]
    while parts:
        rel = "/".join(parts)
        if os.path.lexists(copy / rel):
            return
        try:
            with tree.parent(rel) as (dfd, name):
                os.rmdir(name, dir_fd=dfd)
        except OSError:
            return
        parts.pop()
