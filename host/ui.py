"""Everything moss shows people goes through here, on stderr (stdout is for answers)."""

from __future__ import annotations

import re
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
    c.print(f"[bold red]error:[/] {escape(sanitize(message))}")
    if hint:
        c.print(f"[dim]{escape(sanitize(hint))}[/]")


def escape(text: str) -> str:
    from rich.markup import escape as _escape

    return _escape(text)


# C0 controls but tab and newline, DEL and the C1 controls: ESC starts every terminal
# escape sequence (titles, clearing the screen, moving the cursor, OSC 52 clipboard
# writes), and \x9b is a one-byte CSI on some terminals. Lone surrogates cannot be
# written to a UTF-8 stream at all.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def _visible(m: re.Match) -> str:
    ch = m.group()
    if ch == "\r":
        return ""  # \r\n is a line end; a lone \r would let later text overwrite earlier
    if "\ud800" <= ch <= "\udfff":
        return "\ufffd"
    return f"\\x{ord(ch):02x}"


def sanitize(text: str) -> str:
    """`text` (a model's, or a file's) made safe for a terminal: every control character
    except tab and newline is shown as a visible `\\xNN` escape, so no text can drive the
    terminal (set its title, clear it, hide what came before). Logs, JSON and stream-json
    output keep the raw text; only what is shown to a person passes through here."""
    return _UNSAFE.sub(_visible, text) if _UNSAFE.search(text) else text
