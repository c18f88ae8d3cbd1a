"""Writing a batch: every file checked unchanged on disk, then written through safefs, and
the ones already written restored when a write fails.
"""

from __future__ import annotations

import os

from ...errors import MossError
from .. import safefs
from .files import MAX_BYTES, File


def commit(files: list[File]) -> None:
    """Write every changed file, or restore the ones written if one write fails."""
    for f in files:
        _check_unchanged(f)
    done: list[File] = []
    for f in files:
        try:
            _write(f)
        except (OSError, safefs.UnsafePath) as e:
            failed = _roll_back(done)
            note = ("the files already written were restored" if not failed else
                    "could not restore " + ", ".join(failed) + " (restore them by hand)")
            why = e.message if isinstance(e, MossError) else (e.strerror or str(e))
            raise MossError(f"writing {f.rel} failed ({why}); {note}",
                            kind="denied" if isinstance(e, MossError) else "io") from e
        done.append(f)


def _read_now(f: File) -> bytes | None:
    """What is at the file's path now (None when nothing is), read without following a
    link anywhere on the way."""
    try:
        fd = f.tree.open(f.rel, os.O_RDONLY)
    except (FileNotFoundError, NotADirectoryError):
        return None
    with os.fdopen(fd, "rb") as fh:
        return fh.read(MAX_BYTES + 1)


def _check_unchanged(f: File) -> None:
    try:
        now = _read_now(f)
    except safefs.UnsafePath as e:
        raise MossError(f"{f.rel} changed on disk while the edit was being prepared ({e.message}); "
                        "nothing was written", kind="conflict") from None
    except OSError:
        now = b""
    if now != f.original:
        raise MossError(f"{f.rel} changed on disk while the edit was being prepared; "
                        "nothing was written: view it again and redo the edit",
                        kind="conflict")


def _write(f: File) -> None:
    data = f.encoded()
    if data is None:
        f.tree.unlink(f.rel, missing_ok=False)
        return
    if f.original is None:
        f.made_dirs = _make_parents(f)
    try:
        f.tree.write_atomic(f.rel, data, f.mode, create_dirs=False)
    except (OSError, safefs.UnsafePath):
        _remove_dirs(f.tree, f.made_dirs)
        raise


def _make_parents(f: File) -> list[str]:
    """Create missing parent folders (never through a link); returns the ones made,
    deepest first."""
    made: list[str] = []
    parent = os.path.dirname(f.rel)
    while parent and f.tree.lstat(parent) is None:
        made.append(parent)
        parent = os.path.dirname(parent)
    for d in reversed(made):
        with f.tree.parent(d) as (dfd, name):
            os.mkdir(name, 0o755, dir_fd=dfd)
    return made


def _remove_dirs(tree: safefs.Tree, made: list[str]) -> None:
    """Remove folders `_make_parents` made (deepest first), if still empty."""
    for d in made:
        try:
            with tree.parent(d) as (dfd, name):
                os.rmdir(name, dir_fd=dfd)
        except (OSError, MossError):
            break


def _roll_back(done: list[File]) -> list[str]:
    """Put back the originals of files already written; returns those that failed."""
    failed: list[str] = []
    for f in reversed(done):
        try:
            if f.original is None:
                f.tree.unlink(f.rel)
                _remove_dirs(f.tree, f.made_dirs)
            else:
                f.tree.write_atomic(f.rel, f.original, f.mode, create_dirs=False)
        except (OSError, MossError):
            failed.append(f.rel)
    return failed
