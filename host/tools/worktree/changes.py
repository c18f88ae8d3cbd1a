"""A child's change: its copy now against the tree it started from, made as `moss batch`
makes an attempt's patch (host/tools/patch.py).

When the copy is made, ``start`` indexes it in a throwaway repository beside it
(``HOME/patch.git``): that tree is the child's starting point, the base of its patch and of
the three-way merge. The repository borrows the parent's shadow store's objects
(``objects/info/alternates``): the parent's files are captured there already, so indexing the
copy stores nothing new (it only hashes). ``diff`` indexes the copy again and compares:
binary files are named ("Binary files a/x and b/x differ"), deletions included; left out are
the copy's ``.moss/``, every ``.git`` and what the tree's ``.gitignore`` files ignore (build
output, caches), as in a batch patch. ``blobs`` reads what a path held at the start.
"""

from __future__ import annotations

import os
from pathlib import Path

from ...errors import MossError
from .. import patch as batch

GIT_DIR = "patch.git"


class ChangeError(MossError):
    pass


def _git(home: Path, copy: Path, *args: str, text: bool = True, input: bytes | None = None):
    try:
        return batch.git(home / GIT_DIR, copy, *args, text=text, input=input)
    except batch.PatchError as e:
        raise ChangeError(f"the child's change: {e}", kind="io") from None


def borrow(home: Path, objects: Path | None) -> None:
    """Before `start`: the repository may use `objects` (the parent's shadow store's) instead
    of storing its own; so may the child's own shadow store, which borrows this repository's
    objects from its first write on (taken once the copy is whole)."""
    info = home / GIT_DIR / "objects" / "info"
    info.mkdir(parents=True, exist_ok=True)
    if objects is not None and objects.is_dir():
        (info / "alternates").write_text(str(objects.resolve()) + "\n")


def start(copy: Path, home: Path) -> str:
    """Index the copy as it starts (what `borrow` lent is not stored again); the base tree's id."""
    try:
        batch.snapshot(copy, home)
    except batch.PatchError as e:
        raise ChangeError(f"cannot record where the child starts: {e}", kind="io") from None
    return base(home)


def base(home: Path) -> str:
    return (home / GIT_DIR / "moss-base").read_text().strip()


def diff(copy: Path, home: Path) -> dict:
    """``{patch, patch_cut, patch_stat, changes: [{path, status}], changed: [path]}``; status is
    git's: A added, M modified, D deleted, T changed kind (a file became a link)."""
    try:
        got = batch.diff(copy, home / GIT_DIR)
    except batch.PatchError as e:
        raise ChangeError(f"the child's change: {e}", kind="io") from None
    out = _git(home, copy, "diff", "--cached", "--name-status", "-z", "--no-renames", base(home),
               "--", ".", *batch.EXCLUDE, text=False)
    parts = out.split(b"\0")
    changes = []
    for status, path in zip(parts[0::2], parts[1::2]):
        if status:
            changes.append({"path": os.fsdecode(path), "status": status.decode()[:1]})
    return {**got, "changes": changes, "changed": [c["path"] for c in changes]}


def entries(home: Path, copy: Path, paths: list[str]) -> tuple[dict, dict]:
    """What each of `paths` was at the start and is in the copy (as last indexed by
    ``diff``): two maps path -> (git mode, blob id)."""
    if not paths:
        return {}, {}
    want = set(paths)
    old = _parse(_git(home, copy, "ls-tree", "-r", "-z", "--full-tree", base(home), text=False), tree=True)
    new = _parse(_git(home, copy, "ls-files", "-s", "-z", text=False), tree=False)
    return ({p: v for p, v in old.items() if p in want}, {p: v for p, v in new.items() if p in want})


def _parse(out: bytes, *, tree: bool) -> dict:
    found = {}
    for rec in out.split(b"\0"):
        if not rec:
            continue
        head, path = rec.split(b"\t", 1)
        fields = head.split(b" ")
        mode, sha = (fields[0], fields[2]) if tree else (fields[0], fields[1])
        found[os.fsdecode(path)] = (mode.decode(), sha.decode())
    return found


def blobs(home: Path, copy: Path, ids: set[str]) -> dict[str, bytes]:
    """The contents of blob `ids`, one git process for all of them."""
    wanted = sorted(i for i in ids if i)
    if not wanted:
        return {}
    out = _git(home, copy, "cat-file", "--batch", input="".join(i + "\n" for i in wanted).encode(), text=False)
    found, pos = {}, 0
    while pos < len(out):
        end = out.index(b"\n", pos)
        head = out[pos:end].decode().split(" ")
        if len(head) != 3:  # "<id> missing"
            pos = end + 1
            continue
        sha, n = head[0], int(head[2])
        found[sha] = out[end + 1:end + 1 + n]
        pos = end + 1 + n + 1
    return found
