"""Git metadata inside the project: find it, keep it read-only, notice and undo changes.

Git runs commands named in a repository's own metadata (hooks, ``core.fsmonitor``,
``core.hooksPath``, filter drivers, ...) the next time *the user* runs ``git status`` there,
outside any sandbox. So below ``full`` access the agent must not create or change git
metadata anywhere in the project:

- ``scan(root)`` finds every ``.git`` (directory, file or symlink) at any depth, and every
  directory git would take for a bare repository (``HEAD`` + ``objects/`` + ``refs/``), without
  following symlinks and without descending into them or into the project's ``.moss/``.
- the sandbox binds each one read-only (``protected()``) for the command;
- ``GitGuard.check()`` after the command (and before the next) compares with what was there
  when the session first looked: anything new is moved out of the way into
  ``.moss/agent/quarantine/`` (defanged: its ``config`` and ``hooks`` renamed, so git cannot
  use it even there), a replaced ``.git`` link or file is put back, and every change that
  matters (new hooks, settings that run commands, a repointed gitdir) comes back as a
  sentence to report. Nothing the user had is ever deleted.

moss may run as root, and a command (or a background run) can swap a folder of the project for
a link while moss looks: every look and every move here is made on descriptors, walked from the
project root without following a link (moss.tools.safefs). What is moved is checked to be the
very file or folder the scan found (its device and inode), from a descriptor of its parent
folder inside the project; a folder that became a link meanwhile is left alone and reported.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import shutil
import stat
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import MossError
from . import safefs

__all__ = ["Entry", "GitGuard", "guard_for", "scan", "risky_settings"]

# Settings that make git run a command (or load settings that may), by "section.key" with
# "*" for any subsection. Compared case-insensitively, as git does.
RISKY_KEYS = (
    "core.fsmonitor", "core.hookspath", "core.sshcommand", "core.pager", "core.editor",
    "core.askpass", "core.gitproxy", "core.worktree", "diff.external", "diff.*.textconv",
    "diff.*.command", "merge.*.driver", "filter.*.clean", "filter.*.smudge", "filter.*.process",
    "credential.helper", "credential.*.helper", "sequence.editor", "gpg.program",
    "gpg.*.program", "pager.*", "alias.*", "include.path", "includeif.*.path",
    "uploadpack.packobjectshook", "remote.*.uploadpack", "remote.*.receivepack",
    "interactive.difffilter", "browser.*.cmd", "man.*.cmd",
)
_RISKY = [re.compile("^" + re.escape(k).replace(r"\*", r"[^.]*(?:\.[^.]*)*?") + "$") for k in RISKY_KEYS]


@dataclass
class Entry:
    """One piece of git metadata: where it is, what it is, and what in it can run commands."""

    rel: str           # relative to the project root ("." never: the root itself is not one)
    kind: str          # "dir" (.git directory), "file" (.git file), "link" (.git symlink), "bare"
    ident: tuple       # (st_dev, st_ino) of the entry itself (lstat)
    data: bytes = b""  # a .git file's content, or a .git link's target
    risky: tuple = field(default=(), compare=False)


def scan(root: Path | str) -> dict[str, Entry]:
    """Every piece of git metadata under `root`, by relative path (see the module doc).

    Each folder is opened from the root's descriptor without following a link on the way, and
    read through that descriptor: a folder swapped for a link while the scan runs is skipped,
    never followed out of the project."""
    found: dict[str, Entry] = {}
    try:
        tree = safefs.tree(os.path.realpath(os.fspath(root)))
    except OSError:
        return found
    stack = [""]
    while stack:
        rel = stack.pop()
        try:
            fd = tree.open_dir(rel or ".")
        except (OSError, MossError):
            continue  # gone, or a link now: nothing of the project is behind it
        try:
            _scan_dir(fd, rel, found, stack)
        finally:
            os.close(fd)
    return found


def _scan_dir(fd: int, rel: str, found: dict[str, Entry], stack: list[str]) -> None:
    try:
        with os.scandir(fd) as it:
            entries = list(it)
    except OSError:
        return
    names = {e.name: e for e in entries}
    if rel and "HEAD" in names and "objects" in names and "refs" in names:
        try:
            if names["objects"].is_dir(follow_symlinks=False) and names["refs"].is_dir(follow_symlinks=False):
                st = os.fstat(fd)  # the folder read, whatever its name is now
                found[rel] = Entry(rel, "bare", (st.st_dev, st.st_ino))
                return
        except OSError:
            pass
    for e in entries:
        name = e.name
        path = f"{rel}/{name}" if rel else name
        if name == ".git":
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue  # gone meanwhile
            ident = (st.st_dev, st.st_ino)
            if stat.S_ISLNK(st.st_mode):
                try:
                    data = os.readlink(name, dir_fd=fd).encode("utf-8", "surrogateescape")
                except OSError:
                    data = b""
                found[path] = Entry(path, "link", ident, data)
            elif stat.S_ISDIR(st.st_mode):
                found[path] = Entry(path, "dir", ident)
            else:
                found[path] = Entry(path, "file", ident, _read_git_file(fd, ident))
            continue
        if not rel and name == ".moss":
            continue  # moss's own folder: read-only to commands as a whole
        try:
            if e.is_dir(follow_symlinks=False):
                stack.append(path)
        except OSError:
            pass


def _read_git_file(dfd: int, ident: tuple) -> bytes:
    """The first 4 KB of the `.git` file in `dfd` if it is still the regular file scanned
    (never through a link, never blocking on a fifo), else nothing."""
    try:
        fd = os.open(".git", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
    except OSError:
        return b""
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != ident:
            return b""
        return os.read(fd, 4096)
    except OSError:
        return b""
    finally:
        os.close(fd)


def _gitdir(root: str, entry: Entry) -> str | None:
    """The directory git would use for this entry (None if it does not point anywhere)."""
    path = os.path.join(root, entry.rel)
    if entry.kind in ("dir", "bare"):
        return path
    if entry.kind == "link":
        return os.path.realpath(path)
    m = re.match(rb"gitdir:\s*(.+?)\s*$", entry.data, re.M)
    if not m:
        return None
    target = m.group(1).decode("utf-8", "surrogateescape")
    return os.path.normpath(os.path.join(os.path.dirname(path), target))


def _config_items(text: str) -> list[tuple[str, str]]:
    """(section[.subsection].key, value) pairs of a git config file; a forgiving reader."""
    items: list[tuple[str, str]] = []
    section = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        m = re.match(r'^\[\s*([A-Za-z0-9.-]+)(?:\s+"((?:[^"\\]|\\.)*)")?\s*\](.*)$', line)
        if m:
            name, sub = m.group(1).lower(), m.group(2)
            section = f"{name}.{sub}" if sub is not None else name
            line = m.group(3).strip()
            if not line:
                continue
        m = re.match(r"^([A-Za-z][A-Za-z0-9-]*)\s*(?:=\s*(.*))?$", line)
        if m and section:
            items.append((f"{section}.{m.group(1).lower()}", (m.group(2) or "true").strip()))
    return items


def risky_settings(gitdir: str | None) -> tuple[str, ...]:
    """What in this git directory makes git run something: hooks and command settings."""
    if not gitdir or not os.path.isdir(gitdir):
        return ()
    try:
        hooks = os.listdir(os.path.join(gitdir, "hooks"))
    except OSError:
        hooks = []
    return _risky(_read_small(os.path.join(gitdir, "config")), hooks)


def _risky(config: str, hooks: list[str]) -> tuple[str, ...]:
    out = [f"{key} = {value}" for key, value in _config_items(config)
           if any(r.match(key.lower()) for r in _RISKY)]
    out += [f"hook {h}" for h in sorted(hooks) if not h.endswith(".sample")]
    return tuple(out)


def _risky_entry(root: str, entry: Entry) -> tuple[str, ...]:
    """risky_settings of an entry. A git directory inside the project (a `.git` folder, a bare
    repository) is read from the root without following a link, so a folder swapped for a
    link never has moss read (and report) settings from outside; a `.git` file or link
    names its git directory, which may rightly be elsewhere (a worktree's)."""
    if entry.kind not in ("dir", "bare"):
        return risky_settings(_gitdir(root, entry))
    tree = safefs.tree(root)
    try:
        config = tree.read_text(f"{entry.rel}/config", 256 * 1024)
    except (OSError, MossError):
        config = ""
    try:
        hooks = tree.listdir(f"{entry.rel}/hooks")
    except (OSError, MossError):
        hooks = []
    return _risky(config, hooks)


def _read_small(path: str, limit: int = 256 * 1024) -> str:
    """A regular file's text (at most `limit` bytes); "" for anything else. Never blocks on
    a fifo or reads a device."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""
        return os.read(fd, limit).decode("utf-8", errors="replace")
    except OSError:
        return ""
    finally:
        os.close(fd)


def _describe(entry: Entry) -> str:
    what = {"dir": "a git repository", "file": "a .git file", "link": "a .git link",
            "bare": "a bare git repository"}[entry.kind]
    details = []
    if entry.kind == "file" and entry.data:
        details.append(entry.data.decode("utf-8", "replace").strip()[:200])
    if entry.kind == "link":
        details.append("-> " + entry.data.decode("utf-8", "replace"))
    if entry.risky:
        details.append("it sets " + "; ".join(entry.risky[:6]) + ("; ..." if len(entry.risky) > 6 else ""))
    return what + " appeared" + (f" ({'; '.join(details)})" if details else "")


class GitGuard:
    """What git metadata one project had when this process first looked, and what changed since.

    Thread-safe: shell commands and background runs of one project share one guard."""

    def __init__(self, root: Path | str):
        self.root = os.path.realpath(os.fspath(root))
        self._lock = threading.Lock()
        self._known: dict[tuple, Entry] | None = None  # by identity
        self._gone_reported: set[tuple] = set()

    def before(self) -> tuple[list[str], list[str]]:
        """Before a command: (what changed since the last look, undone where possible; the
        absolute paths the sandbox must bind read-only). The first call takes the baseline."""
        with self._lock:
            notes = self._check()
            assert self._known is not None  # _check took the baseline
            paths = []
            for e in self._known.values():
                p = os.path.join(self.root, e.rel)
                if e.kind == "link":
                    p = os.path.realpath(p)
                    if not p.startswith(self.root + os.sep):
                        continue  # outside the project: read-only inside the sandbox anyway
                if os.path.lexists(p):
                    paths.append(p)
            return notes, sorted(set(paths))

    def _baseline(self, current: dict[str, Entry]) -> None:
        self._known = {}
        for e in current.values():
            e.risky = _risky_entry(self.root, e)
            self._known[e.ident] = e

    def check(self) -> list[str]:
        """After a command: compare with what was known, undo what can be undone, and say
        what happened (one sentence per finding; empty when nothing did)."""
        with self._lock:
            return self._check()

    def _check(self) -> list[str]:
        current = scan(self.root)
        if self._known is None:
            self._baseline(current)
            return []
        notes: list[str] = []
        seen: set[tuple] = set()
        for rel, e in sorted(current.items()):
            old = self._known.get(e.ident)
            if old is None or old.kind != e.kind:
                e.risky = _risky_entry(self.root, e)
                notes.append(self._quarantine(e))
                continue
            seen.add(e.ident)
            e.risky = _risky_entry(self.root, e)
            if old.rel != rel:
                notes.append(f"{old.rel}: the git metadata that was here when the session began is now "
                             f"at {rel}")
            if e.data != old.data:
                notes.append(f"{rel}: its gitdir changed from {old.data.decode('utf-8', 'replace').strip()!r} "
                             f"to {e.data.decode('utf-8', 'replace').strip()!r}")
            added = [r for r in e.risky if r not in old.risky]
            if added:
                notes.append(f"{rel}: git settings that run commands appeared: " + "; ".join(added))
            self._known[e.ident] = e
        put_back: list[tuple[Entry, Entry]] = []
        for ident, old in list(self._known.items()):
            if ident in seen or ident in self._gone_reported:
                continue
            if old.kind in ("file", "link"):
                # Quarantine above has freed the path if something new took its place.
                new = None if os.path.lexists(os.path.join(self.root, old.rel)) else self._restore(old)
                if new is not None:
                    put_back.append((old, new))
                    notes.append(f"{old.rel}: the {'.git file' if old.kind == 'file' else '.git link'} "
                                 "was removed; moss put it back")
                    continue
            self._gone_reported.add(ident)
            notes.append(f"{old.rel}: the git metadata that was here when the session began is gone")
        # What is put back is known by its new identity. One put back may have the inode of
        # another removed by the same command, so every old identity goes before a new one
        # is recorded (else a restored .git link would be taken for a new one next time).
        for old, _new in put_back:
            self._known.pop(old.ident, None)
        for _old, new in put_back:
            self._known[new.ident] = new
        return notes

    def _restore(self, old: Entry) -> Entry | None:
        """Put a removed .git file or link back, made in its folder's descriptor (reached from
        the root without following a link) and never through a link already there; what was
        made, or None when it could not be."""
        try:
            # created, not replaced (O_EXCL): whatever took the path meanwhile is left alone
            st = safefs.tree(self.root).create_new(old.rel, old.data, 0o644, symlink=old.kind == "link")
        except (OSError, MossError):
            return None
        return Entry(old.rel, old.kind, (st.st_dev, st.st_ino), old.data, old.risky)

    def _quarantine(self, e: Entry) -> str:
        """Move a new piece of git metadata out of the project tree, defanged.

        Acts on descriptors only: the folder holding it is opened from the root without
        following a link, and what is moved must be the very file or folder the scan found
        (same device and inode). So a folder swapped for a link to, say, the home folder
        moves nothing of the home into the project."""
        what = _describe(e)
        tree = safefs.tree(self.root)
        stamp = time.strftime("%Y%m%d-%H%M%S") + "-" + hashlib.sha1(f"{e.rel}{time.time_ns()}".encode()).hexdigest()[:6]
        qrel = f".moss/agent/quarantine/{stamp}"
        name = e.rel.replace(os.sep, "__").lstrip(".") or "git"
        dest = f"{qrel}/{name}.quarantined"
        try:
            with tree.parent(e.rel) as (dfd, src):
                try:
                    st = os.stat(src, dir_fd=dfd, follow_symlinks=False)
                except FileNotFoundError:
                    return f"{e.rel}: {what}, and it is gone again"
                if (st.st_dev, st.st_ino) != e.ident:
                    return (f"{e.rel}: {what}, but something else is there now, so moss left it where it is; "
                            "do not run git there before checking it")
                try:
                    from .. import storage

                    storage.ensure_dir(Path(self.root) / qrel)
                    with tree.parent(dest, create=False) as (qfd, qname):
                        os.rename(src, qname, src_dir_fd=dfd, dst_dir_fd=qfd)
                        moved = os.stat(qname, dir_fd=qfd, follow_symlinks=False)
                        if stat.S_ISDIR(moved.st_mode):
                            _defang(qfd, qname, (moved.st_dev, moved.st_ino))
                except (OSError, MossError) as exc:
                    return self._remove_instead(e, what, dfd, src, exc)
        except MossError as exc:  # a folder on the way is a link (or a file) now
            return (f"{e.rel}: {what}, but {exc.message.split(';')[0]}, so moss left it where it is; "
                    "do not run git there before checking it")
        except OSError as exc:
            return f"{e.rel}: {what} and moss could NOT move it ({exc.strerror or exc}); do not run git there before checking it"
        return (f"{e.rel}: {what}; the agent may not create git metadata, so moss moved it to "
                f"{dest} (disabled)")

    def _remove_instead(self, e: Entry, what: str, dfd: int, src: str, exc: OSError | MossError) -> str:
        """Could not move it: remove what the command created rather than leave it armed,
        if it is still what the scan found."""
        why = exc.message if isinstance(exc, MossError) else (exc.strerror or str(exc))
        try:
            st = os.stat(src, dir_fd=dfd, follow_symlinks=False)
            if (st.st_dev, st.st_ino) != e.ident:
                raise OSError(errno.ESTALE, "something else is there now")
            if stat.S_ISDIR(st.st_mode):
                shutil.rmtree(src, dir_fd=dfd)  # descriptor-based: never follows a link
            else:
                os.unlink(src, dir_fd=dfd)
        except OSError as exc2:
            return (f"{e.rel}: {what} and moss could NOT remove it ({why}; {exc2.strerror or exc2}); "
                    "do not run git there before checking it")
        return f"{e.rel}: {what}; the agent may not create git metadata, so moss deleted it"


def _defang(qfd: int, qname: str, ident: tuple) -> None:
    """Rename config, hooks and HEAD inside the quarantined folder, through its descriptor."""
    fd = os.open(qname, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=qfd)
    try:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != ident:
            return
        for inner in ("config", "hooks", "HEAD"):
            with contextlib.suppress(FileNotFoundError):
                os.rename(inner, inner + ".disabled", src_dir_fd=fd, dst_dir_fd=fd)
    finally:
        os.close(fd)


_guards: dict[str, GitGuard] = {}
_guards_lock = threading.Lock()


def guard_for(root: Path | str) -> GitGuard:
    """The one guard of this project in this process (its baseline is the first look)."""
    key = os.path.realpath(os.fspath(root))
    with _guards_lock:
        g = _guards.get(key)
        if g is None:
            g = _guards[key] = GitGuard(key)
        return g
