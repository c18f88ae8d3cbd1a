"""Shadow captures of the working tree, and who changed what since, outside the user's git.

A *capture* records the whole tree under ROOT at one moment as a commit in a private git
repository at ``ROOT/.moss/shadow.git``: every regular file (bytes and permission bits),
every symlink (its target, never followed), every directory (empty ones included), and
ignored files and files of nested repositories like any other. Left out: ``.moss/`` at
the root and anything named ``.git`` (never captured, never restored into). A file's
content is left out ("uncaptured", with its size, times and inode kept so a change is
still noticed) when it is larger than ``max_file_bytes``, when the capture already holds
``max_total_bytes`` (non-ignored files and files captured last time go first, then the
smallest), when it cannot be read, or when it is not a file (a fifo, a socket).

Every git command runs with ``GIT_DIR``, ``GIT_WORK_TREE`` and ``GIT_INDEX_FILE`` pointing
at the shadow repository, with system and global config switched off and a fixed author,
so the user's ``.git`` is never written and no user identity is needed. Captures are
incremental: the shadow index is git's stat cache, so an unchanged file is not re-read,
and a file whose lstat has not changed since git last read it (a few seconds after its
last change) is not even shown to git; identical contents are stored once.

Three ways to capture
    ``snapshot(label)``: a restore point (listed by ``list()``).
    ``begin_write(label)`` / ``end_write(id)``: brackets around anything that may write
    (an edit, a shell command). ``begin_write`` is a snapshot too (its id can be passed
    to ``restore``); ``end_write`` captures again and appends to an *ownership journal*
    (``.moss/shadow.git/moss-journal.jsonl``) which paths that write changed, by which
    session, with each path's entry before and after.

Restore
    ``restore(id)`` with no session: every path that differs from the capture is put
    back as it was (files, symlinks, executable and other permission bits, empty
    directories), created paths are removed. With a session (``session=``, the bound
    session id in Lua) that has recorded writes: only paths that session changed in
    writes after ``id``, each back to its state before the session's first change to
    it; a path another session (or anything outside recorded writes) changed after
    that is a *conflict*: reported, not overwritten.

    A restore never follows a symlink (every directory on the way is opened with
    ``O_NOFOLLOW``), never writes under ``.git`` or ``.moss/``, and first records the
    current tree as a *backup* (returned as ``"backup"``; ``restore(backup)`` undoes the
    restore). Content the backup does not hold (uncaptured now) is never overwritten or
    deleted. Whatever it cannot put back is listed in ``"skipped"`` as ``{path, reason,
    detail}``; ``reason`` is one of ``too_large``, ``over_total``, ``unreadable``,
    ``special`` (the old content was never captured), ``not_backed_up`` (the content
    there now is not captured, so it is kept), ``not_empty`` (a directory to remove
    holds something that is not being removed), ``obstructed`` (a parent is missing or
    is not a directory), ``failed`` (an OS error, or the path changed meanwhile).
    Directories are listed with a trailing ``/``.

The store is moss's own
    A repository can ship a ``.moss/shadow.git`` of its own, with links out of the project
    where moss writes (``info/exclude -> ~/.bashrc``) or a config that runs commands. moss
    uses only a store it made for this project: one holding its token (``moss-owner``,
    whose sha256 and that of the config git wrote are kept outside every repository, in
    ``$XDG_DATA_HOME/moss/shadow/``), and nothing but folders and regular files. Any
    other store is moved, never deleted, to ``.moss/agent/quarantine/`` with one warning
    line, and a new one is made. Every file moss itself reads or writes in the store goes
    through moss.tools.safefs (never through a link), and git runs against it with
    ``_SAFE_CONFIG`` on its command line, no system or global config, and no hooks.

Concurrency: every operation holds an exclusive ``flock`` on
``.moss/shadow.git/moss.lock``, so processes and threads using the same root take turns.
Writes of two sessions that overlap in time are both attributed to both sessions (git
cannot tell who wrote a byte); a rollback then reports those paths as conflicts.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import hmac
import json
import os
import secrets
import shutil
import stat
import subprocess
import time
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from moss.errors import MossError
from moss.tools import safefs
from moss.tools.safefs import UnsafePath

SNAPSHOTS_REF = "refs/heads/snapshots"
BACKUPS_REF = "refs/moss/backups"
WRITES_REF = "refs/moss/writes"
FORMAT = "2"
MB = 1024 * 1024
DEFAULT_MAX_FILE = 50 * MB
DEFAULT_MAX_TOTAL = 200 * MB

_STORE = ".moss/shadow.git"     # relative to the root: every file moss touches in it goes
                                # through safefs (from a held root descriptor, no links)
_OWNER = "moss-owner"           # a random token; its sha256 is kept outside the project
_JOURNAL_LIMIT = 1024 * MB
_SYMLINK = 0o120000
_EXEC = 0o100755
_RACY_NS = 3_000_000_000     # a file changed this close to git reading it is read again
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# Only to reach a directory (no read permission needed); O_NOFOLLOW: never through a link.
_PATH_FLAGS = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

# Settings given on every command line. Command-line config beats the repository's own
# config file, so these hold even if .moss/shadow.git/config was tampered with: no
# filters, no line-ending conversion, no fsmonitor or hook program, no signing.
_SAFE_CONFIG = (
    "core.autocrlf=false",
    "core.safecrlf=false",
    "core.symlinks=true",
    "core.fileMode=true",
    "core.fsmonitor=false",
    "core.untrackedCache=false",
    "core.hooksPath=/dev/null",
    "core.attributesFile=/dev/null",
    "core.sparseCheckout=false",
    "core.splitIndex=false",
    "core.bare=false",
    "commit.gpgSign=false",
    "gc.autoDetach=false",
    "advice.addEmbeddedRepo=false",
    "advice.addIgnoredFile=false",
    "color.ui=false",
    "diff.noprefix=false",
    "diff.mnemonicPrefix=false",
    "diff.relative=false",
    "protocol.allow=never",
)

# $GIT_DIR/info/attributes takes precedence over every .gitattributes: store and restore
# bytes exactly (no eol conversion, no clean/smudge filters such as git-lfs, no ident,
# no re-encoding).
_ATTRIBUTES = "* -text -eol -crlf -filter -ident -working-tree-encoding\n"

# Used only to tell which files are ignored (they go after the others when a capture
# reaches max_total_bytes); ignored files are captured all the same.
_EXCLUDE_HEAD = (
    "# Written by moss (host/tools/shadow.py); rewritten on use, edits are lost.\n"
    "/.moss/\n"
    ".git\n"
)

_AUTHOR = {
    "GIT_AUTHOR_NAME": "moss",
    "GIT_AUTHOR_EMAIL": "moss@localhost",
    "GIT_COMMITTER_NAME": "moss",
    "GIT_COMMITTER_EMAIL": "moss@localhost",
}

_UNCAPTURED = {
    "too_large": "its content was not captured: {size} is over [shadow] max_file_mb",
    "over_total": "its content was not captured: the capture had reached [shadow] max_total_mb",
    "unreadable": "it could not be read when captured",
    "special": "it is not a regular file, symlink or directory",
}


class Shadow:
    """Captures of ``root`` in ``root/.moss/shadow.git``, and the ownership journal.

    >>> sh = Shadow(Path("."))
    >>> sid = sh.snapshot("session start", session="abc")
    >>> w = sh.begin_write("run make", session="abc"); ...; sh.end_write(w)
    >>> sh.restore(sid, session="abc")   # {"reverted", "removed", "restored", "skipped",
    ...                                  #  "conflicts", "backup", "scope"}
    """

    def __init__(self, root: Path | str, *, max_file_bytes: int = DEFAULT_MAX_FILE,
                 max_total_bytes: int = DEFAULT_MAX_TOTAL, lock_timeout: float = 60.0,
                 notify=None):
        root_path = Path(root)
        if not root_path.is_dir():
            raise MossError(f"shadow: project root {str(root)!r} is not a directory",
                            kind="not_found")
        for name, value in (("max_file_bytes", max_file_bytes),
                            ("max_total_bytes", max_total_bytes)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise MossError(f"shadow: {name} must be a non-negative integer",
                                kind="usage")
        self.root = root_path.resolve()
        self.max_file_bytes = max_file_bytes
        self.max_total_bytes = max_total_bytes
        self.lock_timeout = lock_timeout
        self.git_dir = self.root / ".moss" / "shadow.git"
        self.journal_path = self.git_dir / "moss-journal.jsonl"
        self._tree = safefs.tree(self.root)
        self._notify = notify
        self._verified = False
        self._git_bin = shutil.which("git")
        if self._git_bin is None:
            raise MossError("shadow: the `git` program is not installed or not on PATH",
                            kind="config")
        self._env = self._make_env()
        self._excludes_file: str | None = None
        self._prepared = False
        self._index_cache: tuple | None = None     # (index file key, index, tree)
        self._loaded: dict[str, "_Capture"] = {}
        self._open: dict[str, dict] = {}     # write id -> begin record (this process)
        self._commits = 0
        self._sha1 = True
        self._memo: tuple | None = None      # (index key, path -> (lstat key, fed at))

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

    def diff(self, sid: str, paths: list[str] | None = None) -> str:
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

    # ------------------------------------------------------------------ capture

    def _capture(self) -> "_Capture":
        for _attempt in range(3):
            try:
                return self._capture_once()
            except _Raced as e:
                last = e
                self._index_cache = self._memo = None
        raise MossError(f"shadow: the tree kept changing while it was captured ({last})",
                        kind="io")

    def _capture_once(self) -> "_Capture":
        files, dirs, odd, nested = self._walk()
        prev = self._read_index(cached=True)
        key0 = self._index_cache[0]
        keep, uncaptured = self._select(files, prev, nested)
        uncaptured.update(odd)

        kept = set(keep)
        drop = [p for p in prev if p not in kept]
        keys = {p: _stat_key(files[p]) for p in keep}
        feed = self._to_feed(keep, keys, prev, key0)
        started = time.time_ns()
        if drop:
            self._git_bytes("update-index", "-z", "--force-remove", "--stdin",
                            input=b"".join(os.fsencode(p) + b"\0" for p in drop))
        if feed:
            # bigFileThreshold=1 streams new contents into one pack per call instead of
            # one loose object file each (the first capture of 5k files: 1 s, not 5).
            proc = self._git_bytes("-c", "core.bigFileThreshold=1", "update-index", "-z",
                                   "--add", "--replace", "--remove", "--stdin", check=False,
                                   input=b"".join(os.fsencode(p) + b"\0" for p in feed))
            if proc.returncode != 0:
                raise _Raced(proc.stderr.decode(errors="replace").strip())
        cache = self._index_cache
        if cache[2] and cache[0] == self._index_key():
            index, tree = prev, cache[2]            # git left the index as it was
        else:
            tree = self._git("write-tree").strip()  # (this rewrites the index too)
            if key0 is not None and len(feed) <= 256 and sum(map(len, feed)) < 100_000:
                # Only what was fed or dropped can have changed (we hold the lock).
                index = dict(prev)
                for p in drop:
                    index.pop(p, None)
                index.update(self._ls_files(feed))
                self._index_cache = (self._index_key(), index, tree)
            else:
                index = self._read_index(cached=False)
                self._index_cache = (self._index_cache[0], index, tree)
        memo = self._memo[1] if self._memo and self._memo[0] == key0 else {}
        fed = set(feed)
        self._memo = (self._index_cache[0], {
            p: (keys[p], started if p in fed else memo[p][1]) for p in keep})

        entries: dict[str, tuple] = {}
        perms: dict[str, int] = {}
        for p in keep:
            got = index.get(p)
            if got is None:
                raise _Raced(f"{p} vanished")
            mode, sha = got
            st = files[p]
            if mode == _SYMLINK:
                entries[p] = ("l", sha)
            else:
                perm = stat.S_IMODE(st.st_mode)
                entries[p] = ("f", perm, sha)
                if perm != _default_perm(mode):
                    perms[p] = perm
        for d, perm in dirs.items():
            entries[d] = ("d", perm)
        for p, (reason, sig) in uncaptured.items():
            entries[p] = ("u", reason, *sig)
        meta = {"format": int(FORMAT), "dirs": dirs, "perms": perms,
                "uncaptured": {p: [reason, *sig] for p, (reason, sig) in uncaptured.items()}}
        return _Capture(tree, meta, entries, len(keep))

    def _walk(self) -> tuple[dict, dict, dict, set]:
        """Everything under the root, never following a symlink: regular files and
        symlinks (path -> lstat), directories (path -> permission bits), what cannot be
        captured (path -> (reason, signature)), and directories holding a ``.git``."""
        files: dict[str, os.stat_result] = {}
        dirs: dict[str, int] = {}
        odd: dict[str, tuple] = {}
        nested: set[str] = set()
        check_read = os.geteuid() != 0

        def scan(fd: int, prefix: str) -> bool:
            try:
                with os.scandir(fd) as it:
                    found = list(it)
            except OSError:
                return False
            for e in found:
                name = e.name
                if name == ".git":
                    if prefix:
                        nested.add(prefix[:-1])
                    continue
                if not prefix and name == ".moss":
                    continue
                rel = prefix + name
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue                    # gone meanwhile
                mode = st.st_mode
                if stat.S_ISDIR(mode):
                    try:
                        child = os.open(name, _DIR_FLAGS, dir_fd=fd)
                    except OSError:
                        odd[rel] = ("unreadable", _sig(st))
                        continue
                    try:
                        if scan(child, rel + "/"):
                            dirs[rel] = stat.S_IMODE(mode)
                        else:
                            odd[rel] = ("unreadable", _sig(st))
                    finally:
                        os.close(child)
                elif stat.S_ISREG(mode):
                    if check_read and not os.access(name, os.R_OK, dir_fd=fd):
                        odd[rel] = ("unreadable", _sig(st))
                    else:
                        files[rel] = st
                elif stat.S_ISLNK(mode):
                    files[rel] = st
                else:
                    odd[rel] = ("special", _sig(st))
            return True

        fd = os.open(self.root, _DIR_FLAGS)
        try:
            scan(fd, "")
        except RecursionError:
            raise MossError("shadow: the directory tree is too deep to capture",
                            kind="io") from None
        finally:
            os.close(fd)
        return files, dirs, odd, nested

    def _select(self, files: dict, prev: dict, nested: set) -> tuple[list, dict]:
        """Which files' contents to capture, and why the others are not."""
        uncaptured: dict[str, tuple] = {}
        keep = []
        for p, st in files.items():
            if stat.S_ISREG(st.st_mode) and st.st_size > self.max_file_bytes:
                uncaptured[p] = ("too_large", _sig(st))
            else:
                keep.append(p)
        if sum(files[p].st_size for p in keep) <= self.max_total_bytes:
            return keep, uncaptured
        # Over the total: what was captured last time goes first (already stored, so
        # free, and the same file does not flip between captured and not), then the
        # project's own files, then ignored files and nested repositories; smallest
        # first within each.
        ignored = self._ignored()

        def low(p: str) -> bool:
            if p in ignored:
                return True
            parts = p.split("/")
            for i in range(1, len(parts)):
                d = "/".join(parts[:i])
                if d + "/" in ignored or d in nested:
                    return True
            return False

        def rank(p: str) -> tuple:
            return (0 if p in prev else 2 if low(p) else 1, files[p].st_size, p)

        chosen, used = [], 0
        for p in sorted(keep, key=rank):
            size = files[p].st_size
            if used + size <= self.max_total_bytes:
                chosen.append(p)
                used += size
            else:
                uncaptured[p] = ("over_total", _sig(files[p]))
        return chosen, uncaptured

    def _ignored(self) -> set[str]:
        """Paths the user's ignore rules ignore (directories as ``dir/``), read against
        an empty index so that captured ignored files count too."""
        env = dict(self._env, GIT_INDEX_FILE=str(self.git_dir / "moss-no-index"))
        out = self._git_bytes("ls-files", "-z", "--others", "--ignored",
                              "--exclude-standard", "--directory", env=env).stdout
        return {os.fsdecode(p) for p in out.split(b"\0") if p}

    def _index_key(self) -> tuple | None:
        st = self._tree.lstat(f"{_STORE}/index")
        if st is None:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)

    def _read_index(self, cached: bool) -> dict[str, tuple[int, str]]:
        """The shadow index as path -> (git mode, blob id); reused while the index file
        is unchanged (git replaces the file whenever it changes it, and another process
        may have)."""
        key = self._index_key()
        if cached and self._index_cache and self._index_cache[0] == key:
            return self._index_cache[1]
        index: dict = {}
        if key is not None:
            index = _parse_stage(self._git_bytes("ls-files", "-z", "--stage").stdout)
        self._index_cache = (key, index, None)
        return index

    def _to_feed(self, keep: list, keys: dict, prev: dict, key0) -> list[str]:
        """The captured paths git must look at: all of them, less those whose lstat is
        what it was when git last read them, long enough after their last change that
        no same-timestamp rewrite can hide (git's own "racy" check stays in charge of
        the others)."""
        memo = self._memo[1] if self._memo and self._memo[0] == key0 else {}
        out = []
        for p in keep:
            m = memo.get(p)
            if m is not None and m[0] == keys[p] and p in prev:
                sk = m[0]
                if sk[1] < m[1] - _RACY_NS and sk[2] < m[1] - _RACY_NS:
                    continue
            out.append(p)
        return out

    def _ls_files(self, paths: list[str]) -> dict[str, tuple[int, str]]:
        if not paths:
            return {}
        env = dict(self._env, GIT_LITERAL_PATHSPECS="1")
        out = self._git_bytes("ls-files", "-z", "--stage", "--", *paths, env=env).stdout
        return _parse_stage(out)

    def _commit(self, cap: "_Capture", ref: str, label: str, kind: str,
                session: str | None) -> str:
        """Store a capture as a commit on ``ref``; sets ``cap.seq``, returns the id.

        The three small objects (metadata blob, wrapper tree, commit) are written here
        rather than by three git processes: a capture runs twice per write, and process
        starts are most of its cost on a small tree."""
        cap.seq = self._next_seq()
        meta_blob = self._object("blob", _dumps(cap.meta).encode())
        wrapper = self._object("tree", b"40000 files\0" + bytes.fromhex(cap.tree)
                               + b"100644 meta\0" + bytes.fromhex(meta_blob))
        subject = " ".join(label.replace("\0", " ").split())[:72] or kind
        message = (f"{subject}\n\nMoss-Kind: {kind}\nMoss-Label: {json.dumps(label)}\n"
                   f"Moss-Files: {cap.files}\nMoss-Seq: {cap.seq}\nMoss-Format: {FORMAT}\n")
        if session:
            message += f"Moss-Session: {json.dumps(session)}\n"
        parent = self._read_ref(ref)
        who = f"moss <moss@localhost> {int(time.time())} +0000"
        body = f"tree {wrapper}\n" + (f"parent {parent}\n" if parent else "") + \
            f"author {who}\ncommitter {who}\n\n{message}"
        commit = self._object("commit", body.encode(errors="surrogateescape"))
        self._update_ref(ref, commit, parent)
        cap.commit = commit
        self._remember(commit, cap)
        self._commits += 1
        if self._commits % 50 == 1:         # cheap, but a process: not on every capture
            self._git("gc", "--auto", "--quiet", check=False)
        return commit

    def _object(self, kind: str, body: bytes) -> str:
        """Write one loose object the way git does; returns its id."""
        if not self._sha1:
            return self._git("hash-object", "-w", "-t", kind, "--literally", "--stdin",
                             input=body).strip()
        data = f"{kind} {len(body)}\0".encode() + body
        sha = hashlib.sha1(data).hexdigest()
        rel = f"{_STORE}/objects/{sha[:2]}/{sha[2:]}"
        if self._tree.lstat(rel) is None:
            self._tree.write_atomic(rel, zlib.compress(data, 1), 0o444, sync=False)
        return sha

    def _read_ref(self, ref: str) -> str | None:
        """A ref's commit id, read from the files (no process; we hold the lock)."""
        try:
            value = self._tree.read_text(f"{_STORE}/{ref}", 4096).strip()
            if len(value) == 40:
                return value
        except (FileNotFoundError, NotADirectoryError):
            pass
        except OSError:
            return self._ref(ref)
        try:
            for line in self._tree.read_text(f"{_STORE}/packed-refs").splitlines():
                sha, _, name = line.partition(" ")
                if name == ref and len(sha) == 40:
                    return sha
        except FileNotFoundError:
            pass
        return None

    def _load(self, commit: str) -> "_Capture":
        """A stored capture (files, directories, permissions, uncaptured paths)."""
        if commit in self._loaded:
            return self._loaded[commit]
        meta_msg = _parse_meta(self._git("cat-file", "commit", commit).split("\n\n", 1)[-1])
        if meta_msg.get("format") != FORMAT:
            raise MossError(f"shadow: {commit[:12]} was taken by an older moss and holds "
                            "no directories, permissions or ignored files, so it cannot "
                            "be restored exactly; take a new snapshot", kind="not_found")
        meta = json.loads(self._git("cat-file", "blob", f"{commit}:meta"))
        tree = self._git("rev-parse", "--verify", f"{commit}:files").strip()
        perms = meta.get("perms", {})
        entries: dict[str, tuple] = {}
        out = self._git_bytes("ls-tree", "-r", "-z", tree).stdout
        files = 0
        for rec in out.split(b"\0"):
            if not rec:
                continue
            head, path = rec.split(b"\t", 1)
            mode_s, _kind, sha = head.decode().split(" ")
            p, mode = os.fsdecode(path), int(mode_s, 8)
            files += 1
            if mode == _SYMLINK:
                entries[p] = ("l", sha)
            else:
                entries[p] = ("f", perms.get(p, _default_perm(mode)), sha)
        for d, perm in meta.get("dirs", {}).items():
            entries[d] = ("d", perm)
        for p, u in meta.get("uncaptured", {}).items():
            entries[p] = ("u", *u)
        cap = _Capture(tree, meta, entries, files)
        cap.seq, cap.commit = meta_msg.get("seq", 0), commit
        self._remember(commit, cap)
        return cap

    def _remember(self, commit: str, cap: "_Capture") -> None:
        """Keep a few recent captures in memory (an open write needs its start)."""
        self._loaded.pop(commit, None)
        self._loaded[commit] = cap
        while len(self._loaded) > 4:
            self._loaded.pop(next(iter(self._loaded)))

    # ------------------------------------------------------------------ journal

    def _close(self, wid: str, post: "_Capture", auto: bool) -> dict:
        """End the open write ``wid`` with capture ``post``; append and return its record."""
        begin = self._open.pop(wid)
        pre = self._load(wid)
        post_id = post.commit or self._commit(post, WRITES_REF,
                                              f"after {begin.get('label', '')}", "write",
                                              begin.get("session"))
        paths = {p: [_enc(a), _enc(b)] for p, (a, b) in
                 _differences(pre.entries, post.entries).items()}
        rec = {"op": "write", "id": wid, "post": post_id, "session": begin.get("session"),
               "label": begin.get("label", ""), "begin": begin["begin"], "end": post.seq,
               "t0": begin.get("t0"), "t1": round(time.time(), 3), "paths": paths}
        if auto:
            rec["auto"] = True
        self._append(rec)
        return rec

    def _find_end(self, wid: str) -> dict | None:
        if wid in self._open:
            return None
        for r in reversed(self._journal()):
            if r.get("op") == "write" and r.get("id") == wid:
                return r
        return None

    def _journal(self) -> list[dict]:
        try:
            lines = self._tree.read_text(f"{_STORE}/moss-journal.jsonl", _JOURNAL_LIMIT).splitlines()
        except FileNotFoundError:
            return []
        out = []
        for line in lines:
            try:
                rec = json.loads(line)
            except ValueError:
                continue                # a torn last line from a killed process
            if isinstance(rec, dict):
                out.append(rec)
        return out

    def _append(self, rec: dict) -> None:
        line = (_dumps(rec) + "\n").encode()
        fd = self._tree.open(f"{_STORE}/moss-journal.jsonl",
                             os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size > 0 and os.pread(fd, 1, size - 1) != b"\n":
                line = b"\n" + line        # a line torn by a killed process ends here
            os.write(fd, line)
        finally:
            os.close(fd)

    def _next_seq(self) -> int:
        """A number that orders captures, increasing even if the counter file is lost."""
        rel = f"{_STORE}/moss-seq"
        try:
            last = int(self._tree.read_text(rel, 64).strip() or 0)
        except (OSError, ValueError):
            last = 0
        seq = max(last + 1, time.time_ns())
        self._tree.write_atomic(rel, str(seq), 0o644, sync=False)
        return seq

    # ------------------------------------------------------------------ restore

    def _apply(self, plan: dict, cur: dict, blobs: "_BlobReader") -> dict:
        """Make each path in ``plan`` (path -> target entry, None = absent) so."""
        reverted: list[str] = []
        removed: list[str] = []
        restored: list[str] = []
        skipped: list[dict] = []
        acted: list[str] = []
        todo: dict[str, tuple] = {}
        for p, t in plan.items():
            c = cur.get(p)
            if t == c:
                continue
            if t is not None and t[0] == "u":
                skipped.append({"path": _show(p, t), "reason": t[1],
                                "detail": _uncaptured_detail(t, self)})
            elif c is not None and c[0] == "u":
                skipped.append({"path": _show(p, c), "reason": "not_backed_up",
                                "detail": "what is there now is not in the backup ("
                                + _uncaptured_detail(c, self) + "), so it was kept"})
            elif not _safe_rel(p):
                skipped.append({"path": p, "reason": "obstructed",
                                "detail": "moss never writes under .git or .moss/"})
            else:
                todo[p] = (c, t)

        blocked: set[str] = set()
        # 1. Remove, deepest first: what is gone at the target, and what is in the way
        #    of something of another kind (a directory where a file goes, or the reverse).
        gone = [p for p, (c, t) in todo.items()
                if c is not None and (t is None or (c[0] == "d") != (t[0] == "d"))]
        for p in sorted(gone, key=lambda p: (-p.count("/"), p)):
            c, t = todo[p]
            try:
                self._remove(p, c)
            except _Blocked as e:
                blocked.add(p)
                skipped.append({"path": _show(p, c), "reason": e.reason, "detail": e.detail})
                continue
            acted.append(p)
            if t is None:
                removed.append(_show(p, c))
        # 2. Create or rewrite, shallowest first (a directory before what it holds).
        put = [p for p, (c, t) in todo.items() if t is not None and p not in blocked]
        for p in sorted(put, key=lambda p: (p.count("/"), p)):
            c, t = todo[p]
            try:
                self._place(p, c, t, blobs)
            except _Blocked as e:
                skipped.append({"path": _show(p, t), "reason": e.reason, "detail": e.detail})
                continue
            acted.append(p)
            (reverted if c is not None else restored).append(_show(p, t))
        return {"reverted": sorted(reverted), "removed": sorted(removed),
                "restored": sorted(restored), "skipped": skipped, "acted": acted}

    def _open_parent(self, rel: str) -> int:
        """A descriptor of ``rel``'s directory, reached from the root one component at a
        time without following symlinks."""
        parts = rel.split("/")
        fd = os.open(self.root, _PATH_FLAGS)
        try:
            for i, part in enumerate(parts[:-1]):
                where = "/".join(parts[:i + 1])
                try:
                    nfd = os.open(part, _PATH_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    raise _Blocked("obstructed", f"its directory {where}/ is missing") from None
                except OSError as e:
                    if e.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise _Blocked("obstructed", f"{where} is not a directory (a symlink "
                                       "or a file); moss does not write through it") from None
                    raise _Blocked("failed", f"{where}: {e.strerror}") from None
                os.close(fd)
                fd = nfd
            return fd
        except BaseException:
            os.close(fd)
            raise

    def _remove(self, rel: str, cur: tuple) -> None:
        pfd = self._open_parent(rel)
        name = rel.rsplit("/", 1)[-1]
        try:
            try:
                st = os.stat(name, dir_fd=pfd, follow_symlinks=False)
            except FileNotFoundError:
                return
            if stat.S_ISDIR(st.st_mode) != (cur[0] == "d"):
                raise _Blocked("failed", "it changed while restoring")
            try:
                if cur[0] == "d":
                    os.rmdir(name, dir_fd=pfd)
                else:
                    os.unlink(name, dir_fd=pfd)
            except OSError as e:
                if e.errno in (errno.ENOTEMPTY, errno.EEXIST):
                    raise _Blocked("not_empty", "it holds files this restore does not "
                                   "remove, so it was kept") from None
                raise _Blocked("failed", e.strerror) from None
        finally:
            os.close(pfd)

    def _place(self, rel: str, cur: tuple | None, t: tuple, blobs: "_BlobReader") -> None:
        pfd = self._open_parent(rel)
        name = rel.rsplit("/", 1)[-1]
        try:
            if t[0] == "d":
                try:
                    os.mkdir(name, 0o700, dir_fd=pfd)
                except FileExistsError:
                    pass
                _chmod_at(pfd, name, t[1], os.O_DIRECTORY)
            elif cur is not None and cur[0] == "f" and t[0] == "f" and cur[2] == t[2]:
                _chmod_at(pfd, name, t[1], 0)          # same bytes: permissions only
            else:
                data = blobs.read(t[2] if t[0] == "f" else t[1])
                tmp = f".moss-{secrets.token_hex(6)}.tmp"
                try:
                    if t[0] == "l":
                        os.symlink(os.fsdecode(data), tmp, dir_fd=pfd)
                    else:
                        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL
                                     | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=pfd)
                        try:
                            view = memoryview(data)
                            while view:
                                view = view[os.write(fd, view):]
                            os.fchmod(fd, t[1])
                        finally:
                            os.close(fd)
                    os.replace(tmp, name, src_dir_fd=pfd, dst_dir_fd=pfd)
                except BaseException:
                    try:
                        os.unlink(tmp, dir_fd=pfd)
                    except OSError:
                        pass
                    raise
        except OSError as e:
            raise _Blocked("failed", e.strerror or str(e)) from None
        finally:
            os.close(pfd)

    # ------------------------------------------------------------------ git plumbing

    def _make_env(self) -> dict[str, str]:
        # Drop every inherited GIT_* variable (moss may run inside a git hook, where
        # GIT_DIR and GIT_INDEX_FILE point at the user's repository).
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("GIT_") or k == "GIT_EXEC_PATH"}
        env.update(_AUTHOR)
        env.update({
            "GIT_DIR": str(self.git_dir),
            "GIT_WORK_TREE": str(self.root),
            "GIT_INDEX_FILE": str(self.git_dir / "index"),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_ATTR_NOSYSTEM": "1",
            "GIT_NO_REPLACE_OBJECTS": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_PAGER": "cat",
        })
        return env

    def _cmd(self, args: tuple[str, ...]) -> list[str]:
        cmd = [self._git_bin]
        for c in _SAFE_CONFIG:
            cmd += ["-c", c]
        if self._excludes_file:
            cmd += ["-c", f"core.excludesFile={self._excludes_file}"]
        return cmd + list(args)

    def _git_bytes(self, *args: str, input: bytes | None = None, check: bool = True,
                   ok: tuple[int, ...] = (0,), env: dict | None = None
                   ) -> subprocess.CompletedProcess:
        try:
            proc = subprocess.run(self._cmd(args), input=input, capture_output=True,
                                  cwd=self.root, env=env or self._env)
        except OSError as e:
            raise MossError(f"shadow: cannot run git: {e}", kind="io") from e
        if check and proc.returncode not in ok:
            err = proc.stderr.decode(errors="replace").strip()
            raise MossError(f"shadow: git {args[0]} failed: {err}", kind="io",
                            returncode=proc.returncode)
        return proc

    def _git(self, *args: str, input: bytes | None = None, check: bool = True,
             env: dict | None = None) -> str:
        proc = self._git_bytes(*args, input=input, check=check, env=env)
        return os.fsdecode(proc.stdout) if check or proc.returncode == 0 else ""

    def _ref(self, ref: str) -> str | None:
        proc = self._git_bytes("rev-parse", "-q", "--verify", f"{ref}^{{commit}}",
                               check=False)
        return proc.stdout.decode().strip() if proc.returncode == 0 else None

    def _update_ref(self, ref: str, new: str, old: str | None) -> None:
        """Point ``ref`` at ``new`` by writing its loose ref file (which takes precedence
        over packed-refs), as git does; every writer holds moss.lock."""
        if self._read_ref(ref) != old:
            raise MossError(f"shadow: {ref} moved under us", kind="io")
        self._tree.write_atomic(f"{_STORE}/{ref}", new + "\n", 0o644, sync=False)

    def _resolve(self, sid: str) -> str:
        """Full id of a capture given its id or an unambiguous prefix."""
        if not isinstance(sid, str) or not (4 <= len(sid) <= 64) or any(
                c not in "0123456789abcdefABCDEF" for c in sid):
            raise MossError(f"shadow: {sid!r} is not a snapshot id", kind="usage")
        if not self._has_repo():
            raise MossError(f"shadow: no snapshot {sid} (no snapshots taken yet)",
                            kind="not_found")
        if sid.lower() in self._loaded or sid.lower() in self._open:
            return sid.lower()                   # taken or read by this process
        proc = self._git_bytes("rev-parse", "-q", "--verify", f"{sid}^{{commit}}",
                               check=False)
        if proc.returncode != 0:
            err = proc.stderr.decode(errors="replace")
            if "ambiguous" in err:
                raise MossError(f"shadow: snapshot id {sid} is ambiguous; give more "
                                "digits", kind="ambiguous")
            raise MossError(f"shadow: no snapshot {sid}", kind="not_found")
        commit = proc.stdout.decode().strip()
        for ref in (SNAPSHOTS_REF, BACKUPS_REF, WRITES_REF):
            if self._ref(ref) and self._git_bytes(
                    "merge-base", "--is-ancestor", commit, ref, check=False
            ).returncode == 0:
                return commit
        raise MossError(f"shadow: {sid} is not a snapshot of this project",
                        kind="not_found")

    # ------------------------------------------------------------------ repository

    @contextmanager
    def _locked(self, create: bool) -> Iterator[None]:
        self._check_git_dir()
        fd = self._acquire(create)
        if fd is None:
            yield            # nothing to lock yet; callers fail on the missing repo
            return
        try:
            # Holding the flock, no other moss process is inside this repository, so
            # git lock files left by a killed run are stale and would block every
            # later command.
            for stale in ("index.lock", "HEAD.lock", "packed-refs.lock",
                          f"{SNAPSHOTS_REF}.lock", f"{BACKUPS_REF}.lock",
                          f"{WRITES_REF}.lock"):
                self._tree.unlink(f"{_STORE}/{stale}")
            if create or self._has_repo():
                self._prepare()
            yield
        finally:
            os.close(fd)        # releases the lock

    def _acquire(self, create: bool) -> int | None:
        """The flock on moss.lock of a store moss made for this project (None when there
        is no store and `create` is false). A store moss did not make (shipped by the
        repository, or changed since) is set aside first: see `_foreign`."""
        deadline = time.monotonic() + self.lock_timeout
        while True:
            st = self._tree.lstat(_STORE)
            if st is None:
                if not create:
                    return None
                self._tree.mkdirs(_STORE)
                st = self._tree.lstat(_STORE)
                if st is None:
                    continue
            store = (st.st_dev, st.st_ino)   # the store judged (and, if foreign, moved)
            try:
                fd = self._tree.open(f"{_STORE}/moss.lock", os.O_RDWR | os.O_CREAT, 0o644)
            except UnsafePath as e:      # a link or a fifo where moss keeps its lock
                self._set_aside(e.message, store)
                continue
            try:
                while True:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except OSError as e:
                        if e.errno not in (errno.EAGAIN, errno.EACCES):
                            raise
                        if time.monotonic() > deadline:
                            raise MossError("shadow: the snapshot store is busy (another "
                                            "moss process holds .moss/shadow.git/moss.lock)",
                                            kind="timeout") from None
                        time.sleep(0.02)
                # The lock held must still be the store's: another process may have set
                # that store aside while this one waited.
                now, held = self._tree.lstat(f"{_STORE}/moss.lock"), os.fstat(fd)
                if now is None or (now.st_dev, now.st_ino) != (held.st_dev, held.st_ino):
                    self._verified = False
                    os.close(fd)
                    continue
                if not self._verified:
                    problem = self._foreign()
                    if problem:
                        self._set_aside(problem, store)
                        os.close(fd)
                        continue
                    self._verified = True
                return fd
            except BaseException:
                with _suppress_oserror():
                    os.close(fd)
                raise

    def _check_git_dir(self) -> None:
        # A .moss/ or shadow.git that is a symlink could aim our index at the user's
        # .git; refuse rather than follow it.
        for rel in (".moss", _STORE):
            st = self._tree.lstat(rel)
            if st is not None and stat.S_ISLNK(st.st_mode):
                raise MossError(f"shadow: {self.root / rel} is a symbolic link; refusing to use it",
                                kind="denied")
            if st is None:
                return

    def _has_repo(self) -> bool:
        try:
            st = self._tree.lstat(f"{_STORE}/HEAD")
        except (UnsafePath, NotADirectoryError):
            return False
        return st is not None and stat.S_ISREG(st.st_mode)

    # ------------------------------------------------------------------ ownership

    def _foreign(self) -> str | None:
        """Why the store at .moss/shadow.git is not one moss made for this project, or None.

        A store moss made holds its token (`moss-owner`, whose sha256 and the config's are
        kept outside the project, in the user's data folder), the config git wrote when moss
        made it, and nothing but folders and regular files. A repository can ship a
        `.moss/shadow.git` whose files are links out of the project, or whose config runs
        commands; moss never writes to or runs git against such a store. A folder holding
        only moss's lock is a store being made (by this process or another)."""
        names = [n for n in self._tree.listdir(_STORE) if n != "moss.lock"]
        if not names:
            return None
        odd = self._odd_entry()
        if odd:
            return odd
        record = _owners.get(str(self.root)) or _read_owner_record(self.root)
        if record is None:
            return "there is no record that moss made it here"
        try:
            token = self._tree.read_bytes(f"{_STORE}/{_OWNER}", 256)
            config = self._tree.read_bytes(f"{_STORE}/config", 64 * 1024)
        except FileNotFoundError as e:
            return f"{os.path.basename(e.filename or _OWNER)} is missing"
        except OSError as e:
            return f"it cannot be read ({e.strerror or e})"
        if not hmac.compare_digest(hashlib.sha256(token).hexdigest(), record.get("token", "")):
            return "its owner token is not the one moss recorded"
        if not hmac.compare_digest(hashlib.sha256(config).hexdigest(), record.get("config", "")):
            return "its config is not the one git wrote when moss made it"
        return None

    def _odd_entry(self) -> str | None:
        """The first link, fifo, socket or device anywhere in the store, named."""
        stack = [_STORE]
        while stack:
            rel = stack.pop()
            try:
                fd = self._tree.open_dir(rel)
            except (UnsafePath, OSError) as e:
                return getattr(e, "message", None) or f"{rel}: {e}"
            try:
                with os.scandir(fd) as it:
                    found = [(e.name, e.stat(follow_symlinks=False).st_mode) for e in it]
            except OSError as e:
                return f"{rel} cannot be read ({e.strerror})"
            finally:
                os.close(fd)
            for name, mode in found:
                if stat.S_ISDIR(mode):
                    stack.append(f"{rel}/{name}")
                elif stat.S_ISLNK(mode):
                    return f"{rel}/{name} is a symlink"
                elif not stat.S_ISREG(mode):
                    return f"{rel}/{name} is not a regular file"
        return None

    def _set_aside(self, why: str, store: tuple) -> None:
        """Move the store moss did not make, `store` (device, inode), into
        .moss/agent/quarantine/ (never deleted)."""
        from moss import storage

        dest = (f".moss/agent/quarantine/{time.strftime('%Y%m%d-%H%M%S')}-"
                f"{secrets.token_hex(3)}-shadow.git")
        # nothing known about the store being moved holds for the new one
        self._verified = self._prepared = False
        self._index_cache = self._memo = None
        self._loaded.clear()
        self._open.clear()
        try:
            storage.ensure_dir(self.root / ".moss" / "agent" / "quarantine")
            now = self._tree.lstat(_STORE)
            if now is None or (now.st_dev, now.st_ino) != store:
                return       # another moss process moved it aside first, and said so
            self._tree.rename(_STORE, dest, create_dirs=False)
        except FileNotFoundError:
            if self._tree.lstat(_STORE) is None:
                return
            raise MossError(f"shadow: .moss/shadow.git was not made by moss for this project ({why}) "
                            "and could not be moved aside; remove it", kind="denied") from None
        except (MossError, OSError) as e:
            reason = e.message if isinstance(e, MossError) else (e.strerror or str(e))
            raise MossError(f"shadow: .moss/shadow.git was not made by moss for this project "
                            f"({why}) and could not be moved aside ({reason}); remove it",
                            kind="denied") from None
        message = (f"warning: .moss/shadow.git was not made by moss for this project ({why}); "
                   f"moved it to {dest}/ and started a new snapshot store")
        if self._notify is not None:
            self._notify(message)
        else:
            from moss import ui

            ui.note(message, "yellow")

    def _own(self) -> None:
        """Mark a store this process just made as moss's: a fresh token inside it, its
        sha256 and the config's outside the project."""
        token = secrets.token_hex(32).encode()
        if not self._tree.create_exclusive(f"{_STORE}/{_OWNER}", token, 0o600, create_dirs=False):
            raise MossError("shadow: .moss/shadow.git/moss-owner appeared while moss made the "
                            "store; remove .moss/shadow.git", kind="denied")
        config = self._tree.read_bytes(f"{_STORE}/config", 64 * 1024)
        record = {"root": str(self.root), "token": hashlib.sha256(token).hexdigest(),
                  "config": hashlib.sha256(config).hexdigest()}
        _owners[str(self.root)] = record
        _write_owner_record(self.root, record)
        self._verified = True

    def _prepare(self) -> None:
        """Create the repository if needed; (re)write info/exclude and attributes."""
        if self._prepared and self._has_repo():
            return
        if not self._has_repo():
            env = {k: v for k, v in self._env.items()
                   if k not in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE")}
            proc = subprocess.run(
                [self._git_bin, "init", "--quiet", "--bare", "--template=",
                 "--initial-branch=snapshots", str(self.git_dir)],
                capture_output=True, env=env, cwd=self.root)
            if proc.returncode != 0:
                raise MossError("shadow: git init failed: "
                                + proc.stderr.decode(errors="replace").strip(), kind="io")
            self._own()
        # Invisible to the user's own git even where .moss/ is not ignored yet (their
        # .gitignore is theirs; a .gitignore inside shadow.git covers just this dir).
        self._write_if_changed(".gitignore", "*\n")
        self._write_if_changed("info/exclude", _EXCLUDE_HEAD + self._user_excludes())
        self._write_if_changed("info/attributes", _ATTRIBUTES)
        self._excludes_file = self._global_excludes_file()
        self._sha1 = self._git("rev-parse", "--show-object-format").strip() == "sha1"
        self._prepared = True

    def _write_if_changed(self, rel: str, text: str) -> None:
        rel = f"{_STORE}/{rel}"
        try:
            if self._tree.read_text(rel, 1024 * 1024) == text:
                return
        except (OSError, MossError):
            pass
        self._tree.write_atomic(rel, text, 0o644, sync=False)

    def _user_excludes(self) -> str:
        """The user's .git/info/exclude (read only), so 'ignored' means what it means
        to the user's own git. Read without blocking and only when it is a regular file:
        the .git file of a cloned repository can point anywhere."""
        dot_git = self.root / ".git"
        try:
            if dot_git.is_file():     # worktree or submodule: "gitdir: <path>"
                text = _read_regular(dot_git).strip()
                if not text.startswith("gitdir:"):
                    return ""
                gd = (self.root / text[len("gitdir:"):].strip()).resolve()
                common = gd / "commondir"
                if common.is_file():
                    gd = (gd / _read_regular(common).strip()).resolve()
                dot_git = gd
            exclude = dot_git / "info" / "exclude"
            if exclude.is_file():
                return "# from the project's own info/exclude\n" + _read_regular(exclude) + "\n"
        except (OSError, ValueError):
            pass
        return ""

    def _global_excludes_file(self) -> str | None:
        """The user's global core.excludesFile, read from their global config (the
        only thing taken from it; the rest of it stays switched off)."""
        env = dict(self._env)
        env.pop("GIT_CONFIG_GLOBAL")
        proc = subprocess.run(
            [self._git_bin, "config", "--global", "--includes", "--path", "--get",
             "core.excludesFile"], capture_output=True, env=env, cwd=self.root)
        value = os.fsdecode(proc.stdout).strip()
        return value if proc.returncode == 0 and value else None

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


# ---------------------------------------------------------------------- helpers


class _Capture:
    """One capture: the git tree of captured files, the metadata blob's content, and
    every path's entry: ("f", perm, blob) | ("l", blob) | ("d", perm) |
    ("u", reason, kind, size, mtime_ns, ctime_ns, inode, perm)."""

    __slots__ = ("tree", "meta", "entries", "files", "seq", "commit")

    def __init__(self, tree: str, meta: dict, entries: dict, files: int):
        self.tree, self.meta, self.entries, self.files = tree, meta, entries, files
        self.seq = 0
        self.commit: str | None = None     # the commit that stores it, once stored


class _Raced(Exception):
    """The tree changed under a capture (a file became a directory, or vanished)."""


class _Blocked(Exception):
    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason, self.detail = reason, detail


def _session_plan(journal: list[dict], session: str, since: int, cur: dict
                  ) -> tuple[dict, list[dict]]:
    """What a session's rollback to the capture with sequence number ``since`` puts
    back (path -> entry before the session's first change to it), and the conflicts."""
    writes = [r for r in journal if r.get("op") in ("write", "restore")
              and isinstance(r.get("paths"), dict)]
    writes.sort(key=lambda r: r.get("begin", 0))
    first: dict[str, dict] = {}
    last: dict[str, dict] = {}
    others: dict[str, list[dict]] = {}
    for r in writes:
        if r.get("session") == session:
            if r.get("begin", 0) >= since:      # a write whose start is ``since`` counts
                for p in r["paths"]:
                    first.setdefault(p, r)
                    last[p] = r
        elif r.get("end", 0) > since:
            for p in r["paths"]:
                others.setdefault(p, []).append(r)
    plan: dict[str, tuple | None] = {}
    conflicts: list[dict] = []
    for p, r1 in sorted(first.items()):
        later = [r for r in others.get(p, ()) if r.get("end", 0) > r1.get("begin", 0)]
        pre = _dec(r1["paths"][p][0])
        shown = _show(p, pre or _dec(last[p]["paths"][p][1]))
        if later:
            by = max(later, key=lambda r: r.get("end", 0))
            who = by.get("session")
            conflicts.append({"path": shown, "session": who, "reason": (
                f"session {who} changed it after this session did" if who else
                "a script with no session changed it after this session did")})
            continue
        if cur.get(p) != _dec(last[p]["paths"][p][1]):
            conflicts.append({"path": shown, "session": None, "reason":
                              "it changed after this session's last write to it (by hand, "
                              "or by a command outside a recorded write)"})
            continue
        plan[p] = pre
    return plan, conflicts


def _parse_stage(out: bytes) -> dict[str, tuple[int, str]]:
    """``git ls-files -z --stage`` as path -> (mode, blob id)."""
    index = {}
    for rec in out.split(b"\0"):
        if rec:
            head, path = rec.split(b"\t", 1)
            mode, sha, _stage = head.split(b" ")
            index[os.fsdecode(path)] = (int(mode, 8), sha.decode())
    return index


def _stat_key(st: os.stat_result) -> tuple:
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_mode)


