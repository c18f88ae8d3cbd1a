"""moss.session: checkpoints and append-only JSONL event logs under .moss/agent/.

A checkpoint is a base document, session-ID.json, written atomically (temp file, fsync,
rename), plus a journal, session-ID.journal: the changes of each later save, one JSON line
per save, appended with one write. Saving a turn costs what the turn changed, not the size of
the session: the Lua side compares the session table with a copy of what was last saved
(a walk of Lua tables, no conversion) and only the changes cross into Python.

The journal's first line names the base it extends ({"base": saved_at}); a journal whose base
was since replaced is ignored, and a line that is not whole (a write cut short) ends it. The
base is rewritten (compacted) on a session's first save in a process, when its script says it ended (final), and
every JOURNAL_MAX_SAVES saves or JOURNAL_MAX_SECONDS, so a reader of session-ID.json alone sees
every finished session as before. Durability: a killed process (SIGKILL) loses nothing that
was saved, since appended lines are in the kernel's page cache the moment the write returns;
journal lines are not fsynced, so a power cut or kernel crash can lose the saves since the last
compaction (the base itself is fsynced, so it is never lost or torn). Log lines are appended
with one write each and never truncated.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from lupa.lua54 import lua_type

from .. import storage
from ..errors import MossError
from ..storage import (  # noqa: F401  (re-exported: the session API's own names)
    ID_RE, MAX_DEPTH, UnsafePath, agent_dir, append_line, check_id, depth_ok, dumps, ensure_dir, loads, read_lines,
    scalars, write_atomic,
)
from .registry import primitive


def checkpoint_path(root: Path, sid: str) -> Path:
    return agent_dir(root) / f"session-{sid}.json"


def journal_path(root: Path, sid: str) -> Path:
    return agent_dir(root) / f"session-{sid}.journal"


JOURNAL_MAX_SAVES = 64  # then the base is rewritten (and fsynced) and the journal starts again
JOURNAL_MAX_SECONDS = 30.0
JOURNAL_MAX_BYTES = 4 << 20


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
        raise CorruptCheckpoint(path, f"a JSON {_json_kind(state)} where a checkpoint is an object")
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
    """Apply one save's changes, as the Lua differ (_DIFF) writes them, to a JSON document:
    ["s", path, value] sets, ["d", path] deletes, ["a", path, values] appends to a list. A path
    is a list of keys; an integer key into a list is 1-based (Lua's)."""
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


def _json_kind(value) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", list: "array", dict: "object", type(None): "null"}.get(type(value), "value")


def list_checkpoints(root: Path) -> list[dict]:
    """Every checkpoint, oldest first: its scalar fields as saved (the host reads none of
    them) and `running`, whether a live moss process runs it now (its running marker,
    host/inbox.py; stale markers are removed on the way). One that cannot be read is listed
    all the same, with state and reason "corrupt" and `error` saying why and what to do. What
    a session that is not running and did not end counts as is its script's to say."""
    from .. import inbox

    out: list[dict] = []
    live = None  # ids of the sessions a live process runs, asked once
    folder = agent_dir(root)
    for name in storage.listed(folder):
        if not (name.startswith("session-") and name.endswith(".json")):
            continue
        p = folder / name
        sid = p.stem[len("session-"):]
        st = storage.lstat(p)
        if st is None:
            continue  # deleted while we listed
        mtime = st.st_mtime
        jst = storage.lstat(p.with_suffix(".journal"))
        if jst is not None:
            mtime = max(mtime, jst.st_mtime)  # saved since the base
        if live is None:
            live = {r["id"] for r in inbox.running(root)}
        row = {"id": sid, "mtime": mtime, "running": sid in live}
        try:
            data = read_checkpoint(p)
        except FileNotFoundError:
            continue
        except CorruptCheckpoint as e:
            row.update(state="corrupt", reason="corrupt", error=e.message)
        else:
            row.update({k: v for k, v in scalars(data).items() if k not in row})
            # the JSON kind of each other top-level field, for the script's own shape checks
            row["field_kinds"] = {k: _json_kind(v) for k, v in data.items() if isinstance(k, str) and k not in row}
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


def _write_base(p: Path, sid: str, state: dict, now: float) -> None:
    """A whole checkpoint (fsynced, renamed into place), then a new journal that extends it.
    Killed between the two, the old journal names the old base and is ignored."""
    state.setdefault("session_id", sid)
    state["saved_at"] = now
    write_atomic(p, dumps(state, separators=(",", ":")))
    write_atomic(p.with_suffix(".journal"), dumps({"base": now}) + "\n")


class Journal:
    """The saves of one session since its base: appended lines, never fsynced (see the module)."""

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


# The Lua half of incremental checkpoints. copy(t) is a deep copy of the session table (the
# "shadow" of what was saved); diff(shadow, t) brings the shadow up to date with t and returns
# the operations that did it (see apply_ops), or nil when nothing changed. A table's kind is
# what it converts to: "list" (keys exactly 1..n), "map", or empty; a change of kind replaces
# the value. A list that only grew is an append; one that lost elements (its others shifted up)
# is removals then an append; one whose elements changed a lot is replaced.
_DIFF = b"""
local is_object, NULL, unhooked = ...
local next, type, rawget, rawset, rawlen, rawequal, ipairs = next, type, rawget, rawset, rawlen, rawequal, ipairs
local mtype, table_remove = math.type, table.remove
local setmetatable, getmetatable = setmetatable, getmetatable
-- shadow table -> its kind: "list", "{}", "[]", or for a map how many keys it has (a number)
local KIND = setmetatable({}, { __mode = "k" })

local function kind(t)
  local len = rawlen(t)
  if len == 0 then
    if next(t) == nil then return is_object(t) and "{}" or "[]" end
    return "map"
  end
  local c = 0
  for k in next, t do
    if mtype(k) ~= "integer" or k < 1 or k > len then return "map" end
    c = c + 1
  end
  return c == len and "list" or "map"
end

local function copy(t, depth)
  if type(t) ~= "table" or depth > 220 or rawequal(t, NULL) then return t end
  local c, n = {}, 0
  for k, v in next, t do
    rawset(c, k, copy(v, depth + 1))
    n = n + 1
  end
  local mt = getmetatable(t)
  if mt ~= nil and type(mt) == "table" then setmetatable(c, mt) end
  local k = kind(t)
  KIND[c] = k == "map" and n or k
  return c
end

-- `path` is one array shared by the whole walk: path[1..depth] leads to the node in hand;
-- an operation takes a copy of it (most nodes are visited and found unchanged)
local function path_of(path, depth, k)
  local p = {}
  for i = 1, depth do p[i] = path[i] end
  if k ~= nil then p[depth + 1] = k end
  return p
end

local diff_node

-- "same_scalar(ov, nv)", written out in the list and map loops below: whether the shadow's
-- `ov` and the table's `nv` are the same string, boolean or number as JSON writes them (1
-- and 1.0, 0.0 and -0.0 are equal in Lua but not in JSON). Most values of a session are,
-- and this answers without a call to diff_value.

-- the value `nv` at `key` of the shadow node `old` (whose value there is `ov`)
local function diff_value(old, key, ov, nv, path, depth, ops)
  local tn = type(nv)
  if tn == "table" then
    if rawequal(ov, nv) then return end -- moss.json.null (the only table shared with the shadow)
    if type(ov) == "table" and not rawequal(ov, NULL) and not rawequal(nv, NULL) then
      path[depth + 1] = key
      if diff_node(ov, nv, path, depth + 1, ops) then return end
    end
    rawset(old, key, copy(nv, 0))
    ops[#ops + 1] = { "s", path_of(path, depth, key), nv }
    return
  end
  if tn == type(ov) and ov == nv then
    if tn ~= "number" then return end
    -- 1 and 1.0, 0.0 and -0.0 are equal in Lua but not in JSON
    if mtype(ov) == mtype(nv) and (nv ~= 0 or 1 / nv == 1 / ov) then return end
  end
  rawset(old, key, nv)
  if nv == nil then ops[#ops + 1] = { "d", path_of(path, depth, key) }
  else ops[#ops + 1] = { "s", path_of(path, depth, key), nv } end
end

-- whether the shadow's `ov` and the table's `nv` read the same as JSON (no ops, no change)
local function same(ov, nv, depth)
  local tn = type(nv)
  if tn ~= "table" then
    if tn == "number" then return mtype(ov) == mtype(nv) and ov == nv and (nv ~= 0 or 1 / nv == 1 / ov) end
    return rawequal(ov, nv)
  end
  if rawequal(ov, nv) then return true end -- moss.json.null
  if type(ov) ~= "table" or rawequal(ov, NULL) or rawequal(nv, NULL) or depth > 220 then return false end
  local k_old, k_new = KIND[ov], kind(nv)
  if k_old ~= k_new and not (k_new == "map" and mtype(k_old)) then return false end
  if k_new == "list" then
    local n = rawlen(nv)
    if rawlen(ov) ~= n then return false end
    for i = 1, n do
      if not same(rawget(ov, i), rawget(nv, i), depth + 1) then return false end
    end
    return true
  end
  if k_new ~= "map" then return true end -- both empty, of the same kind
  local c = 0
  for k, v in next, nv do
    c = c + 1
    local o = rawget(ov, k)
    if o == nil or not same(o, v, depth + 1) then return false end
  end
  return c == k_old
end

-- A list: the elements it starts with unchanged, then removals (the shadow's element i is
-- gone when its next one is the table's element i: $(forget) and $(drop) take notes out of
-- the middle of working memory), then elementwise changes and what was appended. A list
-- whose elements merely shifted left used to be rewritten whole, every element of it.
local function diff_list(old, new, path, depth, ops)
  local n_new, mark = rawlen(new), #ops
  local function give_up()
    for j = #ops, mark + 1, -1 do ops[j] = nil end
    return false
  end
  local i, n_old = 1, rawlen(old)
  while i <= n_old do
    if i <= n_new and same(rawget(old, i), rawget(new, i), depth + 1) then
      i = i + 1
    elseif i > n_new or (i < n_old and same(rawget(old, i + 1), rawget(new, i), depth + 1)) then
      table_remove(old, i) -- the shadow's element i is gone
      n_old = n_old - 1
      ops[#ops + 1] = { "d", path_of(path, depth, i) }
      if #ops - mark > n_new // 2 + 4 then return give_up() end
    else
      break
    end
  end
  if n_new < n_old then return give_up() end
  for j = i, n_old do
    local ov, nv = rawget(old, j), rawget(new, j)
    local tn = type(nv) -- same_scalar(ov, nv), written out: this loop runs for every entry
    if not (tn == "number" and mtype(ov) == mtype(nv) and ov == nv and (nv ~= 0 or 1 / nv == 1 / ov)
        or tn ~= "table" and tn ~= "number" and rawequal(ov, nv)) then
      diff_value(old, j, ov, nv, path, depth, ops)
      if #ops - mark > n_new // 2 + 4 then return give_up() end
    end
  end
  if n_new > n_old then
    local tail = {}
    for j = n_old + 1, n_new do
      local v = rawget(new, j)
      tail[#tail + 1] = v
      rawset(old, j, copy(v, 0))
    end
    ops[#ops + 1] = { "a", path_of(path, depth), tail }
  end
  return true
end

-- brings `old` (at path[1..depth]) up to `new` in place, emitting ops; false when it must
-- be replaced whole (nothing emitted for it then)
diff_node = function(old, new, path, depth, ops)
  if depth > 220 then return false end
  local k_old, k_new = KIND[old], kind(new)
  if k_old ~= k_new and not (k_new == "map" and mtype(k_old)) then return false end
  if k_new == "{}" or k_new == "[]" then return true end
  if k_new == "list" then return diff_list(old, new, path, depth, ops) end
  local kept, total = 0, 0 -- keys of `new` already in the shadow, all keys of `new`
  for k, nv in next, new do
    total = total + 1
    local ov = rawget(old, k)
    if ov ~= nil then kept = kept + 1 end
    local tn = type(nv) -- same_scalar(ov, nv), written out
    if not (tn == "number" and mtype(ov) == mtype(nv) and ov == nv and (nv ~= 0 or 1 / nv == 1 / ov)
        or tn ~= "table" and tn ~= "number" and rawequal(ov, nv)) then
      diff_value(old, k, ov, nv, path, depth, ops)
    end
  end
  if kept ~= k_old then -- a key of the shadow is no longer in the table: find which
    local gone = {}
    for k in next, old do
      if rawget(new, k) == nil then gone[#gone + 1] = k end
    end
    for _, k in ipairs(gone) do
      rawset(old, k, nil)
      ops[#ops + 1] = { "d", path_of(path, depth, k) }
    end
  end
  KIND[old] = total
  return true
end

local function diff(shadow, t)
  local ops = {}
  if not diff_node(shadow, t, {}, 0, ops) then return false end -- replaced whole: a new base
  if #ops == 0 then return nil end
  return ops
end

-- both run with the count hook off (Runtime.unhooked): raw access to plain data only
local M = {}
function M.copy(t) return unhooked(copy, t, 0) end
function M.diff(shadow, t) return unhooked(diff, shadow, t) end
return M
"""


class _Differ:
    def __init__(self, rt):
        m = rt.lua.execute(_DIFF, rt.conv._is_object_table, rt.conv.null, rt.unhooked)
        self.copy = m[b"copy"]
        self.diff = m[b"diff"]


def _differ(rt) -> _Differ:
    d = getattr(rt, "_session_differ", None)  # one per Lua state: tables cannot cross runtimes
    if d is None:
        d = rt._session_differ = _Differ(rt)
    return d


ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"  # no look-alikes (0/o, 1/l/i)


def new_session_id(root: Path) -> str:
    import secrets

    while True:
        sid = "".join(secrets.choice(ALPHABET) for _ in range(8))
        if storage.lstat(checkpoint_path(root, sid)) is None:
            return sid


class _Known:
    """What one run knows of the sessions it saves and logs (`ctx.services["session"]`): the
    journal of each it saved (what it last saved of it) and each one's paths, checked once."""

    def __init__(self) -> None:
        self.saved: dict[str, Journal] = {}
        self.checkpoints: dict[str, Path] = {}
        self.logs: dict[str, Path] = {}


def _known(ctx) -> _Known:
    known = ctx.services.get("session")
    if known is None:
        known = ctx.services["session"] = _Known()
    return known


@primitive
def new_id(ctx):
    """A fresh session id (never from Lua's math.random, which --seed makes repeatable)."""
    return new_session_id(ctx.root)


# the session table stays in Lua: only what changed is converted (lua_args)
@primitive(lua_args=True)
def save(ctx, sid, state, opts=None):
    """The checkpoint of `sid`: a new base on the first save in this process, when due, and
    when the caller says the session ended (`opts.final`); else one journal line."""
    final = lua_type(opts) == "table" and opts[b"final"] is True
    if isinstance(sid, bytes):
        sid = sid.decode("utf-8", errors="replace")
    known = _known(ctx)
    saved, ckpt_paths = known.saved, known.checkpoints
    p = ckpt_paths.get(sid) if isinstance(sid, str) else None
    if p is None:
        p = ckpt_paths[sid] = checkpoint_path(ctx.root, check_id(sid))
    now = time.time()
    rt = ctx.runtime
    if rt is None or lua_type(state) != "table":  # a Python caller, or nil: nothing to diff
        state = rt.conv.to_py(state) if rt is not None and not isinstance(state, dict) else state
        if state is not None and not isinstance(state, dict):
            raise MossError(f"moss.session.save: the state must be a table, got {type(state).__name__}", kind="usage")
        saved.pop(sid, None)
        _write_base(p, sid, dict(state or {}), now)
        return str(p)
    differ = _differ(rt)
    j = saved.pop(sid, None)  # back only once this save is written: a failure starts a new base
    ops = differ.diff(j.shadow, state) if j is not None and not j.due(now) and not final else False
    if ops is False or j is None:  # the first save in this process, compaction time, the end, or a new root
        shadow = differ.copy(state)
        _write_base(p, sid, rt.conv.to_py(shadow), now)
        saved[sid] = Journal(p.with_suffix(".journal"), shadow, now)
        return str(p)
    ops = rt.conv.to_py(ops) if ops is not None else []
    ops.append(["s", ["saved_at"], now])
    j.append(ops)
    saved[sid] = j
    return str(p)


@primitive
def load(ctx, sid=None):
    return load_checkpoint(ctx.root, sid)


@primitive
def list_(ctx):
    return list_checkpoints(ctx.root)


@primitive
def log(ctx, sid, event, data=None):
    record = {"event": str(event), "ts": round(time.time(), 3)}
    if isinstance(data, dict):
        record.update(data)
    record["session"] = sid  # every line names its agent and that agent's parent
    record["parent"] = ctx.parent_id if sid == ctx.session_id else record.get("parent")
    paths = _known(ctx).logs
    p = paths.get(sid) if isinstance(sid, str) else None
    if p is None:
        p = log_path(ctx.root, check_id(sid))
        paths[sid] = p
    append_line(p, record)
    return True


@primitive
def bind(ctx, sid, opts=None):
    """Host-side events (LLM attempts, retries) go to this session's log from now on;
    opts.role names the agent's role (shown to agents waiting for its locks)."""
    ctx.session_id = check_id(sid)
    if isinstance(opts, dict) and isinstance(opts.get("role"), str):
        ctx.role = opts["role"]
    if isinstance(opts, dict) and isinstance(opts.get("resume"), str):
        ctx.resume = opts["resume"]  # what run.py prints when Ctrl-C stops the session
    if ctx.tree is not None and ctx.tree.root_id is None and ctx.parent_id is None:
        ctx.tree.root_id = ctx.session_id
    return True


@primitive
def logs(ctx):
    out: list[dict] = []
    folder = agent_dir(ctx.root) / "logs"
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
                skip(p, e)  # a link, a folder or a pipe where a log should be
                continue
            out.append({"id": p.stem, "path": str(p), "events": lines, "mtime": mtime})
    out.sort(key=lambda d: d["mtime"])
    return out


@primitive
def events(ctx, sid):
    return read_log(ctx.root, sid)
