"""Everything moss shows people goes through here, on stderr (stdout is for answers)."""

from __future__ import annotations

import sys
from functools import lru_cache


@lru_cache(maxsize=1)
def console():
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=True)


def stderr_is_tty() -> bool:
    return sys.stderr.isatty()


def error(message: str, hint: str | None = None) -> None:
    c = console()
    c.print(f"[bold red]error:[/] {escape(message)}")
    if hint:
        c.print(f"[dim]{escape(hint)}[/]")


def escape(text: str) -> str:
    from rich.markup import escape as _escape

    return _escape(text)
