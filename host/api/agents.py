"""moss.agents: child agents, each in its own thread with its own Lua runtime.

The Lua face is `moss.spawn{...}` -> handle (`:wait`, `:status`, `:pause`, `:resume`,
`:cancel`), `moss.wait_any` and `moss.wait_all` (host/bootstrap.lua), on top of these
primitives keyed by child id. What a child *does* is policy: its thread runs the entry the
spawn spec names (`script`, default "agent"; `entry`, default "child": docs/agent.md, "Entry
points an agent script provides") with the spec, and that function's result table comes back
as plain data. The host never reads a session: resuming a child that finished earlier, and
what a child cancelled mid-turn records, are its own Lua's to decide (a cancelled child's
`interrupted` entry). No Lua state is shared between runtimes.

Mechanism kept here:
- ids: a child of session P is `P-N` (N = 1, 2, ... never reused, also across resumes);
- access: a child's access is capped at its parent's (and at `access=` of the spec);
  `moss.access.set` above the cap is refused (kind `denied`);
- one budget and one set of SDK clients for the whole tree (host/llm/chat.py `LLM.child`);
- failures: anything a child raises ends that child with a failed result naming its id,
  never the parent;
- pause/cancel at turn boundaries (`agents.boundary`, called by the runner of a child);
- Ctrl-C: a child's runtime stops with its parent's (host/runtime.py `parent`);
- progress: `agents.progress` feeds the live panel (stderr, on a terminal) and, in
  stream-json mode, one `child_*` event per line on stdout with the child's id.
"""

from __future__ import annotations

import re
import threading
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import MossError
from ..tools.sandbox import ACCESS_LEVELS
from .registry import primitive

if TYPE_CHECKING:  # imported where a child is built (run.py), not at start-up
    from ..context import Context
    from ..runtime import Runtime

TERMINAL = ("done", "failed", "cancelled")
ACCESS = ACCESS_LEVELS  # weakest first, declared once in tools/sandbox.py


class Tree:
    """What the agents of one tree share: the registry of children, one condition to wait
    on, the output lock, and the live panel."""

    def __init__(self, root_id: str | None):
        self.root_id = root_id
        self.children: dict[str, "Child"] = {}
        self.cond = threading.Condition()
        self.out_lock = threading.Lock()
        self.stream = False
        self.live: _Panel | None = None

    def changed(self) -> None:
        with self.cond:
            self.cond.notify_all()
        live = self.live
        if live is not None:
            live.refresh()

    def running(self) -> list["Child"]:
        return [c for c in self.children.values() if c.status not in TERMINAL]

    def emit(self, event: dict) -> None:
        """One stream-json line on stdout, whole (threads never interleave within a line)."""
        import json
        import sys

        data = {"type": event.get("type"), **{k: event[k] for k in sorted(event) if k != "type"}}
        with self.out_lock:
            sys.stdout.write(json.dumps(data, ensure_ascii=False, default=str) + "\n")
            sys.stdout.flush()

    def close(self, grace: float = 5.0) -> None:
        """The root ends: children still running are cancelled (resumable from their checkpoints)."""
        for c in self.running():
            c.cancel()
        deadline = time.monotonic() + grace
        for c in list(self.children.values()):
            if c.thread is not None:
                c.thread.join(max(0.0, deadline - time.monotonic()))
        if self.live is not None:
            self.live.stop()
            self.live = None
        kept = sorted(c.id for c in self.children.values()
                      if c.worktree is not None and c.worktree.state == "working" and c.worktree.tree.is_dir())
        if kept:
            from .. import ui

            ui.note(f"kept the copies of the tree of {len(kept)} isolated child agent(s) neither merged nor "
                    f"discarded ({', '.join(kept)}): a resumed session can still merge them; `moss sessions "
                    f"clean` removes them", "yellow")


