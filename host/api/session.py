"""moss.session: a script's saved sessions, their checkpoints and logs (docs/lua-api.md).

The store itself is host/sessions/ (checkpoints with their journals, listings, logs, running
markers); this module is its face for Lua. What it adds is Lua's: a session table is saved by
its changes (`save`), found by host/api/session_diff.lua comparing the table with a copy of
what was last saved (a walk of Lua tables, no conversion), so only the changes cross into
Python and a turn's save costs what the turn changed, not the size of the session.
"""

from __future__ import annotations

import time
from pathlib import Path

from lupa.lua54 import lua_type

from .. import hostlua, sessions
from ..errors import MossError
from ..storage import append_line, check_id
from .registry import primitive


class _Differ:
    """host/api/session_diff.lua in one Lua state: copy(t) and diff(shadow, t)."""

    def __init__(self, rt):
        m = hostlua.run(rt.lua, "api/session_diff.lua", rt.conv._is_object_table, rt.conv.null, rt.unhooked)
        self.copy = m[b"copy"]
        self.diff = m[b"diff"]


def _differ(rt) -> _Differ:
    d = getattr(rt, "_session_differ", None)  # one per Lua state: tables cannot cross runtimes
    if d is None:
        d = rt._session_differ = _Differ(rt)
    return d


class _Known:
    """What one run knows of the sessions it saves and logs (`ctx.services["session"]`): the
    journal of each it saved (what it last saved of it) and each one's paths, checked once."""

    def __init__(self) -> None:
        self.saved: dict[str, sessions.Journal] = {}
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
    return sessions.new_session_id(ctx.root)


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
        p = ckpt_paths[sid] = sessions.checkpoint_path(ctx.root, check_id(sid))
    now = time.time()
    rt = ctx.runtime
    if rt is None or lua_type(state) != "table":  # a Python caller, or nil: nothing to diff
        state = rt.conv.to_py(state) if rt is not None and not isinstance(state, dict) else state
        if state is not None and not isinstance(state, dict):
            raise MossError(f"moss.session.save: the state must be a table, got {type(state).__name__}", kind="usage")
        saved.pop(sid, None)
        sessions.write_base(p, sid, dict(state or {}), now)
        return str(p)
    differ = _differ(rt)
    j = saved.pop(sid, None)  # back only once this save is written: a failure starts a new base
    ops = differ.diff(j.shadow, state) if j is not None and not j.due(now) and not final else False
    if ops is False or j is None:  # the first save in this process, compaction time, the end, or a new root
        shadow = differ.copy(state)
        sessions.write_base(p, sid, rt.conv.to_py(shadow), now)
        saved[sid] = sessions.Journal(p.with_suffix(".journal"), shadow, now)
        return str(p)
    ops = rt.conv.to_py(ops) if ops is not None else []
    ops.append(["s", ["saved_at"], now])
    j.append(ops)
    saved[sid] = j
    return str(p)


@primitive
def load(ctx, sid=None):
    return sessions.load_checkpoint(ctx.root, sid)


@primitive
def list_(ctx):
    return sessions.list_checkpoints(ctx.root)


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
        p = sessions.log_path(ctx.root, check_id(sid))
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
    return sessions.list_logs(ctx.root)


@primitive
def events(ctx, sid):
    return sessions.read_log(ctx.root, sid)
