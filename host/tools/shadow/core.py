"""The ``Shadow`` class: snapshots, write brackets, list, diff, changed and restore.

What each operation does is told in the package docstring (host/tools/shadow/__init__.py);
the layers it stands on: capture, journal, restore, store.
"""

from __future__ import annotations

import builtins
import os
import time
from pathlib import Path

from ...errors import MossError
from .capture import Capturing
from .git import _BlobReader
from .journal import Journaling, _end_summary, _session_plan
from .model import (BACKUPS_REF, SNAPSHOTS_REF, WRITES_REF, _check_label, _differences, _enc,
                    _show)
from .restore import Restoring
from .store import _parse_meta


class Shadow(Capturing, Journaling, Restoring):
    """Captures of ``root`` in ``root/.moss/shadow.git``, and the ownership journal.

    >>> sh = Shadow(Path("."))
    >>> sid = sh.snapshot("session start", session="abc")
    >>> w = sh.begin_write("run make", session="abc"); ...; sh.end_write(w)
    >>> sh.restore(sid, session="abc")   # {"reverted", "removed", "restored", "skipped",
    ...                                  #  "conflicts", "backup", "scope"}
    """

    # ------------------------------------------------------------------ public API

    def snapshot(self, label: str = "", *, session: str | None = None) -> str:
        """Capture the current tree as a restore point; returns its id (40 hex digits)."""
        _check_label(label)
        with self._locked(create=True):
            cap = self._capture()
            return self._commit(cap, SNAPSHOTS_REF, label, "snapshot", session)

    def begin_write(self, label: str = "", *, session: str | None = None) -> str:
        """Capture before something that may write; returns the write id (a snapshot id).

        A write of the same session left open in this process (no ``end_write``) is
        closed first, with this capture as its end, so its changes stay owned.
        """
        _check_label(label)
        with self._locked(create=True):
            cap = self._capture()
            wid = self._commit(cap, SNAPSHOTS_REF, label, "write", session)
            for old, rec in list(self._open.items()):
                if rec.get("session") == session:
                    self._close(old, cap, auto=True)
            rec = {"op": "begin", "id": wid, "session": session, "label": label,
                   "begin": cap.seq, "t0": round(time.time(), 3)}
            self._append(rec)
            self._open[wid] = rec
            return wid

    def end_write(self, wid: str) -> dict:
        """Capture after a write and record, for its session, the paths it changed.

        Returns ``{"id", "post", "changed": [...], "not_captured": [{path, reason,
        detail}]}``: ``changed`` are the paths that differ from the capture taken by
        ``begin_write``; ``not_captured`` those among them that a rollback cannot put
        back (their old content was never captured), or cannot remove (their new content
        is not captured). Ending a write twice returns the first result.
        """
        with self._locked(create=False):
            wid = self._resolve(wid)
            done = self._find_end(wid)
            if done is not None:
                return _end_summary(done)
            if wid not in self._open:
                begin = next((r for r in self._journal()
                              if r.get("op") == "begin" and r.get("id") == wid), None)
                if begin is None:
                    raise MossError(f"shadow: {wid} was not opened with begin_write",
                                    kind="not_found")
                self._open[wid] = begin
            cap = self._capture()
            return _end_summary(self._close(wid, cap, auto=False))

    def list(self) -> list[dict]:
        """Snapshots and write starts, oldest first: ``{"id", "label", "time", "files"}``."""
        if not self._has_repo():
            return []
        with self._locked(create=False):
            if not self._has_repo() or self._ref(SNAPSHOTS_REF) is None:
                return []
            out = self._git("log", "-z", "--reverse", "--format=%H%x1f%ct%x1f%B",
                            SNAPSHOTS_REF, "--")
        result = []
        for record in out.split("\0"):
            if not record.strip():
                continue
            sid, ctime, body = record.lstrip("\n").split("\x1f", 2)
            meta = _parse_meta(body)
            result.append({"id": sid, "label": meta.get("label", ""),
                           "time": int(ctime), "files": meta.get("files", 0)})
        return result

    def diff(self, sid: str, paths: builtins.list[str] | None = None) -> str:  # `list` is a method here
        """Unified diff from capture ``sid`` to the current tree (new files included).

        ``paths`` (relative to the root, or absolute inside it) limits the diff; a
        directory covers everything below it. Binary files show as "Binary files ...
        differ". Uncaptured files are not compared (``changed`` lists them).
        """
        specs = [self._relpath(p) for p in (paths or [])]
        with self._locked(create=False):
            commit = self._resolve(sid)
            old = self._load(commit)
            cap = self._capture()
            env = dict(self._env, GIT_LITERAL_PATHSPECS="1")
            return self._git("diff", "--no-color", "--no-ext-diff", "--no-textconv",
                             old.tree, cap.tree, "--", *specs, env=env)

    def changed(self, sid: str) -> dict:
        """Paths that differ between capture ``sid`` and the current tree.

        ``{"modified": [...], "added": [...], "deleted": [...]}``, each sorted; a change
        of permission bits or of kind (file, symlink, directory) counts as modified;
        directories end with ``/``.
        """
        with self._locked(create=False):
            old = self._load(self._resolve(sid))
            cap = self._capture()
        result: dict[str, list[str]] = {"modified": [], "added": [], "deleted": []}
        for p, (a, b) in sorted(_differences(old.entries, cap.entries).items()):
            key = "added" if a is None else "deleted" if b is None else "modified"
            result[key].append(_show(p, b or a))
        return result

    def restore(self, sid: str, *, session: str | None = None) -> dict:
        """Put back what changed since capture ``sid`` (see the module docstring).

        Returns ``{"reverted": [...], "removed": [...], "restored": [...], "skipped":
        [{path, reason, detail}], "conflicts": [{path, session, reason}], "backup": id,
        "scope": "session" | "all"}``. ``scope`` is ``"session"`` when ``session`` has
        recorded writes (only its own changes are reverted), else ``"all"``.
        """
        with self._locked(create=False):
            commit = self._resolve(sid)
            target = self._load(commit)
            cur = self._capture()
            backup = self._commit(cur, BACKUPS_REF, f"before restore to {commit}", "backup",
                                  session)
            # A write of this session left open (a crash, a script without end_write)
            # ends here, so what it changed is owned. Without a session, only this
            # process's own open writes: another script's may still be running.
            journal = self._journal()
            ended = {r.get("id") for r in journal if r.get("op") == "write"}
            for r in list(journal):
                if (r.get("op") == "begin" and r.get("session") == session
                        and r.get("id") not in ended
                        and (session is not None or r.get("id") in self._open)):
                    self._open.setdefault(r["id"], r)
                    journal.append(self._close(r["id"], cur, auto=True))

            conflicts: list[dict] = []
            # A session that never bracketed a write (a script that only snapshots)
            # gets the whole-tree restore it always had; its own restores don't count.
            if session is not None and any(
                    r.get("session") == session and r.get("op") == "write"
                    for r in journal):
                scope = "session"
                plan, conflicts = _session_plan(journal, session, target.seq, cur.entries)
            else:
                scope = "all"
                plan = {p: a for p, (a, b) in
                        _differences(target.entries, cur.entries).items()}

            with _BlobReader(self) as blobs:
                result = self._apply(plan, cur.entries, blobs)

            # Verify, and record the restore as a write of this session: what it put
            # back is its change now (another session's later rollback must not undo it
            # silently).
            post = self._capture()
            post_id = self._commit(post, WRITES_REF, f"after restore to {commit}",
                                   "restore", session)
            done = {s["path"].rstrip("/") for s in result["skipped"]}
            for p in sorted(set(result.pop("acted"))):
                if post.entries.get(p) != plan[p] and p not in done:
                    result["skipped"].append({"path": _show(p, plan[p] or cur.entries.get(p)),
                                              "reason": "failed",
                                              "detail": "it changed again while restoring"})
            paths = {p: [_enc(a), _enc(b)] for p, (a, b) in
                     _differences(cur.entries, post.entries).items() if p in plan}
            self._append({"op": "restore", "id": backup, "post": post_id,
                          "session": session, "label": f"restore {commit}",
                          "begin": cur.seq, "end": post.seq, "t1": round(time.time(), 3),
                          "paths": paths})
            result.update(conflicts=conflicts, backup=backup, scope=scope)
            return result
    def _relpath(self, p: str) -> str:
        if not isinstance(p, str) or not p:
            raise MossError("shadow: paths must be non-empty strings", kind="usage")
        path = Path(p)
        full = path if path.is_absolute() else self.root / path
        full = Path(os.path.normpath(full))
        if full != self.root and self.root not in full.parents:
            raise MossError(f"shadow: {p!r} is outside the project", kind="denied")
        rel = full.relative_to(self.root).as_posix()
        return rel if rel != "." else "."

