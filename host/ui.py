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
    inner.print(Markdown(_hard_breaks(text), hyperlinks=False))  # a link shows its address: no hidden targets
    lines = buf.getvalue().rstrip("\n").split("\n")
    # the stream as it is now: the input area may have taken it while this rendered (the first
    # render imports rich's markdown), and a write past the area lands in the typed line
    file = sys.stdout if stdout else sys.stderr
    file.write("".join(f"{gutter}{line.rstrip()}\n" for line in lines))
    file.flush()


def _hard_breaks(text: str) -> str:
    """The model's line breaks kept: markdown would join "Thinking.\n$(answer ...)" into one
    line (a soft break); outside fenced code each line followed by another ends in a hard break."""
    out, fenced = [], False
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        elif not fenced and line.strip() and i + 1 < len(lines) and lines[i + 1].strip():
            line = line.rstrip() + "  "
        out.append(line)
    return "\n".join(out)


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

    def pieces(self) -> list[tuple[str, str]]:
        """The line after the spinner, as (text, style) pieces: rich renders them (rich Live),
        or the input area does (prompt_toolkit, below)."""
        out = [(self.text, ""), (f" · {int(time.monotonic() - self.t0)}s", "dim")]
        if self.chars:
            out.append((f" · ~{(self.chars + 3) // 4} tokens", "dim"))
            tail = " ".join(self.tail.split())[-60:]
            if tail:
                out.append((f" · {tail}", "italic dim"))
        return out

    def frame(self) -> str:
        """The spinner's current frame (the input area draws it; rich Live renders the spinner)."""
        s = self.spinner
        return s.frames[int((time.monotonic() - self.t0) * 1000 / s.interval) % len(s.frames)]

    def __rich_console__(self, console, options):
        from rich.text import Text

        line = Text()
        for text, style in self.pieces():
            line.append(text, style=style or None)
        line.truncate(max(options.max_width - 3, 10), overflow="ellipsis")
        self.spinner.text = line
        yield self.spinner.render(console.get_time())


_live_lock = threading.Lock()
_live: tuple[Any, _LiveLine] | None = None  # (rich Live, or None when the input area draws it; the line)


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
        line = _LiveLine()
        line.text = sanitize(text)
        area = _area
        if area is not None:  # the input area owns the terminal: it draws the line above what is typed
            _live = (None, line)
            area.status = line
            area.redraw()
            return True
        from rich.live import Live

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
        area = _area
        if area is not None and current is not None and area.status is current[1]:
            area.status = None
    if current is None:
        return False
    if current[0] is None:
        if area is not None:
            area.redraw()
        return True
    try:
        current[0].stop()
    except Exception:
        pass
    return True


# -- typing while moss works ---------------------------------------------------------------
# With stdin and stderr on one terminal (colours allowed), a line being typed while moss works
# lives in an input area at the bottom (prompt_toolkit), below the status line: the area is
# the one writer of that terminal. Everything else for the terminal (rich's console, the
# model's streamed text, a terminal stdout) goes through `_Above`, which prompt_toolkit's
# run_in_terminal writes above the area, so a redraw never eats what is typed. Elsewhere (a
# pipe, NO_COLOR, a dumb terminal) stdin is read line by line as before.


def input_area_possible() -> bool:
    """Whether a line typed on stdin can be kept in an input area: stdin and stderr are one
    kind of terminal that takes escape sequences."""
    try:
        if not (sys.stdin and sys.stdin.isatty() and sys.stderr.isatty()):
            return False
    except (ValueError, AttributeError):
        return False
    term = os.environ.get("TERM", "")
    return not no_color() and term not in ("", "dumb", "unknown")


