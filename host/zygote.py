"""Starting `python -m moss ...` many times, fast: each process forked from one that has already
imported moss and the LLM SDKs (a *zygote*), instead of a new interpreter importing them again.

Importing the anthropic SDK alone takes 1.6 s of CPU (it builds ~1,500 pydantic classes); moss's
own start is ~0.1 s. `moss eval` and `moss batch` start one agent process per attempt, so on a
two-core machine every attempt began with more than a second of both cores spent importing.
With a zygote that cost is paid once per run.

The zygote is `python -P -m moss.zygote FD`, started by the process that needs it and tied to
it by a socket pair (never a name in the file system: no other process can ask it for
anything). Each request carries the argv, the whole environment, the working directory, the
new process's stdin/stdout/stderr (as file descriptors, SCM_RIGHTS) and one end of a socket on
which it answers. For each, the zygote forks a *monitor*, which forks the moss process, sends
back its pid, waits for it and sends back its wait status; so `ZygotePopen` is a
`subprocess.Popen` whose poll, wait, communicate, send_signal and kill behave as for a child
(signals go straight to the pid; a new session when asked, as `start_new_session` makes one).

The forked process is set up as `python [-P] -m moss ARGS` starts: its environment replaces
`os.environ` (and so the C environment), it changes to its directory, its stdio are new
`sys.std*` objects made as CPython makes them, and without `-P` its directory goes first on
`sys.path` as `-m` puts it. It runs moss/__main__.py with runpy, and whatever that raises
ends it as the interpreter would: non-daemon threads joined, `atexit`, streams flushed, the
exit status. What differs from a new interpreter: the PRELOAD modules are imported already and
its functions have run (prices and tree-sitter queries loaded, a TLS context made, the SDKs'
reply types built: the same in every process), and at the end the modules are not torn down
(`_end` says why).

Ending: when the process that started the zygote closes its end of the socket pair or dies
(the kernel closes it then, SIGKILL included), the zygote exits; each monitor is killed with it
(PR_SET_PDEATHSIG) and each moss process still running then gets SIGTERM, as an eval's attempt
always did when its runner died.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading

from .errors import MossError

# What the zygote does before it forks, so that no forked process does it again: modules to
# import, and "module:function" to call (after the imports). Beyond moss, what an agent's first
# client and request import on their own (httpcore2 alone brings anyio, and trio when
# installed), genai-prices' data, the tree-sitter queries and the Lua API's modules and
# argument checks: an agent answering the context bench's question then spends 0.2 s of CPU
# after the fork instead of 0.5-0.7 s. The LLM SDKs are in SDKS: a zygote imports those its
# agents' providers use (`preload_for`).
BASE = ("moss.entry", "moss.run", "moss.runtime", "moss.api", "moss.context", "moss.llm.pricing", "moss.ui",
        "moss.trust", "moss.config", "lupa", "httpcore2", "h11", "sqlite3", "moss.live", "moss.redact",
        "moss.tools.search", "moss.tools.view", "moss.tools.structcache", "moss.tools.confine",
        "moss.tools.caps", "moss.tools.locks", "moss.tools.resolve",
        "moss.llm.pricing:load_data", "moss.tools.treesitter:load_all", "moss.api:preload")


def _sdks() -> dict[str, tuple[str, ...]]:
    """Each SDK apart, by the wire API of the providers that use it (host/llm/wire.py: its
    module, its SDK and its PRELOAD): the anthropic SDK alone is ~1.2-1.8 s of a zygote's
    ~2.5 s, the openai SDK ~0.6 s. With each, what its first client and first responses make
    (~80 ms of a forked agent's ~0.2 s of CPU otherwise): the TLS context its client checks
    certificates with, its response types' validators. Those of the wire APIs moss ships."""
    from .llm import wire

    return {name: wire.get(name).preload() for name in wire.BUILTIN}


SDKS = _sdks()


def preload_for(apis) -> tuple[str, ...]:
    """BASE and what the wire APIs named in `apis` need (SDKS, and for one an installed
    package registers, its own preload; other names, such as "replay", need none), each
    name once."""
    from .llm import wire

    names = [name for api in SDKS if api in apis for name in SDKS[api]]
    for api in apis:
        if api not in SDKS and wire.known(api):
            try:
                names += wire.get(api).preload()
            except MossError:  # it fails again where it is used, and says so there
                pass
    return tuple(dict.fromkeys(BASE + tuple(names)))


PRELOAD = preload_for(SDKS)  # everything: for processes whose provider is not known
_STATUS = 4  # bytes of a pid, then of a wait status, on a request's answer socket
_ROOM = " " * 4096  # the zygote's last argument: room for a forked process's own command line
PR_SET_PDEATHSIG = 1


def _python_vars(env: dict) -> dict:
    """The variables Python reads as it starts: a process is forked only when they match."""
    return {k: v for k, v in env.items() if k.startswith("PYTHON")}


class Zygote:
    """A zygote for processes whose environment has the PYTHON* variables of `env`. Started at
    once (it imports in the background; the first request waits for it)."""

    def __init__(self, env: dict, preload: tuple[str, ...] = PRELOAD, *, own_session: bool = True):
        """`own_session`: the zygote (and each process it forks without a new session of its own)
        is out of reach of the terminal's Ctrl-C, which then reaches only the process that
        started it (moss eval stops its attempts itself). False: they stay in this process's
        group, as `subprocess.Popen`'s children do."""
        self.python_env = _python_vars(env)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-P", "-m", "moss.zygote", str(theirs.fileno()), ",".join(preload), _ROOM],
                env=env, pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, start_new_session=own_session)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self.sock = ours
        self.lock = threading.Lock()
        self.broken = False

    def forkable(self, argv: list, kw: dict) -> str | None:
        """How `argv` runs moss when the zygote can start it ("-P" or "-m"), else None."""
        env = kw.get("env")
        cwd = kw.get("cwd")
        if self.broken or env is None or _python_vars(env) != self.python_env:
            return None
        if set(kw) - {"env", "cwd", "stdin", "stdout", "stderr", "text", "encoding", "errors",
                      "start_new_session", "bufsize"}:
            return None  # preexec_fn, pass_fds, a user: a new process
        if cwd is not None and not os.path.isdir(cwd):
            return None  # subprocess says what is wrong
        head = [str(a) for a in argv[:4]]
        if head == [sys.executable, "-P", "-m", "moss"]:
            return "-P"
        if head[:3] == [sys.executable, "-m", "moss"]:
            return "-m"
        return None

    def popen(self, argv: list, *, preload: tuple[str, ...] = (), **kw) -> subprocess.Popen:
        """`subprocess.Popen(argv, **kw)`: forked here when `forkable`, else a new process.
        `preload`: names (as in PRELOAD) the zygote imports or calls first, once, if it has not
        yet: what this process will need that the zygote was not started with (another SDK)."""
        how = self.forkable(argv, kw)
        if how is None:
            return subprocess.Popen(argv, **kw)
        try:
            return ZygotePopen(argv, zygote=self, how=how, preload=preload, **kw)
        except ConnectionError:
            self.broken = True  # it died or never came up: new processes from now on
            return subprocess.Popen(argv, **kw)

    def request(self, request: dict, fds: list[int]) -> socket.socket:
        """Send one request; the socket its monitor answers on."""
        answer, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            with self.lock:
                socket.send_fds(self.sock, [json.dumps(request).encode()], [*fds, theirs.fileno()])
        except OSError as e:
            answer.close()
            raise ConnectionError(f"the moss zygote is gone: {e}") from None
        finally:
            theirs.close()
        return answer

    def close(self) -> None:
        """Stop the zygote (moss processes it started and that still run get SIGTERM)."""
        self.sock.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class ZygotePopen(subprocess.Popen):
    """A `subprocess.Popen` of `python [-P] -m moss ARGS` whose process a zygote forked."""

    def __init__(self, argv, *, zygote: Zygote, how: str, preload: tuple[str, ...] = (), **kw):
        self._zygote, self._how, self._preload = zygote, how, list(preload)
        super().__init__(argv, **kw)

    def _execute_child(self, args, executable, preexec_fn, close_fds, pass_fds, cwd, env, startupinfo,
                       creationflags, shell, p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite,
                       restore_signals, gid, gids, uid, umask, start_new_session, process_group):
        fds = [p2cread if p2cread != -1 else 0, c2pwrite if c2pwrite != -1 else 1,
               errwrite if errwrite != -1 else 2]
        cwd = os.fspath(cwd) if cwd is not None else os.getcwd()
        rest = list(args[4:] if self._how == "-P" else args[3:])
        request = {"argv": [os.fsdecode(a) for a in rest], "shown": [os.fsdecode(a) for a in args],
                   "env": dict(env), "cwd": cwd,
                   "path0": None if self._how == "-P" else cwd, "new_session": bool(start_new_session),
                   "preload": self._preload}
        try:
            answer = self._zygote.request(request, fds)
            try:
                self.pid = int.from_bytes(_read_exactly(answer, _STATUS), "little")
            except BaseException:
                answer.close()
                raise
        finally:
            self._close_pipe_fds(p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite)  # type: ignore[attr-defined]
        self._answer = answer
        self._child_created = True

    def _status(self, block: bool) -> int | None:
        """The wait status its monitor sent, or None while the process runs."""
        self._answer.setblocking(block)
        try:
            data = _read_exactly(self._answer, _STATUS)
        except BlockingIOError:
            return None
        self._answer.close()
        return int.from_bytes(data, "little", signed=True)

    def _try_wait(self, wait_flags):
        sts = self._status(block=not (wait_flags & os.WNOHANG))
        return (0, 0) if sts is None else (self.pid, sts)

    def _internal_poll(self, _deadstate=None, **_ignored):
        # (Popen's own private helpers, as its POSIX _internal_poll uses them)
        lock = self._waitpid_lock  # type: ignore[attr-defined]
        if self.returncode is None and lock.acquire(False):
            try:
                if self.returncode is None:
                    sts = self._status(block=False)
                    if sts is not None:
                        self._handle_exitstatus(sts)  # type: ignore[attr-defined]
            except OSError:
                if _deadstate is not None:
                    self.returncode = _deadstate
            finally:
                lock.release()
        return self.returncode


