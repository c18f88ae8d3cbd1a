"""A running session's inbox: what its user says while it works, from any channel.

Every channel (the terminal, `moss say`, stream-json on stdin, MCP `send_message`) appends one
JSON line to `.moss/agent/inbox/<session id>.jsonl`, so nothing a user says is lost if the
process dies; the session reads the lines it has not seen yet. A line:

    {"id": "m-...", "ts": 1795.3, "source": "say"|"terminal"|"stream-json"|"mcp"|"board",
     "type": "user", "text": "...", "acked": true?}       a message ("acked": the host showed
                                                          the user it arrived as it was typed)
    {"id": ..., "type": "control", "action": "pause"|"stop"|"resume", "source": ...}

A message goes only to a session a live moss process runs (its running marker, kept by the
session store: host/sessions/running.py); one that has ended would never read it.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from . import sessions, storage
from .errors import MossError
from .storage import UnsafePath, agent_dir, append_line, check_id

CONTROL_ACTIONS = ("pause", "stop", "resume")
MAX_TEXT = 20_000
MAX_READ = 16 << 20  # of an inbox, per read: what a session has not seen yet


def inbox_path(root: Path, sid: str) -> Path:
    return agent_dir(root) / "inbox" / f"{check_id(sid)}.jsonl"


def post(root: Path, sid: str, text: str | None = None, *, source: str, action: str | None = None,
         acked: bool = False) -> dict:
    """Append a message (text) or a control action to session `sid`'s inbox; the record.
    acked: the terminal already told the user it arrived (the Lua policy then says only what
    it makes of it)."""
    record: dict = {"id": "m-" + uuid.uuid4().hex[:12], "ts": round(time.time(), 3), "source": source}
    if action is not None:
        if action not in CONTROL_ACTIONS:
            raise MossError(f"unknown control action {action!r}; use {', '.join(CONTROL_ACTIONS)}", kind="usage")
        record.update(type="control", action=action)
    else:
        text = " ".join(str(text or "").split()) if "\n" not in str(text or "") else str(text).strip()
        if not text:
            raise MossError("a message needs some text", kind="usage")
        if len(text) > MAX_TEXT:
            raise MossError(f"a message is at most {MAX_TEXT} characters", kind="usage")
        record.update(type="user", text=text)
        if acked:
            record["acked"] = True
    append_line(inbox_path(root, sid), record)
    return record


def read_from(root: Path, sid: str, offset: int = 0, path: Path | None = None) -> tuple[list[dict], int]:
    """Records appended since byte `offset`, and the new offset. A torn last line (a writer
    mid-append) is left for the next read; a line that is not a JSON object is skipped.
    `path`: the inbox's path when the caller has it (inbox_path(root, sid))."""
    path = path or inbox_path(root, sid)
    try:
        records, end = storage.read_records(path, offset, MAX_READ)
    except FileNotFoundError:
        return [], offset
    except UnsafePath as e:  # a planted link or fifo: never read (posting to it fails too)
        storage.skipped(path, e)
        return [], offset
    return [r for r in records if r.get("type") in ("user", "control")], end


def require_running(root: Path, sid: str) -> None:
    """Nothing when session `sid` is running now; else the error (exit 2) that names its
    state: a message to a session that has ended would wait unread."""
    if sessions.is_running(root, sid):
        return
    row = sessions.saved_row(root, sid)
    if row is None:
        raise MossError(f"no session {sid} in this project (moss sessions list shows them)", kind="not_found")
    said = row.get("reason")  # what its script last recorded, shown as it is
    why = f"it ended ({said})" if said else "no moss process runs it"
    raise MossError(f"session {sid} is not running: {why}. "
                    f"To go on with a message: moss @agent --resume {sid} \"...\"", kind="usage")
