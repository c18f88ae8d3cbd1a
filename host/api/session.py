"""moss.session: checkpoints and append-only JSONL event logs under .moss/agent/.

Checkpoints are written atomically (temp file, fsync, rename) so a session killed at any
moment leaves either the previous checkpoint or the new one, never half of one. Log lines
are appended with one write each and never truncated.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

from ..errors import MossError

ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def agent_dir(root: Path) -> Path:
    return Path(root) / ".moss" / "agent"


def checkpoint_path(root: Path, sid: str) -> Path:
    return agent_dir(root) / f"session-{sid}.json"


def log_path(root: Path, sid: str) -> Path:
    return agent_dir(root) / "logs" / f"{sid}.jsonl"


def check_id(sid) -> str:
    if not isinstance(sid, str) or not ID_RE.match(sid):
        raise MossError(f"bad session id {sid!r}: letters, digits, '-' and '_' only", kind="usage")
    return sid


def ensure_dir(path: Path) -> None:
    """Create a folder under .moss/agent, and keep that whole folder out of the user's git."""
    path.mkdir(parents=True, exist_ok=True)
    agent = next((p for p in (path, *path.parents) if p.name == "agent" and p.parent.name == ".moss"), None)
    if agent is not None and not (agent / ".gitignore").exists():
        (agent / ".gitignore").write_text("# sessions and logs written by moss\n*\n", encoding="utf-8")


def write_atomic(path: Path, text: str) -> None:
    from ..tools.atomic import write_atomic as _write_atomic

    ensure_dir(path.parent)
    _write_atomic(path, text, sync_dir=True)


def append_line(path: Path, record: dict) -> None:
    from ..redact import value as redacted

    ensure_dir(path.parent)
    line = (json.dumps(redacted(record), ensure_ascii=False, default=str) + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def list_checkpoints(root: Path) -> list[dict]:
    out = []
    for p in agent_dir(root).glob("session-*.json"):
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            data = {}
        sid = p.stem[len("session-"):]
        out.append({
            "id": sid, "mtime": p.stat().st_mtime, "turn": data.get("turn"), "state": data.get("state"),
            "reason": data.get("reason"), "task": data.get("task"), "machine": data.get("machine"),
            "role": data.get("role"), "done": data.get("done"),
        })
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
        return json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        known = ", ".join(d["id"] for d in list_checkpoints(root)[-5:]) or "none"
        raise MossError(f"no session {sid!r} (recent: {known})", kind="not_found") from None
    except json.JSONDecodeError as e:
        raise MossError(f"{p}: checkpoint is not valid JSON ({e.msg} at line {e.lineno})", kind="io") from None


def read_log(root: Path, sid: str) -> list[dict]:
    p = log_path(root, check_id(sid))
    events = []
    try:
        with open(p, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    events.append(json.loads(line))
                except json.JSONDecodeError:
                    events.append({"event": "unreadable_line", "line": n})
    except FileNotFoundError:
        raise MossError(f"no log for session {sid!r}", kind="not_found") from None
    return events


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
        write_atomic(p, json.dumps(state, ensure_ascii=False, separators=(",", ":"), default=str))
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
        for p in sorted((agent_dir(ctx.root) / "logs").glob("*.jsonl"), key=lambda p: p.stat().st_mtime):
            with open(p, "rb") as f:
                lines = sum(1 for _ in f)
            out.append({"id": p.stem, "path": str(p), "events": lines, "mtime": p.stat().st_mtime})
        return out

    def events(sid):
        return read_log(ctx.root, sid)

    return {"session.new_id": new_id, "session.save": save, "session.load": load, "session.list": list_, "session.log": log,
            "session.bind": bind, "session.logs": logs, "session.events": events}
