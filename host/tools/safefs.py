"""The one way the host touches a file under a project: by descriptor, never through a link.

moss runs as root in repositories it did not write. A path it checked and then opened by
name can be a different file by the time it is opened: the repository may ship a symlink
(`.moss/memory/facts.md -> /etc/shadow`), or a background run may swap a folder for a link
between the check and the use. So every host reader and writer of project files goes
through here:

- A path is taken relative to an open descriptor of the project root and walked one
  component at a time with O_NOFOLLOW | O_DIRECTORY (`openat2` with RESOLVE_BENEATH |
  RESOLVE_NO_SYMLINKS does the same walk in one call where the kernel has it). `..`, an
  absolute path outside the root, or a link anywhere below the root is refused with
  UnsafePath; nothing is ever resolved by name twice.
- What is opened must be a regular file (checked on the descriptor, with O_NONBLOCK so a
  planted fifo cannot hang the open), and reads are capped.
- A file is replaced by writing a temp file created with O_EXCL in the same directory
  descriptor and renaming it within that descriptor; a rename replaces a planted link
  itself and never writes through it.

`follow_inside=True` (for the project's own files, which may hold links that stay inside
the tree) lets links resolve as long as every step stays beneath the root; the kernel checks
that during the open (RESOLVE_BENEATH), or the fallback resolves first and then walks the
resolved path without following anything.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import os
import secrets
import stat
from pathlib import Path, PurePosixPath
from typing import Iterator

from ..errors import MossError


class UnsafePath(MossError):
    """A path under the project that moss will not touch: it leaves the tree, passes
    through a link, or is not the kind of file expected there."""

    def __init__(self, message: str, **data):
        super().__init__(message, kind="denied", **data)


DEFAULT_READ_LIMIT = 64 * 1024 * 1024

_NOFOLLOW_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

# --- openat2 (Linux 5.6+) ------------------------------------------------------------------

_SYS_OPENAT2 = 437  # the same number on every architecture (it is from the unified table)
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_SYSCALL_NR = ctypes.c_long(_SYS_OPENAT2)
_HOW_SIZE = ctypes.c_size_t(ctypes.sizeof(_OpenHow))
_libc = None
# None: not tried yet; False: the kernel (or a seccomp filter) has no openat2.
_openat2_ok: bool | None = None


def _openat2(dirfd: int, rel: str, flags: int, mode: int, resolve: int) -> int | None:
    """openat2(2), or None when this kernel cannot do it (then the caller walks)."""
    global _libc, _openat2_ok
    if _openat2_ok is False:
        return None
    if _libc is None:
        try:
            _libc = ctypes.CDLL(None, use_errno=True)
        except OSError:
            _openat2_ok = False
            return None
    how = _OpenHow(flags, mode if flags & os.O_CREAT else 0, resolve)  # else EINVAL
    fd = _libc.syscall(_SYSCALL_NR, dirfd, os.fsencode(rel), ctypes.byref(how), _HOW_SIZE)
    if fd < 0:
        err = ctypes.get_errno()
        if err in (errno.ENOSYS, errno.EPERM) and _openat2_ok is None:
            _openat2_ok = False  # seccomp filters answer EPERM for syscalls they do not know
            return None
        raise OSError(err, os.strerror(err), rel)
    _openat2_ok = True
    return fd


def use_openat2(enabled: bool) -> None:
    """Tests run the component walk too, on kernels that have openat2."""
    global _openat2_ok
    _openat2_ok = None if enabled else False


# --- paths ---------------------------------------------------------------------------------


def parts_of(root: Path, path: Path | str) -> list[str]:
    """The components of `path` below `root`, lexically (no filesystem access). An absolute
    path must lie under `root`; `..` and empty names are refused."""
    if isinstance(path, str):  # a log line per event names the same file: split it once
        return list(_parts_of_str(str(root), path))
    return _parts(root, path)


@functools.lru_cache(maxsize=1024)
def _parts_of_str(root: str, path: str) -> tuple[str, ...]:
    return tuple(_parts(Path(root), path))


def _parts(root: Path, path: Path | str) -> list[str]:
    p = PurePosixPath(os.fspath(path))
    if p.is_absolute():
        try:
            p = p.relative_to(PurePosixPath(os.path.abspath(root)))
        except ValueError:
            raise UnsafePath(f"{path} is outside the project {root}") from None
    parts = [x for x in p.parts if x not in ("", ".")]
    if any(x == ".." for x in parts):
        raise UnsafePath(f"{path}: '..' is not allowed in a path moss writes under the project")
    return parts


def _shown(parts: list[str]) -> str:
    return "/".join(parts) or "."


def _refuse(parts: list[str], e: OSError, upto: int | None = None) -> UnsafePath:
    shown = _shown(parts[:upto] if upto is not None else parts)
    if e.errno in (errno.ELOOP, errno.EXDEV):
        return UnsafePath(f"{shown} is a symlink (or passes through one); moss does not follow links here "
                          "— remove it")
    if e.errno == errno.ENOTDIR:
        return UnsafePath(f"{shown} is not a folder (a symlink or a file); moss does not follow links here "
                          "— remove it")
    if e.errno == errno.ENXIO:
        return UnsafePath(f"{shown} is not a regular file — remove it")
    return UnsafePath(f"{shown}: {e.strerror}")


# --- the tree ------------------------------------------------------------------------------


class Tree:
    """An open project root. Every method takes a path relative to it (or an absolute one
    beneath it) and never follows a link below the root unless asked to stay inside."""

    def __init__(self, root: Path | str):
        self.root = Path(os.path.abspath(root))
        self.fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> "Tree":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _explain(self, parts: list[str], e: OSError, upto: int | None = None, *,
                 folder: bool = False) -> UnsafePath:
        """The refusal for `e`, naming the component at fault (the link, or the file where a
        folder should be; every component is one with `folder`) rather than the whole path;
        looked up by name for the message only."""
        if e.errno in (errno.ELOOP, errno.ENOTDIR, errno.EXDEV):
            for i in range(1, len(parts) + 1):
                try:
                    st = os.stat("/".join(parts[:i]), dir_fd=self.fd, follow_symlinks=False)
                except OSError:
                    break
                shown = _shown(parts[:i])
                if stat.S_ISLNK(st.st_mode):
                    return UnsafePath(f"{shown} is a symlink; moss does not follow links here — remove it")
                if (i < len(parts) or folder) and not stat.S_ISDIR(st.st_mode):
                    return UnsafePath(f"{shown} is a file, but moss needs a folder there: rename or remove {shown}")
        return _refuse(parts, e, upto)

    # folders

    def open_dir(self, path: Path | str, *, create: bool = False) -> int:
        """A descriptor of the folder `path` (the caller closes it). `create` makes missing
        folders (0o755 under the umask); a link, a file or `..` on the way is refused."""
        parts = parts_of(self.root, path)
        if not parts:
            return os.dup(self.fd)
        if not create:
            try:
                fd = _openat2(self.fd, "/".join(parts), _NOFOLLOW_DIR, 0,
                              RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)
            except FileNotFoundError:
                raise
            except OSError as e:
                raise self._explain(parts, e, folder=True) from None
            if fd is not None:
                return fd
        return self._walk(parts, create)

    def _walk(self, parts: list[str], create: bool) -> int:
        fd = os.dup(self.fd)
        try:
            for i, name in enumerate(parts):
                try:
                    nxt = os.open(name, _NOFOLLOW_DIR, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    try:
                        os.mkdir(name, 0o755, dir_fd=fd)
                    except FileExistsError:
                        pass  # made meanwhile: open whatever is there, without following
                    try:
                        nxt = os.open(name, _NOFOLLOW_DIR, dir_fd=fd)
                    except OSError as e:
                        raise self._explain(parts, e, i + 1, folder=True) from None
                except OSError as e:
                    raise self._explain(parts, e, i + 1, folder=True) from None
                os.close(fd)
                fd = nxt
            return fd
        except BaseException:
            os.close(fd)
            raise

    @contextlib.contextmanager
    def parent(self, path: Path | str, *, create: bool = False) -> Iterator[tuple[int, str]]:
        """(descriptor of the folder holding `path`, its last name)."""
        parts = parts_of(self.root, path)
        if not parts:
            raise UnsafePath("the project root itself is not a file")
        dfd = self.open_dir("/".join(parts[:-1]) or ".", create=create)
        try:
            yield dfd, parts[-1]
        finally:
            os.close(dfd)

    # files

    def open(self, path: Path | str, flags: int = os.O_RDONLY, mode: int = 0o644, *,
             follow_inside: bool = False, create_dirs: bool = False) -> int:
        """A descriptor of the regular file `path`, opened with `flags`. Links are refused
        (or, with `follow_inside`, followed only while they stay beneath the root); a fifo,
        a device or a socket is refused without blocking."""
        parts = parts_of(self.root, path)
        flags |= os.O_CLOEXEC | os.O_NONBLOCK
        fd: int | None = None
        if follow_inside:
            fd = self._open_inside(parts, flags, mode)
        else:
            if not create_dirs:
                try:
                    fd = _openat2(self.fd, "/".join(parts), flags | os.O_NOFOLLOW, mode,
                                  RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)
                except OSError as e:
                    if e.errno in (errno.ENOENT, errno.EEXIST, errno.EISDIR):
                        raise
                    raise self._explain(parts, e) from None
            if fd is None:
                with self.parent(path, create=create_dirs) as (dfd, name):
                    try:
                        fd = os.open(name, flags | os.O_NOFOLLOW, mode, dir_fd=dfd)
                    except OSError as e:
                        if e.errno in (errno.ENOENT, errno.EEXIST, errno.EISDIR):
                            raise
                        raise self._explain(parts, e) from None
        return _regular(fd, parts, flags)

    def _open_inside(self, parts: list[str], flags: int, mode: int) -> int:
        try:
            fd = _openat2(self.fd, "/".join(parts) or ".", flags, mode,
                          RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)
        except OSError as e:
            if e.errno in (errno.ENOENT, errno.EEXIST, errno.EISDIR):
                raise
            raise self._explain(parts, e) from None
        if fd is not None:
            return fd
        # No openat2: resolve by name, check it stays inside, then walk what it resolved
        # to without following anything (a swap after the check fails the walk).
        real = Path(os.path.realpath(self.root.joinpath(*parts)))
        try:
            inner = real.relative_to(os.path.realpath(self.root))
        except ValueError:
            raise UnsafePath(f"{_shown(parts)} leads outside the project") from None
        return self.open(inner, flags & ~(os.O_CLOEXEC | os.O_NONBLOCK), mode)

    def read_bytes(self, path: Path | str, limit: int = DEFAULT_READ_LIMIT, *,
                   follow_inside: bool = False) -> bytes:
        """The content of the regular file `path`; more than `limit` bytes is an error."""
        fd = self.open(path, os.O_RDONLY, follow_inside=follow_inside)
        with os.fdopen(fd, "rb") as f:
            data = f.read(limit + 1)
        if len(data) > limit:
            raise MossError(f"{_shown(parts_of(self.root, path))} is larger than {limit} bytes", kind="io")
        return data

    def read_text(self, path: Path | str, limit: int = DEFAULT_READ_LIMIT, **kw) -> str:
        return self.read_bytes(path, limit, **kw).decode("utf-8", errors="replace")

    def write_atomic(self, path: Path | str, data: bytes | str, mode: int | None = None, *,
                     create_dirs: bool = True, sync: bool = True, sync_dir: bool | None = None,
                     new_mode: int | None = 0o644) -> None:
        """Replace `path` with `data`: a temp file made with O_EXCL in the same folder
        descriptor, then a rename within it (a planted link at `path` is replaced, never
        written through). `mode` None keeps an existing file's permissions; a new one gets
        `new_mode` (None: what open(2) gives under the umask). `sync` fsyncs the file, and
        the folder (the rename) too unless `sync_dir` says otherwise.

        This is moss's one atomic writer (`replace_at` on the folder holding `path`):
        storage.write_atomic (files under .moss/) and replace_file (a path anywhere) are this
        method on the right folder."""
        with self.parent(path, create=create_dirs) as (dfd, name):
            replace_at(dfd, name, data, mode, sync=sync, sync_dir=sync_dir, new_mode=new_mode)

    def create_exclusive(self, path: Path | str, data: bytes | str = b"", mode: int = 0o644, *,
                         create_dirs: bool = True) -> bool:
        """Create `path` only if nothing (not even a dangling link) is there; False if
        something was."""
        try:
            self.create_new(path, data, mode, create_dirs=create_dirs)
        except FileExistsError:
            return False
        return True

    def create_new(self, path: Path | str, data: bytes | str = b"", mode: int = 0o644, *,
                   create_dirs: bool = True, symlink: bool = False) -> os.stat_result:
        """Create `path` only if nothing (not even a dangling link) is there, else
        FileExistsError: a regular file holding `data`, or with `symlink` a symbolic link
        whose target is `data` (a link moss puts back, such as a removed `.git` link; it is
        made, never followed). Returns the lstat of what was made, taken in the folder that
        holds it, so the caller knows the very file it made (device and inode)."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        if symlink:
            with self.parent(path, create=create_dirs) as (dfd, name):
                os.symlink(os.fsdecode(data), name, dir_fd=dfd)
                return os.stat(name, dir_fd=dfd, follow_symlinks=False)
        fd = self.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode, create_dirs=create_dirs)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            return os.fstat(fh.fileno())

    def append(self, path: Path | str, data: bytes | str, *, create_dirs: bool = True, create: bool = True,
               mend: bool = False) -> None:
        """Append `data` in one write to the regular file `path` (created if missing, unless
        not `create`: then a missing file is FileNotFoundError). With `mend`, a file whose
        last line has no newline (torn by a killed writer) gets one first, so `data` starts
        a line of its own. moss's one log writer: storage.append_line (JSONL under .moss/),
        append_file (a path anywhere) and the shadow store's journal use it."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        flags = (os.O_RDWR if mend else os.O_WRONLY) | os.O_APPEND | (os.O_CREAT if create else 0)
        fd = self.open(path, flags, 0o644, create_dirs=create_dirs and create)
        try:
            if mend:
                size = os.fstat(fd).st_size
                if size > 0 and os.pread(fd, 1, size - 1) != b"\n":
                    data = b"\n" + data
            os.write(fd, data)
        finally:
            os.close(fd)

    # names

    def lstat(self, path: Path | str) -> os.stat_result | None:
        """What is at `path` itself (a link is reported as a link), or None."""
        try:
            with self.parent(path) as (dfd, name):
                return os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def listdir(self, path: Path | str = ".") -> list[str]:
        try:
            fd = self.open_dir(path)
        except FileNotFoundError:
            return []
        try:
            return sorted(os.listdir(fd))
        finally:
            os.close(fd)

    def unlink(self, path: Path | str, *, missing_ok: bool = True) -> None:
        """Remove the name `path` (a link is removed, not what it points to)."""
        try:
            with self.parent(path) as (dfd, name):
                os.unlink(name, dir_fd=dfd)
        except FileNotFoundError:
            if not missing_ok:
                raise

    def rename(self, src: Path | str, dst: Path | str, *, create_dirs: bool = True) -> None:
        """Move the name `src` to `dst`, both beneath the root, each folder held open."""
        with self.parent(src) as (sfd, sname), self.parent(dst, create=create_dirs) as (dfd, dname):
            os.rename(sname, dname, src_dir_fd=sfd, dst_dir_fd=dfd)

    def touch(self, path: Path | str) -> None:
        """Set the times of the name `path` to now (a link's own times, never its target's):
        a heartbeat on a file moss made."""
        with self.parent(path) as (dfd, name):
            os.utime(name, dir_fd=dfd, follow_symlinks=False)

    def mkdirs(self, path: Path | str) -> None:
        os.close(self.open_dir(path, create=True))


_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def _regular(fd: int, parts: list[str], flags: int) -> int:
    """Keep `fd` only if it is a regular file; drop O_NONBLOCK again for ordinary I/O."""
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a regular file")
            raise UnsafePath(f"{_shown(parts)} is {kind}; moss expected a regular file here — remove it")
        os.set_blocking(fd, True)
        return fd
    except BaseException:
        os.close(fd)
        raise


# Trees by root, kept open for the process: the host writes a log line per event, and one
# openat2 from a held root is cheaper than re-opening the root by name each time.
_trees: dict[str, Tree] = {}


def tree(root: Path | str) -> Tree:
    key = os.path.abspath(root)
    t = _trees.get(key)
    if t is None or t.fd < 0:
        t = _trees[key] = Tree(key)
    return t


def replace_at(dfd: int, name: str, data: bytes | str, mode: int | None = None, *, sync: bool = True,
               sync_dir: bool | None = None, new_mode: int | None = 0o644, symlink: bool = False) -> None:
    """The atomic writer itself, in a folder already held open (`dfd`, which may be an
    O_PATH descriptor): `name` there becomes `data` through a temp name made with O_EXCL
    and a rename within `dfd`, so a link at `name` is replaced, never written through.
    With `symlink`, what `name` becomes is a symbolic link whose target is `data` (a
    shadow restore putting back a link it captured); else a regular file, whose mode is
    `mode`, or with `mode` None an existing file's, or `new_mode` for a new one (None: the
    umask's). `sync` fsyncs the file, and the folder too unless `sync_dir` says otherwise.

    Tree.write_atomic is this on the folder it walked to; a caller that walked there itself
    (the shadow restore, which names the component that blocks it) calls it directly."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    if sync_dir is None:
        sync_dir = sync
    tmp = f".{name[:100]}.moss-{secrets.token_hex(4)}.tmp"
    if symlink:
        os.symlink(os.fsdecode(data), tmp, dir_fd=dfd)
    else:
        if mode is None:
            try:
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
                mode = stat.S_IMODE(st.st_mode) if stat.S_ISREG(st.st_mode) else new_mode
            except FileNotFoundError:
                mode = new_mode
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600 if mode is not None else 0o666, dir_fd=dfd)
    try:  # the temp name is ours from here: removed again if anything fails
        if not symlink:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                if mode is not None:
                    os.fchmod(fh.fileno(), mode)
                if sync:
                    os.fsync(fh.fileno())
        os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dfd)
        raise
    if sync_dir:
        with contextlib.suppress(OSError):
            os.fsync(dfd)


