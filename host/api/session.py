"""moss.session: checkpoints and append-only JSONL event logs under .moss/agent/.

Checkpoints are written atomically (temp file, fsync, rename) so a session killed at any
moment leaves either the previous checkpoint or the new one, never half of one. Log lines
are appended with one write each and never truncated.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from ..errors import MossError

from ..storage import (  # noqa: F401  (re-exported: the session API's own names)
    ID_RE, MAX_DEPTH, agent_dir, append_line, check_id, depth_ok, dumps, ensure_dir, loads, read_lines, scalars,
    write_atomic,
)


def checkpoint_path(root: Path, sid: str) -> Path:
    return agent_dir(root) / f"session-{sid}.json"


def log_path(root: Path, sid: str) -> Path:
    return agent_dir(root) / "logs" / f"{sid}.jsonl"




class CorruptCheckpoint(MossError):
    """A checkpoint file moss cannot use: names the file and how to start fresh."""

    def __init__(self, path: Path, why: str):
        from ..roots import display_path

        shown = display_path(path)
        super().__init__(f"{shown} is not a usable checkpoint ({why}); delete it to start fresh, or "
                         "start a new session instead of resuming this one", kind="config", path=str(path))
        self.why = why


def read_checkpoint(path: Path) -> dict:
    """The checkpoint at `path` as a dict, or CorruptCheckpoint saying what is wrong with it."""
    from ..tools.resolve import special_kind

    kind = special_kind(path)
    if kind is not None:
        raise CorruptCheckpoint(path, f"it is {kind}")
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise
    except IsADirectoryError:
        raise CorruptCheckpoint(path, "it is a directory") from None
    except OSError as e:
        raise CorruptCheckpoint(path, f"unreadable: {e.strerror or e}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CorruptCheckpoint(path, f"not UTF-8 text: byte {e.start} is {data[e.start]:#04x}") from None
    try:
        state = loads(text)
    except json.JSONDecodeError as e:
        raise CorruptCheckpoint(path, f"not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}") from None
    except ValueError as e:
        raise CorruptCheckpoint(path, f"not valid JSON: {e}") from None
    if not isinstance(state, dict):
        raise CorruptCheckpoint(path, f"a JSON {_json_kind(state)} where a checkpoint is an object")
    if not depth_ok(state):
        raise CorruptCheckpoint(path, f"nested more than {MAX_DEPTH} levels deep")
    return state


def _json_kind(value) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", list: "array", dict: "object", type(None): "null"}.get(type(value), "value")


def list_checkpoints(root: Path) -> list[dict]:
    """Every checkpoint, oldest first. One that cannot be read is listed all the same,
    with state and reason "corrupt" and `error` saying why and what to do."""
    out = []
    for p in agent_dir(root).glob("session-*.json"):
        sid = p.stem[len("session-"):]
        try:
            mtime = p.lstat().st_mtime
        except OSError:
            continue  # deleted while we listed
        row = {"id": sid, "mtime": mtime}
        try:
            data = read_checkpoint(p)
        except FileNotFoundError:
            continue
        except CorruptCheckpoint as e:
            row.update(state="corrupt", reason="corrupt", error=e.message)
        else:
            row.update({k: v for k, v in scalars(data).items() if k not in row})
        out.append(row)
    out.sort(key=lambda d: d["mtime"])
    return out


def load_checkpoint(root: Path, sid: str | None) -> dict:
    if sid in (None, "", "latest", True):
        items = list_checkpoints(root)
        if not items:
            raise MossError("no saved sessions in .moss/agent/ to resume", kind="not_found")
        sid = items[-1]["id"]
    check_id(sid)
    p = checkpoint_path(root, sid)
    try:
        state = read_checkpoint(p)
    except FileNotFoundError:
        known = ", ".join(d["id"] for d in list_checkpoints(root)[-5:]) or "none"
        raise MossError(f"no session {sid!r} (recent: {known})", kind="not_found") from None
    state["session_id"] = sid  # the file it came from, whatever a copied file says inside
    return state


def read_log(root: Path, sid: str) -> list[dict]:
    """One session's events (see storage.read_lines for lines that are not events)."""
    p = log_path(root, check_id(sid))
    try:
        return read_lines(p, "session log")
    except FileNotFoundError:
        raise MossError(f"no log for session {sid!r}", kind="not_found") from None
    except IsADirectoryError:
        raise MossError(f"{p} is a directory, not a session log", kind="not_found") from None


ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"  # no look-alikes (0/o, 1/l/i)


def new_session_id(root: Path) -> str:
    import secrets

    while True:
        sid = "".join(secrets.choice(ALPHABET) for _ in range(8))
        if not checkpoint_path(root, sid).exists():
            return sid


def functions(ctx):
    def new_id():
        """A fresh session id (never from Lua's math.random, which --seed makes repeatable)."""
        return new_session_id(ctx.root)

    def save(sid, state):
        p = checkpoint_path(ctx.root, check_id(sid))
        state = dict(state or {})
        state.setdefault("session_id", sid)
        state["saved_at"] = time.time()
        write_atomic(p, dumps(state, separators=(",", ":")))
        return str(p)

    def load(sid=None):
        return load_checkpoint(ctx.root, sid)

    def list_():
        return list_checkpoints(ctx.root)

    def log(sid, event, data=None):
        record = {"event": str(event), "ts": round(time.time(), 3)}
        if isinstance(data, dict):
            record.update(data)
        record["session"] = sid  # every line names its agent and that agent's parent
        record["parent"] = ctx.parent_id if sid == ctx.session_id else record.get("parent")
        append_line(log_path(ctx.root, check_id(sid)), record)
        return True

    def bind(sid, opts=None):
        """Host-side events (LLM attempts, retries) go to this session's log from now on;
        opts.role names the agent's role (shown to agents waiting for its locks)."""
        ctx.session_id = check_id(sid)
        if isinstance(opts, dict) and isinstance(opts.get("role"), str):
            ctx.role = opts["role"]
        if ctx.tree is not None and ctx.tree.root_id is None and ctx.parent_id is None:
            ctx.tree.root_id = ctx.session_id
        return True

    def logs():
        out = []
        from ..tools.resolve import special_kind

        for p in sorted((agent_dir(ctx.root) / "logs").glob("*.jsonl"), key=lambda p: p.lstat().st_mtime):
            if p.is_dir() or special_kind(p) is not None:
                continue  # a folder or a pipe where a log should be: nothing to count
            with open(p, "rb") as f:
                lines = sum(1 for _ in f)
            out.append({"id": p.stem, "path": str(p), "events": lines, "mtime": p.stat().st_mtime})
        return out

    def events(sid):
        return read_log(ctx.root, sid)

    return {"session.new_id": new_id, "session.save": save, "session.load": load, "session.list": list_, "session.log": log,
            "session.bind": bind, "session.logs": logs, "session.events": events}
