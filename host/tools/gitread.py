"""Read what git HEAD holds for a few project files, without letting the repository run anything.

Workspace trust (host/trust/) asks one question of git: did this file's content arrive
through git (a pull, checkout, merge, reset, commit), or was it changed here, in the working
tree? The repository being asked may be hostile (its `.git/config`, its `.gitattributes`, its
refs), so every call here:

- reads objects, never the index or the working tree's status: `git ls-tree` of HEAD,
  `git cat-file` of a blob, `git hash-object` (no `-w`: nothing is written), `git check-attr`;
  `git update-index --assume-unchanged` or a doctored index change nothing here;
- drops every inherited `GIT_*` variable, reads no system or global config, no system or
  global attributes file, no replace refs (`refs/replace/` cannot show another blob for a
  path), takes pathspecs literally, and gives on the command line the settings that beat the
  repository's own config (no fsmonitor, no hooks, no line-ending conversion of its own);
- allows no transport (`protocol.allow=never`, and `GIT_NO_LAZY_FETCH`): a partial clone's
  missing blob is not fetched from anywhere while moss looks;
- runs `hash-object` with the repository's attributes only for paths `check-attr` found no
  filter driver on (a filter is a command): such paths are reported as converted, not hashed.

A repository owned by someone else is read only if the user's own git config lists it in
`safe.directory` (the one thing taken from that config). Anything unexpected (no git, not a
work tree, git refusing the repository, a timeout) makes `GitView.open` return None: the
caller then cannot tell, and asks.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field

__all__ = ["GitView", "SAFE_CONFIG", "IN_PROGRESS", "CONVERTING"]

SAFE_CONFIG = (
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.attributesFile=/dev/null",
    "core.autocrlf=false",
    "core.safecrlf=false",
    "core.untrackedCache=false",
    "core.sparseCheckout=false",
    "core.quotePath=false",
    "protocol.allow=never",
    "color.ui=false",
)
# Files in the git directory that mean an operation brought content into the working tree
# without moving HEAD yet (merge --no-commit or --squash, cherry-pick -n, revert, rebase).
IN_PROGRESS = ("MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD", "SQUASH_MSG", "rebase-merge",
               "rebase-apply")
# Attributes under which the working tree's bytes are not a plain copy of a blob beyond line
# endings: a filter driver (a command), another encoding, `$Id$` expansion.
CONVERTING = ("filter", "working-tree-encoding", "ident")
TIMEOUT_S = 10


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") or k == "GIT_EXEC_PATH"}
    env.update({
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_ATTR_NOSYSTEM": "1",
        "GIT_NO_REPLACE_OBJECTS": "1",
        "GIT_LITERAL_PATHSPECS": "1",
        "GIT_NO_LAZY_FETCH": "1",
        "GIT_OPTIONAL_LOCKS": "0",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_PAGER": "cat",
        "LC_ALL": "C",
    })
    return env


def _users_safe_directories(git: str) -> tuple:
    """The user's own `safe.directory` entries (their global git config; nothing else of it)."""
    env = {k: v for k, v in _env().items() if k != "GIT_CONFIG_GLOBAL"}
    try:
        p = subprocess.run([git, "config", "--global", "--get-all", "safe.directory"], cwd="/", env=env,
                           capture_output=True, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return ()
    return tuple(ln for ln in p.stdout.decode("utf-8", "surrogateescape").splitlines() if ln) \
        if p.returncode == 0 else ()


@dataclass
class GitView:
    """HEAD's entries for the project's `.moss/` files, and ways to ask about blobs."""

    root: str
    git: str
    gitdir: str
    top: str = ""  # the work tree's top folder
    prefix: str = ""  # root relative to `top` ("" or "sub/")
    head: dict[str, str] = field(default_factory=dict)  # path (relative to root) -> "MODE OID"
    busy: str = ""  # an operation in progress (MERGE_HEAD, rebase-merge, ...), if any
    safe: tuple = ()  # the user's own safe.directory entries, when git needed them

    @classmethod
    def open(cls, root, under: str = ".moss") -> GitView | None:
        """The view of the work tree holding `root`, or None when there is none git will read."""
        git = shutil.which("git")
        if git is None:
            return None
        view = cls(os.path.realpath(os.fspath(root)), git, "")
        ask = ("rev-parse", "--is-inside-work-tree", "--absolute-git-dir", "--show-toplevel", "--show-prefix")
        p = view._proc(*ask)
        if p is not None and p.returncode != 0 and b"safe.directory" in p.stderr:
            # a repository owned by someone else: read it only if the user's own git config
            # says it is safe (moss reads no global config otherwise)
            view.safe = _users_safe_directories(git)
            p = view._proc(*ask) if view.safe else None
        out = p.stdout if p is not None and p.returncode == 0 else None
        if out is None:
            return None
        lines = out.decode("utf-8", "surrogateescape").split("\n")
        if len(lines) < 4 or lines[0] != "true":
            return None
        view.gitdir, view.top, view.prefix = lines[1], lines[2], lines[3]
        view.busy = next((name for name in IN_PROGRESS if os.path.lexists(os.path.join(view.gitdir, name))), "")
        has_head = view._run("rev-parse", "-q", "--verify", "HEAD^{commit}")
        if has_head:  # no commit yet: nothing is in HEAD
            listing = view._run("ls-tree", "-r", "-z", "HEAD", "--", under)
            if listing is None:
                return None
            for row in listing.split(b"\0"):
                meta, tab, path = row.partition(b"\t")
                if not tab:
                    continue
                mode, _, oid = meta.split(b" ")
                view.head[path.decode("utf-8", "surrogateescape")] = f"{mode.decode()} {oid.decode()}"
        return view

    def _run(self, *args: str, input: bytes | None = None, top: bool = False) -> bytes | None:
        """git's output, or None if it failed; `top`: run from the work tree's top folder
        (hash-object does not take paths relative to a subfolder), else from the root."""
        p = self._proc(*args, input=input, top=top)
        return p.stdout if p is not None and p.returncode == 0 else None

    def _proc(self, *args: str, input: bytes | None = None, top: bool = False):
        cmd = [self.git]
        for c in SAFE_CONFIG + tuple(f"safe.directory={d}" for d in self.safe):
            cmd += ["-c", c]
        try:
            return subprocess.run(cmd + list(args), cwd=self.top if top else self.root, env=_env(), input=input,
                                  capture_output=True, timeout=TIMEOUT_S,
                                  stdin=None if input is not None else subprocess.DEVNULL)
        except (OSError, subprocess.SubprocessError):
            return None

    def blob(self, entry: str | None) -> bytes | None:
        """The raw bytes of a HEAD entry's blob (no conversion), or None."""
        if not entry:
            return None
        mode, _, oid = entry.partition(" ")
        if mode == "160000":
            return None  # a submodule: no blob
        return self._run("cat-file", "blob", oid)

    def converting(self, paths: list[str]) -> dict[str, list[str]]:
        """For each path, the attributes (of CONVERTING) set on it; a path git could not be
        asked about counts as converted."""
        out: dict[str, list[str]] = {p: [] for p in paths}
        if not paths:
            return out
        raw = self._run("check-attr", "-z", *CONVERTING, "--", *(self.prefix + p for p in paths), top=True)
        if raw is None:
            return {p: ["unknown attributes"] for p in paths}
        parts = raw.split(b"\0")
        for i in range(0, len(parts) - 2, 3):
            path, attr, value = (x.decode("utf-8", "surrogateescape") for x in parts[i:i + 3])
            path = path[len(self.prefix):] if path.startswith(self.prefix) else path
            if value not in ("unspecified", "unset") and path in out:
                out[path].append(f"{attr}={value}")
        return out

    def in_store(self, paths: list[str]) -> dict[str, bool]:
        """For each path (whose attributes convert nothing but line endings): whether its bytes,
        hashed as they are or as `git add` would clean them, name an object git already has,
        i.e. the content came out of the repository (a checkout of another version, a merge, a
        stash, an earlier `git add`). A path git could not hash counts as in the store."""
        if not paths:
            return {}
        listing = "".join(self.prefix + p + "\n" for p in paths).encode("utf-8", "surrogateescape")
        ids: list[list[str]] = [[] for _ in paths]
        for flags in (("--no-filters",), ()):
            got = self._run("hash-object", *flags, "--stdin-paths", input=listing, top=True)
            rows = got.decode().split() if got is not None else []
            if len(rows) != len(paths):
                return {p: True for p in paths}
            for i, oid in enumerate(rows):
                ids[i].append(oid)
        wanted = sorted({oid for pair in ids for oid in pair})
        got = self._run("cat-file", "--batch-check=%(objectname) %(objecttype)",
                        input="".join(o + "\n" for o in wanted).encode())
        if got is None:
            return {p: True for p in paths}
        present = {ln.split(" ")[0] for ln in got.decode().splitlines() if not ln.endswith(" missing")}
        return {p: any(oid in present for oid in pair) for p, pair in zip(paths, ids)}
