"""A session's reply as it streams: the side file `moss ui` shows growing.

A session's log (``.moss/agent/logs/ID.jsonl``) holds each reply once it is whole. While one
streams, the running moss process keeps the text so far in ``.moss/agent/live/ID.json``:

    {"session": ID, "reply": N, "started": TS, "ts": TS, "chars": TOTAL, "text": "...", "cut": K}

written through moss.storage (safefs: a temp file made with O_EXCL, renamed within the held
folder, so a link planted at that path is replaced, never written through; a folder there that
is a link gets nothing). Writes are coalesced (at most one every ``EVERY`` seconds, no fsync:
it is a view, not a record), the text is capped to its last ``MAX_CHARS`` characters (``cut``:
how many came before them), a new reply replaces the file, and the file is removed when the
reply ends (whole, failed or cancelled: the log has what counts). Calls the session makes
quietly (the inbox's classification, an aside) never reach it. A failure to write it never
fails the session: the reply goes on without its live view.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from . import storage
from .errors import MossError

EVERY = 0.25        # seconds between writes of one reply's text (the last deltas wait for the next)
MAX_CHARS = 16_000  # characters of a reply kept (its tail)
MAX_READ = 256 << 10


def path_of(root: Path, sid: str) -> Path:
    return storage.agent_dir(root) / "live" / f"{storage.check_id(sid)}.json"


class LiveReply:
    """One reply of session `sid` as it streams. feed() from the thread that reads the stream,
    end() once the call returned or failed (any thread)."""

    _counter = 0

    def __init__(self, root: Path, sid: str, clock=time.monotonic) -> None:
        self.path = path_of(root, sid)
        self.sid = sid
        LiveReply._counter += 1
        self.reply = LiveReply._counter
        self.started = round(time.time(), 3)
        self.parts: list[str] = []
        self.chars = 0  # of the whole reply
        self.held = 0   # in self.parts
        self.clock = clock
        self.last = 0.0
        self.wrote = False
        self.broken = False
        self.ended = False
        self.lock = threading.Lock()

    def feed(self, delta: str) -> None:
        if not delta:
            return
        with self.lock:
            if self.ended or self.broken:
                return
            self.parts.append(delta)
            self.chars += len(delta)
            self.held += len(delta)
            if self.held > 2 * MAX_CHARS:  # only the tail is kept
                self.parts = [self._text()]
                self.held = len(self.parts[0])
            now = self.clock()
            if now - self.last >= EVERY:
                self.last = now
                self._write()

    def _text(self) -> str:
        return "".join(self.parts)[-MAX_CHARS:]

    def _write(self) -> None:
        text = self._text()
        data = json.dumps({"session": self.sid, "reply": self.reply, "started": self.started,
                           "ts": round(time.time(), 3), "chars": self.chars, "text": text,
                           "cut": self.chars - len(text)}, ensure_ascii=False)
        try:
            if not self.wrote:
                storage.ensure_dir(self.path.parent)
            t, rel = storage.at(self.path)
            t.write_atomic(rel, data, create_dirs=False, sync=False, sync_dir=False)
            self.wrote = True
        except (OSError, MossError):
            self.broken = True  # a planted link or a full disk: no live view for this reply

    def end(self) -> None:
        """The reply is over: its file goes (the log has the reply, or nothing of a failed one)."""
        with self.lock:
            if self.ended:
                return
            self.ended = True
            if not self.wrote:
                return
            try:
                storage.unlink(self.path)  # the name itself, a link put there since included
            except (OSError, MossError):
                pass


def read(root: Path, sid: str) -> dict | None:
    """Session `sid`'s reply so far ({"reply", "text", "chars", "cut", ...}), or None when no
    reply is streaming (no file, not a regular file, not what the writer writes)."""
    try:
        data = json.loads(storage.read_bytes(path_of(root, sid), MAX_READ))
    except (OSError, ValueError, MossError):  # none, a link, a fifo, too large, not JSON
        return None
    if not isinstance(data, dict) or not isinstance(data.get("text"), str):
        return None
    return data


def stamp(root: Path, sid: str) -> tuple | None:
    """What changes when the file does (its inode, size and mtime), or None when there is none:
    a reader looks again only when this moved."""
    try:
        st = storage.lstat(path_of(root, sid))
    except (OSError, MossError):
        return None
    return None if st is None else (st.st_ino, st.st_size, st.st_mtime_ns)