class Child:
    def __init__(self, tree: Tree, cid: str, parent_id: str, spec: dict):
        self.tree = tree
        self.id = cid
        self.parent_id = parent_id
        self.spec = spec
        self.role = spec.get("role") or ""
        self.status = "running"
        self.result: dict | None = None
        self.thread: threading.Thread | None = None
        self.ctx: Context | None = None      # set on the child's thread before its script runs
        self.runtime: Runtime | None = None
        self.info: dict = {"turn": 0, "state": "starting", "waiting": None}
        self._pause = False
        self._cancel = False
        self._message: str | None = None
        self._wake = threading.Event()
        self.started = time.time()
        self.worktree = None       # an isolated child's own copy of the tree (host/tools/worktree/)
        self.change: dict | None = None  # its change when it ended (host/api/_isolated.py)

    # -- control (any thread) ------------------------------------------------------------
    def pause(self) -> None:
        self._pause = True

    def resume(self, message: str | None = None) -> None:
        self._pause = False
        self._message = message
        self._wake.set()

    def cancel(self) -> None:
        self._cancel = True
        self._wake.set()
        rt = self.runtime
        if rt is not None and self.status == "running":
            rt.cancel()

    # -- the child's own thread ----------------------------------------------------------
    def boundary(self, turn, state) -> dict:
        """Between two turns (after the checkpoint): cancel, or wait here while paused."""
        self.info.update(turn=turn, state=state)
        self.tree.changed()
        if self._cancel:
            return {"cancel": True}
        if not self._pause:
            msg, self._message = self._message, None
            return {"message": msg} if msg else {}
        ctx = self.ctx
        assert ctx is not None  # the child's script calls this, so _run_child has set its ctx
        self.status = "paused"
        ctx.log("paused", {"turn": turn})
        self.tree.changed()
        parent_rt = self.runtime.parent if self.runtime is not None else None
        while self._pause and not self._cancel:
            if parent_rt is not None and parent_rt.cancelled:
                self._cancel = True
                break
            self._wake.wait(0.5)
            self._wake.clear()
        if self._cancel:
            return {"cancel": True}
        self.status = "running"
        ctx.log("resumed", {"turn": turn, "message": self._message})
        self.tree.changed()
        msg, self._message = self._message, None
        return {"message": msg} if msg else {}

    def finish(self, result: dict, status: str) -> None:
        """The child ended: `status` is done, failed or cancelled (a cancel the child did not
        outlive is "cancelled" whatever it says)."""
        if self._cancel and status != "done":
            status = "cancelled"
        self.result = result
        with self.tree.cond:
            self.status = status
            self.tree.cond.notify_all()
        self.tree.changed()

    def snapshot(self) -> dict:
        out = {"id": self.id, "parent": self.parent_id, "role": self.role, "status": self.status,
               "task": self.spec.get("task"), "turn": self.info.get("turn"), "state": self.info.get("state"),
               "waiting": self.info.get("waiting"), "started": self.started}
        if self.worktree is not None:
            out["isolated"] = {**self.worktree.summary(), "changed": len((self.change or {}).get("changed") or [])}
        return out


def _rank(level: str) -> int:
    return ACCESS.index(level) if level in ACCESS else 0


def _tree(ctx) -> Tree:
    if ctx.tree is None:
        ctx.tree = Tree(ctx.session_id)
        ctx.services["agents"] = _Closer(ctx.tree)
    if ctx.tree.root_id is None and ctx.parent_id is None:
        ctx.tree.root_id = ctx.session_id
    return ctx.tree


class _Closer:
    def __init__(self, tree: Tree):
        self.tree = tree

    def close(self) -> None:
        self.tree.close()


def _next_id(ctx, tree: Tree) -> str:
    from ..sessions import saved_ids
    from ..storage import ID_RE

    parent = ctx.session_id
    pat = re.compile(re.escape(parent) + r"-(\d+)$")
    used = [int(m.group(1)) for cid in [*tree.children, *saved_ids(ctx.root, refuse_link=True)] if (m := pat.match(cid))]
    cid = f"{parent}-{max(used, default=0) + 1}"
    if not ID_RE.match(cid):
        raise MossError(f"cannot spawn below {parent}: the child's id would be longer than 64 characters "
                        f"(the tree is too deep)", kind="usage")
    return cid