def _read_exactly(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise ConnectionError("the moss zygote went away")
        data += chunk
        conn.setblocking(True)  # once an answer has begun, the rest is read in full
    return data


# --- the zygote's side ----------------------------------------------------------------------

def prepare(preload: list[str] | tuple[str, ...]) -> None:
    """Import each "module" of `preload`, then call each "module:function" (PRELOAD). The
    cyclic garbage collector rests meanwhile (its passes over the SDKs' ~150,000 new objects
    were ~0.4 s of a zygote's ~2.5 s); what was made is then collected once and frozen, so that
    the forked processes share it and no later collection walks it (or copies its pages)."""
    import gc
    import importlib

    was_enabled = gc.isenabled()
    gc.disable()
    try:
        for name in preload:
            importlib.import_module(name.partition(":")[0])
        for name in preload:
            module, _, function = name.partition(":")
            if function:
                getattr(sys.modules[module], function)()
    finally:
        if was_enabled:
            gc.enable()
    if threading.active_count() != 1:
        raise SystemExit("moss.zygote: a preloaded module started a thread; forking would lose it")
    gc.collect()
    gc.freeze()


def _serve(fd: int, preload: list[str]):
    """Imports `preload`, then forks a monitor per request until the other end closes (first
    preparing what a request's own "preload" names and this zygote has not). Returns only in a
    forked moss process: what to run there."""
    ctrl = socket.socket(fileno=fd)
    prepare(preload)
    prepared = set(preload)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # monitors are reaped by the kernel
    while True:
        try:
            msg, fds, _flags, _addr = socket.recv_fds(ctrl, 1 << 20, 4)
        except OSError:
            raise SystemExit(0) from None
        if not msg:
            raise SystemExit(0)  # the process that started this zygote closed its end, or died
        try:
            request = json.loads(msg)
        except ValueError:
            request = None
        if not isinstance(request, dict) or len(fds) != 4:
            for f in fds:
                os.close(f)
            continue
        more = [n for n in request.get("preload") or () if isinstance(n, str) and n not in prepared]
        if more:
            prepared.update(more)  # tried once: what fails here, the forked process meets itself
            try:
                prepare(more)
            except Exception:  # as a new interpreter would, when it imports it
                pass
        if os.fork() == 0:
            ctrl.close()
            if _monitor(fds):
                return lambda: _child(fds, request)
        for f in fds:
            os.close(f)


def _die_with_parent(sig: int) -> None:
    """This process gets `sig` when the one that forked it ends (Linux)."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, sig)
    except (OSError, AttributeError):
        pass


def _monitor(fds: list[int]) -> bool:
    """In a monitor: forks the moss process (there, returns True), sends its pid, waits for it,
    sends its wait status and exits."""
    answer = socket.socket(fileno=fds[3])
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        _die_with_parent(signal.SIGKILL)
        pid = os.fork()
        if pid == 0:
            answer.detach()
            return True
        for f in fds[:3]:
            os.close(f)
        answer.sendall(pid.to_bytes(_STATUS, "little"))
        _, sts = os.waitpid(pid, 0)
        answer.sendall(sts.to_bytes(_STATUS, "little", signed=True))
    except BaseException:  # a monitor never goes back to the zygote's loop
        pass
    os._exit(0)


def _child(fds: list[int], request: dict) -> None:
    """Makes this process what `python [-P] -m moss ARGS` starts as, and runs moss/__main__.py."""
    import runpy

    _die_with_parent(signal.SIGTERM)  # the monitor ends only when the zygote's run is over
    if request.get("new_session"):
        os.setsid()
    os.close(fds[3])
    for target, f in enumerate(fds[:3]):
        os.dup2(f, target)
    for f in set(fds[:3]):
        if f > 2:
            os.close(f)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    if request.get("path0"):
        sys.path.insert(0, request["path0"])
    _fresh_stdio()
    _show_command_line(request["shown"])
    sys.argv = ["-m", *request["argv"]]
    try:
        runpy.run_module("moss", run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as e:
        code = _exit_code(e.code)
    except KeyboardInterrupt:
        sys.excepthook(*sys.exc_info())
        code = -signal.SIGINT
    except BaseException:  # what the interpreter does with it, below
        sys.excepthook(*sys.exc_info())
        code = 1
    _end(code)


def _exit_code(code) -> int:
    """The status `raise SystemExit(code)` ends an interpreter with (a message is printed)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _end(code: int) -> None:
    """End as an interpreter ends, short of tearing its modules down: non-daemon threads
    joined, atexit handlers run, stdout and stderr flushed (status 120 when that fails), then
    os._exit, as multiprocessing ends a forked process. A module teardown here would free, one
    by one, the objects every process shares with the zygote (pages copied to be freed), with
    daemon threads still running: one forked process in a few hundred died of SIGSEGV there.
    An unhandled Ctrl-C ends by SIGINT, as in the interpreter."""
    import atexit

    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # the interpreter reports it with status 120
            code = 120
    if code == -signal.SIGINT:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        code = 130
    os._exit(code)


def _show_command_line(argv: list[str]) -> None:
    """Make /proc/self/cmdline (what ps, top and pgrep show) the command this process stands
    for, not the zygote's: written over the zygote's own arguments, in the room its last one
    keeps (a longer command is cut there)."""
    import ctypes

    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        start, end = int(fields[45]), int(fields[46])  # arg_start, arg_end (fields 48 and 49)
    except (OSError, IndexError, ValueError):
        return
    size = end - start
    data = b"\0".join(os.fsencode(a) for a in argv)[:size - 1]
    ctypes.memmove(start, data + b"\0" * (size - len(data)), size)


_FIRST_STDIO: list = []  # the zygote's own streams, kept so that dropping them closes nothing


def _fresh_stdio() -> None:
    """sys.stdin/stdout/stderr on fds 0-2 as CPython makes them at start-up (create_stdio)."""
    import io

    buffered = not os.environ.get("PYTHONUNBUFFERED")
    for fd, name, mode in ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w")):
        old = getattr(sys, "__" + name + "__")
        _FIRST_STDIO.append(old)
        raw = io.FileIO(fd, mode + "b", closefd=False)
        tty = raw.isatty()
        buf = io.BufferedReader(raw) if mode == "r" else (io.BufferedWriter(raw) if buffered else raw)
        stream = io.TextIOWrapper(buf, encoding=old.encoding, errors=old.errors, newline="\n",
                                  line_buffering=buffered and (tty or fd == 2), write_through=not buffered)
        stream.mode = mode  # type: ignore[misc]
        setattr(sys, name, stream)
        setattr(sys, "__" + name + "__", stream)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 3 or not argv[0].isdigit():
        raise SystemExit("usage: python -P -m moss.zygote FD MODULE,MODULE,... ROOM (moss starts it itself)")
    _serve(int(argv[0]), [m for m in argv[1].split(",") if m])()


if __name__ == "__main__":
    main()
