"""Which sessions a live moss process runs now: `.moss/agent/running/<id>.json` ({pid,
pid_start, started, task}), kept by the process while it runs the session, so `moss say`
without an id can find the latest one that is still alive and a listing can say `running`.
A marker whose process is gone (or whose pid now belongs to a later process: pid_start
differs) is stale, and removed wherever the running sessions are listed.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from .. import storage
from ..errors import MossError
from ..storage import UnsafePath, agent_dir, check_id
from ..tools.procs import alive_since, start_time

MAX_MARKER = 64 << 10  # a running marker is a few hundred bytes


def running_path(root: Path, sid: str) -> Path:
    return agent_dir(root) / "running" / f"{check_id(sid)}.json"


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


def is_running(root: Path, sid: str) -> bool:
    return any(r["id"] == sid for r in running(root))


def latest_running(root: Path) -> str:
    """The id of the most recently started session that is still running."""
    rows = running(root)
    if not rows:
        raise MossError("no moss session is running in this project; name one: moss say ID \"message\"",
                        kind="not_found")
    return rows[0]["id"]