def _differences(a: dict, b: dict) -> dict[str, tuple]:
    """path -> (entry in a, entry in b) for every path where they differ."""
    out = {}
    for p, ea in a.items():
        eb = b.get(p)
        if ea != eb:
            out[p] = (ea, eb)
    for p, eb in b.items():
        if p not in a:
            out[p] = (None, eb)
    return out


def _end_summary(rec: dict) -> dict:
    changed, lost = [], []
    for p, (a, b) in sorted(rec.get("paths", {}).items()):
        a, b = _dec(a), _dec(b)
        changed.append(_show(p, b or a))
        if a is not None and a[0] == "u":
            lost.append({"path": _show(p, a), "reason": a[1], "detail":
                         "a rollback cannot bring back what was there before: "
                         + _uncaptured_detail(a, None)})
        elif b is not None and b[0] == "u":
            lost.append({"path": _show(p, b), "reason": b[1], "detail":
                         "a rollback will keep what is there now: "
                         + _uncaptured_detail(b, None)})
    return {"id": rec["id"], "post": rec.get("post"), "changed": changed,
            "not_captured": lost}


def _uncaptured_detail(e: tuple, sh: Shadow | None) -> str:
    reason, size = e[1], e[3]
    text = _UNCAPTURED.get(reason, reason).format(size=_human(size))
    if sh is not None and reason == "too_large":
        text += f" ({_human(sh.max_file_bytes)})"
    elif sh is not None and reason == "over_total":
        text += f" ({_human(sh.max_total_bytes)})"
    return text