def _exists(ctx, cid: str) -> bool:
    """Whether child `cid` has a checkpoint (a file; what it holds is the child's own business)."""
    from ..sessions import has_checkpoint

    return has_checkpoint(ctx.root, cid)


@primitive
def start(ctx, spec):
    """moss.agents.start{task=, role=, machine=, max_turns=, access=, resume=} -> child id."""
    if not isinstance(spec, dict):
        raise MossError("moss.spawn takes a table: {task = ..., role = ..., machine = ..., max_turns = ...}", kind="usage")
    if ctx.runtime is None:
        raise MossError("moss.spawn needs a running script", kind="usage")
    if not ctx.session_id:
        from ..sessions import new_session_id

        ctx.session_id = new_session_id(ctx.root)  # a plain script becomes the root of its tree
    tree = _tree(ctx)
    spec = dict(spec)
    if spec.get("events") == "stream-json":
        tree.stream = True
    resume = spec.get("resume")
    if resume:
        cid, running = _resumed(ctx, tree, resume)
        if running:
            return cid
    else:
        task = spec.get("task")
        if not isinstance(task, str) or not task.strip():
            raise MossError("moss.spawn needs a task: moss.spawn{task = \"...\", role = \"explorer\"}", kind="usage")
        cid = _next_id(ctx, tree)
    cap = _child_access(ctx, spec.get("access"))
    from ..entries import check_name
    from ..roots import NAME_RE
    from . import _isolated

    isolate = spec.get("isolate")
    if isolate is not None and not isinstance(isolate, bool):
        raise MossError(f"moss.spawn: isolate must be true or false, got {isolate!r}", kind="usage")

    script = spec.get("script") or "agent"
    if not isinstance(script, str) or not NAME_RE.match(script):
        raise MossError(f"moss.spawn: script must be a script name like \"agent\", got {script!r}", kind="usage")
    spec["script"] = script
    spec["entry"] = check_name(spec.get("entry") or "child", "moss.spawn: entry")
    spec["id"] = cid
    spec["max_access"] = cap
    spec["parent"] = ctx.session_id
    worktree = _isolated.make(ctx, cid, cap, bool(resume), bool(isolate))
    spec["isolate"] = worktree is not None
    _launch(ctx, tree, Child(tree, cid, ctx.session_id, spec), worktree, bool(resume))
    return cid


def _resumed(ctx, tree: Tree, resume) -> tuple[str, bool]:
    """The id of the child that `resume` names, and whether it still runs (nothing to start)."""
    from ..storage import check_id

    cid = check_id(resume)
    if not cid.startswith(ctx.session_id + "-"):
        raise MossError(f"{cid} is not a child of {ctx.session_id}", kind="usage")
    existing = tree.children.get(cid)
    if existing is not None and existing.status not in TERMINAL:
        return cid, True
    if not _exists(ctx, cid):
        raise MossError(f"no checkpoint for child {cid}", kind="not_found")
    return cid, False


def _child_access(ctx, want) -> str:
    """A new child's access: its parent's (held to the parent's own cap), or the less it asks for."""
    cap = ctx.access
    if ctx.max_access is not None and _rank(ctx.max_access) < _rank(cap):
        cap = ctx.max_access
    if want is not None:
        if want not in ACCESS:
            raise MossError(f"access must be one of {', '.join(ACCESS)}, got {want!r}", kind="usage")
        if _rank(want) > _rank(cap):
            raise MossError(f"a child never gets more access than its parent: asked {want}, the parent "
                            f"has {cap}", kind="denied")
        cap = want
    return cap


