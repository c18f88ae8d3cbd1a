"""The session store: a project's saved sessions under `.moss/agent/`, one job per module.

- `checkpoint.py`: one session's checkpoint, a base file plus a journal of later saves:
  read, written, its journal applied;
- `listing.py`: the saved sessions: their ids, the listing `moss.session.list` gives the agent
  script, one loaded whole, a new id;
- `logs.py`: a session's log of events (`.moss/agent/logs/ID.jsonl`);
- `running.py`: which sessions a live moss process runs now (its running markers);
- `row.py`: what the host reads of a session, the row and timeline declared in
  host/api/events.lua, and nothing else.

What a session holds is its agent script's business (docs/architecture.md): the store keeps
and finds checkpoints and logs, and reads a session only through `row.py`. The Lua API's
`moss.session` (host/api/session.py) is its face for scripts; the inbox, the MCP server, the
board and the CLI use it directly.
"""

from .checkpoint import (
    JOURNAL_MAX_BYTES, JOURNAL_MAX_SAVES, JOURNAL_MAX_SECONDS, CorruptCheckpoint, Journal, apply_ops,
    checkpoint_path, journal_path, read_checkpoint, write_base,
)
from .listing import has_checkpoint, list_checkpoints, load_checkpoint, new_session_id, saved_ids
from .logs import list_logs, log_path, read_log
from .row import read_children, read_result, read_row, read_rows, read_timeline, saved_row
from .running import is_running, latest_running, mark_running, mark_stopped, running, running_path

__all__ = [
    "JOURNAL_MAX_BYTES", "JOURNAL_MAX_SAVES", "JOURNAL_MAX_SECONDS", "CorruptCheckpoint", "Journal", "apply_ops",
    "checkpoint_path", "has_checkpoint", "is_running", "journal_path", "latest_running", "list_checkpoints",
    "list_logs", "load_checkpoint", "log_path", "mark_running", "mark_stopped", "new_session_id", "read_checkpoint",
    "read_children", "read_log", "read_result", "read_row", "read_rows", "read_timeline", "running", "running_path",
    "saved_ids", "saved_row", "write_base",
]