def _human(n: int) -> str:
    return f"{n / MB:.1f} MB" if n >= MB // 10 else f"{n} bytes"


def _sig(st: os.stat_result) -> tuple:
    m = st.st_mode
    kind = ("f" if stat.S_ISREG(m) else "l" if stat.S_ISLNK(m)
            else "d" if stat.S_ISDIR(m) else "s")
    return (kind, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino,
            stat.S_IMODE(m))


def _show(p: str, e: tuple | None) -> str:
    is_dir = e is not None and (e[0] == "d" or (e[0] == "u" and e[2] == "d"))
    return p + "/" if is_dir else p


def _enc(e: tuple | None):
    return None if e is None else list(e)


def _dec(e) -> tuple | None:
    return None if e is None else tuple(e)


def _default_perm(git_mode: int) -> int:
    return 0o755 if git_mode == _EXEC else 0o644


def _safe_rel(p: str) -> bool:
    parts = p.split("/")
    return (bool(p) and not any(x in ("", ".", "..", ".git") for x in parts)
            and parts[0] != ".moss")


def _chmod_at(pfd: int, name: str, perm: int, flags: int) -> None:
    """chmod without following a symlink at ``name``."""
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | flags,
                 dir_fd=pfd)
    try:
        os.fchmod(fd, perm)
    finally:
        os.close(fd)


