"""A session's log, `.moss/agent/logs/ID.jsonl`: its events, appended one line each and never
truncated (storage.append_line writes them; docs/events.md says what each record is)."""

from __future__ import annotations

import os
from pathlib import Path

from .. import storage
from ..errors import MossError
from ..storage import UnsafePath, agent_dir, check_id, read_lines


def log_path(root: Path, sid: str) -> Path:
    return agent_dir(root) / "logs" / f"{sid}.jsonl"


def read_log(root: Path, sid: str) -> list[dict]:
    """One session's events (see storage.read_lines for lines that are not events)."""
    p = log_path(root, check_id(sid))
    try:
        return read_lines(p, "session log")
    except FileNotFoundError:
        raise MossError(f"no log for session {sid!r}", kind="not_found") from None


def list_logs(root: Path) -> list[dict]:
    """Every session log, oldest first: {id, path, events (its line count), mtime}; a link, a
    folder or a pipe where a log should be is skipped with one line."""
    out: list[dict] = []
    folder = agent_dir(root) / "logs"
    with storage.Skips(folder) as skip:
        for name in storage.listed(folder):
            if not name.endswith(".jsonl"):
                continue
            p = folder / name
            try:
                with storage.open_read(p) as f:
                    mtime = os.fstat(f.fileno()).st_mtime
                    lines = sum(1 for _ in f)
            except FileNotFoundError:
                continue
            except UnsafePath as e:
                skip(p, e)
                continue
            out.append({"id": p.stem, "path": str(p), "events": lines, "mtime": mtime})
    out.sort(key=lambda d: d["mtime"])
    return out
