"""Shadow snapshots of the working tree, kept outside the user's git.

A snapshot is a commit in a private git repository at ``ROOT/.moss/shadow.git`` whose
work tree is the project root. Every git command runs with ``GIT_DIR``,
``GIT_WORK_TREE`` and ``GIT_INDEX_FILE`` pointing at that repository, with system and
global config switched off and a fixed author, so the user's ``.git`` (index, stash,
branches, hooks, config) is never read for writing nor written; no user identity is
needed. The project may or may not be a git repository itself.

What a snapshot holds
    Every file under ROOT that git would see, as bytes plus the executable bit, and
    symlinks as links. Never: ``.moss/``, anything named ``.git``, ignored paths (the
    work tree's ``.gitignore`` files, the user's ``.git/info/exclude`` and their global
    excludes file), files larger than ``max_file_bytes`` ("oversized"), and nested git
    repositories (a directory holding its own ``.git``; its contents are its own
    repository's business). Empty directories are not recorded (git tracks files).

Snapshots are cheap: unchanged files are not re-read (git's stat cache) and identical
contents are stored once. Every ``snapshot()`` call makes a new commit, even when nothing
changed, so each call has its own id, label and time in ``list()``.

Restore
    ``restore(sid)`` makes the tree equal to the snapshot: files changed since (by any
    means: edits, shell commands, other programs) are rewritten byte for byte with the
    snapshot's executable bit (other permission bits of an existing file are kept),
    symlinks are re-pointed, files created since are deleted, files deleted since are
    brought back, and directories left empty by the deletions are removed.

    First it records the current tree as a *backup* commit (not shown in ``list()``; its
    id is returned as ``"backup"`` and can itself be passed to ``restore``). Restore only
    overwrites or deletes content that this backup holds, so ``restore(backup)`` always
    undoes it. Left alone, and reported in ``"skipped"`` as ``{"path", "why"}``:

    - ``"ignored"``: ignored paths. Ignore files (``.gitignore``) are restored first, so
      the snapshot's own rules decide which files created since count as ignored. Ignored
      paths present now are reported when modified since the snapshot (by mtime); an
      ignored directory is reported once, as ``dir/``.
    - ``"oversized"``: files over ``max_file_bytes`` (never in the backup, so never
      overwritten or deleted), reported when modified since the snapshot (by mtime).
    - ``"nested_repo"``: nested git repositories (always reported).
    - ``"obstructed"``: a snapshot file that cannot be put back because something the
      backup lacks is in the way (a non-empty directory where the file was, or a file
      or symlink where one of its parent directories was).
    - ``"failed"``: a path that still differs after the restore (changed meanwhile).

    Empty directories created since the snapshot are not removed (git records files,
    not directories) unless the files deleted by the restore leave them empty.

Concurrency: every operation holds an exclusive ``flock`` on
``.moss/shadow.git/moss.lock``, so processes and threads using the same root take turns.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import secrets
import shutil
import stat
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from moss.errors import MossError

SNAPSHOTS_REF = "refs/heads/snapshots"
BACKUPS_REF = "refs/moss/backups"

_GITLINK = 0o160000
_SYMLINK = 0o120000
_EXEC = 0o100755

# Settings given on every command line. Command-line config beats the repository's own
# config file, so these hold even if .moss/shadow.git/config was tampered with: no
# filters, no line-ending conversion, no fsmonitor or hook program, no signing.
_SAFE_CONFIG = (
    "core.autocrlf=false",
    "core.safecrlf=false",
    "core.symlinks=true",
    "core.fsmonitor=false",
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


class Shadow:
    """Snapshots of ``root`` in ``root/.moss/shadow.git``.

    >>> sh = Shadow(Path("."))
    >>> sid = sh.snapshot("before edit")
    >>> sh.changed(sid)            # {"modified": [...], "added": [...], "deleted": [...]}
    >>> sh.restore(sid)            # {"reverted", "removed", "restored", "skipped", "backup"}
    """

    def __init__(self, root: Path | str, *, max_file_bytes: int = 5_000_000,
                 lock_timeout: float = 60.0):
        root_path = Path(root)
        if not root_path.is_dir():
            raise MossError(f"shadow: project root {str(root)!r} is not a directory",
                            kind="not_found")
        if not isinstance(max_file_bytes, int) or max_file_bytes < 0:
            raise MossError("shadow: max_file_bytes must be a non-negative integer",
                            kind="usage")
        self.root = root_path.resolve()
        self.max_file_bytes = max_file_bytes
        self.lock_timeout = lock_timeout
        self.git_dir = self.root / ".moss" / "shadow.git"
        self._git_bin = shutil.which("git")
        if self._git_bin is None:
            raise MossError("shadow: the `git` program is not installed or not on PATH",
                            kind="config")
        self._env = self._make_env()
        self._excludes_file: str | None = None
        self._prepared = False

    # ------------------------------------------------------------------ public API

    def snapshot(self, label: str = "") -> str:
        """Record the current tree; returns the snapshot's commit id (40 hex digits)."""
        if not isinstance(label, str):
            raise MossError("shadow.snapshot: label must be a string", kind="usage")
        with self._locked(create=True):
            self._stage()
            tree = self._git("write-tree").strip()
            parent = self._ref(SNAPSHOTS_REF)
            sid = self._commit(tree, parent, label, kind="snapshot")
            self._update_ref(SNAPSHOTS_REF, sid, parent)
            self._git("gc", "--auto", "--quiet", check=False)
            return sid

    def list(self) -> list[dict]:
        """Snapshots, oldest first: ``{"id", "label", "time", "files"}``."""
        if not (self.git_dir / "HEAD").is_file():
            return []
        with self._locked(create=False):
            if self._ref(SNAPSHOTS_REF) is None:
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
        """Unified diff from snapshot ``sid`` to the current tree (new files included).

        ``paths`` (relative to the root, or absolute inside it) limits the diff; a
        directory covers everything below it. Binary files show as "Binary files ...
        differ". Ignored and oversized files are not compared: a snapshot file that is
        now ignored or oversized shows as deleted (``changed`` calls it modified).
        """
        specs = [self._relpath(p) for p in (paths or [])]
        with self._locked(create=False):
            commit = self._resolve(sid)
            self._stage()
            tree = self._git("write-tree").strip()
            env = dict(self._env, GIT_LITERAL_PATHSPECS="1")
            return self._git("diff", "--no-color", "--no-ext-diff", "--no-textconv",
                             f"{commit}^{{tree}}", tree, "--", *specs, env=env)

    def changed(self, sid: str) -> dict:
        """Paths that differ between snapshot ``sid`` and the current tree.

        ``{"modified": [...], "added": [...], "deleted": [...]}``, each sorted; a change of
        the executable bit or of file type (file <-> symlink) counts as modified.
        """
        with self._locked(create=False):
            commit = self._resolve(sid)
            self._stage()
            tree = self._git("write-tree").strip()
            result: dict[str, list[str]] = {"modified": [], "added": [], "deleted": []}
            for ch in self._diff_trees(f"{commit}^{{tree}}", tree):
                if ch.status == "A":
                    result["added"].append(ch.path)
                elif ch.status == "D" and not os.path.lexists(self.root / ch.path):
                    result["deleted"].append(ch.path)
                else:
                    result["modified"].append(ch.path)
            return result

    def restore(self, sid: str) -> dict:
        """Make the tree equal to snapshot ``sid`` (see the module docstring).

        Returns ``{"reverted": [...], "removed": [...], "restored": [...],
        "skipped": [{"path", "why"}], "backup": <id of the pre-restore backup>}``.
        """
        with self._locked(create=False):
            commit = self._resolve(sid)
            snap_tree = self._git("rev-parse", "--verify", f"{commit}^{{tree}}").strip()
            snap_time = int(self._git("show", "-s", "--format=%ct", commit, "--").strip())

            # 1. Back up the current tree, so the restore can itself be undone.
            staged = self._stage()
            cur_tree = self._git("write-tree").strip()
            parent = self._ref(BACKUPS_REF)
            backup = self._commit(cur_tree, parent, f"before restore to {commit}",
                                  kind="backup")
            self._update_ref(BACKUPS_REF, backup, parent)

            changes = self._diff_trees(snap_tree, cur_tree)
            remove = [c.path for c in changes if c.status == "A"]
            reverted: list[str] = []
            restored: list[str] = []
            skipped: list[dict] = []
            # Only what the backup holds is overwritten or deleted, so restore(backup)
            # can always undo this. A snapshot file whose place is taken by content the
            # backup lacks (ignored or oversized now) is left alone.
            write = []
            for ch in changes:
                if ch.status == "A":
                    continue
                why = self._unsaved(ch.path, staged) if ch.status == "D" else None
                if why:
                    skipped.append({"path": ch.path, "why": why})
                else:
                    write.append(ch)

            with _BlobReader(self) as blobs:
                # 2. Ignore files first: the snapshot's rules decide which of the files
                # created since are ignored (and so are not deleted).
                rule_files = [c for c in write if _is_ignore_file(c.path)]
                late = self._write_entries(rule_files, blobs, reverted, restored)
                removed = self._remove([p for p in remove if _is_ignore_file(p)])
                rest = [p for p in remove if not _is_ignore_file(p)]
                if rest and (removed or len(late) < len(rule_files)):
                    ignored = self._check_ignore(rest)
                    skipped += [{"path": p, "why": "ignored"} for p in rest if p in ignored]
                    rest = [p for p in rest if p not in ignored]

                # 3. Delete what was created since; write back what changed or went.
                removed += self._remove(rest)
                late += [c for c in write if not _is_ignore_file(c.path)]
                for ch in self._write_entries(late, blobs, reverted, restored):
                    skipped.append({"path": ch.path, "why": "obstructed"})

            # 4. Verify, and report what was left alone.
            info = self._stage()
            after_tree = self._git("write-tree").strip()
            left = {s["path"] for s in skipped}
            for ch in self._diff_trees(snap_tree, after_tree):
                if ch.path not in left:
                    skipped.append({"path": ch.path, "why": "failed"})
            seen = set(left)
            for s in self._left_alone(info, snap_time):
                if s["path"] not in seen:
                    seen.add(s["path"])
                    skipped.append(s)
            return {"reverted": reverted, "removed": removed, "restored": restored,
                    "skipped": skipped, "backup": backup}

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
        self._git("update-ref", "-m", "moss", ref, new, old or "0" * len(new))

    def _commit(self, tree: str, parent: str | None, label: str, kind: str) -> str:
        files = len([p for p in self._git("ls-tree", "-r", "-z", "--name-only", tree)
                     .split("\0") if p])
        subject = " ".join(label.replace("\0", " ").split())[:72] or kind
        message = (f"{subject}\n\nMoss-Kind: {kind}\nMoss-Label: {json.dumps(label)}\n"
                   f"Moss-Files: {files}\n")
        args = ["commit-tree", tree, "-F", "-"]
        if parent:
            args += ["-p", parent]
        return self._git(*args, input=message.encode()).strip()

    def _resolve(self, sid: str) -> str:
        """Full id of a snapshot or backup given its id or an unambiguous prefix."""
        if not isinstance(sid, str) or not (4 <= len(sid) <= 64) or any(
                c not in "0123456789abcdefABCDEF" for c in sid):
            raise MossError(f"shadow: {sid!r} is not a snapshot id", kind="usage")
        if not (self.git_dir / "HEAD").is_file():
            raise MossError(f"shadow: no snapshot {sid} (no snapshots taken yet)",
                            kind="not_found")
        proc = self._git_bytes("rev-parse", "-q", "--verify", f"{sid}^{{commit}}",
                               check=False)
        if proc.returncode != 0:
            err = proc.stderr.decode(errors="replace")
            if "ambiguous" in err:
                raise MossError(f"shadow: snapshot id {sid} is ambiguous; give more "
                                "digits", kind="ambiguous")
            raise MossError(f"shadow: no snapshot {sid}", kind="not_found")
        commit = proc.stdout.decode().strip()
        for ref in (SNAPSHOTS_REF, BACKUPS_REF):
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
        if not create and not (self.git_dir / "HEAD").is_file():
            yield            # nothing to lock yet; callers fail on the missing repo
            return
        self.git_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.git_dir / "moss.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            deadline = time.monotonic() + self.lock_timeout
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
            # Holding the flock, no other moss process is inside this repository, so
            # git lock files left by a killed run are stale and would block every
            # later command.
            for stale in ("index.lock", "HEAD.lock", "packed-refs.lock",
                          f"{SNAPSHOTS_REF}.lock", f"{BACKUPS_REF}.lock"):
                try:
                    (self.git_dir / stale).unlink()
                except FileNotFoundError:
                    pass
            self._prepare()
            yield
        finally:
            os.close(fd)        # releases the lock

    def _check_git_dir(self) -> None:
        # A .moss/ or shadow.git that is a symlink could aim our index at the user's
        # .git; refuse rather than follow it.
        for p in (self.root / ".moss", self.git_dir):
            if p.is_symlink():
                raise MossError(f"shadow: {p} is a symbolic link; refusing to use it",
                                kind="denied")

    def _prepare(self) -> None:
        """Create the repository if needed; (re)write info/exclude and attributes."""
        if self._prepared and (self.git_dir / "HEAD").is_file():
            return
        if not (self.git_dir / "HEAD").is_file():
            env = {k: v for k, v in self._env.items()
                   if k not in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE")}
            proc = subprocess.run(
                [self._git_bin, "init", "--quiet", "--bare", "--template=",
                 "--initial-branch=snapshots", str(self.git_dir)],
                capture_output=True, env=env, cwd=self.root)
            if proc.returncode != 0:
                raise MossError("shadow: git init failed: "
                                + proc.stderr.decode(errors="replace").strip(), kind="io")
        # Invisible to the user's own git even where .moss/ is not ignored yet (their
        # .gitignore is theirs; a .gitignore inside shadow.git covers just this dir).
        _write_if_changed(self.git_dir / ".gitignore", "*\n")
        info = self.git_dir / "info"
        info.mkdir(exist_ok=True)
        _write_if_changed(info / "exclude", _EXCLUDE_HEAD + self._user_excludes())
        _write_if_changed(info / "attributes", _ATTRIBUTES)
        self._excludes_file = self._global_excludes_file()
        self._prepared = True

    def _user_excludes(self) -> str:
        """The user's .git/info/exclude (read only), so 'ignored' means what it means
        to the user's own git."""
        dot_git = self.root / ".git"
        try:
            if dot_git.is_file():     # worktree or submodule: "gitdir: <path>"
                text = dot_git.read_text(errors="replace").strip()
                if not text.startswith("gitdir:"):
                    return ""
                gd = (self.root / text[len("gitdir:"):].strip()).resolve()
                common = gd / "commondir"
                if common.is_file():
                    gd = (gd / common.read_text().strip()).resolve()
                dot_git = gd
            exclude = dot_git / "info" / "exclude"
            if exclude.is_file():
                return "# from the project's own info/exclude\n" + exclude.read_text(
                    errors="replace") + "\n"
        except OSError:
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

    # ------------------------------------------------------------------ staging

    def _stage(self) -> dict:
        """Bring the shadow index to the current tree. Returns what was left out:
        ``{"oversized": [...], "nested": [...]}``."""
        listing = self._git("ls-files", "-z", "--others", "--modified",
                            "--exclude-standard")
        oversized: list[str] = []
        nested: list[str] = []
        for rel in dict.fromkeys(p for p in listing.split("\0") if p):
            if rel.endswith("/"):         # a directory holding its own .git
                nested.append(rel.rstrip("/"))
                continue
            try:
                st = os.lstat(self.root / rel)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) and st.st_size > self.max_file_bytes:
                oversized.append(rel)

        drop = [p for p in self._git("ls-files", "-z", "--cached", "--ignored",
                                     "--exclude-standard").split("\0") if p]
        drop += oversized
        if nested:
            env = dict(self._env, GIT_LITERAL_PATHSPECS="1")
            drop += [p for p in self._git("ls-files", "-z", "--cached", "--", *nested,
                                          env=env).split("\0") if p]
        if drop:
            self._git("update-index", "--force-remove", "-z", "--stdin",
                      input=b"".join(os.fsencode(p) + b"\0" for p in drop))

        specs = [b"."] + [b":(exclude,literal)" + os.fsencode(p)
                          for p in oversized + nested]
        # --ignore-errors: an unreadable file must not stop the snapshot (git exits 1
        # and keeps the rest).
        self._git_bytes("add", "-A", "--ignore-errors", "--pathspec-from-file=-",
                        "--pathspec-file-nul", input=b"\0".join(specs) + b"\0",
                        ok=(0, 1))
        return {"oversized": oversized, "nested": nested}

    def _diff_trees(self, a: str, b: str) -> list["_Change"]:
        out = self._git_bytes("diff-tree", "-r", "-z", "--no-renames", "--no-ext-diff",
                              a, b).stdout
        fields = out.split(b"\0")
        changes = []
        i = 0
        while i + 1 < len(fields):
            head = fields[i].decode()
            if not head.startswith(":"):
                i += 1
                continue
            old_mode, new_mode, old_sha, new_sha, status = head[1:].split(" ")
            changes.append(_Change(os.fsdecode(fields[i + 1]), status[0],
                                   int(old_mode, 8), int(new_mode, 8), old_sha, new_sha))
            i += 2
        return [c for c in changes if _GITLINK not in (c.old_mode, c.new_mode)]

    # ------------------------------------------------------------------ restore help

    def _unsaved(self, rel: str, staged: dict) -> str | None:
        """Why the thing now at ``rel`` (absent from the staged tree) must be kept:
        "ignored", "oversized", "nested_repo"; None if nothing of value is there."""
        try:
            st = os.lstat(self.root / rel)
        except FileNotFoundError:
            return None
        except OSError:
            return "ignored"
        if any(rel.startswith(n + "/") for n in staged["nested"]):
            return "nested_repo"
        if stat.S_ISDIR(st.st_mode):
            return None                 # _make_room decides (only an empty one goes)
        if stat.S_ISREG(st.st_mode) and st.st_size > self.max_file_bytes:
            return "oversized"
        return "ignored"

    def _check_ignore(self, paths: list[str]) -> set[str]:
        proc = self._git_bytes("check-ignore", "--no-index", "-z", "--stdin",
                               input=b"".join(os.fsencode(p) + b"\0" for p in paths),
                               ok=(0, 1))
        return {os.fsdecode(p) for p in proc.stdout.split(b"\0") if p}

    def _remove(self, paths: list[str]) -> list[str]:
        """Delete files and symlinks, deepest first, then directories left empty."""
        removed: list[str] = []
        parents: set[Path] = set()
        for rel in sorted(paths, key=lambda p: (-p.count("/"), p)):
            full = self.root / rel
            try:
                if stat.S_ISDIR(os.lstat(full).st_mode):
                    continue            # became a directory after staging; leave it
                os.unlink(full)
            except FileNotFoundError:
                pass
            removed.append(rel)
            parents.add(full.parent)
        self._prune_empty_dirs(parents)
        return removed

    def _write_entries(self, entries: list, blobs: "_BlobReader", reverted: list,
                       restored: list) -> list:
        """Write snapshot entries; returns the ones that could not be placed."""
        blocked = []
        for ch in sorted(entries, key=lambda c: c.path):
            full = self.root / ch.path
            if not self._make_room(ch.path):
                blocked.append(ch)
                continue
            existed = os.path.lexists(full)
            self._write(full, ch.old_mode, blobs.read(ch.old_sha))
            (reverted if existed else restored).append(ch.path)
        return blocked

    def _prune_empty_dirs(self, dirs: set[Path]) -> None:
        for d in sorted(dirs, key=lambda p: -len(p.parts)):
            while d != self.root and self.root in d.parents:
                try:
                    d.rmdir()
                except OSError:
                    break
                d = d.parent

    def _make_room(self, rel: str) -> bool:
        """Whether the snapshot file ``rel`` can be written: every parent is a real
        directory (or absent), and nothing but an empty directory sits at ``rel``."""
        parts = rel.split("/")
        if any(p in ("", ".", "..", ".git") for p in parts) or rel.startswith(".moss/"):
            return False
        d = self.root
        for part in parts[:-1]:
            d = d / part
            try:
                st = os.lstat(d)
            except FileNotFoundError:
                break
            if not stat.S_ISDIR(st.st_mode):
                return False
        full = self.root / rel
        try:
            st = os.lstat(full)
        except FileNotFoundError:
            return True
        if stat.S_ISDIR(st.st_mode):
            try:
                full.rmdir()
            except OSError:
                return False
        return True

    def _write(self, full: Path, mode: int, data: bytes) -> None:
        """Replace ``full`` atomically with a file (or symlink) of git mode ``mode``."""
        full.parent.mkdir(parents=True, exist_ok=True)
        tmp = full.parent / f".moss-{secrets.token_hex(6)}.tmp"
        try:
            if mode == _SYMLINK:
                os.symlink(data, os.fsencode(tmp))
            else:
                try:
                    cur = os.lstat(full)
                    keep = stat.S_IMODE(cur.st_mode) if stat.S_ISREG(cur.st_mode) else None
                except FileNotFoundError:
                    keep = None
                execute = mode == _EXEC
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                             0o777 if execute else 0o666)    # the umask applies
                try:
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fd, view):]
                    if keep is not None:
                        # Keep the file's permissions; set x where r is, or clear x.
                        perm = (keep | (keep & 0o444) >> 2) if execute else keep & ~0o111
                        os.fchmod(fd, perm)
                finally:
                    os.close(fd)
            os.replace(tmp, full)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise

    def _left_alone(self, info: dict, since: int) -> list[dict]:
        out = []

        def recent(rel: str) -> bool:
            try:
                return os.lstat(self.root / rel).st_mtime >= since
            except OSError:
                return False

        ignored = self._git("ls-files", "-z", "--others", "--ignored",
                            "--exclude-standard", "--directory")
        for rel in (p for p in ignored.split("\0") if p):
            top = rel.split("/", 1)[0]
            if top in (".moss", ".git") or rel.rstrip("/").split("/")[-1] == ".git":
                continue
            if recent(rel):
                out.append({"path": rel, "why": "ignored"})
        out += [{"path": p, "why": "oversized"} for p in info["oversized"] if recent(p)]
        out += [{"path": p, "why": "nested_repo"} for p in info["nested"]]
        return out

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


