"""moss.inbox: what the user says while a session works, from every channel at once.

The terminal (a line typed while the agent works), `moss say` from another terminal,
stream-json on stdin (`--input-format stream-json`) and MCP's send_message all append to the
session's inbox file (host/inbox.py). A script opens the inbox for its session, registers a
handler with `watch`, and reads what is new with `read`. While moss itself waits — for the
model or for a shell command — the host calls the handler every POLL seconds, so a message is
acknowledged (and classified, by the Lua policy) before that call ends; a handler that
returns "interrupt" ends the wait: the LLM call raises kind "stopped", a shell command is
stopped.

Only one stdin reader runs: when moss itself asks a question, the next line typed (or the
next `{"type": "answer"}` on stream-json input) answers it instead of going to the inbox.

On a terminal the reader acknowledges a typed line the moment Enter is pressed ("› got it:
..."), before the Lua policy reads and classifies it; with stdin and stderr on one terminal the
line being typed is kept in an input area below the status line (host/ui.py), so nothing moss
writes meanwhile overwrites it.
"""

from __future__ import annotations

import json
import queue
import sys
import threading
import time
from pathlib import Path

from .. import inbox as store
from .. import sessions, ui
from ..errors import MossError
from .registry import primitive

POLL = 0.2  # seconds between inbox checks while moss waits


class _StdinReader:
    """The one thread that reads stdin: lines go to a waiting question, else to the inbox."""

    def __init__(self, root, sid: str, stream_json: bool):
        self.root, self.sid, self.stream_json = root, sid, stream_json
        self.answers: queue.Queue = queue.Queue()
        self.asking = threading.Event()
        self.prompt = "› "
        self.eof = False
        # claimed here, before the session's first status line, so that line is the area's
        self.area = None if stream_json else ui.input_open(self._typed)
        self.thread = threading.Thread(target=self._run, name="moss-stdin", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        if self.area is not None and ui.input_run(self.area):
            return  # the area was taken away (moss is ending)
        for line in sys.stdin:
            line = line.rstrip("\n")
            try:
                self._take(line)
            except MossError:
                pass  # an empty or oversized message: nothing to deliver
        self.eof = True
        self.answers.put(None)

    def _typed(self, line: str) -> None:
        """Enter in the input area: the line leaves it, so it is shown above, then taken."""
        if self.asking.is_set():
            ui.note(self.prompt + line, "dim")
        try:
            self._take(line)
        except MossError:
            pass

    def _take(self, line: str) -> None:
        if not self.stream_json:
            if self.asking.is_set():
                self.answers.put(line)
            elif line.strip():
                store.post(self.root, self.sid, line, source="terminal", acked=True)
                # receipt at once (mechanism); what it means is the Lua policy's to say
                ui.note("› got it: " + _one_line(line), "cyan")
            return
        try:
            msg = json.loads(line)
        except ValueError:
            return
        if not isinstance(msg, dict):
            return
        kind = msg.get("type")
        if kind in ("answer", "approval"):
            value = msg.get("text", msg.get("answer"))
            if kind == "approval" and "approve" in msg:
                value = "y" if msg.get("approve") else "n"
            self.answers.put("" if value is None else str(value))
        elif kind == "user":
            store.post(self.root, self.sid, str(msg.get("text") or ""), source="stream-json")
        elif kind == "control":
            store.post(self.root, self.sid, source="stream-json", action=str(msg.get("action")))

    def ask(self, timeout: float | None = None, prompt: str = "› ") -> str | None:
        """The next answer line (None at end of input); `prompt`: what the input area shows
        before the answer being typed."""
        self.prompt = prompt
        ui.input_prompt(prompt)
        self.asking.set()
        try:
            return self.answers.get(timeout=timeout)
        except queue.Empty:
            return None
        finally:
            self.asking.clear()
            ui.input_prompt(None)


def _one_line(text: str, limit: int = 100) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


_reader: _StdinReader | None = None  # one per process: there is one stdin


def stdin_reader() -> _StdinReader | None:
    return _reader


class Inbox:
    def __init__(self, ctx, sid: str, offset: int):
        self.ctx, self.sid, self.offset = ctx, sid, offset
        self.watched = False  # a Lua handler was registered (moss.inbox.watch, bootstrap.lua)
        self.last_poll = 0.0
        self.busy = False
        self.path: Path | None = None

    def read(self) -> list[dict]:
        if self.path is None:
            self.path = store.inbox_path(self.ctx.root, self.sid)  # once: read every turn
        records, self.offset = store.read_from(self.ctx.root, self.sid, self.offset, self.path)
        return records

    def poll(self, force: bool = False) -> bool:
        """Hand new records to the handler; True when it asked to interrupt the wait."""
        now = time.monotonic()
        if not self.watched or self.busy or (not force and now - self.last_poll < POLL):
            return False
        self.last_poll = now
        records = self.read()
        if not records:
            return False
        self.busy = True  # the handler may itself call the LLM: no re-entry
        try:
            rt = self.ctx.runtime
            verdict = rt.call(rt.moss[b"inbox"][b"_dispatch"], records, self.offset)
        finally:
            self.busy = False
        return rt.to_py(verdict) in ("interrupt", b"interrupt")


def _box(ctx) -> Inbox:
    box = ctx.services.get("inbox")
    if box is None:
        raise MossError("moss.inbox.open(session_id) first", kind="usage")
    return box


@primitive
def open_(ctx, sid, opts=None):
    """Start listening for session `sid`: it counts as running (moss say finds it), and
    reading starts at `offset` (what an earlier run of the session already read)."""
    global _reader
    opts = opts or {}
    offset = int(opts.get("offset") or 0)
    sessions.mark_running(ctx.root, sid, str(opts.get("task") or ""))
    box = Inbox(ctx, sid, offset)
    ctx.services["inbox"] = box
    ctx.inbox_poll = box.poll
    stream_json = ctx.options.get("input_format") == "stream-json"
    terminal = sys.stdin is not None and sys.stdin.isatty() and bool(opts.get("terminal", True))
    if _reader is None and (stream_json or terminal):
        _reader = _StdinReader(ctx.root, sid, stream_json)
    return {"offset": box.offset, "listening": _reader is not None,
            "channels": ["say", "mcp"] + (["stream-json"] if stream_json else []) + (["terminal"] if terminal else [])}


@primitive
def _watched(ctx, on=True):
    """Called by moss.inbox.watch (bootstrap.lua), which keeps the Lua handler."""
    _box(ctx).watched = bool(on)
    return True


@primitive
def read(ctx):
    """The records that arrived since the last read, and the offset to save."""
    box = _box(ctx)
    return {"records": box.read(), "offset": box.offset}


@primitive
def post(ctx, sid, text, opts=None):
    """Put a message into a session's inbox (from a script: e.g. a parent to a child)."""
    return store.post(ctx.root, sid, text, source=str((opts or {}).get("source") or "script"))


@primitive
def close(ctx):
    box = ctx.services.pop("inbox", None)
    ctx.inbox_poll = None
    if box is not None:
        sessions.mark_stopped(ctx.root, box.sid)
    return True
