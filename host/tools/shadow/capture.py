"""One capture of the working tree: walk it, choose what to store, feed git's index.

The shadow index is git's stat cache, so an unchanged file is not re-read, and a file whose
lstat has not changed since git last read it (a few seconds after its last change) is not
even shown to git. Content is left out ("uncaptured") over ``max_file_bytes``, past
``max_total_bytes``, when unreadable, or when the path is not a file, link or directory.
"""

from __future__ import annotations

import hashlib
import os
import stat
import time

from ...errors import MossError
from .model import FORMAT, _STORE, _SYMLINK, _Capture, _default_perm
from .store import Store

_RACY_NS = 3_000_000_000     # a file changed this close to git reading it is read again
_VERIFY_BYTES = 1 << 20      # of racy files, hashed in the capture's own process (_still_indexed)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Capturing(Store):
    """Taking a capture of the tree (``_capture``), kept incremental by git's index."""

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
        key0 = self._cache()[0]
        keep, uncaptured = self._select(files, prev, nested)
        uncaptured.update(odd)

        kept = set(keep)
        drop = [p for p in prev if p not in kept]
        keys = {p: _stat_key(files[p]) for p in keep}
        feed, checked, checked_at = self._to_feed(keep, keys, prev, key0)
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
        cache = self._cache()
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
                self._index_cache = (self._cache()[0], index, tree)
        memo = self._memo[1] if self._memo and self._memo[0] == key0 else {}
        fed = set(feed)
        self._memo = (self._cache()[0], {
            p: (keys[p], started if p in fed else checked_at if p in checked else memo[p][1]) for p in keep})

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

    def _cache(self) -> tuple:
        """(index file key, index, tree): set by every ``_read_index``."""
        assert self._index_cache is not None
        return self._index_cache

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

    def _to_feed(self, keep: list, keys: dict, prev: dict, key0) -> tuple[list[str], set[str], int]:
        """The captured paths git must look at: all of them, less those whose lstat is
        what it was when git last read them, long enough after their last change that
        no same-timestamp rewrite can hide (git's own "racy" check stays in charge of
        the others), and less the racy ones whose bytes were found unchanged here. Returns
        them, the paths found unchanged, and when that check began (they count as read then)."""
        memo = self._memo[1] if self._memo and self._memo[0] == key0 else {}
        out, checked, began = [], set(), time.time_ns()
        budget = [_VERIFY_BYTES]
        for p in keep:
            m = memo.get(p)
            if m is not None and m[0] == keys[p] and p in prev:
                sk = m[0]
                if sk[1] < m[1] - _RACY_NS and sk[2] < m[1] - _RACY_NS:
                    continue
                if self._still_indexed(p, sk, prev[p], budget):
                    checked.add(p)
                    continue
            out.append(p)
        return out, checked, began

    def _still_indexed(self, p: str, key: tuple, entry: tuple[int, str], budget: list[int]) -> bool:
        """Whether the racy file `p` (its lstat `key` as when git last read it, but too soon
        after its last change to trust) still holds the bytes the index has for it: hashed
        here as git would, so that the capture just after a write (the next write's "before")
        needs no git process for the file that write changed. Small regular files only, up
        to `budget` bytes a capture; anything else is git's to read."""
        size, mode = key[0], key[4]
        want = 0o100755 if mode & stat.S_IXUSR else 0o100644
        if not self._sha1 or not stat.S_ISREG(mode) or entry[0] != want or size > budget[0]:
            return False
        try:
            data = self._tree.read_bytes(p, size)  # grown since: an error, and git reads it
        except (MossError, OSError):
            return False
        budget[0] -= len(data)
        return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() == entry[1]

    def _ls_files(self, paths: list[str]) -> dict[str, tuple[int, str]]:
        if not paths:
            return {}
        env = dict(self._env, GIT_LITERAL_PATHSPECS="1")
        out = self._git_bytes("ls-files", "-z", "--stage", "--", *paths, env=env).stdout
        return _parse_stage(out)


class _Raced(Exception):
    """The tree changed under a capture (a file became a directory, or vanished)."""


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


def _sig(st: os.stat_result) -> tuple:
    m = st.st_mode
    kind = ("f" if stat.S_ISREG(m) else "l" if stat.S_ISLNK(m)
            else "d" if stat.S_ISDIR(m) else "s")
    return (kind, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino,
            stat.S_IMODE(m))

