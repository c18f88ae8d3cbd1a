"""Storage under .moss/: the one place that knows how moss keeps documents and logs.

Documents (a session's checkpoint, a moss.store document) are JSON objects written atomically
(temp file, fsync, rename), so a reader or a killed process sees the old one or the new one,
never half of one. Logs (a session's events, an inbox) are JSONL, appended with one write per
line and never truncated; reading one never fails on a torn or foreign line. Names are
checked, the folder keeps itself out of the user's git, and logged values are redacted.
What a document or a line *means* is the scripts' business.

Every file here is reached through moss.tools.safefs, from a held descriptor of the project
root: a link the repository planted under .moss/ (a log folder pointing elsewhere, a memory
file linked to a host secret, a fifo or /dev/zero where a lock file should be) is refused
with UnsafePath (kind "denied", one line naming the path), never followed or read. Listings
skip such an entry with a one-line warning instead (`skipped`).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import BinaryIO

from .errors import MossError
from .tools import safefs
from .tools.safefs import UnsafePath  # re-exported for the callers of this module

ID_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
GITIGNORE = "# sessions and logs written by moss\n*\n"


def agent_dir(root: Path) -> Path:
    return Path(root) / ".moss" / "agent"


def check_id(sid, what: str = "session id") -> str:
    if not isinstance(sid, str) or not ID_RE.match(sid):
        raise MossError(f"bad {what} {sid!r}: letters, digits, '-' and '_' only", kind="usage")
    return sid


def at(path: Path | str) -> tuple[safefs.Tree, str]:
    """(the project's held tree, `path` relative to it) for a path under a `.moss` folder."""
    t, rel = safefs.under_moss(path)
    return t, str(rel)


def ensure_dir(path: Path) -> None:
    """Create a folder under .moss/ (no link followed on the way), and keep .moss/agent out
    of the user's git. A `.gitignore` already there, even a dangling link, is left alone:
    created with O_EXCL, it is never written through."""
    t, rel = at(path)
    t.mkdirs(rel)
    parts = rel.split("/")
    for i in range(len(parts) - 1):
        if parts[i] == ".moss" and parts[i + 1] == "agent":
            t.create_exclusive("/".join(parts[:i + 2] + [".gitignore"]), GITIGNORE, create_dirs=False)
            break


def write_atomic(path: Path, data: str | bytes) -> None:
    """Replace the file `path` under .moss/ (temp file with O_EXCL, fsync, rename in the same
    folder descriptor): a planted link there is replaced, never written through."""
    ensure_dir(path.parent)
    t, rel = at(path)
    t.write_atomic(rel, data, create_dirs=False)


def open_read(path: Path | str) -> BinaryIO:
    """The regular file `path` under .moss/, open for reading; FileNotFoundError when there
    is none, UnsafePath for a link, a fifo or a device (refused without blocking)."""
    t, rel = at(path)
    return os.fdopen(t.open(rel, os.O_RDONLY), "rb")


def open_append(path: Path | str):
    """The file `path` under .moss/ open for appending as text (created, with its folder,
    if missing): for a log a process keeps open, such as an MCP server's stderr."""
    ensure_dir(Path(path).parent)
    t, rel = at(path)
    return os.fdopen(t.open(rel, os.O_WRONLY | os.O_APPEND | os.O_CREAT, create_dirs=False), "a",
                     encoding="utf-8")


def create_new(path: Path | str) -> BinaryIO:
    """A new file `path` under .moss/, open for reading and writing (O_EXCL: nothing that was
    there, not even a dangling link, is opened or written through)."""
    ensure_dir(Path(path).parent)
    t, rel = at(path)
    return os.fdopen(t.open(rel, os.O_RDWR | os.O_CREAT | os.O_EXCL, create_dirs=False), "w+b")


def read_bytes(path: Path | str, limit: int = safefs.DEFAULT_READ_LIMIT) -> bytes:
    t, rel = at(path)
    return t.read_bytes(rel, limit)


def read_text(path: Path | str, limit: int = safefs.DEFAULT_READ_LIMIT) -> str:
    return read_bytes(path, limit).decode("utf-8", errors="replace")


def listdir(folder: Path | str) -> list[str]:
    """The names in the folder `folder` under .moss/ ([] when there is none); UnsafePath
    when it is a link."""
    t, rel = at(folder)
    return t.listdir(rel)


def listed(folder: Path | str) -> list[str]:
    """listdir for a listing: a folder that is a link (or passes through one) lists nothing,
    with a one-line warning, instead of failing the listing."""
    try:
        return listdir(folder)
    except UnsafePath as e:
        skipped(folder, e)
        return []


def lstat(path: Path | str) -> os.stat_result | None:
    t, rel = at(path)
    return t.lstat(rel)


def unlink(path: Path | str) -> None:
    """Remove the name `path` (a planted link itself, never what it points to)."""
    t, rel = at(path)
    t.unlink(rel)


_warned: set = set()


def skipped(path: Path | str, why: Exception | str) -> None:
    """One line on stderr, once per process and path, for an entry a listing leaves out (a
    link, a fifo, a device, a file moss cannot read as what it should be)."""
    from .roots import display_path

    key = str(path)
    if key in _warned:
        return
    _warned.add(key)
    from . import ui

    reason = why.message if isinstance(why, MossError) else str(why)
    ui.note(f"warning: skipped {display_path(Path(path))}: {reason}", "yellow")


class Skips:
    """The entries one listing of `folder` leaves out, said on ONE line when the listing ends
    (`with storage.Skips(d) as skip: ... skip(path, why)`): a repository that plants 2,000
    links in a folder moss lists gets one warning, not 2,000. Each entry is said once per
    process, as by skipped()."""

    def __init__(self, folder: Path | str):
        self.folder = Path(folder)
        self.found: list[tuple[Path, Exception | str]] = []

    def __enter__(self) -> "Skips":
        return self

    def __call__(self, path: Path | str, why: Exception | str) -> None:
        if str(path) not in _warned:
            _warned.add(str(path))
            self.found.append((Path(path), why))

    def __exit__(self, *exc) -> None:
        if len(self.found) == 1:
            path, why = self.found[0]
            _warned.discard(str(path))
            skipped(path, why)
        elif self.found:
            from . import ui
            from .roots import display_path

            kinds: dict[str, int] = {}
            for path, _why in self.found:
                kind = _kind(path)
                kinds[kind] = kinds.get(kind, 0) + 1
            counted = ", ".join(f"{n:,} {k}{'s' if n > 1 else ''}"
                                for k, n in sorted(kinds.items(), key=lambda kv: -kv[1]))
            names = sorted(p.name for p, _ in self.found)[:3]
            more = len(self.found) - len(names)
            ui.note(f"warning: skipped {len(self.found):,} entries in {display_path(self.folder)}/ that moss does not "
                    f"read ({counted}): {', '.join(names)}{f' and {more:,} more' if more else ''}; remove them",
                    "yellow")


def _kind(path: Path) -> str:
    """What an entry moss skipped is, for people ("symlink", "named pipe", ...)."""
    import stat

    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return "entry"
    for test, name in ((stat.S_ISLNK, "symlink"), (stat.S_ISFIFO, "named pipe"), (stat.S_ISSOCK, "socket"),
                       (stat.S_ISCHR, "device"), (stat.S_ISBLK, "device"), (stat.S_ISDIR, "folder")):
        if test(mode):
            return name
    return "file"


def dumps(value, **kw) -> str:
    """JSON text that always encodes as UTF-8: a lone surrogate (a model may send "\\ud800")
    is kept as its \\u escape rather than failing the write."""
    text = json.dumps(value, ensure_ascii=False, default=str, **kw)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(value, ensure_ascii=True, default=str, **kw)
    return text


# The files this process appends to, each with its (tree, relative path), found once: a log
# line per event costs one openat2 from the held root, one write and one close. Keyed by the
# Path object the caller keeps (a session's log), whose hash it caches.
_appending: dict = {}


_line_json = json.JSONEncoder(ensure_ascii=False, default=str).encode  # dumps() without a new encoder a call


def append_line(path: Path, record: dict) -> None:
    from .redact import value as redacted

    record = redacted(record)
    try:
        line = (_line_json(record) + "\n").encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: kept as its \u escape (see dumps)
        line = (dumps(record) + "\n").encode("utf-8")
    append_bytes(path, line)


def append_bytes(path: Path, data: bytes) -> None:
    """Append `data` to `path` under .moss/ in one write, creating it (and its folder) if
    need be; a planted link or fifo there is refused (UnsafePath)."""
    where = _appending.get(path)
    if where is None:
        ensure_dir(path.parent)
        where = _appending[path] = at(path)
    t, rel = where
    try:
        t.append(rel, data, create_dirs=False)
    except FileNotFoundError:  # the folder went away meanwhile: make it again
        ensure_dir(path.parent)
        t.append(rel, data, create_dirs=False)


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
    records = []
    try:
        f = open_read(path)
    except UnsafePath as e:
        raise MossError(f"{e.message} (moss reads a {what} only from a regular file)", kind="denied") from None
    with f:
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


def objects(data: bytes | str) -> list[dict]:
    """The JSON objects among the lines of `data`; any other line (torn, stray, not an object) is skipped."""
    out = []
    for line in data.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict):
            out.append(rec)
    return out


def read_records(path: Path | str, offset: int, limit: int) -> tuple[list[dict], int]:
    """The whole JSONL records appended to `path` since byte `offset` (at most `limit` bytes
    read), and the offset after them: a torn last line (a writer mid-append) waits for the next
    read. Read without following a link (FileNotFoundError, UnsafePath to the caller)."""
    with open_read(path) as f:
        f.seek(offset)
        data = f.read(limit)
    end = data.rfind(b"\n") + 1
    return objects(data[:end]), offset + end


def scalars(document: dict) -> dict:
    """The top-level fields of a document that are plain values (what a listing can show
    without knowing what the document is)."""
    return {k: v for k, v in document.items()
            if isinstance(k, str) and (v is None or isinstance(v, (str, int, float, bool)))}
