"""The sandboxed Lua 5.4 runtime: one per agent.

Mechanism only. The runtime
- uses lupa's Lua 5.4 (the only lupa runtime without the object-identity bug #294),
- denies every attribute and item access on Python objects (whitelist of nothing),
- keeps `debug.sethook` privately for a count hook that polls cancellation/deadline,
- resolves `require` through project, user and built-in script roots,
- exposes host primitives as the `moss` global, converting values deeply both ways.
"""

from __future__ import annotations

import hashlib
import os
import signal
import threading
import time
import traceback as py_traceback
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable

from lupa import lua54

from . import hostlua, ui
from .convert import Converter, decode
from .errors import MossError
from .roots import ScriptRoots

DEFAULT_MEMORY_MB = 256
HOOK_COUNT = 10_000


class LuaScriptError(MossError):
    """A script failed: `text` is `file:line: message`, `trace` the Lua traceback, `where`
    the `file:line: ` part of `text` ("" when none was named), `on_purpose` whether the script
    raised it with moss.error (not a bug, nor a primitive's error it left uncaught)."""

    def __init__(self, text: str, kind: str = "lua", trace: str = "", where: str = "", on_purpose: bool = False):
        super().__init__(text, kind=kind)
        self.trace = trace
        self.where = where if text.startswith(where) else ""
        self.on_purpose = on_purpose

    @property
    def sentence(self) -> str:
        """The message without the position it was raised at."""
        return self.message[len(self.where):]


class _Chunks:
    """Compiled Lua chunks shared by every runtime of this process.

    Every child agent is a new Lua state that compiles the same modules as its parent (the
    agent script, the machine kernel: some 40 files). The first runtime to load a built-in
    module compiles its source as text and keeps `string.dump` of it (with debug info, so
    error positions stay the same); later runtimes load that bytecode instead of compiling.

    Only moss's own built-in scripts are cached, keyed by the file's real path, the chunk
    name and the sha256 of the source just read from disk (so an edited file is compiled
    afresh, never served stale); the bytecode only ever comes from a dump made in this
    process from text compiled here. Nothing is read from or written to disk, and the
    binary-mode loader is a private closure of the bootstrap: scripts can still load text
    only (host/bootstrap.lua)."""

    ORIGINS = ("built-in",)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_file: dict[tuple[str, bytes], tuple[bytes, bytes]] = {}  # (path, chunkname) -> (sha, dump)

    def get(self, path: str, chunkname: bytes, sha: bytes) -> bytes | None:
        with self._lock:
            hit = self._by_file.get((path, chunkname))
        return hit[1] if hit is not None and hit[0] == sha else None

    def put(self, path: str, chunkname: bytes, sha: bytes, dump: bytes) -> None:
        with self._lock:
            self._by_file[(path, chunkname)] = (sha, dump)

    def clear(self) -> None:
        with self._lock:
            self._by_file.clear()


CHUNKS = _Chunks()


def _deny_get(obj, name):
    raise AttributeError("Python objects are not accessible from Lua")


def _deny_set(obj, name, value):
    raise AttributeError("Python objects are not accessible from Lua")


