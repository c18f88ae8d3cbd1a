"""Putting paths back as a capture had them: files, symlinks, permission bits, directories.

Every directory on the way is opened from the root with ``O_NOFOLLOW``, nothing is written
under ``.git`` or ``.moss/``, and what cannot be put back is reported as skipped with a
reason rather than forced.
"""

from __future__ import annotations

import errno
import os
import stat

from .. import safefs
from .git import _BlobReader
from .model import _show, _uncaptured_detail
from .store import Store

# Only to reach a directory (no read permission needed); O_NOFOLLOW: never through a link.
_PATH_FLAGS = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Restoring(Store):
    """Making paths what a plan says (``_apply``), each from its parent's descriptor."""

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
                raise _Blocked("failed", e.strerror or str(e)) from None
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
            elif t[0] == "l":
                # moss's one atomic writer, in the folder walked to above: a temp link
                # renamed over `name` (what is there is replaced, never written through)
                safefs.replace_at(pfd, name, blobs.read(t[1]), symlink=True, sync=False)
            else:
                safefs.replace_at(pfd, name, blobs.read(t[2]), t[1], sync=False)
        except OSError as e:
            raise _Blocked("failed", e.strerror or str(e)) from None
        finally:
            os.close(pfd)


class _Blocked(Exception):
    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason, self.detail = reason, detail


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
