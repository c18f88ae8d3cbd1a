"""`moss mcp serve`: moss's agent and read-only tools for an MCP client (an IDE, another agent).

Over stdio, stdout carries JSON-RPC and nothing else: agents run as child processes through
the agent script's `serve` entry (`python -m moss @agent --entry serve REQUEST`, REQUEST one
JSON object; docs/agent.md, "Entry points an agent script provides"), started and read by
host/agentproc.py: of their stream-json events this server uses only `session_start` (the
id), `turn` (progress) and the last `result`. The SDK points fd 1 at stderr while it serves,
so a stray print cannot corrupt the wire. Tools are async so a cancelled call stops at once:
`run_agent` then sends SIGINT to its child, which saves its checkpoint and exits 130, so the
session stays resumable.

The project is the current directory's (host/context.find_project_root). The agents obey
trust like any moss run: nothing here passes --trust or --allow-full. `view` and
`text_search` are the agent's own read-only tools, confined to the project.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import signal
from pathlib import Path
from typing import Any

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError

from .. import agentproc
from ..errors import MossError
from ..sessions import read_row
from ..streamevents import Result

MAX_TEXT = 20_000          # a view or search result, as the agent sees it
STDERR_TAIL = 4_000        # how much of a failed child's stderr an error result quotes
MAX_TASK_BYTES = 100_000   # a task or message travels as one argument of the agent's command line,
                           # which Linux caps at 128 KiB (MAX_ARG_STRLEN)
INTERRUPT_GRACE = 15.0     # seconds a child gets after SIGINT to save and exit
_children: set[agentproc.AgentProcess] = set()  # running agents, stopped with the server

INSTRUCTIONS = (
    "moss is a coding agent for the project this server was started in. run_agent asks it a "
    "question or gives it a task and returns its answer (progress per turn); send_message "
    "talks to a running session; list_sessions / show_session / resume_session manage saved "
    "sessions; view and text_search read the project directly."
)


def _fail(e: BaseException) -> ToolError:
    if isinstance(e, MossError):
        return ToolError(e.message)
    return ToolError(f"{type(e).__name__}: {e}")


class ProjectServer(MCPServer):
    """The MCP server for one project: each tool finds the project's root through its Context."""

    def __init__(self, root: Path):
        from .. import __version__

        super().__init__("moss", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING")
        self.root = root


def _root(ctx: Context) -> Path:
    server = ctx.mcp_server
    assert isinstance(server, ProjectServer)
    return server.root


# The tools: module-level functions, each registered by TOOLS below (in the order clients list
# them). A tool takes `ctx: Context` (which the client never sees) for the project's root and
# progress; its other parameters, and its docstring, are what the client is told.


async def run_agent(task: str, ctx: Context, role: str | None = None, machine: str | None = None,
                    max_turns: int | None = None) -> dict[str, Any]:
    """Run the moss agent on TASK in this project and return its result object (answer,
    success, reason, turns, session_id, usage). role: explorer (default), auditor,
    refactorer or a project role; machine: v1, v2, tce, wild or a project machine;
    max_turns: a turn limit. A progress notification is sent per turn. Cancelling the
    call interrupts the agent; its session keeps its checkpoint (resume_session)."""
    if not task or not task.strip():
        raise ToolError("run_agent needs a task")
    _fits("run_agent", "task", task)
    request: dict[str, Any] = {"task": task}
    if role:
        request["role"] = role
    if machine:
        request["machine"] = machine
    if max_turns is not None:
        if max_turns < 1:
            raise ToolError("max_turns must be 1 or more")
        request["max_turns"] = int(max_turns)
    return await _run_child(_root(ctx), request, ctx, max_turns)


async def resume_session(ctx: Context, session_id: str | None = None, message: str | None = None,
                         max_turns: int | None = None) -> dict[str, Any]:
    """Continue a saved session (the latest without session_id), optionally with a message
    for the agent (a message also reopens an answered or blocked session). Returns the
    result object, like run_agent."""
    request: dict[str, Any] = {"resume": _check_id(session_id) if session_id else True}
    if max_turns is not None:
        request["max_turns"] = int(max_turns)
    if message:
        _fits("resume_session", "message", message)
        request["message"] = message
    return await _run_child(_root(ctx), request, ctx, max_turns)


async def send_message(text: str, ctx: Context, session_id: str | None = None) -> dict[str, Any]:
    """Say something to a running session (the latest running one without session_id);
    the agent reads it at its next turn. Returns {session_id, message_id}. A session that
    is not running is an error naming how it ended: resume_session takes a message."""
    from .. import inbox, sessions

    root = _root(ctx)
    try:
        sid = _check_id(session_id) if session_id else sessions.latest_running(root)
        inbox.require_running(root, sid)  # an ended session would never read it: resume_session
        record = inbox.post(root, sid, text, source="mcp")
    except MossError as e:
        raise _fail(e) from None
    return {"session_id": sid, "message_id": record["id"]}


async def list_sessions(ctx: Context) -> dict[str, Any]:
    """{sessions: [...]}: saved sessions, oldest first: id, task, state, turn, reason, machine, role, done,
    mtime, and running (whether a moss process is working on it now)."""
    rows = await _sessions(_root(ctx))
    return {"sessions": [{**r, "task": (read_row(r) or {}).get("task", "")[:500]} for r in rows]}


async def show_session(session_id: str, ctx: Context) -> dict[str, Any]:
    """One session: its checkpoint summary and its log as a timeline (text)."""
    from ..sessions import read_log

    root = _root(ctx)
    try:
        _check_id(session_id)
        events = read_log(root, session_id)
    except MossError as e:
        if e.kind != "not_found":
            raise _fail(e) from None
        events = []
    rows = [r for r in await _sessions(root) if (read_row(r) or {}).get("id") == session_id]
    if not rows and not events:
        raise ToolError(f"no session {session_id} in {root}")
    return {"session": rows[0] if rows else None, "timeline": await _timeline(root, session_id)}


async def view(ctx: Context, target: str = ".", depth: int = 1) -> str:
    """The agent's view tool: "." for the project tree, a file for its skeleton,
    FILE:A-B for numbered lines, FILE/Symbol for one symbol's source. Paths are relative
    to the project; nothing outside it can be read."""
    from ..tools.view import view as _view

    root = _root(ctx)
    try:
        return await anyio.to_thread.run_sync(lambda: _view(root, target, depth=depth, max_chars=MAX_TEXT))
    except MossError as e:
        raise _fail(e) from None


async def text_search(pattern: str, ctx: Context, only: list[str] | None = None, limit: int = 50,
                      ignore_case: bool = False) -> str:
    """The agent's text-search tool: ripgrep over the project (a regex), hits grouped by
    file with their enclosing symbols. only: globs inside the project (`*.rs`, `src/**`,
    `!tests/**`)."""
    from ..tools.search import search

    root = _root(ctx)
    for g in only or []:
        bare = g.lstrip("!")
        if os.path.isabs(bare) or bare.startswith("~") or ".." in Path(bare).parts:
            raise ToolError(f"--only {g!r}: globs are relative to the project and stay inside it")
    try:
        return await anyio.to_thread.run_sync(
            lambda: search(root, pattern, only=list(only or []) or None, limit=max(1, min(int(limit), 1000)),
                           ignore_case=ignore_case, max_chars=MAX_TEXT))
    except MossError as e:
        raise _fail(e) from None


TOOLS = (run_agent, resume_session, send_message, list_sessions, show_session, view, text_search)


def build(root: Path) -> ProjectServer:
    """The MCP server for project `root` (tools registered, not yet running)."""
    server = ProjectServer(Path(root).resolve())
    for tool in TOOLS:
        server.add_tool(tool)
    return server


def _fits(tool: str, field: str, text: str) -> None:
    """A ToolError naming the limit for text too long to pass to the agent (else the OS refuses
    to start it, and the client would learn nothing of why)."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_TASK_BYTES:
        raise ToolError(f"{tool}: the {field} is {size:,} bytes; at most {MAX_TASK_BYTES:,} fit on the agent's "
                        f"command line. Put the long part in a file in the project and name that file in the {field}")


def _check_id(sid: str) -> str:
    from ..storage import check_id

    try:
        return check_id(sid)
    except MossError as e:
        raise _fail(e) from None


async def _sessions(root: Path) -> list[dict]:
    """The saved sessions as the agent script's `sessions` entry lists them (`sessions json`:
    one JSON object on stdout; docs/agent.md): what a session holds, and how one that is not
    running stands, are the script's to say; `running` is the host's fact it relays. Each is
    relayed to the client as the script wrote it; the server reads only its declared fields
    (host/sessions/row.py)."""
    done = await agentproc.run_entry(root, "sessions", "json")
    data = done.last_json()
    rows = data.get("sessions") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        tail = done.stderr.decode("utf-8", "replace").strip()[-STDERR_TAIL:]
        raise ToolError(f"the agent's sessions entry gave no listing (exit {done.returncode})"
                        + (f":\n{tail}" if tail else ""))
    return [r for r in rows if isinstance(r, dict)]


async def _timeline(root: Path, sid: str) -> str:
    """The session's timeline as `moss sessions show` draws it (the agent's Lua decides what
    it shows), as tab-separated text."""
    from ..tools.caps import cap

    done = await agentproc.run_entry(root, "sessions", "show", sid)
    return cap(done.stdout.decode("utf-8", "replace"), MAX_TEXT)


async def _run_child(root: Path, request: dict, ctx: Context, max_turns: int | None) -> dict[str, Any]:
    """Run `moss @agent --entry serve REQUEST` in `root`, report a progress notification per
    `turn` event, and return its `result` event. Cancellation: SIGINT, then wait for its exit."""
    arg = json.dumps(request, ensure_ascii=False)
    _fits("the agent's request", "task", arg)  # escaping may lengthen it
    argv = agentproc.command("--entry", "serve", arg)
    env = dict(os.environ)
    env.pop("MOSS_ASSUME_TTY", None)  # nobody can answer a question on this channel
    env["PYTHONUNBUFFERED"] = "1"
    from .. import storage

    stderr_path = _stderr_file(root)
    err = storage.create_new(stderr_path)
    agent = agentproc.start(argv, cwd=root, env=env, stderr=err)
    _children.add(agent)
    state: dict[str, Any] = {"session_id": None, "result": None}
    try:
        try:
            await _read_events(agent, ctx, state, max_turns)
            code = await anyio.to_thread.run_sync(agent.wait)
        except BaseException:
            # Cancelled (the client sent notifications/cancelled or went away): let the agent
            # save its checkpoint and stop, as Ctrl-C would; killed if it has not INTERRUPT_GRACE s later.
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(functools.partial(agent.interrupt, kill_after=INTERRUPT_GRACE,
                                                                 block=True))
            raise
    finally:
        _children.discard(agent)
        agent.close()
        err.seek(0, 2)
        size = err.tell()
        err.seek(max(0, size - STDERR_TAIL))
        tail = err.read().decode("utf-8", "replace")
        err.close()
        try:
            storage.unlink(stderr_path)  # what matters from it is quoted in the error below
        except (OSError, storage.UnsafePath):
            pass
    sid = state["session_id"]
    result: Result | None = state["result"]
    if result is not None and result.get("reason") == "error" and not result.get("session_id"):
        raise ToolError(str(result.get("detail") or "the agent could not start"))  # e.g. no such session
    if result is not None:
        return {**{k: v for k, v in result.items() if k != "type"}, "exit_code": code}
    if code == 130:
        raise ToolError("the agent was interrupted (exit 130)" + (
            f"; session {sid} keeps its checkpoint: resume_session(session_id={sid!r})" if sid else ""))
    tail = tail.strip()
    raise ToolError(f"the agent exited {code} without a result" + (f" (session {sid})" if sid else "")
                    + (f":\n{tail}" if tail else ""))


def _stderr_file(root: Path) -> Path:
    from ..storage import agent_dir

    return agent_dir(root) / "mcp" / f"agent-{os.getpid()}-{id(object())}.stderr"


async def _read_events(agent: agentproc.AgentProcess, ctx: Context, state: dict, max_turns: int | None) -> None:
    """Read the agent's events (in a thread: a pipe blocks) until its stdout closes: its
    session id, a progress notification per `turn`, its `result`."""
    send, receive = anyio.create_memory_object_stream[agentproc.StreamEvent](100)

    def reader():
        try:
            for event in agent.events():
                anyio.from_thread.run(send.send, event)
        except Exception:
            pass
        finally:
            try:
                anyio.from_thread.run(send.aclose)
            except Exception:
                pass

    async with anyio.create_task_group() as tg:
        tg.start_soon(functools.partial(anyio.to_thread.run_sync, reader, abandon_on_cancel=True))
        async with receive:
            async for event in receive:
                if event["type"] == "session_start":
                    state["session_id"] = event.get("session_id")
                elif event["type"] == "turn":
                    turn = event.get("turn") or 0
                    total = event.get("max_turns") or max_turns
                    sid = event.get("session_id") or state["session_id"]
                    msg = f"session {sid}: turn {turn}" + (f"/{total}" if total else "") + f" ({event.get('state')})"
                    try:
                        await ctx.report_progress(turn, total, msg)
                    except Exception:
                        pass  # a client that went away: the run goes on until cancelled
                elif event["type"] == "result":
                    state["result"] = event


def _stop_children(signum=None, frame=None) -> None:
    for agent in list(_children):
        agent.interrupt()  # SIGINT to each agent's group: it saves its checkpoint and exits
    if signum is not None:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


def _check_port(port: int) -> None:
    """A port moss cannot listen on is the user's to change: one line naming it (exit 2),
    not uvicorn's errno and its start-up failure status."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            s.bind(("127.0.0.1", port))
        except OSError as e:
            why = "is in use" if e.errno == errno.EADDRINUSE else f"cannot be used ({e.strerror})"
            raise MossError(f"port {port} on 127.0.0.1 {why}: choose another with --http PORT",
                            kind="usage") from None


def serve(root: Path, http_port: int | None = None) -> None:
    """Serve over stdio (default) or streamable HTTP on 127.0.0.1:PORT at /mcp."""
    import atexit

    from mcp.server.transport_security import TransportSecuritySettings

    if http_port is not None:
        _check_port(http_port)
    server = build(root)
    atexit.register(_stop_children)
    signal.signal(signal.SIGTERM, _stop_children)
    if http_port is None:
        server.run()
        return
    hosts = [f"127.0.0.1:{http_port}", f"localhost:{http_port}"]
    security = TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts,
                                         allowed_origins=[f"http://{h}" for h in hosts])
    server.run("streamable-http", host="127.0.0.1", port=http_port, transport_security=security)