def _launch(ctx, tree: Tree, child: Child, worktree, resume: bool) -> None:
    """The child joins the tree and its thread starts, sharing the parent's LLM service."""
    from .llm import _service

    child.worktree = worktree
    tree.children[child.id] = child
    parent_llm = _service(ctx)
    spec = child.spec
    ctx.log("child_start", {"child": child.id, "role": spec.get("role"), "task": spec.get("task"),
                            "access": spec["max_access"], "resume": resume, "isolated": worktree is not None})
    _start_live(tree)
    child.thread = threading.Thread(target=_run_child, args=(ctx, child, parent_llm), name=f"moss-agent-{child.id}",
                                    daemon=True)
    child.thread.start()


def _get(ctx, cid) -> Child:
    tree = ctx.tree
    child = tree.children.get(cid) if tree is not None and isinstance(cid, str) else None
    if child is None:
        raise MossError(f"no child agent {cid!r} in this tree", kind="not_found")
    return child


def _wait_for(ctx, pred, timeout):
    tree = _tree(ctx)
    deadline = None if timeout is None else time.monotonic() + max(0.0, float(timeout))
    with tree.cond:
        while True:
            hit = pred()
            if hit is not None:
                return hit
            if ctx.cancelled():
                raise MossError("interrupted", kind="interrupted")
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            tree.cond.wait(0.5 if left is None else min(left, 0.5))


@primitive
def wait(ctx, cid, timeout=None):
    """The child's result table once it ended; nil after `timeout` seconds."""
    child = _get(ctx, cid)
    got = _wait_for(ctx, lambda: child.result if child.status in TERMINAL else None, timeout)
    if got is not None:
        from ..sessions import read_result

        said = read_result(got)  # what the host reads of a result: its declared fields (events.lua)
        ctx.log("child_result", {"child": cid, "reason": said.get("reason"), "success": said.get("success")})
    return got


@primitive
def wait_any(ctx, ids, timeout=None):
    """(index, result) of the first of `ids` to end; nil after `timeout` seconds."""
    kids = [_get(ctx, c) for c in ids or []]
    if not kids:
        raise MossError("moss.wait_any needs at least one handle", kind="usage")

    def first():
        for i, k in enumerate(kids, 1):
            if k.status in TERMINAL:
                return i, k.result
        return None

    got = _wait_for(ctx, first, timeout)
    return got if got is not None else None


@primitive
def status(ctx, cid):
    return _get(ctx, cid).status


@primitive
def info(ctx, cid=None):
    if cid is None:
        tree = ctx.tree
        return [c.snapshot() for c in tree.children.values()] if tree else []
    c = _get(ctx, cid)
    return {**c.snapshot(), "result": c.result}


@primitive
def pause(ctx, cid):
    child = _get(ctx, cid)
    if child.status in TERMINAL:
        return False
    child.pause()
    ctx.log("child_pause", {"child": cid})
    return True


@primitive
def resume(ctx, cid, message=None):
    child = _get(ctx, cid)
    if child.status in TERMINAL:
        if not message:
            return False
        # a finished child goes on, with the message (the same script, entry and labels)
        start(ctx, {"resume": cid, "message": message, "role": child.role or None, "task": child.spec.get("task"),
                    "script": child.spec.get("script"), "entry": child.spec.get("entry"),
                    "access": child.spec.get("max_access")})
        return True
    child.resume(message if isinstance(message, str) else None)
    ctx.log("child_resume", {"child": cid, "message": message})
    return True


@primitive
def cancel(ctx, cid):
    child = _get(ctx, cid)
    if child.status in TERMINAL:
        return False
    child.cancel()
    ctx.log("child_cancel", {"child": cid})
    return True


def _ended(ctx, cid, what: str) -> Child:
    child = _get(ctx, cid)
    if child.parent_id != ctx.session_id:  # a sibling's or a grandchild's change is its parent's to take
        raise MossError(f"child {cid} is not a child of this agent ({ctx.session_id}): only its parent "
                        f"({child.parent_id}) can {what} its change", kind="usage")
    if child.status not in TERMINAL:
        raise MossError(f"child {cid} is still running: wait for it (or cancel it) before you {what} "
                        f"its change", kind="usage")
    return child