class Runtime:
    """A Lua 5.4 state with the moss sandbox, loader and API installed."""

    def __init__(
        self,
        roots: ScriptRoots,
        functions: dict[str, Callable[..., Any]] | None = None,
        *,
        memory_mb: int = DEFAULT_MEMORY_MB,
        stdout: Callable[[str], None] | None = None,
    ):
        self.roots = roots
        if memory_mb >= 1 << 44:  # lupa takes bytes as a C unsigned long: 2^64 at most
            raise MossError(f"a Lua memory limit of {memory_mb:,} MiB is more than a 64-bit machine "
                            "can address ([lua] max_memory_mb or --memory-mb)", kind="config")
        self.memory_mb = memory_mb
        self._stdout = stdout or _write_stdout
        self._cancel = threading.Event()
        self.parent: "Runtime | None" = None  # a child agent's runtime stops with its parent's
        self._in_primitive = 0
        self._deadline: float | None = None
        self._grace = False  # call_after_interrupt: cancellation held off, the deadline still holds
        # called with a file's shown path when a project file that replaces one of moss's own or
        # the user's own scripts or modules loads (host/run.py: the session is then held to
        # [trust] max_access)
        self.on_project_override: Callable[[str], None] | None = None
        self.lua = lua54.LuaRuntime(
            encoding=None,
            unpack_returned_tuples=True,
            register_eval=False,
            register_builtins=False,
            max_memory=memory_mb << 20,
            attribute_handlers=(_deny_get, _deny_set),
        )
        self.conv = Converter(self.lua)
        self._install(functions or {})

    # ---- setup -------------------------------------------------------------------------
    def _install(self, functions):
        lua = self.lua
        host = lua.table()
        host[b"check"] = self._check
        host[b"hook_count"] = HOOK_COUNT
        host[b"write_stdout"] = self._raw_write
        host[b"find_module"] = self._find_module
        fns = lua.table()
        for name, fn in functions.items():
            fns[name.encode()] = self._wrap_primitive(name, fn)
        host[b"functions"] = fns
        # debug.gethook/sethook for the host's own Lua (the converter's encoder, the checkpoint
        # differ): held by Python and by those closures only, never reachable from a script.
        # Any count hook makes Lua 5.4 trap every instruction (~1.5x slower); host loops over
        # plain data, which end and call no script code, turn it off while they run.
        self.hook_fns = lua.execute(b"return debug.gethook, debug.sethook")
        self.conv.hook_fns = self.hook_fns
        self.unhooked = hostlua.run(lua, "unhooked.lua")
        self._run, self._compile, is_object, is_null, self._load_dump, self._dump = \
            hostlua.run(lua, "bootstrap.lua", host)
        self.conv._is_object_table = is_object
        self.conv._is_null = is_null
        self.moss = lua.globals()[b"moss"]
        self.conv.null = self.moss[b"json"][b"null"]

    def set(self, name: str, value: Any) -> None:
        """Set `moss.<name>` to a plain value (deep-converted)."""
        self.moss[name.encode()] = self.conv.to_lua(value)

    # ---- host callbacks ----------------------------------------------------------------
    def _check(self):
        if not self._grace and (self._cancel.is_set() or (self.parent is not None and self.parent.cancelled)):
            return b"interrupted"
        if self._deadline is not None and time.monotonic() > self._deadline:
            return b"timeout"
        return None

    def _raw_write(self, data):
        try:
            self._stdout(decode(data) if isinstance(data, bytes) else str(data))
        except OSError as e:
            if not ui.is_broken_pipe(e):
                raise
            self.output_closed()

    def output_closed(self) -> None:
        """The reader of stdout or stderr went away (`moss ... | head -1`): the whole script,
        children and all, stops at its next step, and run.py ends it quietly (ui.pipe_closed)."""
        ui.pipe_closed()
        rt = self
        while rt.parent is not None:
            rt = rt.parent
        rt.cancel()
        self.cancel()

    def _find_module(self, name):
        """require's loader: (true, compiled chunk) or (true, nil, syntax error), or (false, message)."""
        try:
            path, display, origin = self.roots.locate(decode(name))
            src = self.roots.read(path, origin)
        except MossError as e:
            return False, e.message.encode(), e.kind.encode()
        self._loaded(path, display, origin)
        result = self._chunk(path, src, ("@" + display).encode(), origin)
        if isinstance(result, tuple):
            return True, None, result[1]
        return True, result

    def _loaded(self, path, shown: str, origin: str | None) -> None:
        if origin == "project" and self.on_project_override is not None and self.roots.shadows_own(path):
            self.on_project_override(shown)

    def _chunk(self, path: Path, src: bytes, chunkname: bytes, origin: str | None):
        """Compile `src` (text), or load the bytecode this process dumped for exactly this
        source (_Chunks). Returns the function, or (None, message) on a syntax error."""
        if origin not in _Chunks.ORIGINS:
            return self._compile(src, chunkname)
        sha = hashlib.sha256(src).digest()
        dump = CHUNKS.get(str(path), chunkname, sha)
        if dump is not None:
            fn = self._load_dump(dump, chunkname)
            if not isinstance(fn, tuple):
                return fn
        fn = self._compile(src, chunkname)
        if not isinstance(fn, tuple):
            CHUNKS.put(str(path), chunkname, sha, self._dump(fn))
        return fn

    def load_file(self, path: Path, shown: str, origin: str | None = None):
        """Compile a script file (as `load` does); a built-in one may come from _Chunks, a
        project one must be the content trusted (ScriptRoots.read)."""
        try:
            src = self.roots.read(path, origin)
        except MossError as e:
            raise LuaScriptError(e.message, kind=e.kind) from None
        self._loaded(path, shown, origin)
        result = self._chunk(path, src, ("@" + shown).encode(), origin)
        if isinstance(result, tuple):
            raise LuaScriptError(decode(result[1]), kind="syntax")
        return result

    def _wrap_primitive(self, name: str, fn: Callable[..., Any]):
        conv = self.conv

        raw = getattr(fn, "lua_args", False)  # the primitive converts (or diffs) its tables itself

        def primitive(*args):
            self._in_primitive += 1
            try:
                py_args = list(args) if raw else [conv.to_py(a) for a in args]
                result = fn(*py_args)
                if isinstance(result, tuple):
                    return (True, *(conv.to_lua(r) for r in result))
                return True, conv.to_lua(result)
            except MossError as e:
                return False, e.message.encode(), e.kind.encode()
            except KeyboardInterrupt:
                self._cancel.set()
                return False, b"interrupted", b"interrupted"
            except Exception as e:  # a host bug (primitives name their own): say so, keep the runtime alive
                if ui.is_broken_pipe(e):  # not a bug: `moss ... | head -1` stopped reading
                    self.output_closed()
                    return False, b"output closed", b"interrupted"
                if os.environ.get("MOSS_DEBUG"):
                    py_traceback.print_exc()
                return False, f"internal error: {type(e).__name__}: {e}".encode(), b"internal"
            finally:
                self._in_primitive -= 1

        primitive.__name__ = name
        return primitive

    # ---- running -----------------------------------------------------------------------
    def cancel(self) -> None:
        """Ask the running script to stop (thread-safe; also used by SIGINT)."""
        self._cancel.set()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set() or (self.parent is not None and self.parent.cancelled)

    def load(self, source: str | bytes, chunkname: str):
        """Compile a chunk; syntax errors become LuaScriptError('file:line: ...')."""
        src = source.encode() if isinstance(source, str) else source
        result = self._compile(src, ("@" + chunkname).encode())
        if isinstance(result, tuple):
            raise LuaScriptError(decode(result[1]), kind="syntax")
        return result

    def call(self, fn, *args, timeout: float | None = None):
        """Call a Lua function under the hook; Lua errors raise LuaScriptError."""
        self._deadline = time.monotonic() + timeout if timeout else None
        lua_args = [self.conv.to_lua(a) for a in args]
        try:
            result = self._run(fn, *lua_args)
        except lua54.LuaMemoryError:
            self.lua.gccollect()
            raise LuaScriptError(self._memory_message(), kind="memory") from None
        finally:
            self._deadline = None
        if not isinstance(result, tuple):
            result = (result,)
        if result[0] is True:
            values = result[1:]
            return values[0] if len(values) == 1 else (values or None)
        _, text, kind, trace, where, on_purpose = (result + (None,) * 5)[:6]
        kind = decode(kind) if kind else "lua"
        if kind == "memory":
            self.lua.gccollect()
            raise LuaScriptError(self._memory_message(), kind="memory")
        raise LuaScriptError(decode(text or b""), kind=kind, trace=_clean_trace(decode(trace or b"")),
                             where=decode(where or b""), on_purpose=on_purpose is True)

    def call_after_interrupt(self, fn, *args, timeout: float = 5.0):
        """Call `fn` once the script was interrupted (or cancelled): cancellation is held off
        for this call, which `timeout` seconds bound (host/run.py: the `interrupted` entry)."""
        self._grace = True
        try:
            return self.call(fn, *args, timeout=timeout)
        finally:
            self._grace = False

    def execute(self, source: str | bytes, chunkname: str = "=(moss)", *args, timeout: float | None = None):
        return self.call(self.load(source, chunkname), *args, timeout=timeout)

    def to_py(self, value):
        return self.conv.to_py(value)

    def _memory_message(self) -> str:
        return (
            f"Lua memory limit of {self.memory_mb} MiB exceeded "
            "(raise [lua] max_memory_mb in .moss/config.toml or pass --memory-mb)"
        )

    @contextmanager
    def sigint_cancels(self, grace: float = 2.0):
        """While active, Ctrl-C cancels the script instead of raising in Python.

        Inside a blocking host primitive (an HTTP call, a subprocess) Ctrl-C raises
        KeyboardInterrupt there, which the primitive wrapper turns into the same
        cancellation. A watchdog thread hears Ctrl-C even
        while Lua is stuck where no hook runs (a C pattern match, a finalizer): if the script
        has not stopped `grace` seconds later, the process exits with 130.
        """
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def handler(signum, frame):
            self._cancel.set()
            if self._in_primitive:  # a blocking host call: interrupt it where it waits
                raise KeyboardInterrupt

        done = threading.Event()
        r, w = os.pipe()
        os.set_blocking(w, False)

        def watchdog():
            while True:
                try:
                    data = os.read(r, 64)
                except OSError:
                    return
                if done.is_set() or not data:
                    return
                if signal.SIGINT in data:  # the Python handler sets the cancel flag itself
                    if not done.wait(grace):
                        from . import ui

                        ui.restore_terminal()  # os._exit skips atexit: no raw terminal left behind
                        os.write(2, b"\ninterrupted (forced: the script was stuck where Ctrl-C cannot reach it)\n")
                        os._exit(130)

        previous = signal.signal(signal.SIGINT, handler)
        previous_fd = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
        thread = threading.Thread(target=watchdog, name="moss-sigint-watchdog", daemon=True)
        thread.start()
        try:
            yield
        finally:
            done.set()
            signal.set_wakeup_fd(previous_fd)
            signal.signal(signal.SIGINT, previous)
            try:
                os.write(w, b"\0")  # wake the watchdog so it sees `done`
            except OSError:
                pass
            thread.join(timeout=1)
            os.close(w)
            os.close(r)


def _clean_trace(trace: str) -> str:
    """Drop the sandbox's own frames from a Lua traceback."""
    keep = [ln for ln in trace.splitlines() if "moss/bootstrap.lua" not in ln and "'raw_xpcall'" not in ln]
    return "\n".join(keep).strip("\n")


def _write_stdout(text: str) -> None:
    """print() from Lua. On a terminal control characters are shown, not obeyed (the agent
    prints the model's answer); piped or redirected output keeps the text as it is."""
    import sys

    if sys.stdout.isatty():
        from .ui import sanitize

        text = sanitize(text)
    sys.stdout.write(text)
    sys.stdout.flush()
