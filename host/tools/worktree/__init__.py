"""An isolated child agent's own copy of the tree, and bringing its change back.

A ``Worktree`` is one child's copy: made when the child starts (``create``), found again by
the child's id when a tree resumes (``adopt``), compared with where it started (``changes``:
the patch and the changed paths), merged into the tree it came from (``merge``) or dropped
(``discard``). Nothing here knows what an agent is; host/api/agents.py uses it.

The package, one job a module
    ``homes``    where copies live (the user's cache or the system temp folder), each one's
                 record, and the copies a crash left behind (``moss sessions clean``)
    ``copy``     making the copy: reflinks, copies, or hard links for a child that never writes
    ``changes``  the starting point and the patch, made as `moss batch` makes its patches
    ``merge``    the three-way merge into a tree, path by path, never into .moss/ or .git
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from ...errors import MossError
from . import changes, copy, homes, merge as merging

__all__ = ["Worktree", "homes"]


class Worktree:
    """One child's copy: ``tree`` (the folder it works in), ``home`` (what holds it),
    ``record`` (how it was made and where it stands: ``state`` working, merged, discarded)."""

    def __init__(self, home: Path, record: dict):
        self.home = Path(home)
        self.record = record

    @property
    def tree(self) -> Path:
        return self.home / homes.TREE

    @property
    def objects(self) -> Path:
        """The starting point's objects (borrowing the parent's shadow store's in turn)."""
        return self.home / changes.GIT_DIR / "objects"

    @property
    def state(self) -> str:
        return self.record.get("state", "working")

    @classmethod
    def create(cls, *, project: Path, source: Path, child: str, parent: str, may_write: bool,
               borrow: Path | None = None, env=os.environ) -> "Worktree":
        """Copy `source` (the parent's tree) for `child` of `project` and record its start.
        `may_write`: whether the child can ever write (else hard links are used where they can
        be); `borrow`: the parent's shadow objects (so recording the start stores nothing)."""
        t0 = time.monotonic()
        home = homes.new_home(project, child, env)
        try:
            made = copy.make(source, home / homes.TREE, may_write=may_write)
            base = changes.start(home / homes.TREE, home, borrow)
        except BaseException:
            homes.remove(home)
            raise
        record = homes.claim(home, {
            "project": str(project), "source": str(source), "child": child, "parent": parent,
            "state": "working", "base": base, "may_write": may_write, "started": round(time.time(), 3),
            "copy": {k: made[k] for k in ("strategy", "counts", "files", "links", "dirs", "bytes", "seconds")},
            "skipped": made["skipped"][:100], "seconds": round(time.monotonic() - t0, 3)})
        homes.write_record(home, record)
        return cls(home, record)

    @classmethod
    def adopt(cls, project: Path, child: str, env=os.environ) -> "Worktree | None":
        """The copy of `child` left by an earlier run of this tree (this process works in it
        from now on); None when there is none."""
        home = homes.home_of(project, child, env)
        if home is None:
            return None
        record = homes.read_record(home)
        if record is None or record.get("child") != child or not (home / homes.TREE).is_dir():
            return None
        record = homes.claim(home, record)
        homes.write_record(home, record)
        return cls(home, record)

    @classmethod
    def gone(cls, project: Path, child: str, env=os.environ) -> "Worktree":
        """A child whose copy is gone (merged, discarded, cleaned): its tree is a private path
        that does not exist, so anything it would touch fails, never reaching another tree."""
        home = homes.base_for(project, env) / homes.project_key(project) / child
        return cls(home, {"child": child, "state": "gone"})

    def _require(self, what: str) -> None:
        if self.state != "working" or not self.tree.is_dir():
            raise MossError(f"cannot {what} child {self.record.get('child')}: its copy was already "
                            f"{self.state if self.state != 'working' else 'removed'}", kind="usage")

    def changes(self) -> dict:
        """The copy against where it started: {patch, patch_cut, patch_stat, changes, changed}."""
        self._require("compare")
        return changes.diff(self.tree, self.home)

    def merge(self, target: Path, got: dict | None = None) -> dict:
        """Merge the child's change (`got`: what ``changes`` returned, else taken now) into
        `target`; then the copy is removed. {applied, conflicts, changed}."""
        self._require("merge")
        got = got if got is not None else self.changes()
        result = merging.merge(self.home, self.tree, Path(target), got["changes"])
        result["changed"] = got["changed"]
        self._end("merged")
        return result

    def discard(self) -> int:
        """Drop the copy; the bytes it held."""
        self._require("discard")
        return self._end("discarded")

    def _end(self, state: str) -> int:
        self.record["state"] = state
        return homes.remove(self.home)

    def summary(self) -> dict:
        """What the parent's log and `moss.agents.info` say of it."""
        made = self.record.get("copy") or {}
        return {"state": self.state, "strategy": made.get("strategy"), "files": made.get("files"),
                "bytes": made.get("bytes"), "seconds": self.record.get("seconds"), "home": str(self.home)}
