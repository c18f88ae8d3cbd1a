"""The `moss` command's entry: `moss @NAME` goes straight to the script runner; anything
else is the click CLI. Kept apart from cli.py so running a script never imports click."""

from __future__ import annotations

import errno
import io
import os
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    _whole_writes()
    try:
        try:
            _main(argv)
        finally:
            sys.stdout.flush()  # here, not at exit: a reader that went away is seen below
    except OSError as e:
        from .ui import error, is_broken_pipe, pipe_closed

        if is_broken_pipe(e):  # `moss ... | head` closed the pipe: nothing to say
            raise SystemExit(pipe_closed()) from None
        # The last line of defence: the file system said no (a file where moss needs a
        # directory, a permission, a full disk). One line naming the path, not a traceback.

        message, code = _os_error(e)
        error(message)
        raise SystemExit(code) from None


def _whole_writes() -> None:
    """Under PYTHONUNBUFFERED, sys.stdout and sys.stderr write straight to the file and drop
    the count of a write cut short (by a reader that went away, or a signal): the rest of
    the text vanishes without an error. A buffered layer finishes each write or raises."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        raw = getattr(stream, "buffer", None)
        if isinstance(raw, io.RawIOBase):
            setattr(sys, name, io.TextIOWrapper(io.BufferedWriter(raw), encoding=stream.encoding,
                                                errors=stream.errors, line_buffering=True, write_through=True))


def _main(argv: list[str]) -> None:
    if argv and argv[0].startswith("@"):
        from .run import run_script

        name = argv[0][1:]
        if not name:
            from .ui import error

            error("missing script name after @ (try `moss scripts`)")
            raise SystemExit(2)
        raise SystemExit(run_script(name, argv[1:]))
    from .cli import main as cli_main

    cli_main(argv)


def _os_error(e: OSError) -> tuple[str, int]:
    """(message, exit status) for an OSError: 2 when a file stands where moss needs a
    directory (the user must move it), else 1."""
    from .roots import display_path

    name = e.filename
    if name is not None and e.errno in (errno.ENOTDIR, errno.EEXIST):
        path = Path(os.fsdecode(name))
        for p in (path, *path.parents):
            if os.path.lexists(p) and not p.is_dir():
                shown = display_path(p)
                return f"{shown} is a file, but moss needs a directory there: rename or remove {shown}", 2
    reason = e.strerror or str(e)
    if name is None:
        return reason, 1
    return f"{display_path(Path(os.fsdecode(name)))}: {reason}", 1
