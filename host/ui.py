"""Everything moss shows people goes through here, on stderr (stdout is for answers)."""

from __future__ import annotations

import errno
import os
import re
import sys
import threading
import time
from functools import lru_cache
from typing import Any


def no_color() -> bool:
    """NO_COLOR (https://no-color.org) set to anything: plain text, no escape sequences."""
    return bool(os.environ.get("NO_COLOR"))


@lru_cache(maxsize=1)
def console():
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:  # rich would exit 1 itself: let pipe_closed() decide
            self.quiet = True
            raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))

    # color_system=None renders no styles at all: with NO_COLOR a terminal gets plain text
    # (rich's own no_color drops colours but still sends bold and dim)
    extra: dict[str, Any] = {"color_system": None} if no_color() else {}
    return _Console(stderr=True, highlight=False, soft_wrap=True, **extra)


# -- a reader that went away -------------------------------------------------------------
# `moss sessions list | head -1`: head exits after one line, and the next write to the pipe
# fails with EPIPE. git and cat die of SIGPIPE there, silently; moss does the same without
# dying mid-step: every write path (Lua's print and moss.ui, click's echo, the final flush)
# ends up here, and the run stops quietly with the status a shell shows for them.

EXIT_PIPE = 141  # 128 + SIGPIPE
_pipe_closed = False


def is_broken_pipe(e: BaseException) -> bool:
    """`e` is EPIPE from writing our own stdout or stderr (not, say, a child process's stdin
    or an MCP server's pipe, which are errors to report): its reader is gone."""
    if not (isinstance(e, OSError) and e.errno == errno.EPIPE):
        return False
    import select

    p = select.poll()
    for stream in (sys.stdout, sys.stderr):
        try:
            p.register(stream.fileno(), 0)  # POLLERR and POLLHUP are always reported
        except (OSError, ValueError, AttributeError):
            pass
    try:
        return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in p.poll(0))
    except OSError:
        return False


def pipe_closed() -> int:
    """The reader of stdout or stderr closed its end. From now on both go to /dev/null (so
    nothing more fails, nor does Python's last flush), and the exit status is EXIT_PIPE."""
    global _pipe_closed
    _pipe_closed = True
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        return EXIT_PIPE
    for stream in (sys.stdout, sys.stderr):
        try:
            os.dup2(fd, stream.fileno())
        except (OSError, ValueError, AttributeError):
            pass
    os.close(fd)
    return EXIT_PIPE


def pipe_was_closed() -> bool:
    return _pipe_closed


def stderr_is_tty() -> bool:
    return sys.stderr.isatty()


def surely_not_terminal() -> bool:
    """True where rich's console would not be a terminal either, known without importing rich
    (which costs ~25 ms of a run's start): stderr is no tty and nothing forces one."""
    return not sys.stderr.isatty() and not any(os.environ.get(k) for k in ("FORCE_TERMINAL", "TTY_COMPATIBLE",
                                                                             "FORCE_COLOR"))


def note(text: str, style: str | None = None) -> None:
    """One line for people on stderr, in `style` on a terminal; plain (and without importing
    rich) where no terminal would show the style anyway."""
    if surely_not_terminal():
        sys.stderr.write(sanitize(text) + "\n")
        sys.stderr.flush()
        return
    console().print(f"[{style}]{escape(sanitize(text))}[/]" if style else escape(sanitize(text)))


def error(message: str, hint: str | None = None) -> None:
    c = console()
    c.print(f"[bold red]error:[/] {escape(sanitize(message))}")
    if hint:
        c.print(f"[dim]{escape(sanitize(hint))}[/]")


def markdown(text: str, *, gutter: str = "", stdout: bool = False) -> None:
    """`text` (a model's reply, an answer) for a person. On a terminal (without NO_COLOR):
    rendered as markdown by rich, wrapped to fit after `gutter`, which starts every line.
    Elsewhere (a pipe, a file, NO_COLOR): the text as it is, each line after `gutter`; an
    answer on stdout then stays byte for byte what the model wrote (control characters
    shown, not obeyed, only when a terminal reads it). On stdout when `stdout`, else stderr."""
    file = sys.stdout if stdout else sys.stderr
    tty = file.isatty()
    if tty or not stdout:
        text = sanitize(text)  # the model's text must not drive a terminal (links, titles, ...)
    if not tty or no_color() or os.environ.get("TERM") == "dumb":
        lines = text.split("\n") if gutter else [text]
        file.write("".join(f"{gutter}{line}\n" for line in lines))
        file.flush()
        return
    import io

    from rich.cells import cell_len
    from rich.console import Console
    from rich.markdown import Markdown

    width = Console(file=file).width
    buf = io.StringIO()
    inner = Console(file=buf, width=max(20, width - cell_len(gutter)), force_terminal=True, highlight=False,
                    emoji=False, color_system=console().color_system or "standard")
    inner.print(Markdown(text, hyperlinks=False))  # a link shows its address: no hidden targets
    lines = buf.getvalue().rstrip("\n").split("\n")
    file.write("".join(f"{gutter}{line.rstrip()}\n" for line in lines))
    file.flush()