class _Above:
    """A text stream for sys.stderr (and a terminal sys.stdout) while the input area shows:
    whole lines go above the area (prompt_toolkit's run_in_terminal); an unfinished line
    waits for its end, as patch_stdout's proxy does."""

    def __init__(self, area: "_InputArea", real):
        self.area, self.real = area, real
        self._lock = threading.Lock()
        self._pending = ""

    def write(self, data: str) -> int:
        with self._lock:
            self._pending += data
            cut = self._pending.rfind("\n") + 1
            ready, self._pending = self._pending[:cut], self._pending[cut:]
        if ready:
            self.area.above(self.real, ready)
        return len(data)

    def flush(self) -> None:
        pass  # a line goes out when it ends (an unfinished one would be drawn over)

    def drain(self) -> None:
        with self._lock:
            rest, self._pending = self._pending, ""
        if rest:
            self.real.write(rest)
            self.real.flush()

    def isatty(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.real.fileno()

    @property
    def encoding(self) -> str:
        return getattr(self.real, "encoding", "utf-8")

    @property
    def errors(self):
        return getattr(self.real, "errors", "strict")

    def writable(self) -> bool:
        return True


class _InputArea:
    """The bottom of the terminal while moss works: the status line (when one shows) and the
    line being typed. Enter hands the line to `on_line` (in the area's thread) and clears it."""

    def __init__(self, on_line):
        self.on_line = on_line
        self.status: _LiveLine | None = None
        self.prompt = "› "
        self.app = None
        self.done = threading.Event()
        # set once the area holds sys.stdout/stderr (or will not): a rich Live started after
        # that wraps the area's streams and draws above it; one started before would be
        # wrapped by the area instead, and each of its redraws would call the next (ui.input_settled)
        self.taken = threading.Event()
        self.streams: list[tuple[str, Any, _Above]] = []

    def _build(self):
        from prompt_toolkit.application import Application
        from prompt_toolkit.buffer import Buffer
        from prompt_toolkit.filters import Condition
        from prompt_toolkit.input import create_input
        from prompt_toolkit.key_binding import KeyBindings
        from prompt_toolkit.layout import ConditionalContainer, HSplit, Layout, Window
        from prompt_toolkit.layout.controls import BufferControl, FormattedTextControl
        from prompt_toolkit.layout.processors import BeforeInput
        from prompt_toolkit.output import create_output
        from prompt_toolkit.styles import Style

        self.buffer = Buffer(multiline=False, accept_handler=self._accept)
        status = ConditionalContainer(
            Window(FormattedTextControl(self._status_text), height=1, wrap_lines=False),
            filter=Condition(lambda: self.status is not None))
        typed = Window(BufferControl(self.buffer, input_processors=[
            BeforeInput(lambda: self.prompt, style="class:prompt")]), wrap_lines=True, dont_extend_height=True)
        keys = KeyBindings()

        @keys.add("c-c")
        def _interrupt(event) -> None:  # raw mode: Ctrl-C is a key; it stops moss as the signal would
            import signal

            os.kill(os.getpid(), signal.SIGINT)

        @keys.add("c-z")
        def _suspend(event) -> None:  # likewise Ctrl-Z: the job stops; `fg` brings the area back
            event.app.suspend_to_background()

        return Application(
            layout=Layout(HSplit([status, typed]), focused_element=typed), key_bindings=keys,
            style=Style.from_dict({"prompt": "ansicyan", "spinner": "ansicyan", "dim": "dim"}),
            input=create_input(sys.stdin), output=create_output(stdout=sys.stderr),
            erase_when_done=True, refresh_interval=0.125, mouse_support=False)

    def _status_text(self):
        line = self.status
        if line is None:
            return []
        style = {"": "", "dim": "class:dim", "italic dim": "class:dim italic"}
        return [("class:spinner", line.frame() + " ")] + [(style.get(s, ""), t) for t, s in line.pieces()]

    def _accept(self, buffer) -> bool:
        text = buffer.text
        try:
            self.on_line(text)
        except Exception:
            pass
        return False  # the line is cleared: it was taken

    def run(self) -> bool:
        """Run the area in this thread until stop() or the end of input; False at end of input."""
        global _cooked
        try:
            import termios

            _cooked = (sys.stdin.fileno(), termios.tcgetattr(sys.stdin.fileno()))
        except (OSError, ValueError, ImportError):
            pass
        try:
            self.app = self._build()
            for name in ("stderr", "stdout"):
                real = getattr(sys, name)
                # a rich Live that redirects the stream already (a panel that did not wait,
                # input_settled): wrap what it wraps, the terminal, or its redraws and ours
                # would call each other forever
                real = getattr(real, "rich_proxied_file", real)
                if name == "stdout" and not _same_terminal(real, sys.stderr):
                    continue  # stdout on a pipe carries answers, not the terminal's lines
                above = _Above(self, real)
                self.streams.append((name, real, above))
                setattr(sys, name, above)
            self.taken.set()
            self.app.run(handle_sigint=False)
            return True
        except EOFError:
            return False
        finally:
            self.taken.set()
            self._restore()
            self.done.set()

    def _restore(self) -> None:
        for name, real, above in self.streams:
            if getattr(sys, name) is above:
                setattr(sys, name, real)
            above.drain()
        self.streams = []

    def above(self, real, text: str) -> None:
        """Write `text` above the area (from any thread)."""
        app = self.app
        loop = getattr(app, "loop", None)
        if app is None or loop is None or not app.is_running:
            real.write(text)
            real.flush()
            return

        def write() -> None:
            app.output.enable_autowrap()
            real.write(text)
            real.flush()

        def in_loop() -> None:
            from prompt_toolkit.application import run_in_terminal

            run_in_terminal(write, in_executor=False)

        try:
            loop.call_soon_threadsafe(in_loop)
        except RuntimeError:  # the loop closed meanwhile
            real.write(text)
            real.flush()

    def redraw(self) -> None:
        app = self.app
        if app is not None and app.is_running:
            app.invalidate()

    def stop(self, timeout: float = 2.0) -> None:
        app = self.app
        loop = getattr(app, "loop", None)
        if app is not None and loop is not None and app.is_running:
            try:
                loop.call_soon_threadsafe(lambda: app.is_running and app.exit())
            except RuntimeError:
                pass
        self.done.wait(timeout)
        self._restore()


def _same_terminal(a, b) -> bool:
    try:
        sa, sb = os.fstat(a.fileno()), os.fstat(b.fileno())
    except (OSError, ValueError, AttributeError):
        return False
    return a.isatty() and sa.st_rdev == sb.st_rdev


_area: _InputArea | None = None
_cooked: tuple[int, Any] | None = None  # stdin's terminal settings before the area made it raw


def restore_terminal() -> None:
    """Put stdin's terminal back as it was before the input area (for an exit that skips
    atexit: os._exit after a stuck script)."""
    if _cooked is not None:
        try:
            import termios

            termios.tcsetattr(_cooked[0], termios.TCSANOW, _cooked[1])
        except (OSError, ValueError, termios.error):
            pass


def input_open(on_line) -> "_InputArea | None":
    """Claim the terminal for an input area that calls `on_line(text)` for each line entered
    (None where none can show, see input_area_possible); from then on the status line is the
    area's to draw. Run it with input_run(area) in the thread that reads stdin."""
    global _area
    if not input_area_possible():
        return None
    with _live_lock:
        if _area is not None:
            return None
        _area = _InputArea(on_line)
        return _area


def input_run(area: "_InputArea") -> bool:
    """Keep what is typed in `area` until input_stop() (True) or the end of input (False);
    blocks. False too when the area could not start (stdin is then read line by line)."""
    global _area
    try:
        return area.run()
    except Exception:
        return False
    finally:
        with _live_lock:
            if _area is area:
                _area = None


def input_active() -> bool:
    return _area is not None


def input_settled(timeout: float = 5.0) -> None:
    """Wait (at most `timeout`) until an input area that was opened holds the terminal's
    streams. Call it before starting a rich Live that redirects them (the child agents' panel),
    so that the Live wraps the area and not the other way round."""
    area = _area
    if area is not None:
        area.taken.wait(timeout)


def input_prompt(text: str | None) -> None:
    """What the input area shows before the line being typed ("› " unless a question asks)."""
    area = _area
    if area is not None:
        area.prompt = text or "› "
        area.redraw()


def input_stop() -> None:
    """Take the input area away (the terminal is the terminal again)."""
    area = _area
    if area is not None:
        area.stop()


import atexit  # noqa: E402

atexit.register(live_stop)  # an error or Ctrl-C never leaves the terminal mid-redraw
atexit.register(input_stop)  # runs first: the terminal leaves raw mode, what was written above it is out
