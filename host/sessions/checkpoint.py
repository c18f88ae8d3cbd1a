"""A session's checkpoint on disk: a base document, session-ID.json, written atomically (temp
file, fsync, rename), plus a journal, session-ID.journal: the changes of each later save, one
JSON line per save, appended with one write. Saving a turn costs what the turn changed, not
the size of the session (the Lua side, host/api/session.py, finds the changes).

The journal's first line names the base it extends ({"base": saved_at}); a journal whose base
was since replaced is ignored, and a line that is not whole (a write cut short) ends it. The
base is rewritten (compacted) on a session's first save in a process, when its script says it
ended (final), and every JOURNAL_MAX_SAVES saves or JOURNAL_MAX_SECONDS, so a reader of
session-ID.json alone sees every finished session as before. Durability: a killed process
(SIGKILL) loses nothing that was saved, since appended lines are in the kernel's page cache
the moment the write returns; journal lines are not fsynced, so a power cut or kernel crash can
lose the saves since the last compaction (the base itself is fsynced, so it is never lost or
torn).
"""

from __future__ import annotations

import json
from pathlib import Path

from .. import storage
from ..errors import MossError
from ..storage import MAX_DEPTH, UnsafePath, agent_dir, depth_ok, dumps, loads, write_atomic

JOURNAL_MAX_SAVES = 64  # then the base is rewritten (and fsynced) and the journal starts again
JOURNAL_MAX_SECONDS = 30.0
JOURNAL_MAX_BYTES = 4 << 20


def checkpoint_path(root: Path, sid: str) -> Path:
    return agent_dir(root) / f"session-{sid}.json"


def journal_path(root: Path, sid: str) -> Path:
    return agent_dir(root) / f"session-{sid}.journal"


class CorruptCheckpoint(MossError):
    """A checkpoint file moss cannot use: names the file and how to start fresh."""

    def __init__(self, path: Path, why: str):
        from ..roots import display_path

        shown = display_path(path)
        super().__init__(f"{shown} is not a usable checkpoint ({why}); delete it to start fresh, or "
                         "start a new session instead of resuming this one", kind="config", path=str(path))
        self.why = why


def read_checkpoint(path: Path) -> dict:
    """The checkpoint at `path` as a dict, or CorruptCheckpoint saying what is wrong with it
    as a file (a link, a fifo or a device there is never followed or read: storage.read_bytes;
    not UTF-8, not a JSON object, nested too deep). Whether its fields have the shape of a
    session is its script's to check (agent.lua's resume, timeline.lua's listing)."""
    try:
        data = storage.read_bytes(path)
    except FileNotFoundError:
        raise
    except UnsafePath as e:
        raise CorruptCheckpoint(path, e.message) from None
    except MossError as e:  # larger than a read is allowed to be
        raise CorruptCheckpoint(path, e.message) from None
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
        raise CorruptCheckpoint(path, f"a JSON {json_kind(state)} where a checkpoint is an object")
    if not depth_ok(state):
        raise CorruptCheckpoint(path, f"nested more than {MAX_DEPTH} levels deep")
    return _with_journal(path, state)


def _with_journal(path: Path, state: dict) -> dict:
    """`state` with the saves journaled after it (session-ID.journal next to the base)."""
    jpath = path.with_suffix(".journal")
    try:
        lines = storage.read_bytes(jpath).split(b"\n")
    except UnsafePath as e:
        raise CorruptCheckpoint(jpath, e.message) from None
    except (OSError, MossError):
        return state  # no journal (an old checkpoint, or none since the last compaction)
    try:
        header = loads(lines[0].decode("utf-8"))
    except ValueError:
        return state
    if not isinstance(header, dict) or header.get("base") != state.get("saved_at"):
        return state  # the journal of an earlier base: the base already holds it
    for raw in lines[1:]:
        if not raw.endswith(b"}"):
            break  # the end, or a line cut short: what follows it was never saved
        try:
            record = loads(raw.decode("utf-8", errors="replace"))
            state = apply_ops(state, record["ops"])
        except (ValueError, KeyError, TypeError, IndexError, AttributeError):
            break
    if not isinstance(state, dict) or not depth_ok(state):
        raise CorruptCheckpoint(jpath, "its journal does not apply to it")
    return state


def _json_key(k):
    """A key as JSON writes it (json.dumps turns dict keys into strings this way)."""
    if k is True:
        return "true"
    if k is False:
        return "false"
    if k is None:
        return "null"
    if isinstance(k, float):
        return repr(k)
    return str(k)


def apply_ops(doc, ops):
    """Apply one save's changes, as the Lua differ (host/api/session_diff.lua) writes them, to a
    JSON document: ["s", path, value] sets, ["d", path] deletes, ["a", path, values] appends to
    a list. A path is a list of keys; an integer key into a list is 1-based (Lua's)."""
    for op in ops:
        kind, path = op[0], op[1]
        if not path:
            doc = op[2]
            continue
        parent = doc
        for k in path[:-1]:
            parent = parent[k - 1] if isinstance(parent, list) else parent[_json_key(k)]
        k = path[-1]
        if kind == "s":
            if isinstance(parent, list):
                if k == len(parent) + 1:
                    parent.append(op[2])
                else:
                    parent[k - 1] = op[2]
            else:
                parent[_json_key(k)] = op[2]
        elif kind == "d":
            if isinstance(parent, list):
                del parent[k - 1]
            else:
                parent.pop(_json_key(k), None)
        elif kind == "a":
            target = parent[k - 1] if isinstance(parent, list) else parent[_json_key(k)]
            target.extend(op[2])
        else:
            raise ValueError(f"unknown journal operation {kind!r}")
    return doc


def json_kind(value) -> str:
    """What JSON calls the kind of `value`: object, array, string, number, boolean, null."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", list: "array", dict: "object", type(None): "null"}.get(type(value), "value")


def write_base(p: Path, sid: str, state: dict, now: float) -> None:
    """A whole checkpoint (fsynced, renamed into place), then a new journal that extends it.
    Killed between the two, the old journal names the old base and is ignored."""
    state.setdefault("session_id", sid)
    state["saved_at"] = now
    write_atomic(p, dumps(state, separators=(",", ":")))
    write_atomic(p.with_suffix(".journal"), dumps({"base": now}) + "\n")


class Journal:
    """The saves of one session since its base: appended lines, never fsynced (see the module).
    `shadow` is what the caller last saved (the Lua differ's copy of the session table)."""

    def __init__(self, path: Path, shadow, base_time: float):
        self.path, self.shadow, self.base_time = path, shadow, base_time
        self.tree, self.rel = storage.at(path)
        self.saves = 0
        self.bytes = 0

    def due(self, now: float) -> bool:
        return (self.saves >= JOURNAL_MAX_SAVES or now - self.base_time >= JOURNAL_MAX_SECONDS
                or self.bytes >= JOURNAL_MAX_BYTES)

    def append(self, ops: list) -> None:
        line = (dumps({"ops": ops}, separators=(",", ":")) + "\n").encode("utf-8")
        self.tree.append(self.rel, line, create=False)  # the base wrote it: never created here
        self.saves += 1
        self.bytes += len(line)