def escape(text: str) -> str:
    from rich.markup import escape as _escape

    return _escape(text)


# C0 controls but tab and newline, DEL and the C1 controls: ESC starts every terminal
# escape sequence (titles, clearing the screen, moving the cursor, OSC 52 clipboard
# writes), and \x9b is a one-byte CSI on some terminals. Lone surrogates cannot be
# written to a UTF-8 stream at all. The bidi controls (U+202E RIGHT-TO-LEFT OVERRIDE and
# kin) reorder what a terminal shows: a name ending in U+202E then `txt.exe` reads `exe.txt`.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _visible(m: re.Match) -> str:
    ch = m.group()
    if ch == "\r":
        return ""  # \r\n is a line end; a lone \r would let later text overwrite earlier
    if "\ud800" <= ch <= "\udfff":
        return "\ufffd"
    return f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}"


def sanitize(text: str) -> str:
    """`text` (a model's, a file's, an MCP server's) made safe for a terminal and a prompt:
    every control character except tab and newline is shown as a visible `\\xNN` escape and
    every bidi control as `\\uXXXX`, so no text can drive the terminal (set its title, clear
    it, hide what came before) or reorder what it shows. Logs, JSON and stream-json output
    keep the model's raw text; what is shown to a person passes through here."""
    return _UNSAFE.sub(_visible, text) if _UNSAFE.search(text) else text


_NAME_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\u061c\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff]")


def visible_name(name: str) -> str:
    """A file name as one safe line: control characters, newlines and tabs included, and
    bidi, zero-width and line-separator characters as `\\xNN` / `\\uXXXX`, so a file
    named with a newline cannot pass for two lines of a listing."""
    return _NAME_UNSAFE.sub(_name_escape, name) if _NAME_UNSAFE.search(name) else name


def _name_escape(m: re.Match) -> str:
    o = ord(m.group())
    if 0xDC80 <= o <= 0xDCFF:
        return f"\\x{o - 0xDC00:02x}"  # a byte that is not UTF-8 (decoded with surrogateescape)
    return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}"


# -- the live status line ----------------------------------------------------------------
# One line at the bottom of a terminal while moss waits (moss.ui.live): a spinner, the
# caller's text, seconds since it started, and the tokens an LLM reply has streamed so far
# (characters / 4, so "~"). Only on a terminal without NO_COLOR: it redraws itself with
# escape sequences. Never on stdout.

class _LiveLine:
    def __init__(self):
        from rich.spinner import Spinner

        self.spinner = Spinner("dots", style="cyan")
        self.text = ""
        self.t0 = time.monotonic()
        self.chars = 0
        self.tail = ""

    def __rich_console__(self, console, options):
        from rich.text import Text

        line = Text(self.text)
        line.append(f" · {int(time.monotonic() - self.t0)}s", style="dim")
        if self.chars:
            line.append(f" · ~{(self.chars + 3) // 4} tokens", style="dim")
            tail = " ".join(self.tail.split())[-60:]
            if tail:
                line.append(f" · {tail}", style="italic dim")
        line.truncate(max(options.max_width - 3, 10), overflow="ellipsis")
        self.spinner.text = line
        yield self.spinner.render(console.get_time())


_live_lock = threading.Lock()
_live = None  # (rich Live, _LiveLine) while a status line shows


def live_start(text: str) -> bool:
    """Show (or retitle, restarting its clock) the status line; False where none can show."""
    global _live
    if surely_not_terminal():
        return False
    c = console()
    if not c.is_terminal or no_color() or c.is_dumb_terminal:
        return False
    with _live_lock:
        if _live is not None:
            _live[1].text, _live[1].t0, _live[1].chars, _live[1].tail = sanitize(text), time.monotonic(), 0, ""
            return True
        from rich.live import Live

        line = _LiveLine()
        line.text = sanitize(text)
        live = Live(line, console=c, refresh_per_second=8, transient=True,
                    redirect_stdout=False, redirect_stderr=False)
        try:
            live.start()
        except Exception:  # another live display (the child agents' panel) owns the terminal
            return False
        _live = (live, line)
        return True


def live_feed(delta: str) -> bool:
    """Count a streamed LLM delta on the status line; False when none shows (the caller
    then writes the text itself)."""
    with _live_lock:
        if _live is None:
            return False
        line = _live[1]
        line.chars += len(delta)
        line.tail = (line.tail + sanitize(delta))[-200:]
        return True


def live_stop() -> bool:
    """Clear the status line; True when one was showing."""
    global _live
    with _live_lock:
        current, _live = _live, None
    if current is None:
        return False
    try:
        current[0].stop()
    except Exception:
        pass
    return True


import atexit  # noqa: E402

atexit.register(live_stop)  # an error or Ctrl-C never leaves the terminal mid-redraw