def replace_file(path: Path | str, data: bytes | str, mode: int | None = None, *, sync_dir: bool = False) -> None:
    """Tree.write_atomic for a file anywhere (a user's config, a project file found by
    name): its folder is opened by name, the file itself is replaced within it and never
    written through a link. `mode` None keeps an existing file's permissions, else the
    umask's; the file is fsynced, the folder only with `sync_dir`."""
    path = Path(path)
    with Tree(path.parent) as t:
        t.write_atomic(path.name, data, mode, create_dirs=False, sync=True, sync_dir=sync_dir, new_mode=None)


def append_file(path: Path | str, data: bytes | str) -> None:
    """Tree.append for a file anywhere (a cassette of recorded model answers): one write,
    the folder opened by name, the file never written through a link, fifo or device."""
    path = Path(path)
    with Tree(path.parent) as t:
        t.append(path.name, data, create_dirs=False)


def split_moss(path: Path | str) -> tuple[Path, Path]:
    """(project root, path below it) for a path inside a project's `.moss` folder: the root
    is what precedes the last `.moss` component."""
    p = Path(os.path.abspath(path))
    parts = p.parts
    for i in range(len(parts) - 1, -1, -1):
        if parts[i] == ".moss":
            return Path(*parts[:i]), Path(*parts[i:])
    raise UnsafePath(f"{path} is not inside a .moss folder")


def under_moss(path: Path | str) -> tuple[Tree, Path]:
    """The held Tree of the project `path` belongs to, and `path` relative to it."""
    root, rel = split_moss(path)
    return tree(root), rel