@primitive
def merge(ctx, cid):
    """An isolated child's change merged into this agent's tree: {applied, conflicts, snapshot}."""
    from . import _isolated

    return _isolated.merge(ctx, _ended(ctx, cid, "merge"))


@primitive
def discard(ctx, cid):
    """An isolated child's copy dropped: {discarded, bytes}."""
    from . import _isolated

    return _isolated.discard(ctx, _ended(ctx, cid, "discard"))


@primitive
def boundary(ctx, turn=None, state=None):
    """For a child's runner, between turns: {} to go on, {message=} from its parent,
    {cancel=true} to stop. Blocks while paused. Elsewhere: {}."""
    child = ctx.child
    if child is None:
        if ctx.cancelled():
            raise MossError("interrupted", kind="interrupted")
        return {}
    return child.boundary(turn, state)


@primitive
def progress(ctx, event):
    """A child's progress (turn, command, finish): the live panel, and stream-json events."""
    if not isinstance(event, dict):
        return False
    child = ctx.child
    tree = ctx.tree
    if child is not None:
        if event.get("turn") is not None:
            child.info["turn"] = event["turn"]
        if event.get("state"):
            child.info["state"] = event["state"]
    if tree is not None:
        if tree.stream:
            tree.emit({**event, "type": "child_" + str(event.get("type") or "event"),
                       "session_id": ctx.session_id, "parent": ctx.parent_id})
        tree.changed()
    return True


@primitive
def self_(ctx):
    """This agent: {id, parent, tree, role, max_access, child = is it a child, isolated =
    does it work in its own copy of the tree}."""
    return {"id": ctx.session_id, "parent": ctx.parent_id, "tree": ctx.tree_id, "role": ctx.role,
            "max_access": ctx.max_access, "child": ctx.child is not None, "isolated": ctx.workdir != ctx.root}


@primitive
def children(ctx, sid=None):
    """The direct children of a session (this one by default) as saved: {id, role, task,
    done, reason, turn} from their checkpoints, for resuming a tree."""
    from ..sessions import list_checkpoints

    sid = sid or ctx.session_id
    if not sid:
        return []
    pat = re.compile(re.escape(sid) + r"-(\d+)$")
    numbered = [(int(m.group(1)), c) for c in list_checkpoints(ctx.root) if (m := pat.match(c["id"]))]
    numbered.sort(key=lambda t: t[0])
    return [c for _, c in numbered]


