"""An attempt's patch: what its agent did to the copy, as a unified diff against the repository
as given.

"As given" is the state the copy started from: the task's repository as copied (a ``commit``
checked out), before any setup command ran. So the patch, applied with ``git apply`` to the
repository as given, gives the copy as the agent left it (setup's own changes included, when a
task has setup commands). It is taken right after the agent ended, before the task's check runs.

Real git does the work, in a throwaway repository of its own beside the copy (never the copy's
``.git``, which is the repository's content): ``snapshot`` indexes the copy once, ``diff``
indexes it again and compares. Left out: the copy's ``.moss/`` (moss's own: the session log,
the config the attempt ran with), every ``.git`` folder, and what the repository's
``.gitignore`` ignores (build output, caches). Binary files are noted by name ("Binary files
a/x and b/x differ"), not carried. A patch longer than ``MAX_BYTES`` is cut at a line end and
ends with ``CUT_MARKER``, so it cannot be mistaken for the whole change.

Nothing the repository brings runs: no system or global git config is read (so no diff
driver, filter or hook of the user's or the repository's), the environment's ``GIT_*``
variables are dropped, and attributes are switched off (no filter, no eol conversion).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

MAX_BYTES = 256 * 1024  # a patch in a results row is cut beyond this
CUT_MARKER = "# moss: patch cut here"  # the last line of a cut patch (`git apply` refuses it)
GIT_TIMEOUT = 120.0
EXCLUDE = (":(exclude,top).moss",)  # the copy's own .moss/ (moss's files, not the agent's edit)


class PatchError(Exception):
    pass


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, GIT_TERMINAL_PROMPT="0",
               GIT_AUTHOR_NAME="moss", GIT_AUTHOR_EMAIL="moss@localhost", GIT_COMMITTER_NAME="moss",
               GIT_COMMITTER_EMAIL="moss@localhost", LC_ALL="C")
    return env


def git(git_dir: Path, copy: Path, *args: str, text: bool = True, input: bytes | None = None,
        env: dict[str, str] | None = None):
    """Run git against the throwaway repository `git_dir` with `copy` as its work tree, with
    nothing of the user's or the repository's config, hooks or drivers: its stdout, as text
    (or bytes with `text=False`). Also what a child's copy uses (host/tools/worktree/)."""
    cmd = ["git", "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "core.autocrlf=false",
           "-c", "core.quotepath=false", "-c", "core.excludesFile=/dev/null", "-c", "diff.renames=false",
           f"--git-dir={git_dir}", f"--work-tree={copy}", *args]
    try:
        r = subprocess.run(cmd, cwd=copy, env={**_env(), **(env or {})}, input=input, capture_output=True,
                           timeout=GIT_TIMEOUT)
    except FileNotFoundError:
        raise PatchError("git is not installed (the patch is made with git)") from None
    except subprocess.TimeoutExpired:
        raise PatchError(f"git {args[0]} took longer than {GIT_TIMEOUT:.0f} s") from None
    if r.returncode != 0:
        err = r.stderr.decode("utf-8", "replace").strip().splitlines()
        raise PatchError(f"git {args[0]} failed: {err[-1] if err else f'exit {r.returncode}'}")
    return r.stdout.decode("utf-8", "replace") if text else r.stdout


def snapshot(copy: Path, home: Path) -> Path:
    """Index the copy as given, in a throwaway repository at ``home/patch.git``; its path."""
    git_dir = Path(home) / "patch.git"
    try:
        subprocess.run(["git", "init", "-q", "--bare", str(git_dir)], env=_env(), capture_output=True,
                       timeout=GIT_TIMEOUT, check=True)
    except FileNotFoundError:
        raise PatchError("git is not installed (the patch is made with git)") from None
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
        raise PatchError(f"git init failed: {e}") from None
    (git_dir / "info").mkdir(exist_ok=True)
    # before every .gitattributes of the repository: no filter, eol or encoding conversion
    (git_dir / "info" / "attributes").write_text("* -filter -text -ident -eol -working-tree-encoding\n")
    git(git_dir, copy, "add", "-A", "--", ".", *EXCLUDE)
    tree = git(git_dir, copy, "write-tree").strip()
    (git_dir / "moss-base").write_text(tree + "\n")
    return git_dir


def diff(copy: Path, git_dir: Path, max_bytes: int = MAX_BYTES) -> dict:
    """The copy now against its snapshot: ``{patch, patch_stat: {files, added, removed, binary,
    bytes}, patch_cut}`` (``patch`` is "" when nothing changed)."""
    base = (Path(git_dir) / "moss-base").read_text().strip()
    git(git_dir, copy, "add", "-A", "--", ".", *EXCLUDE)
    flags = ("--cached", "--no-ext-diff", "--no-textconv", "--no-color", "--full-index")
    text = git(git_dir, copy, "diff", *flags, base, "--", ".", *EXCLUDE)
    numstat = git(git_dir, copy, "diff", *flags, "--numstat", base, "--", ".", *EXCLUDE)
    files = added = removed = binary = 0
    for line in numstat.splitlines():
        parts = line.split("\t", 2)
        if len(parts) != 3:
            continue
        files += 1
        if parts[0] == "-":
            binary += 1
        else:
            added += int(parts[0])
            removed += int(parts[1])
    data = text.encode("utf-8")
    cut = len(data) > max_bytes
    if cut:
        head = data[:max_bytes]
        head = head[: head.rfind(b"\n") + 1]
        text = head.decode("utf-8", "ignore") + f"{CUT_MARKER}: {len(head)} of {len(data)} bytes shown\n"
    return {"patch": text, "patch_cut": cut,
            "patch_stat": {"files": files, "added": added, "removed": removed, "binary": binary, "bytes": len(data)}}
