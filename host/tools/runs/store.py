"""The run store: the files of one project's runs under ``.moss/agent/runs``.

    <id>.json    the record: status, exit code, pid, executor, alert rules and alerts;
                 replaced atomically on every change, so another moss process sees it whole
    <id>.log     what the run wrote (a Ray job's driver log is copied here)
    <id>.exit    a detached run's exit code, written by the shell that waits for it
    <id>.stop    why `moss runs stop` stopped a run another moss process watches
    <id>.alert   manual alerts for a run another moss process watches, one JSON line each
    <id>.resolve alerts of such a run resolved elsewhere (`moss ui`), one JSON line each

Every file is reached through moss.tools.safefs from a held descriptor of the project root:
one that is a link, a fifo or a device is never followed or read. A record moss cannot use
(not JSON, fields of the wrong type, a name that is not its id) is kept aside in ``corrupt``
(file -> why), so a listing can name it in one line instead of failing. What a record's
status means, and who changes it, is moss.tools.runs.manager.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable

from ... import storage
from ...errors import MossError
from ...tools import safefs

__all__ = ["RunStore", "STATUSES", "TERMINAL", "unusable"]

STATUSES = ("queued", "running", "finished", "failed", "stopped")
TERMINAL = frozenset({"finished", "failed", "stopped"})
MAX_RECORD = 16 << 20  # bytes of one run record (alerts included)
MAX_READ = 16 << 20   # bytes of a log or trigger file read in one go
MAX_TAIL = 100_000    # characters of a log tail

_RECORD_TYPES: dict[str, type | tuple[type, ...]] = {"name": str, "cmd": str, "alerts": list, "created_at": (int, float), "started_at": (int, float),
                 "ended_at": (int, float), "duration": (int, float), "code": int, "pid": int, "host_pid": int}


def unusable(rec, stem: str) -> str | None:
    """Why a run record read from `<stem>.json` cannot be used, or None."""
    if not isinstance(rec, dict):
        return "not a JSON object"
    if rec.get("id") != stem:
        return f"its id is {rec.get('id')!r}, not the file's name {stem!r}"
    if rec.get("status") not in STATUSES:
        return f"status {rec.get('status')!r} is not one of {', '.join(STATUSES)}"
    for key, want in _RECORD_TYPES.items():
        value = rec.get(key)
        if value is not None and (not isinstance(value, want) or isinstance(value, bool)):
            return f"{key} is {type(value).__name__}, not what a run record holds there"
    if not isinstance(rec.get("name"), str) or not isinstance(rec.get("cmd"), str):
        return "it has no name or command"
    alert_keys = ("id", "status", "message")
    if not all(isinstance(a, dict) and all(isinstance(a.get(k), str) for k in alert_keys)
               for a in rec.get("alerts") or []):
        return "an alert in it is not an object with an id, a status and a message"
    return None


class RunStore:
    """The runs folder of one project. Not locked: the caller (RunManager) serialises."""

    def __init__(self, root: Path, *, prepare_dir: Callable[[Path], None] | None = None):
        self.root = Path(root)
        self.dir = self.root / ".moss" / "agent" / "runs"
        self.corrupt: dict[str, str] = {}  # record file (relative to the project) -> why moss cannot use it
        self._prepare_dir = prepare_dir
        self._ready = False

    def ensure_dir(self) -> None:
        """Make the runs folder (once per store), keeping .moss/agent out of git."""
        if self._ready:
            return
        if self._prepare_dir:
            self._prepare_dir(self.dir)
        storage.ensure_dir(self.dir)
        self._ready = True

    def path(self, rid: str, ext: str) -> Path:
        return self.dir / f"{rid}.{ext}"

    def rel(self, rid: str, ext: str) -> str:
        return f".moss/agent/runs/{rid}.{ext}"

    def tree(self) -> safefs.Tree:
        return safefs.tree(self.root)

    # ---- records ---------------------------------------------------------------------------
    def save(self, rec: dict) -> None:
        """Replace the record of `rec["id"]` (temp file, fsync, rename: never half a record)."""
        self.ensure_dir()
        self.tree().write_atomic(self.rel(rec["id"], "json"), json.dumps(rec, indent=1, ensure_ascii=False),
                                 create_dirs=False)

    def records(self) -> list[Path]:
        """The record files of the runs folder ([] when it is missing or refused)."""
        return [self.dir / n for n in storage.listed(self.dir) if n.endswith(".json") and not n.startswith(".")]

    def read(self, path: Path) -> dict | None:
        """The record in `path`, or None (the file is gone, or it is noted in `corrupt`)."""
        shown = f".moss/agent/runs/{path.name}"
        try:
            rec = json.loads(self.tree().read_bytes(shown, MAX_RECORD))
        except FileNotFoundError:
            return None
        except storage.UnsafePath as e:
            self.corrupt[shown] = e.message
            return None
        except (OSError, ValueError, MossError) as e:
            self.corrupt[shown] = f"not valid JSON ({getattr(e, 'msg', None) or e})"
            return None
        why = unusable(rec, path.stem)
        if why:
            self.corrupt[shown] = why
            return None
        self.corrupt.pop(shown, None)
        rec.setdefault("alerts", [])
        return rec

    # ---- the other files of a run ----------------------------------------------------------
    def read_from(self, rid: str, ext: str, offset: int, limit: int = MAX_READ) -> bytes:
        """Bytes of `<rid>.<ext>` from `offset` (negative: from the end); b"" when it is
        missing or not a regular file."""
        try:
            fd = self.tree().open(self.rel(rid, ext))
        except (OSError, MossError):
            return b""
        with os.fdopen(fd, "rb") as fh:
            if offset < 0:
                fh.seek(0, os.SEEK_END)
                offset = max(0, fh.tell() + offset)
            fh.seek(offset)
            return fh.read(limit)

    def tail(self, rid: str, chars: int) -> str:
        """The last `chars` characters of the run's log (at most MAX_TAIL)."""
        chars = max(0, min(int(chars), MAX_TAIL))
        if chars == 0:
            return ""
        return self.read_from(rid, "log", -4 * chars).decode("utf-8", "replace")[-chars:]

    def size(self, rid: str, ext: str) -> int:
        """Bytes in `<rid>.<ext>` (0 when there is none)."""
        st = self.tree().lstat(self.rel(rid, ext))
        return st.st_size if st is not None else 0

    def append(self, rid: str, ext: str, data: bytes | str) -> None:
        """Append to `<rid>.<ext>` in one write (created if missing): a log, a trigger line."""
        self.ensure_dir()
        self.tree().append(self.rel(rid, ext), data, create_dirs=False)

    def write(self, rid: str, ext: str, data: bytes | str) -> None:
        """Replace `<rid>.<ext>` atomically."""
        self.ensure_dir()
        self.tree().write_atomic(self.rel(rid, ext), data, create_dirs=False)

    def open_log(self, rid: str) -> int:
        """A descriptor of `<rid>.log` open for appending (the run's stdout and stderr)."""
        self.ensure_dir()
        return self.tree().open(self.rel(rid, "log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def exit_code(self, rid: str) -> int | None:
        """The code a detached run's shell left in `<rid>.exit`, or None."""
        try:
            return int(self.tree().read_text(self.rel(rid, "exit"), 64).strip())
        except (OSError, ValueError, MossError):  # missing, not a number, or not a regular file
            return None

    def stop_marker(self, rid: str) -> str | None:
        """The reason `moss runs stop` left in <id>.stop for the process that watches the run."""
        try:
            return self.tree().read_text(self.rel(rid, "stop"), 64 << 10).strip() or "stopped on request"
        except (OSError, MossError):
            return None
