"""A running session's inbox: what its user says while it works, from any channel.

Every channel (the terminal, `moss say`, stream-json on stdin, MCP `send_message`) appends one
JSON line to `.moss/agent/inbox/<session id>.jsonl`, so nothing a user says is lost if the
process dies; the session reads the lines it has not seen yet. A line:

    {"id": "m-...", "ts": 1795.3, "source": "say"|"terminal"|"stream-json"|"mcp"|"board",
     "type": "user", "text": "...", "acked": true?}       a message ("acked": the host showed
                                                          the user it arrived as it was typed)
    {"id": ..., "type": "control", "action": "pause"|"stop"|"resume", "source": ...}

A running session also keeps `.moss/agent/running/<id>.json` ({pid, pid_start, started,
task}) while it runs, so `moss say` without an id can find the latest one that is still
alive. A marker whose process is gone (or whose pid now belongs to a later process: pid_start
differs) is stale, and removed wherever the running sessions are listed.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

from . import storage
from .storage import UnsafePath, agent_dir, append_line, check_id
from .errors import MossError
from .tools.procs import alive_since, start_time

CONTROL_ACTIONS = ("pause", "stop", "resume")
MAX_TEXT = 20_000
MAX_READ = 16 << 20  # of an inbox, per read: what a session has not seen yet
MAX_MARKER = 64 << 10  # a running marker is a few hundred bytes


def inbox_path(root: Path, sid: str) -> Path:
    return agent_dir(root) / "inbox" / f"{check_id(sid)}.jsonl"


def running_path(root: Path, sid: str) -> Path:
    return agent_dir(root) / "running" / f"{check_id(sid)}.json"


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


def mark_running(root: Path, sid: str, task: str = "") -> None:
    storage.write_atomic(running_path(root, sid), json.dumps({
        "pid": os.getpid(), "pid_start": start_time(os.getpid()), "started": round(time.time(), 3),
        "task": task[:200]}))


def mark_stopped(root: Path, sid: str) -> None:
    try:
        storage.unlink(running_path(root, sid))
    except (OSError, MossError):
        pass


def running(root: Path, mine: bool = False) -> list[dict]:
    """Sessions whose process is alive, newest first: {id, pid, started, task}; the markers of
    dead processes are removed. mine: only this process's sessions."""
    out = []
    d = agent_dir(root) / "running"
    with storage.Skips(d) as skip:  # links, fifos, devices: refused without reading, one line for all
        for name in storage.listed(d):
            if not name.endswith(".json") or not storage.ID_RE.match(name[:-5]):
                continue
            p = d / name
            try:
                info = json.loads(storage.read_bytes(p, MAX_MARKER))
            except UnsafePath as e:
                skip(p, e)
                continue
            except (OSError, ValueError, MossError):
                continue
            if not isinstance(info, dict):
                continue
            if not alive_since(info.get("pid"), info.get("pid_start")):
                mark_stopped(root, p.stem)  # stale: its process died without saying so
            elif not mine or info.get("pid") == os.getpid():
                out.append({"id": p.stem, **info})
    out.sort(key=lambda r: -float(r.get("started") or 0))
    return out


def require_running(root: Path, sid: str) -> None:
    """Nothing when session `sid` is running now; else the error (exit 2) that names its
    state: a message to a session that has ended would wait unread."""
    if any(r["id"] == sid for r in running(root)):
        return
    from .api.session import list_checkpoints

    rows = [r for r in list_checkpoints(root) if r["id"] == sid]
    if not rows:
        raise MossError(f"no session {sid} in this project (moss sessions list shows them)", kind="not_found")
    said = rows[0].get("reason")  # what its script last recorded, shown as it is
    why = f"it ended ({said})" if isinstance(said, str) and said else "no moss process runs it"
    raise MossError(f"session {sid} is not running: {why}. "
                    f"To go on with a message: moss @agent --resume {sid} \"...\"", kind="usage")


def latest_running(root: Path) -> str:
    """The id of the most recently started session that is still running."""
    rows = running(root)
    if not rows:
        raise MossError("no moss session is running in this project; name one: moss say ID \"message\"",
                        kind="not_found")
    return rows[0]["id"]
