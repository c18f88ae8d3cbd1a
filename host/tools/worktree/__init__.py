"""An isolated child agent's own copy of the tree, and bringing its change back.

A ``Worktree`` is one child's copy: made when the child starts (``create``), found again by
the child's id when a tree resumes (``adopt``), compared with where it started (``changes``:
the patch and the changed paths), merged into the tree it came from (``merge``) or dropped
(``discard``). Nothing here knows what an agent is; host/api/agents.py uses it.

Making a copy has two steps. ``create`` lays the tree out at once (folders, links, and each
file as a reflink where the file system can, else as a hard link), so the child starts
reading right away. Then, in a thread of its own, the copy is *completed*: every hard link a
child that may write got is replaced by a copy of its own (``copy.materialize``), and the
copy's starting point is recorded (``changes.start``, borrowing the objects of the parent's
snapshot store, brought up to date first by ``prime``). Until that is done nothing may write
in the copy: every writer of moss's (edits, file writes, rollbacks, shell commands, merges)
calls ``wait_ready(tree)`` first, so no write, in place or not, can reach a file the parent
still shares. A crash before the end leaves the record saying so; ``adopt`` completes it.

The package, one job a module
    ``homes``    where copies live (the user's cache or the system temp folder), each one's
                 record, and the copies a crash left behind (``moss sessions clean``)
    ``copy``     making the copy: reflinks, hard links (replaced by copies for a writer), copies
    ``changes``  the starting point and the patch, made as `moss batch` makes its patches
    ``merge``    the three-way merge into a tree, path by path, never into .moss/ or .git
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Callable

from ...errors import MossError
from . import changes, copy, homes, merge as merging

__all__ = ["Worktree", "homes", "wait_ready"]

_completing: dict[str, "Worktree"] = {}   # copies being completed, by their tree's path
_lock = threading.Lock()


def wait_ready(tree: Path | str, cancelled: Callable[[], bool] | None = None) -> None:
    """Before anything writes in `tree`: wait until it is a whole copy, if it is one being
    completed (else at once). Fails (kind io) when it could not be completed."""
    wt = _completing.get(str(tree))
    if wt is not None:
        wt.wait_ready(cancelled)


def _primed(prime: Callable[[], Path | None]) -> Path | None:
    """What `prime` lends; nothing when it fails (the starting point then stores its own)."""
    try:
        return prime()
    except Exception:  # a cost, not a fault: the copy is whole either way
        return None


class Worktree:
    """One child's copy: ``tree`` (the folder it works in), ``home`` (what holds it),
    ``record`` (how it was made and where it stands: ``state`` working, merged, discarded)."""

    def __init__(self, home: Path, record: dict):
        self.home = Path(home)
        self.record = record
        self._ready = threading.Event()
        self._stop = threading.Event()
        self._error: str | None = None
        self._thread: threading.Thread | None = None
        if record.get("whole", True):
            self._ready.set()

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
               prime: Callable[[], Path | None] | None = None, env=os.environ) -> "Worktree":
        """Copy `source` (the parent's tree) for `child` of `project` and record its start.
        `may_write`: whether the child can ever write (else hard links are used where they can
        be); `prime`: called first thing when the copy is completed, the objects folder (the
        parent's shadow store's, just brought up to date) whose objects the starting point
        borrows, so that recording it stores nothing."""
        t0 = time.monotonic()
        home = homes.new_home(project, child, env)
        try:
            changes.borrow(home, None)
            made = copy.make(source, home / homes.TREE, may_write=may_write, defer=True)
        except BaseException:
            homes.remove(home)
            raise
        record = homes.claim(home, {
            "project": str(project), "source": str(source), "child": child, "parent": parent,
            "state": "working", "whole": False, "may_write": may_write, "started": round(time.time(), 3),
            "copy": {**{k: made[k] for k in ("counts", "files", "links", "dirs", "bytes", "seconds")},
                     # a writer's links are copied in the background before it may write
                     "strategy": "hardlink-then-copy" if made["linked"] else made["strategy"]},
            "skipped": made["skipped"][:100], "seconds": round(time.monotonic() - t0, 3)})
        homes.write_record(home, record)
        wt = cls(home, record)
        wt._complete_later(made["linked"], prime)
        return wt

    def _complete_later(self, linked: list[str], prime: Callable[[], Path | None] | None = None) -> None:
        """Complete the copy in a thread of its own; writers wait for it (`wait_ready`)."""
        with _lock:
            _completing[str(self.tree)] = self
        self._thread = threading.Thread(target=self._complete, args=(linked, prime), daemon=True,
                                        name=f"moss-copy-{self.record.get('child')}")
        self._thread.start()

    def _complete(self, linked: list[str], prime: Callable[[], Path | None] | None) -> None:
        t0 = time.monotonic()
        try:
            if prime is not None:
                changes.borrow(self.home, _primed(prime))
            hold = os.environ.get("MOSS_TEST_COPY_HOLD")
            if hold:  # test-only: a slow completion, to show that writers wait for it (tests/test_isolate.py)
                time.sleep(float(hold))
            unshared = copy.materialize(self.tree, linked, self.home / "unshare", self._stop) if linked else 0
            if self._stop.is_set():
                return
            self.record["base"] = changes.start(self.tree, self.home)
            self.record.update(whole=True, completed_s=round(time.monotonic() - t0, 3), unshared=unshared)
            homes.write_record(self.home, self.record)
        except BaseException as e:  # whatever stopped it, nothing may write in the copy
            self._error = getattr(e, "message", None) or str(e) or type(e).__name__
        finally:
            with _lock:
                _completing.pop(str(self.tree), None)
            self._ready.set()

    def wait_ready(self, cancelled: Callable[[], bool] | None = None) -> None:
        """Until the copy is whole (see the module docstring)."""
        while not self._ready.wait(0.25):
            if cancelled is not None and cancelled():
                raise MossError("interrupted", kind="interrupted")
        if self._error:
            raise MossError(f"child {self.record.get('child')}'s copy of the tree could not be completed "
                            f"({self._error}); nothing may be written in it", kind="io")

    @classmethod
    def adopt(cls, project: Path, child: str, env=os.environ, *, may_write: bool = False) -> "Worktree | None":
        """The copy of `child` left by an earlier run of this tree (this process works in it
        from now on); None when there is none. `may_write`: whether the child can write now.
        A copy made for a child that could not (its files hard links to the parent's) is
        completed as a writer's is before anything may write in it: resumed with more access,
        an append in place would otherwise change the parent's file through the link."""
        home = homes.home_of(project, child, env)
        if home is None:
            return None
        record = homes.read_record(home)
        if record is None or record.get("child") != child or not (home / homes.TREE).is_dir():
            return None
        record = homes.claim(home, record)
        if may_write and not record.get("may_write"):
            record.update(may_write=True, whole=False)
        homes.write_record(home, record)
        wt = cls(home, record)
        if not record.get("whole", True):  # a crash cut its completion short, or it may write now: done now
            wt._complete_later(copy.shared_files(wt.tree) if record.get("may_write") else [])
        return wt

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
        self.wait_ready()
        if not self.record.get("may_write"):
            # A child that could not write changed nothing; its copy's files are hard links to
            # the parent's, so what differs from its start is the parent's own in-place edits.
            return {"patch": "", "patch_cut": False, "changes": [], "changed": [],
                    "patch_stat": {"files": 0, "added": 0, "removed": 0, "binary": 0, "bytes": 0}}
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
        """Drop the copy (its completion stopped first); the bytes of its files."""
        self._require("discard")
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        return self._end("discarded")

    def _end(self, state: str) -> int:
        """The copy's end: its home taken out of use now, deleted in the background; the
        bytes of its files."""
        self.record["state"] = state
        homes.remove_later(self.home)
        return int((self.record.get("copy") or {}).get("bytes") or 0)

    def summary(self) -> dict:
        """What the parent's log and `moss.agents.info` say of it."""
        made = self.record.get("copy") or {}
        return {"state": self.state, "strategy": made.get("strategy"), "files": made.get("files"),
                "bytes": made.get("bytes"), "seconds": self.record.get("seconds"), "home": str(self.home),
                "whole": self._ready.is_set() and not self._error}
