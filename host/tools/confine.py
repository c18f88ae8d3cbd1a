"""Path confinement: every path a primitive touches must stay inside the project root.

`confine(root, path)` returns the absolute, symlink-resolved path that the caller must
then use (not the original string), so what was checked is what gets opened.

Refused (MossError kind "denied"), each with a message saying why:
- a relative path whose `..` components climb above the root;
- an absolute path outside the root;
- a path that, through a symlink anywhere along it (the final component included, even a
  dangling one, since a write would follow it), resolves outside the root;
- anything inside a `.git` directory (the repository's own metadata, hooks included).

Paths that do not exist yet are fine (the longest existing prefix is resolved and the
rest appended), unless `must_exist=True` (then kind "not_found").
"""

from __future__ import annotations

import os
from pathlib import Path

from moss.errors import MossError

__all__ = ["confine"]


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _realpath(path: str, shown: str) -> str:
    """os.path.realpath, with a path that changes while it is resolved (a folder swapped for
    a link, which makes readlink fail) as a one-line MossError instead of an OSError."""
    try:
        return os.path.realpath(path)
    except OSError as e:
        raise MossError(f"path {shown!r} changed while moss resolved it (a link on it appeared or went "
                        f"away: {e.strerror or e}); look at it again", kind="conflict") from None


def _git_part(rel: str) -> bool:
    return ".git" in Path(rel).parts


def confine(root: Path, path: str | Path, *, must_exist: bool = False, writing: bool = False) -> Path:
    """Return `path` as an absolute resolved Path inside `root`, or raise MossError.

    With `writing`, moss's own folder `.moss/` (config, scripts, sessions) is refused too:
    the agent must not rewrite its own policy or approval rules."""
    if path is None:
        raise MossError("a path is required", kind="usage")
    text = os.fspath(path)
    if "\0" in text:
        raise MossError(f"path {text!r} contains a NUL byte", kind="usage")
    real_root = os.path.realpath(os.fspath(root))
    if not os.path.isdir(real_root):
        raise MossError(f"project root {os.fspath(root)} is not a directory", kind="usage")

    shown = text if text else "."
    absolute = os.path.isabs(text)
    joined = text if absolute else os.path.join(real_root, text)
    lexical = os.path.normpath(joined)
    if absolute and not _inside(lexical, real_root):
        # An absolute path may name the root through a symlinked spelling of it
        # (e.g. /tmp -> /private/tmp); judge it by where it really leads.
        lexical_real = _realpath(lexical, shown)
        if not _inside(lexical_real, real_root):
            raise MossError(
                f"path {shown!r} is outside the project root {real_root}; "
                "use a path inside the project (relative paths are relative to the root)",
                kind="denied",
            )
    elif not absolute and not _inside(lexical, real_root):
        raise MossError(
            f"path {shown!r} escapes the project root {real_root} through '..'",
            kind="denied",
        )

    if _inside(lexical, real_root) and _git_part(os.path.relpath(lexical, real_root)):
        raise MossError(
            f"path {shown!r} is inside a .git directory; moss does not read or write "
            "repository metadata directly",
            kind="denied",
        )

    # realpath follows every symlink that exists along the path, including the final
    # component and dangling links (whose target a write would create).
    resolved = _realpath(lexical, shown)
    if not _inside(resolved, real_root):
        raise MossError(
            f"path {shown!r} leads through a symlink to {resolved}, outside the project "
            f"root {real_root}",
            kind="denied",
        )
    if _git_part(os.path.relpath(resolved, real_root)):
        raise MossError(
            f"path {shown!r} resolves (through a symlink) into a .git directory "
            f"({resolved}); moss does not read or write repository metadata directly",
            kind="denied",
        )
    if writing and Path(os.path.relpath(resolved, real_root)).parts[:1] == (".moss",):
        raise MossError(
            f"path {shown!r} is inside .moss/ (moss's own config, scripts and sessions); "
            "the agent does not change those: edit them yourself",
            kind="denied",
        )
    if must_exist and not os.path.lexists(resolved):
        raise MossError(f"path {shown!r} does not exist", kind="not_found")
    return Path(resolved)