def _check_label(label) -> None:
    if not isinstance(label, str):
        raise MossError("shadow: label must be a string", kind="usage")


def _dumps(obj) -> str:
    return json.dumps(obj, ensure_ascii=True, sort_keys=True, separators=(",", ":"))


class _BlobReader:
    """Blob contents through one ``git cat-file --batch`` process, one at a time (so
    memory holds one file, not the whole restore)."""

    def __init__(self, shadow: Shadow):
        self._shadow = shadow
        self._proc: subprocess.Popen | None = None

    def __enter__(self) -> "_BlobReader":
        return self

    def read(self, sha: str) -> bytes:
        if self._proc is None:
            sh = self._shadow
            self._proc = subprocess.Popen(sh._cmd(("cat-file", "--batch")),
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=subprocess.DEVNULL, cwd=sh.root,
                                          env=sh._env)
        proc = self._proc
        proc.stdin.write(sha.encode() + b"\n")
        proc.stdin.flush()
        header = proc.stdout.readline().split()
        if len(header) != 3:
            raise MossError(f"shadow: object {sha} is missing from .moss/shadow.git",
                            kind="io")
        size = int(header[2])
        data = proc.stdout.read(size)
        proc.stdout.read(1)           # the newline after the contents
        return data

    def __exit__(self, *exc) -> None:
        proc = self._proc
        if proc is None:
            return
        try:
            proc.stdin.close()
        except OSError:
            pass
        proc.stdout.close()
        proc.wait()