def _run_child(parent_ctx, child: Child, parent_llm) -> None:
    """A child's thread: its own context and runtime, the entry its spec names (`child` of
    the agent script by default). Its result is what that entry returns; cancelled or
    interrupted mid-turn, its script's optional `interrupted` entry says what it records and
    returns the result. Only when the child's Lua could not answer at all (it raised, or has no
    such entry) does the host make the failed result naming its id."""
    from ..entries import find
    from ..run import after_interrupt
    from ..runtime import LuaScriptError
    from . import _isolated

    def done(result: dict, status: str) -> None:  # an isolated child's change joins its result
        child.finish(_isolated.finish(parent_ctx, child, result), status)

    cid = child.id
    ctx = rt = module = None
    shown = child.spec.get("script") or "agent"
    try:
        ctx, rt = build_child_runtime(parent_ctx, child, parent_llm)
        if child._cancel:
            raise LuaScriptError("interrupted", kind="interrupted")
        path, shown, origin = rt.roots.locate(child.spec["script"], what="script")
        module = rt.call(rt.load_file(path, shown, origin))
        entry = find(module, child.spec["entry"], shown)
        spec = {k: v for k, v in child.spec.items() if v is not None}
        result = rt.to_py(rt.call(entry, spec))
        if not isinstance(result, dict):
            raise MossError(f"the {child.spec['entry']} entry of {shown} returned {type(result).__name__}, "
                            f"not a result table", kind="lua")
        result.setdefault("session_id", cid)
        done(result, _status(result))
    except BaseException as e:  # whatever a child does, it is the child's failure
        kind = getattr(e, "kind", None) or type(e).__name__
        message = getattr(e, "message", None) or str(e) or type(e).__name__
        cancelled = kind == "interrupted" and (child._cancel or (parent_ctx.runtime and parent_ctx.runtime.cancelled))
        result = None
        if cancelled and ctx is not None:
            ctx.log("interrupt", {"by": "parent" if child._cancel else "signal"})
            result = after_interrupt(rt, module, {"ids": [cid], "cancelled": bool(child._cancel)}, shown)
        if isinstance(result, dict):
            result.setdefault("session_id", cid)
            done(result, _status(result))
        else:
            result = {"success": False, "reason": "cancelled" if cancelled else "error",
                      "error": None if cancelled else f"child {cid} failed: {message}", "error_kind": kind,
                      "session_id": cid, "role": child.role}
            if not isinstance(e, (MossError, LuaScriptError)):
                result["trace"] = traceback.format_exc(limit=5)
            if ctx is not None and ctx.session_id and not cancelled:
                ctx.log("entry_failed", {"entry": child.spec.get("entry"), "error": result["error"], "kind": kind})  # a host event
            done(result, "cancelled" if cancelled else "failed")
    finally:
        if ctx is not None:
            for svc in list(ctx.services.values()):
                close = getattr(svc, "close", None)
                if close and svc is not parent_llm:
                    try:
                        close()
                    except Exception:
                        pass
            from ..tools.locks import manager

            for where in {parent_ctx.workdir, ctx.workdir}:
                if Path(where).is_dir():
                    manager(where).release_owner(cid)
        r = child.result or {}
        # relayed as the child's entry returned them (the host reads none of them)
        parent_ctx.log("child_end", {"child": cid, "status": child.status,
                                     **{k: r.get(k) for k in ("reason", "turns", "answer", "error", "usage")},
                                     **_isolated.end_fields(child)})


def _status(result: dict) -> str:
    """The status a child's result declares (docs/agent.md): done unless it says otherwise."""
    status = result.get("status")
    return status if status in TERMINAL else "done"


def build_child_runtime(parent_ctx, child: Child, parent_llm):
    from ..run import build_child

    ctx, rt = build_child(parent_ctx, child, parent_llm)
    child.ctx, child.runtime = ctx, rt
    rt.parent = parent_ctx.runtime
    return ctx, rt


def _start_live(tree: Tree) -> None:
    """On a terminal (and not stream-json), a live panel of the running agents on stderr."""
    from .. import ui

    if tree.live is not None or tree.stream or not ui.console().is_terminal:
        return
    ui.input_settled()  # the panel's Live goes on top of the input area's streams
    try:
        from rich.live import Live

        import sys

        # stdout is taken over (drawn above the panel) only when it is this same terminal: an
        # answer bound for a pipe or a file must get there, not onto the screen
        tree.live = _Panel(tree, Live(console=ui.console(), refresh_per_second=4, transient=True,
                                      redirect_stdout=sys.stdout.isatty()))
    except Exception:
        tree.live = None


class _Panel:
    def __init__(self, tree: Tree, live):
        self.tree, self.live = tree, live
        live.update(self.render())
        live.start()

    def render(self):
        return render_panel([c.snapshot() for c in self.tree.children.values()])

    def refresh(self) -> None:
        try:
            self.live.update(self.render())
        except Exception:
            pass

    def stop(self) -> None:
        try:
            self.live.stop()
        except Exception:
            pass


def render_panel(rows: list[dict]):
    from rich.table import Table

    t = Table(box=None, header_style="bold", title="agents", title_justify="left")
    for col in ("id", "role", "state", "turn", "waiting on"):
        t.add_column(col)
    for r in rows:
        state = r["status"] if r["status"] != "running" else (r.get("state") or "running")
        t.add_row(r["id"], r.get("role") or "", state, str(r.get("turn") or 0), r.get("waiting") or "")
    return t
