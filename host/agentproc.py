"""Agent processes: starting `python -P -m moss @agent ...`, reading the stream-json events it
writes, stopping it. The one place moss starts its agent as a process of its own: an eval's
or a batch's attempts (host/eval/executors.py, on this machine or on a Ray node through
host/eval/remote.py), the MCP server's agents (host/mcp/server.py), and the agent script's
`sessions` entry that the MCP server and the board list and show sessions with
(host/board/sessions.py); and the board's other moss commands read for one JSON document
(`run_moss`).

What differs between those callers is a parameter here, not a copy:

- how it starts (`start`): a new interpreter, which `die_with_parent` ties to the thread that
  started it (the kernel sends it SIGTERM when that thread ends: an eval killed with SIGKILL
  leaves nobody to stop its attempts); or forked from a zygote (`Forker`, host/zygote.py)
  that imported moss and the SDKs once, and whose forked processes end with it;
- how it stops (`AgentProcess.interrupt`): SIGINT, as Ctrl-C sends it (the agent saves its
  checkpoint and exits 130), to its process group or to the agent alone, then SIGKILL to the
  group if it still runs a grace period later, waited for there or left to a timer.

Its events are read as host/streamevents.py types them (made from host/api/events.lua by
`python -m moss.api`) through host/typedjson.py: a line that is not a JSON object of a `type` events.lua declares is
skipped, as a consumer of the stream skips what it does not know; a field whose value is not
of its declared type is left out (an integral float where an integer is declared is that
integer, and Lua's empty table, `[]`, where an object is declared is `{}`); fields events.lua
does not declare are kept as they came.
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Callable

from .streamevents import EVENTS, StreamEvent
from .typedjson import reader
from .tools import procs

if TYPE_CHECKING:
    from .zygote import Zygote

__all__ = ["AgentProcess", "Finished", "Forker", "StreamEvent", "command", "parse", "run_entry", "run_moss",
           "start"]


def command(*words: str) -> list[str]:
    """The argv of `moss @agent WORDS` as a process of its own (`python -P -m moss`:
    procs.moss_command says why -P)."""
    return procs.moss_command("@agent", *words)


# ---- starting --------------------------------------------------------------------------------

_LIBC: ctypes.CDLL | None
try:
    _LIBC = ctypes.CDLL(None, use_errno=True)  # loaded here: nothing is imported between fork and exec
except OSError:  # pragma: no cover
    _LIBC = None
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """The agent ends when the thread that started it ends: the kernel sends it SIGTERM."""
    if _LIBC is not None:
        _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class Forker:
    """Agent processes forked from one zygote (host/zygote.py), started with the first of them
    and preloading what its wire APIs need; a later agent's zygote imports what that one
    needs more before forking it. `close` ends the zygote (agents still running get SIGTERM)."""

    def __init__(self) -> None:
        self._zygote: Zygote | None = None
        self._lock = threading.Lock()

    def popen(self, argv: list[str], apis: tuple[str, ...], **kw) -> subprocess.Popen:
        from . import zygote

        preload = zygote.preload_for(apis)
        with self._lock:
            if self._zygote is None:
                self._zygote = zygote.Zygote(kw["env"], preload)
        return self._zygote.popen(argv, preload=preload, **kw)

    def close(self) -> None:
        with self._lock:
            if self._zygote is not None:
                self._zygote.close()
                self._zygote = None


def start(argv: list[str], *, cwd: Path, env: dict, stderr: IO[Any] | int | None, forker: Forker | None = None,
          apis: tuple[str, ...] = (), die_with_parent: bool = False) -> AgentProcess:
    """Start the agent `argv` (`command(...)`) in `cwd` with exactly the environment `env`, in a
    session of its own (a Ctrl-C at the terminal reaches only the process that started it,
    which stops it itself), its stdin /dev/null, its stdout a pipe its events are read from,
    its stderr `stderr`. With a `forker`: forked from its zygote, which first imports what the
    wire APIs `apis` need; else a new interpreter (tied to this thread: `die_with_parent`)."""
    kw: dict[str, Any] = {"cwd": cwd, "env": env, "stdin": subprocess.DEVNULL, "stdout": subprocess.PIPE,
                          "stderr": stderr, "start_new_session": True}
    if forker is not None:
        return AgentProcess(forker.popen(argv, apis, **kw))
    return AgentProcess(subprocess.Popen(argv, preexec_fn=_die_with_parent if die_with_parent else None, **kw))


# ---- a running agent -------------------------------------------------------------------------

class AgentProcess:
    """An agent process `start` started: its events, its end, stopping it."""

    def __init__(self, proc: subprocess.Popen):
        self.proc = proc

    @property
    def pid(self) -> int:
        return self.proc.pid

    def events(self) -> Iterator[StreamEvent]:
        """Its stream-json events as they come (`parse`), until it closes its stdout."""
        assert self.proc.stdout is not None  # start() gives it a pipe
        for line in self.proc.stdout:
            event = parse(line)
            if event is not None:
                yield event

    def wait(self, timeout: float | None = None) -> int:
        return self.proc.wait(timeout)

    def poll(self) -> int | None:
        return self.proc.poll()

    def interrupt(self, *, group: bool = True, kill_after: float | None = None, block: bool = False) -> None:
        """Stop it as Ctrl-C does: SIGINT (the agent saves its checkpoint and exits 130) to its
        process group, or to the agent alone (`group=False`: the commands it runs are its own
        to stop). `kill_after`: seconds after which, if it still runs, its group gets SIGKILL,
        waited for here (`block`, until it has ended) or by a timer thread."""
        if self.proc.poll() is not None:
            return
        try:
            (os.killpg if group else os.kill)(self.pid, signal.SIGINT)
        except (ProcessLookupError, PermissionError):
            return
        if kill_after is None:
            return
        if not block:
            timer = threading.Timer(kill_after, self._kill_if_running)
            timer.daemon = True
            timer.start()
            return
        try:
            self.proc.wait(kill_after)
        except subprocess.TimeoutExpired:
            self.kill()
            self.proc.wait()

    def _kill_if_running(self) -> None:
        if self.proc.poll() is None:
            self.kill()

    def kill(self) -> None:
        """SIGKILL to its process group (the sandboxes of the commands it runs first: procs.signal_group)."""
        procs.signal_group(self.pid, signal.SIGKILL)

    def close(self) -> None:
        """Close the pipe its events came on (a reader thread still on it then ends)."""
        if self.proc.stdout is not None:
            try:
                self.proc.stdout.close()
            except (OSError, ValueError):
                pass


# ---- its events --------------------------------------------------------------------------------

def parse(line: bytes | str) -> StreamEvent | None:
    """One stream-json line as host/streamevents.py types it; None for a line that is not a
    JSON object whose `type` events.lua declares."""
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return None
    kind = obj.get("type") if isinstance(obj, dict) else None
    declared = EVENTS.get(kind) if isinstance(kind, str) else None
    if declared is None:
        return None
    return _read(declared)(obj)


@functools.cache
def _read(declared: Any) -> Callable[[Any], Any]:
    return reader(declared)




# ---- an entry run to its end, from an event loop -------------------------------------------------

@dataclass
class Finished:
    """What a moss process run to its end said."""

    returncode: int
    stdout: bytes
    stderr: bytes

    def lines(self) -> list[str]:
        return self.stdout.decode("utf-8", "replace").strip().splitlines()

    def last_json(self) -> Any:
        """Its last line of stdout as JSON (an entry's one document), or None."""
        lines = self.lines()
        try:
            return json.loads(lines[-1]) if lines else None
        except (ValueError, RecursionError):
            return None


async def run_moss(cwd: Path, args: list[str]) -> Finished:
    """`moss ARGS` run in `cwd` as a user would run it, to its end, without blocking the event
    loop (the MCP server's and the board's: anyio, on asyncio); its stdin /dev/null, its
    output kept. A cancelled run's process is killed."""
    return await _finish(cwd, procs.moss_command(*args))


async def run_entry(cwd: Path, entry: str, *words: str) -> Finished:
    """The agent script's entry `entry` (docs/agent.md, the entry points) called with `words`:
    `moss @agent --entry ENTRY WORDS` run to its end, as `run_moss` runs a command."""
    return await _finish(cwd, command("--entry", entry, *words))


async def _finish(cwd: Path, argv: list[str]) -> Finished:
    import anyio

    done = await anyio.run_process(argv, cwd=cwd, stdin=subprocess.DEVNULL, check=False)
    return Finished(done.returncode, done.stdout, done.stderr)
