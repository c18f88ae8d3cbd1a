"""The `moss` command's entry: `moss @NAME` goes straight to the script runner; anything
else is the click CLI. Kept apart from cli.py so running a script never imports click."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
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
