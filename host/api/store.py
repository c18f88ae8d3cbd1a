"""moss.store: small named JSON documents that outlive sessions, in .moss/agent/store/<name>.json.

A script keeps long-lived data here (the tce machine's storage, caches, counters). Each
save replaces the whole document atomically (temp file, fsync, rename), so a reader or a
killed process sees the old document or the new one, never half of one. The folder is under
.moss/agent/, which moss keeps out of the project's git. There is no locking: two sessions
that load, change and save the same name at the same time can lose one of the changes.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import MossError
from ..storage import ID_RE, agent_dir, read_text, write_atomic
from .registry import primitive


def store_dir(root: Path) -> Path:
    return agent_dir(root) / "store"


def check_name(name) -> str:
    if not isinstance(name, str) or not ID_RE.match(name):
        raise MossError(f"bad store name {name!r}: 1-64 letters, digits, '-' and '_'", kind="usage")
    return name


def store_path(root: Path, name: str) -> Path:
    return store_dir(root) / f"{check_name(name)}.json"


@primitive
def load(ctx, name):
    """The document saved under `name`, or an empty table if there is none."""
    p = store_path(ctx.root, name)
    try:
        text = read_text(p)  # a link, a fifo or a device there is refused (kind "denied")
    except FileNotFoundError:
        return {}
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise MossError(f"{p}: store is not valid JSON ({e.msg} at line {e.lineno})", kind="io") from None


@primitive
def save(ctx, name, data):
    """Replace the document `name` with `data` (a table); returns the file's path."""
    p = store_path(ctx.root, name)
    if not isinstance(data, (dict, list)):
        raise MossError(f"moss.store.save expects a table, got {type(data).__name__}", kind="usage")
    write_atomic(p, json.dumps(data, ensure_ascii=False, indent=1))
    ctx.log("store_save", {"name": name, "entries": len(data)})
    return str(p)
