"""Storage under .moss/agent/: the one place that knows how moss keeps documents and logs.

Documents (a session's checkpoint, a moss.store document) are JSON objects written atomically
(temp file, fsync, rename), so a reader or a killed process sees the old one or the new one,
never half of one. Logs (a session's events, an inbox) are JSONL, appended with one write per
line and never truncated; reading one never fails on a torn or foreign line. Names are
checked, the folder keeps itself out of the user's git, and logged values are redacted.
What a document or a line *means* is the scripts' business.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from .errors import MossError

ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def agent_dir(root: Path) -> Path:
    return Path(root) / ".moss" / "agent"


def check_id(sid, what: str = "session id") -> str:
    if not isinstance(sid, str) or not ID_RE.match(sid):
        raise MossError(f"bad {what} {sid!r}: letters, digits, '-' and '_' only", kind="usage")
    return sid


def ensure_dir(path: Path) -> None:
    """Create a folder under .moss/agent, and keep that whole folder out of the user's git."""
    path.mkdir(parents=True, exist_ok=True)
    agent = next((p for p in (path, *path.parents) if p.name == "agent" and p.parent.name == ".moss"), None)
    if agent is not None and not (agent / ".gitignore").exists():
        (agent / ".gitignore").write_text("# sessions and logs written by moss\n*\n", encoding="utf-8")


def write_atomic(path: Path, text: str) -> None:
    from .tools.atomic import write_atomic as _write_atomic

    ensure_dir(path.parent)
    _write_atomic(path, text, sync_dir=True)


def dumps(value, **kw) -> str:
    """JSON text that always encodes as UTF-8: a lone surrogate (a model may send "\\ud800")
    is kept as its \\u escape rather than failing the write."""
    text = json.dumps(value, ensure_ascii=False, default=str, **kw)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(value, ensure_ascii=True, default=str, **kw)
    return text


# Files whose folder this process has made sure of (ensure_dir costs two syscalls). Keyed by
# the file, not its folder: a caller that keeps its Path object (a session's log) costs one
# set lookup with the hash the object caches, where `path.parent` made and hashed a new Path.
_ensured: set = set()


_line_json = json.JSONEncoder(ensure_ascii=False, default=str).encode  # dumps() without a new encoder a call


def append_line(path: Path, record: dict) -> None:
    from .redact import value as redacted

    record = redacted(record)
    try:
        line = (_line_json(record) + "\n").encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: kept as its \u escape (see dumps)
        line = (dumps(record) + "\n").encode("utf-8")
    if path not in _ensured:
        ensure_dir(path.parent)
        _ensured.add(path)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except FileNotFoundError:  # the folder went away meanwhile: make it again
        ensure_dir(path.parent)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


MAX_DEPTH = 200  # deeper than a Lua table may come back (convert.Converter.max_depth)


def _big_int(text: str):
    """JSON integers beyond Lua's 64 bits become floats, as Lua's own literals do."""
    n = int(text)
    return n if -(2**63) <= n < 2**63 else float(n)


def loads(text: str):
    """json.loads for files moss reads back: big integers as floats; deep nesting a ValueError."""
    try:
        return json.loads(text, parse_int=_big_int)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def depth_ok(value, limit: int = MAX_DEPTH) -> bool:
    stack = [(value, 0)]
    while stack:
        v, d = stack.pop()
        if d > limit:
            return False
        if isinstance(v, dict):
            stack.extend((x, d + 1) for x in v.values())
        elif isinstance(v, list):
            stack.extend((x, d + 1) for x in v)
    return True


def read_lines(path: Path, what: str = "log") -> list[dict]:
    """Every record of a JSONL file. A line that is not a JSON object (a torn write, a stray
    byte, another program's text) becomes {"event": "unreadable_line", "line": N}."""
    from .tools.resolve import special_kind

    kind = special_kind(path)
    if kind is not None:
        raise MossError(f"{path} is {kind}, not a {what}", kind="not_found")
    records = []
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            line = raw.decode("utf-8", errors="replace").strip()
            if not line:
                continue
            try:
                record = loads(line)
            except ValueError:  # JSONDecodeError is one
                record = None
            records.append(record if isinstance(record, dict) else {"event": "unreadable_line", "line": n})
    return records


def scalars(document: dict) -> dict:
    """The top-level fields of a document that are plain values (what a listing can show
    without knowing what the document is)."""
    return {k: v for k, v in document.items()
            if isinstance(k, str) and (v is None or isinstance(v, (str, int, float, bool)))}
