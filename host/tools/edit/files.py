"""The files a batch touches: each loaded once through safefs (binary, non-UTF-8 and
oversized ones refused), and which file a target names.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import MossError
from .. import safefs
from ..confine import confine
from ..resolve import require_regular, resolve_path, special_kind
from ..treesitter import language_for
from .spec import Spec

MAX_BYTES = 2 * 1024 * 1024


@dataclass(eq=False)
class File:
    """One file as the batch sees it. `text` is LF-normalized and ends with a newline
    unless empty; None means the file does not exist (not yet, or no longer)."""

    path: Path
    rel: str
    original: bytes | None
    tree: safefs.Tree
    mode: int | None = None
    eol: str = "\n"
    final_newline: bool = True
    initial: str | None = None
    text: str | None = None
    lang: str | None = None
    made_dirs: list[str] = field(default_factory=list)

    def existing(self) -> str:
        """The text of a file that exists: every edit but create is of a file
        `locate_file` found."""
        assert self.text is not None
        return self.text

    def set(self, text: str | None) -> None:
        if text and not text.endswith("\n"):
            text += "\n"
        self.text = text

    def encoded(self) -> bytes | None:
        """The bytes to write: the file's own line endings and final-newline habit."""
        if self.text is None:
            return None
        out = self.text
        if not self.final_newline and out.endswith("\n"):
            out = out[:-1]
        if self.eol != "\n":
            out = out.replace("\n", self.eol)
        return out.encode("utf-8")

    @property
    def changed(self) -> bool:
        return self.encoded() != self.original


class Plan:
    """Every file the batch touches, loaded once, keyed by resolved path."""

    def __init__(self, root: Path):
        self.root = Path(os.path.realpath(os.fspath(root)))
        self.tree = safefs.tree(self.root)
        self.files: dict[Path, File] = {}
        self.changes: list[dict] = []

    def file(self, path: Path) -> File:
        f = self.files.get(path)
        if f is None:
            f = self.files[path] = _load(self, path)
        return f

    def exists(self, path: Path) -> bool:
        f = self.files.get(path)
        return f.text is not None if f is not None else os.path.lexists(path)

    def is_file(self, path: Path) -> bool:
        f = self.files.get(path)
        return f.text is not None if f is not None else path.is_file()

    def changed(self) -> list[File]:
        return [f for f in self.files.values() if f.changed]


def locate_file(plan: Plan, spec: Spec) -> File:
    """The file a spec edits; sets `spec.symbol` to the rest of the target."""
    if spec.action == "create":
        return plan.file(_new_file_path(plan, spec.target))
    parts = spec.target.split("/")
    for k in range(len(parts), 0, -1):
        candidate = "/".join(parts[:k])
        if not candidate.strip():
            continue
        path = confine(plan.root, candidate, writing=True)
        if path not in plan.files:
            require_regular(path, candidate, "moss edits regular files only")
        if plan.is_file(path):
            spec.symbol = "/".join(p for p in parts[k:] if p)
            return plan.file(path)
    raise _no_file(plan, spec.target)


def _new_file_path(plan: Plan, target: str) -> Path:
    path = confine(plan.root, target, writing=True)
    if path not in plan.files:
        require_regular(path, target, "moss edits regular files only")
    if plan.exists(path):
        what = "directory" if path.is_dir() else "file"
        raise MossError(f"{target} already exists (a {what}); create only makes new files "
                        "(use replace or text to change a file)", kind="conflict")
    parent = path.parent
    while parent != plan.root and not plan.exists(parent):
        parent = parent.parent
    if parent != plan.root and not parent.is_dir():
        raise MossError(f"cannot create {target}: {parent.relative_to(plan.root)} is "
                        f"{special_kind(parent) or 'a file'}",
                        kind="usage")
    return path


def _no_file(plan: Plan, target: str) -> MossError:
    """not_found for a target with no existing file in front; suggest the real path."""
    parts = target.split("/")
    guess_len = next((i + 1 for i, p in enumerate(parts) if "." in p.strip(".")), len(parts))
    guess, rest = "/".join(parts[:guess_len]), "/".join(parts[guess_len:])
    msg = (f"no file at the start of {target!r}: an edit target is the exact path of an "
           "existing file relative to the project root, optionally followed by /Symbol")
    try:
        found = resolve_path(plan.root, guess)
        if found.is_file():
            rel = found.relative_to(plan.root).as_posix()
            msg += f"; did you mean {rel}{'/' + rest if rest else ''}?"
        elif found.is_dir():
            msg = f"{guess} is a directory; an edit target must name a file"
    except MossError as e:
        if e.kind in ("ambiguous", "not_found") and "\n" in e.message:
            msg += "; candidates:\n" + e.message.split("\n", 1)[1]
    return MossError(msg, kind="not_found")


def _load(plan: Plan, path: Path) -> File:
    """Read a file into a File (or an absent one); refuse binary and oversized files."""
    rel = path.relative_to(plan.root).as_posix()
    try:
        fd = plan.tree.open(rel, os.O_RDONLY)
    except (FileNotFoundError, NotADirectoryError):
        return File(path=path, rel=rel, original=None, tree=plan.tree,
                    lang=language_for(path, b""))
    except IsADirectoryError:
        raise MossError(f"{rel} is not a regular file", kind="usage") from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if st.st_size > MAX_BYTES:
            raise MossError(f"{rel} is {st.st_size:,} bytes; moss edits files up to "
                            f"{MAX_BYTES // (1024 * 1024)} MB", kind="usage")
        data = fh.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise MossError(f"{rel} grew past {MAX_BYTES // (1024 * 1024)} MB while it was read",
                        kind="usage")
    if b"\0" in data[:8192]:
        raise MossError(f"{rel} is a binary file; moss edits text files only", kind="usage")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise MossError(f"{rel} is not UTF-8 text; moss edits UTF-8 text files only",
                        kind="usage") from None
    crlf = data.count(b"\r\n")
    eol = "\r\n" if crlf and crlf == data.count(b"\n") else "\n"
    if eol != "\n":
        text = text.replace("\r\n", "\n")
    f = File(path=path, rel=rel, original=data, tree=plan.tree, mode=stat.S_IMODE(st.st_mode), eol=eol,
             final_newline=not data or data.endswith(b"\n"),
             lang=language_for(path, data))
    f.set(text)
    f.initial = f.text
    return f
