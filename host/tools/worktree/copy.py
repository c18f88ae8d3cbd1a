"""Making a child's copy of a tree: cheap where the file system allows, contained always.

What is copied is what the shadow store captures (host/tools/shadow/): every regular file
(bytes, permission bits, times), every symlink *as a link* (its target text, never what it
points to), every directory; never ``.moss/`` at the top (moss's own: the child gets an empty
one) nor anything named ``.git`` (git metadata stays the parent's). A fifo, socket or device
is left out and reported. Every folder is opened with ``O_NOFOLLOW`` from the one above it and
every file with ``O_NOFOLLOW``, so nothing is read through a link: a file swapped for a link
while the copy is made is left out, never followed out of the project.

How a file's bytes get there (``strategy``), the first that works:

- ``reflink``: ``FICLONE``, a copy-on-write clone (btrfs, XFS, bcachefs, ...): no data is
  written, the parent's file is not touched, and a write in either tree, even in place,
  never reaches the other.
- ``hardlink``: a second name for the same file. A shared file is safe only while nobody
  writes it in place: moss's own writers replace a file (a new inode), but a shell command
  (``echo >> f``, a compiler writing its output) writes in place, and through a link it
  would change the parent's file. So links are used as they are only for a child that can
  never write (its access is below ``edit`` for good); for a child that may write, with
  ``defer``, they are a first step: ``materialize`` then replaces each one by a copy, and
  until it is done nothing in the child may write (host/tools/worktree/__init__.py).
  Making or removing a link changes the file's ctime, so the parent's snapshot store and
  git read those files again once (their contents are unchanged).
- ``copy``: the bytes copied (``copy_file_range``, in the kernel): across file systems, or
  without ``defer``.

Files are copied by a small pool of threads (the copy itself runs in the kernel, outside
the GIL), one directory's files a job.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from ...errors import MossError

FICLONE = 0x40049409           # _IOW(0x94, 9, int), linux/fs.h
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NO_CLONE = {errno.EOPNOTSUPP, errno.EXDEV, errno.EINVAL, errno.ENOTTY, errno.EPERM, errno.EBADF, errno.ENOSYS}
_NO_LINK = {errno.EXDEV, errno.EPERM, errno.EMLINK, errno.EACCES, errno.ENOTSUP}
MAX_JOBS = 64                  # directories' file jobs in flight (each holds two folder fds)


def skipped_name(rel: str, top: bool) -> bool:
    """Whether a name is never copied: anything named .git, and .moss at the top."""
    name = rel.rsplit("/", 1)[-1]
    return name == ".git" or (top and name == ".moss")


class _State:
    """What the copy threads share: counts, the left-out paths, whether clones work, and the
    files linked (to be copied later when the child may write)."""

    def __init__(self, link: bool):
        self.lock = threading.Lock()
        self.link = link
        self.clone_ok: bool | None = None     # None: not tried yet
        self.counts = {"reflink": 0, "copy": 0, "hardlink": 0}
        self.bytes = 0
        self.skipped: list[dict] = []
        self.linked: list[str] = []

    def count(self, how: str, size: int, rel: str) -> None:
        with self.lock:
            self.counts[how] += 1
            self.bytes += size
            if how == "hardlink":
                self.linked.append(rel)

    def skip(self, rel: str, reason: str) -> None:
        with self.lock:
            self.skipped.append({"path": rel, "reason": reason})


def make(src: Path, dest: Path, *, may_write: bool, defer: bool = False, workers: int = 2) -> dict:
    """Copy the tree at `src` into `dest` (which must not exist yet). Returns {strategy,
    files, links, dirs, bytes, skipped: [{path, reason}], seconds, counts, linked}: `linked`,
    the files made as hard links although the child may write (`defer`), for `materialize`."""
    t0 = time.monotonic()
    state = _State(link=not may_write or defer)
    try:
        src_fd = os.open(src, _DIR)
    except OSError as e:
        raise MossError(f"cannot copy {src}: {e.strerror}", kind="io") from None
    os.mkdir(dest, 0o700)
    dirs: list[tuple[str, os.stat_result]] = [("", os.fstat(src_fd))]
    links = 0
    gate = threading.BoundedSemaphore(MAX_JOBS)
    jobs: list[Future] = []
    dest_fd = os.open(dest, _DIR)
    # folders still to do are kept by name, not open: a folder of thousands of folders must not
    # hold thousands of descriptors; each is opened from the roots when its turn comes
    stack = [""]
    try:
        with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="moss-copy") as pool:
            while stack:
                rel = stack.pop()
                pair = _open_pair(src_fd, dest_fd, rel, state)
                if pair is None:
                    continue
                sfd, dfd = pair
                try:
                    files, subdirs, nlinks = _one_dir(sfd, dfd, rel, state)
                    links += nlinks
                    for name, st in subdirs:
                        os.mkdir(name, 0o700, dir_fd=dfd)
                        stack.append(f"{rel}{name}/")
                        dirs.append((f"{rel}{name}", st))
                    if files:
                        gate.acquire()
                        job = pool.submit(_copy_files, os.dup(sfd), os.dup(dfd), rel, files, state)
                        job.add_done_callback(lambda _f: gate.release())
                        jobs.append(job)
                finally:
                    os.close(sfd)
                    os.close(dfd)
            for job in jobs:
                job.result()  # a bug in a job is raised here, not lost
    finally:
        os.close(src_fd)
        os.close(dest_fd)
    _finish_dirs(dest, dirs)
    counts = state.counts
    used = [k for k in ("reflink", "hardlink", "copy") if counts[k]]
    return {"strategy": "+".join(used) or ("hardlink" if not may_write else "copy"), "counts": counts,
            "files": sum(counts.values()), "links": links, "dirs": len(dirs), "bytes": state.bytes,
            "skipped": sorted(state.skipped, key=lambda s: s["path"]), "seconds": round(time.monotonic() - t0, 3),
            "linked": sorted(state.linked) if may_write else []}


def _one_dir(sfd: int, dfd: int, rel: str, state: _State):
    """One folder: its symlinks made at once, its files and subfolders returned."""
    files: list[tuple[str, os.stat_result]] = []
    subdirs: list[tuple[str, os.stat_result]] = []
    links = 0
    try:
        with os.scandir(sfd) as it:
            entries = list(it)
    except OSError:
        state.skip(rel or ".", "unreadable")
        return files, subdirs, links
    for e in entries:
        if skipped_name(e.name, not rel):
            continue
        try:
            st = e.stat(follow_symlinks=False)
        except OSError:
            continue  # gone meanwhile
        mode = st.st_mode
        if stat.S_ISDIR(mode):
            subdirs.append((e.name, st))
        elif stat.S_ISREG(mode):
            files.append((e.name, st))
        elif stat.S_ISLNK(mode):
            try:
                os.symlink(os.readlink(e.name, dir_fd=sfd), e.name, dir_fd=dfd)
                links += 1
            except OSError:
                state.skip(rel + e.name, "unreadable")
        else:
            state.skip(rel + e.name, "special")
    return files, subdirs, links


def _open_pair(src_fd: int, dest_fd: int, rel: str, state: _State):
    """Folder `rel` (ending in "/", or "" for the top) opened in both trees, each component
    without following a link; None when it cannot be read in the source."""
    try:
        sfd = _open_below(src_fd, rel)
    except OSError:
        state.skip(rel.rstrip("/") or ".", "unreadable")  # also: swapped for a link meanwhile
        return None
    try:
        return sfd, _open_below(dest_fd, rel)
    except OSError:
        os.close(sfd)
        raise


def _open_below(root_fd: int, rel: str) -> int:
    fd = os.dup(root_fd)
    for part in [p for p in rel.split("/") if p]:
        try:
            nxt = os.open(part, _DIR, dir_fd=fd)
        finally:
            os.close(fd)
        fd = nxt
    return fd


def _copy_files(sfd: int, dfd: int, rel: str, files, state: _State) -> None:
    try:
        for name, st in files:
            try:
                how = _one_file(sfd, dfd, name, st, state)
            except OSError as e:
                state.skip(rel + name, "unreadable" if e.errno in (errno.EACCES, errno.ELOOP, errno.ENXIO)
                           else f"failed: {e.strerror}")
                continue
            state.count(how, st.st_size, rel + name)
    finally:
        os.close(sfd)
        os.close(dfd)


def _one_file(sfd: int, dfd: int, name: str, st: os.stat_result, state: _State) -> str:
    if state.clone_ok is not False:  # reflinks first: the first file finds out whether they work
        how = _copy_at(sfd, dfd, name, name, st, state, clone_only=True)
        if how:
            return how
    if state.link:
        try:
            os.link(name, name, src_dir_fd=sfd, dst_dir_fd=dfd, follow_symlinks=False)
            return "hardlink"
        except OSError as e:
            if e.errno not in _NO_LINK:
                raise
            state.link = False
    return _copy_at(sfd, dfd, name, name, st, None) or "copy"


def _copy_at(sfd: int, dfd: int, name: str, dest: str, st: os.stat_result, state: _State | None,
             clone_only: bool = False) -> str | None:
    """`name` in `sfd` copied to a new `dest` in `dfd`: cloned when `state` says clones may
    work, else its bytes copied. With `clone_only`, None (and nothing left) when it cannot be
    cloned."""
    src = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=sfd)
    try:
        if not stat.S_ISREG(os.fstat(src).st_mode):
            raise OSError(errno.ENXIO, "not a regular file any more")
        dst = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dfd)
        try:
            if state is not None and _clone(src, dst, state):
                how = "reflink"
            elif clone_only:
                os.unlink(dest, dir_fd=dfd)
                return None
            else:
                how = _copy_bytes(src, dst)
            os.fchmod(dst, stat.S_IMODE(st.st_mode))
            os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns))
            return how
        finally:
            os.close(dst)
    finally:
        os.close(src)


def _clone(src: int, dst: int, state: _State) -> bool:
    if state.clone_ok is False:
        return False
    try:
        fcntl.ioctl(dst, FICLONE, src)
    except OSError as e:
        if e.errno not in _NO_CLONE:
            raise
        state.clone_ok = False
        return False
    state.clone_ok = True
    return True


def _copy_bytes(src: int, dst: int) -> str:
    left = os.fstat(src).st_size
    try:
        while left > 0:
            n = os.copy_file_range(src, dst, left)
            if n == 0:
                break
            left -= n
        return "copy"
    except OSError as e:
        if e.errno not in (errno.EXDEV, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
            raise
    os.lseek(src, 0, os.SEEK_SET)
    os.lseek(dst, 0, os.SEEK_SET)
    os.ftruncate(dst, 0)
    while chunk := os.read(src, 1 << 20):
        os.write(dst, chunk)
    return "copy"


def _finish_dirs(dest: Path, dirs: list[tuple[str, os.stat_result]]) -> None:
    """Folders get their permission bits and times last (deepest first): a read-only folder
    of the project must not stop its own files being copied into it."""
    for rel, st in sorted(dirs, key=lambda d: d[0].count("/") + (1 if d[0] else 0), reverse=True):
        path = dest / rel if rel else dest
        try:
            os.chmod(path, stat.S_IMODE(st.st_mode) | (0o700 if not rel else 0))
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        except OSError:
            pass


def materialize(dest: Path, linked: list[str], scratch: Path, stop: threading.Event | None = None,
                workers: int = 2) -> int:
    """Replace each file of `linked` (relative to `dest`; hard links `make` made) by a copy of
    its own, so that nothing in `dest` shares bytes with another tree any more: a temp copy in
    `scratch` (outside `dest`, on its file system: a snapshot of `dest` taken meanwhile never
    sees it), renamed over it. Run while nothing may write in `dest`. How many were replaced."""
    by_dir: dict[str, list[str]] = {}
    for rel in linked:
        folder, _, name = rel.rpartition("/")
        by_dir.setdefault(folder, []).append(name)
    done = [0]
    lock = threading.Lock()

    scratch.mkdir(mode=0o700, exist_ok=True)
    tmp_fd = os.open(scratch, _DIR)

    def one_dir(folder: str, names: list[str]) -> None:
        fd = _open_under(dest, folder)
        try:
            for name in names:
                if stop is not None and stop.is_set():
                    return
                if _unshare(fd, name, tmp_fd):
                    with lock:
                        done[0] += 1
        finally:
            os.close(fd)

    try:
        with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="moss-unshare") as pool:
            for job in [pool.submit(one_dir, f, n) for f, n in by_dir.items()]:
                job.result()
    finally:
        os.close(tmp_fd)
    return done[0]


def _open_under(root: Path, rel: str) -> int:
    top = os.open(root, _DIR)
    try:
        return _open_below(top, rel)
    finally:
        os.close(top)


def _unshare(fd: int, name: str, tmp_fd: int) -> bool:
    """`name` (a file sharing its inode with another tree) made a file of its own."""
    try:
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(st.st_mode) or st.st_nlink < 2:
        return False
    tmp = os.urandom(8).hex()
    try:
        _copy_at(fd, tmp_fd, name, tmp, st, None)
        now = os.stat(name, dir_fd=fd, follow_symlinks=False)
        if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
            raise OSError(errno.EBUSY, "changed while it was copied")
        os.rename(tmp, name, src_dir_fd=tmp_fd, dst_dir_fd=fd)
        return True
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=tmp_fd)
        except OSError:
            pass
        raise


def shared_files(root: Path) -> list[str]:
    """The regular files under `root` that share their inode with another name (a copy whose
    completion a crash cut short), relative to it."""
    out = []
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not (dirpath == str(root) and d == ".moss")]
        for name in files:
            try:
                st = os.lstat(os.path.join(dirpath, name))
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
                out.append(os.path.relpath(os.path.join(dirpath, name), root))
    return out
