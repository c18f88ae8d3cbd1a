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
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

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
    """Every piece of git metadata under `root`, by relative path (see the module doc)."""
    root = os.fspath(root)
    found: dict[str, Entry] = {}
    stack = [root]
    while stack:
        d = stack.pop()
        try:
            with os.scandir(d) as it:
                entries = list(it)
        except OSError:
            continue
        names = {e.name for e in entries}
        if d != root and "HEAD" in names and "objects" in names and "refs" in names:
            try:
                st = os.lstat(d)
                if _is_dir(os.path.join(d, "objects")) and _is_dir(os.path.join(d, "refs")):
                    rel = os.path.relpath(d, root)
                    found[rel] = Entry(rel, "bare", (st.st_dev, st.st_ino))
                    continue
            except OSError:
                pass
        for e in entries:
            if e.name == ".git":
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                rel = os.path.relpath(e.path, root)
                if stat.S_ISLNK(st.st_mode):
                    try:
                        data = os.readlink(e.path).encode("utf-8", "surrogateescape")
                    except OSError:
                        data = b""
                    found[rel] = Entry(rel, "link", (st.st_dev, st.st_ino), data)
                elif stat.S_ISDIR(st.st_mode):
                    found[rel] = Entry(rel, "dir", (st.st_dev, st.st_ino))
                else:
                    try:
                        with open(e.path, "rb") as fh:
                            data = fh.read(4096)
                    except OSError:
                        data = b""
                    found[rel] = Entry(rel, "file", (st.st_dev, st.st_ino), data)
                continue
            if d == root and e.name == ".moss":
                continue  # moss's own folder: read-only to commands as a whole
            try:
                if e.is_dir(follow_symlinks=False):
                    stack.append(e.path)
            except OSError:
                pass
    return found


def _is_dir(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


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
    out: list[str] = []
    try:
        text = Path(gitdir, "config").read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    for key, value in _config_items(text):
        if any(r.match(key.lower()) for r in _RISKY):
            out.append(f"{key} = {value}")
    try:
        hooks = sorted(n for n in os.listdir(os.path.join(gitdir, "hooks")) if not n.endswith(".sample"))
    except OSError:
        hooks = []
    out += [f"hook {h}" for h in hooks]
    return tuple(out)


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
            e.risky = risky_settings(_gitdir(self.root, e))
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
                e.risky = risky_settings(_gitdir(self.root, e))
                notes.append(self._quarantine(e))
                continue
            seen.add(e.ident)
            e.risky = risky_settings(_gitdir(self.root, e))
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
        for ident, old in list(self._known.items()):
            if ident in seen or ident in self._gone_reported:
                continue
            if old.kind in ("file", "link"):
                # Quarantine above has freed the path if something new took its place.
                if not os.path.lexists(os.path.join(self.root, old.rel)) and self._restore(old):
                    notes.append(f"{old.rel}: the {'.git file' if old.kind == 'file' else '.git link'} "
                                 "was removed; moss put it back")
                    continue
            self._gone_reported.add(ident)
            notes.append(f"{old.rel}: the git metadata that was here when the session began is gone")
        return notes

    def _restore(self, old: Entry) -> bool:
        path = os.path.join(self.root, old.rel)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            if old.kind == "link":
                os.symlink(old.data.decode("utf-8", "surrogateescape"), path)
            else:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                with os.fdopen(fd, "wb") as fh:
                    fh.write(old.data)
            st = os.lstat(path)
        except OSError:
            return False
        restored = Entry(old.rel, old.kind, (st.st_dev, st.st_ino), old.data, old.risky)
        del self._known[old.ident]
        self._known[restored.ident] = restored
        return True

    def _quarantine(self, e: Entry) -> str:
        """Move a new piece of git metadata out of the project tree, defanged."""
        what = _describe(e)
        src = os.path.join(self.root, e.rel)
        qdir = os.path.join(self.root, ".moss", "agent", "quarantine",
                            time.strftime("%Y%m%d-%H%M%S") + "-" + hashlib.sha1(
                                f"{e.rel}{time.time_ns()}".encode()).hexdigest()[:6])
        name = e.rel.replace(os.sep, "__").lstrip(".") or "git"
        dest = os.path.join(qdir, name + ".quarantined")
        try:
            _ensure_agent_dir(self.root)
            os.makedirs(qdir, exist_ok=True)
            try:
                os.rename(src, dest)
            except OSError:
                shutil.move(src, dest)
            if os.path.isdir(dest) and not os.path.islink(dest):
                for inner in ("config", "hooks", "HEAD"):
                    p = os.path.join(dest, inner)
                    if os.path.lexists(p):
                        os.rename(p, p + ".disabled")
        except OSError as exc:
            # Could not move it: remove what the command created rather than leave it armed.
            try:
                if os.path.isdir(src) and not os.path.islink(src):
                    shutil.rmtree(src)
                else:
                    os.unlink(src)
            except OSError:
                return (f"{e.rel}: {what} and moss could NOT remove it ({exc}); do not run git "
                        "there before checking it")
            return f"{e.rel}: {what}; the agent may not create git metadata, so moss deleted it"
        return (f"{e.rel}: {what}; the agent may not create git metadata, so moss moved it to "
                f"{os.path.relpath(dest, self.root)} (disabled)")


def _ensure_agent_dir(root: str) -> None:
    agent = os.path.join(root, ".moss", "agent")
    os.makedirs(agent, exist_ok=True)
    ignore = os.path.join(agent, ".gitignore")
    if not os.path.exists(ignore):
        with open(ignore, "w", encoding="utf-8") as fh:
            fh.write("# sessions and logs written by moss\n*\n")


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
