"""A terminal for tests: a real pty, and a small screen that reads what a program draws on it.

`Terminal(argv, ...)` runs a program with stdin and stderr on a pty of `rows` x `cols`
(stdout on a pipe, where answers go, unless `stdout_on_pty`) and a thread that reads everything drawn, keeping

- `screen`: the lines a person would see now (the last `rows` lines), and `history`: the
  lines that scrolled off the top;
- `raw`: every byte as text, and `log`: (monotonic time, text) for each read.

The screen understands what full-screen-less terminal programs (prompt_toolkit, rich) send:
cursor moves and positioning, erasing in line and display, autowrap on and off, and styles
(ignored). It answers cursor-position requests as a terminal does. Only what these tests meet
is modelled; anything else is ignored.

    with Terminal([...], env=...) as t:
        t.wait(lambda: "› " in t.bottom(), 10)
        t.type("hello")
"""

from __future__ import annotations

import codecs
import fcntl
import os
import pty
import re
import struct
import subprocess
import termios
import threading
import time

import forkserver

_CSI = re.compile(r"\x1b\[([?>=]?)([0-9;]*)([ -/]*)([@-~])")
_OSC = re.compile(r"\x1b\][^\x07\x1b]*(\x07|\x1b\\)")


class Screen:
    def __init__(self, rows: int, cols: int):
        self.rows, self.cols = rows, cols
        self.lines = [[" "] * cols for _ in range(rows)]
        self.history: list[str] = []
        self.y = self.x = 0
        self.autowrap = True
        self.saved = (0, 0)
        self.replies: list[bytes] = []  # what the terminal answers (cursor position reports)
        self._rest = ""

    # -- reading -----------------------------------------------------------------------
    def text(self) -> list[str]:
        return ["".join(line).rstrip() for line in self.lines]

    # -- writing -----------------------------------------------------------------------
    def feed(self, data: str) -> None:
        data, self._rest = self._rest + data, ""
        i = 0
        while i < len(data):
            ch = data[i]
            if ch == "\x1b":
                m = _CSI.match(data, i)
                if m:
                    self._csi(m.group(1), m.group(2), m.group(4))
                    i = m.end()
                    continue
                m = _OSC.match(data, i)
                if m:
                    i = m.end()
                    continue
                if i + 1 >= len(data) or (data[i + 1] in "[]" and not re.search(r"[@-~\x07]", data[i + 2:])):
                    self._rest = data[i:]  # an escape sequence cut by the read: wait for the rest
                    return
                nxt = data[i + 1]
                if nxt == "7":
                    self.saved = (self.y, self.x)
                elif nxt == "8":
                    self.y, self.x = self.saved
                i += 2
                continue
            if ch == "\r":
                self.x = 0
            elif ch == "\n":
                self._linefeed()
            elif ch == "\b":
                self.x = max(self.x - 1, 0)
            elif ch == "\t":
                self.x = min((self.x // 8 + 1) * 8, self.cols - 1)
            elif ch >= " ":
                if self.x >= self.cols:
                    if self.autowrap:
                        self.x = 0
                        self._linefeed()
                    else:
                        self.x = self.cols - 1
                self.lines[self.y][self.x] = ch
                self.x += 1
            i += 1

    def _linefeed(self) -> None:
        if self.y == self.rows - 1:
            self.history.append("".join(self.lines.pop(0)).rstrip())
            self.lines.append([" "] * self.cols)
        else:
            self.y += 1

    def _csi(self, private: str, params: str, final: str) -> None:
        nums = [int(p) if p else 0 for p in params.split(";")] if params else []
        n = nums[0] if nums and nums[0] else 1
        if private == "?":
            if final in "hl" and 7 in nums:
                self.autowrap = final == "h"
            return
        if final in "ABCDGdHf":
            self._move(final, n, nums)
        elif final == "J":
            self._erase_display(nums[0] if nums else 0)
        elif final == "K":
            self._erase_line(nums[0] if nums else 0)
        elif final == "X":
            for x in range(self.x, min(self.x + n, self.cols)):
                self.lines[self.y][x] = " "
        elif final == "n" and nums == [6]:
            self.replies.append(f"\x1b[{self.y + 1};{min(self.x, self.cols - 1) + 1}R".encode())
        elif final == "s":
            self.saved = (self.y, self.x)
        elif final == "u":
            self.y, self.x = self.saved

    def _move(self, final: str, n: int, nums: list[int]) -> None:
        """The cursor moves: up, down, right, left by n; to column n, row n; to row;col."""
        if final == "A":
            self.y = max(self.y - n, 0)
        elif final == "B":
            self.y = min(self.y + n, self.rows - 1)
        elif final == "C":
            self.x = min(self.x + n, self.cols - 1)
        elif final == "D":
            self.x = max(min(self.x, self.cols - 1) - n, 0)
        elif final == "G":
            self.x = min(n - 1, self.cols - 1)
        elif final == "d":
            self.y = min(n - 1, self.rows - 1)
        else:  # H, f
            row = nums[0] if nums and nums[0] else 1
            col = nums[1] if len(nums) > 1 and nums[1] else 1
            self.y, self.x = min(row - 1, self.rows - 1), min(col - 1, self.cols - 1)

    def _erase_display(self, mode: int) -> None:
        if mode in (2, 3):
            self.lines = [[" "] * self.cols for _ in range(self.rows)]
        elif mode == 0:
            self._erase_line(0)
            for y in range(self.y + 1, self.rows):
                self.lines[y] = [" "] * self.cols
        elif mode == 1:
            self._erase_line(1)
            for y in range(self.y):
                self.lines[y] = [" "] * self.cols

    def _erase_line(self, mode: int) -> None:
        row = self.lines[self.y]
        x = min(self.x, self.cols)
        if mode == 0:
            row[x:] = [" "] * (self.cols - x)
        elif mode == 1:
            row[: x + 1] = [" "] * min(x + 1, self.cols)
        else:
            self.lines[self.y] = [" "] * self.cols


class Terminal:
    def __init__(self, argv: list[str], *, cwd, env: dict, rows: int = 30, cols: int = 120,
                 stdout_on_pty: bool = False):
        self.screen_ = Screen(rows, cols)
        self.raw = ""
        self.log: list[tuple[float, str]] = []
        self.changed = threading.Condition()
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.proc = forkserver.popen(argv, cwd=cwd, env={**env, "TERM": "xterm-256color", "COLUMNS": str(cols),
                                                          "LINES": str(rows)},
                                     stdin=slave, stdout=slave if stdout_on_pty else subprocess.PIPE, stderr=slave,
                                     start_new_session=True)
        os.close(slave)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        decode = codecs.getincrementaldecoder("utf-8")("replace")
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:  # EIO: the program closed the terminal
                data = b""
            text = decode.decode(data, final=not data)
            with self.changed:
                if text:
                    self.raw += text
                    self.log.append((time.monotonic(), text))
                    self.screen_.feed(text)
                    for reply in self.screen_.replies:
                        os.write(self.master, reply)
                    self.screen_.replies.clear()
                if not data:
                    self.closed = True
                self.changed.notify_all()
            if not data:
                return

    closed = False

    # -- what is shown -----------------------------------------------------------------
    @property
    def screen(self) -> list[str]:
        with self.changed:
            return self.screen_.text()

    def everything(self) -> list[str]:
        """The lines that scrolled off and the screen, top to bottom."""
        with self.changed:
            return self.screen_.history + self.screen_.text()

    def wait(self, predicate, timeout: float, what: str = "") -> float:
        """Wait until predicate() holds (checked whenever something is drawn, and at least
        every 0.05 s); the monotonic time it first held. AssertionError after `timeout`."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                if predicate():
                    return time.monotonic()
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out waiting for {what or predicate}; screen:\n"
                                         + "\n".join(self.screen_.text()))
                self.changed.wait(min(left, 0.05))

    def shows(self, text: str) -> bool:
        return any(text in line for line in self.screen_.text())

    # -- typing ------------------------------------------------------------------------
    def type(self, text: str) -> None:
        os.write(self.master, text.encode())

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        self.reader.join(5)
        try:
            os.close(self.master)
        except OSError:
            pass

    def __enter__(self) -> "Terminal":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def python_on_a_terminal(folder, name: str, source: str) -> Terminal:
    """Write `source` to folder/name, run it with this python on a terminal (no NO_COLOR, the
    terminal's own width) until its end, check that it exited 0; the terminal, to read."""
    import sys
    from pathlib import Path

    script = Path(folder) / name
    script.write_text(source)
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "COLUMNS")}
    with Terminal([sys.executable, str(script)], cwd=folder, env=env) as t:
        t.wait(lambda: t.closed, 30, f"the end of {name}")
    assert t.proc.wait(10) == 0, "\n".join(t.everything())
    return t