class _Change:
    __slots__ = ("path", "status", "old_mode", "new_mode", "old_sha", "new_sha")

    def __init__(self, path, status, old_mode, new_mode, old_sha, new_sha):
        self.path, self.status = path, status
        self.old_mode, self.new_mode = old_mode, new_mode
        self.old_sha, self.new_sha = old_sha, new_sha


class _BlobReader:
    """Blob contents through one ``git cat-file --batch`` process, one at a time (so
    memory holds one file, not the whole restore)."""

    def __init__(self, shadow: Shadow):
        self._shadow = shadow
        self._proc: subprocess.Popen | None = None

    def __enter__(self) -> "_BlobReader":
        sh = self._shadow
        self._proc = subprocess.Popen(sh._cmd(("cat-file", "--batch")),
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL, cwd=sh.root, env=sh._env)
        return self

    def read(self, sha: str) -> bytes:
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
        try:
            proc.stdin.close()
        except OSError:
            pass
        proc.stdout.close()
        proc.wait()


def _is_ignore_file(rel: str) -> bool:
    return rel.rsplit("/", 1)[-1] == ".gitignore"


def _parse_meta(body: str) -> dict:
    meta: dict = {}
    for line in body.splitlines():
        if line.startswith("Moss-Label: "):
            try:
                meta["label"] = json.loads(line[len("Moss-Label: "):])
            except ValueError:
                pass
        elif line.startswith("Moss-Files: "):
            try:
                meta["files"] = int(line[len("Moss-Files: "):])
            except ValueError:
                pass
    return meta


def _write_if_changed(path: Path, text: str) -> None:
    try:
        if path.read_text() == text:
            return
    except OSError:
        pass
    path.write_text(text)
