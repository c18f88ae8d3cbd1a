"""The `moss` command's entry: `moss @NAME` goes straight to the script runner; anything
else is the click CLI. Kept apart from cli.py so running a script never imports click."""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        _main(argv)
    except OSError as e:
        # The last line of defence: the file system said no (a file where moss needs a
        # directory, a permission, a full disk). One line naming the path, not a traceback.
        if e.errno == errno.EPIPE:  # `moss ... | head` closed the pipe: nothing to say
            raise SystemExit(1) from None
        from .ui import error

        message, code = _os_error(e)
        error(message)
        raise SystemExit(code) from None


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
