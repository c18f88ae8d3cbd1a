"""What a capture is, and the names and formats the shadow package shares.

A capture's entries map each path to ("f", perm, blob) | ("l", blob) | ("d", perm) |
("u", reason, kind, size, mtime_ns, ctime_ns, inode, perm); the functions here compare
entries, show a path as the user sees it, and say why content was not captured.
"""

from __future__ import annotations

import json
from typing import Protocol

from ...errors import MossError

SNAPSHOTS_REF = "refs/heads/snapshots"
BACKUPS_REF = "refs/moss/backups"
WRITES_REF = "refs/moss/writes"
FORMAT = "2"
MB = 1024 * 1024
DEFAULT_MAX_FILE = 50 * MB
DEFAULT_MAX_TOTAL = 200 * MB

_STORE = ".moss/shadow.git"     # relative to the root: every file moss touches in it goes
                                # through safefs (from a held root descriptor, no links)
_SYMLINK = 0o120000
_EXEC = 0o100755

_UNCAPTURED = {
    "too_large": "its content was not captured: {size} is over [shadow] max_file_mb",
    "over_total": "its content was not captured: the capture had reached [shadow] max_total_mb",
    "unreadable": "it could not be read when captured",
    "special": "it is not a regular file, symlink or directory",
}


class _Capture:
    """One capture: the git tree of captured files, the metadata blob's content, and
    every path's entry: ("f", perm, blob) | ("l", blob) | ("d", perm) |
    ("u", reason, kind, size, mtime_ns, ctime_ns, inode, perm)."""

    __slots__ = ("tree", "meta", "entries", "files", "seq", "commit")

    def __init__(self, tree: str, meta: dict, entries: dict, files: int):
        self.tree, self.meta, self.entries, self.files = tree, meta, entries, files
        self.seq = 0
        self.commit: str | None = None     # the commit that stores it, once stored


def _differences(a: dict, b: dict) -> dict[str, tuple]:
    """path -> (entry in a, entry in b) for every path where they differ."""
    out = {}
    for p, ea in a.items():
        eb = b.get(p)
        if ea != eb:
            out[p] = (ea, eb)
    for p, eb in b.items():
        if p not in a:
            out[p] = (None, eb)
    return out


class _Limits(Protocol):
    """The capture limits a store holds (store.Store)."""

    max_file_bytes: int
    max_total_bytes: int


def _uncaptured_detail(e: tuple, sh: _Limits | None) -> str:
    reason, size = e[1], e[3]
    text = _UNCAPTURED.get(reason, reason).format(size=_human(size))
    if sh is not None and reason == "too_large":
        text += f" ({_human(sh.max_file_bytes)})"
    elif sh is not None and reason == "over_total":
        text += f" ({_human(sh.max_total_bytes)})"
    return text


def _human(n: int) -> str:
    return f"{n / MB:.1f} MB" if n >= MB // 10 else f"{n} bytes"


def _show(p: str, e: tuple | None) -> str:
    is_dir = e is not None and (e[0] == "d" or (e[0] == "u" and e[2] == "d"))
    return p + "/" if is_dir else p


def _enc(e: tuple | None):
    return None if e is None else list(e)


def _dec(e) -> tuple | None:
    return None if e is None else tuple(e)


def _default_perm(git_mode: int) -> int:
    return 0o755 if git_mode == _EXEC else 0o644


def _check_label(label) -> None:
    if not isinstance(label, str):
        raise MossError("shadow: label must be a string", kind="usage")


def _dumps(obj) -> str:
    return json.dumps(obj, ensure_ascii=True, sort_keys=True, separators=(",", ":"))