def _parse_meta(body: str) -> dict:
    meta: dict = {}
    for line in body.splitlines():
        key, sep, value = line.partition(": ")
        if not sep:
            continue
        try:
            if key == "Moss-Label":
                meta["label"] = json.loads(value)
            elif key == "Moss-Files":
                meta["files"] = int(value)
            elif key == "Moss-Seq":
                meta["seq"] = int(value)
            elif key == "Moss-Format":
                meta["format"] = value.strip()
            elif key == "Moss-Session":
                meta["session"] = json.loads(value)
        except ValueError:
            pass
    return meta


def _read_regular(path: Path, limit: int = 1024 * 1024) -> str:
    """A small regular file's text; a fifo or a device is refused without blocking."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(f"{path} is not a regular file")
        return os.read(fd, limit).decode("utf-8", errors="replace")
    finally:
        os.close(fd)


# Ownership records: which .moss/shadow.git moss made, kept where no repository can ship
# them ($XDG_DATA_HOME/moss/shadow/), and in this process for the stores it made.
_owners: dict[str, dict] = {}


def _owner_record_path(root: Path) -> Path:
    from moss.roots import user_data_dir

    key = hashlib.sha256(os.fsencode(str(root))).hexdigest()[:32]
    return user_data_dir() / "shadow" / f"{key}.json"


def _read_owner_record(root: Path) -> dict | None:
    try:
        with open(_owner_record_path(root), "rb") as f:
            rec = json.loads(f.read(64 * 1024))
    except (OSError, ValueError):
        return None
    if not isinstance(rec, dict) or rec.get("root") != str(root):
        return None
    return rec


def _write_owner_record(root: Path, record: dict) -> None:
    """Best effort: without a writable data folder the store is this process's only (the
    next moss process sets it aside and makes its own)."""
    from moss.tools.atomic import write_atomic

    path = _owner_record_path(root)
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_atomic(path, _dumps(record) + "\n", 0o600)
    except OSError:
        pass


@contextmanager
def _suppress_oserror() -> Iterator[None]:
    try:
        yield
    except OSError:
        pass
