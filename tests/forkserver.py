"""`python -m moss` for tests, started from an interpreter that has already imported moss.

Most tests run moss the way its users do, as a new `python -m moss ...` process. Each such
process used to spend most of its CPU importing: the anthropic SDK alone is 1.6 s of CPU here
(about 1,500 pydantic classes built at import), and the suite starts ~1,000 moss processes,
~370 of them agents that import an SDK (bench/RESULTS.md, issue 24). That import, not moss,
was most of the suite's time.

So the tests' moss processes are forked from a *zygote*: one process per test worker that
imported moss, lupa, click, rich and both LLM SDKs once and then only forks. A forked child
is set up as `python -m moss ARGS` would start: the test's argv, its whole environment (put in
`os.environ`, so the C environment too), its working directory first on `sys.path` (as `-m`
puts it), its stdin/stdout/stderr (the pipes `subprocess` made, passed over a Unix socket),
new `sys.std*` objects made as CPython makes them, a new session or process group when asked.
It runs `moss/__main__.py` with runpy, and whatever that raises ends the interpreter the
usual way (threads joined, `atexit`, streams flushed, modules finalized, the exit status). Between it and the
test a small monitor process waits for it and sends its wait status back, so `ZygotePopen` is
a `subprocess.Popen` whose poll/wait/communicate/send_signal/kill behave as for a child.

What differs from a fresh interpreter, on purpose: the modules listed in PRELOAD are already
imported (a test about what a moss process imports must start a fresh one: `fresh=True`, or
any PYTHON* variable that differs from the zygote's). Everything else goes the usual way,
through `subprocess.Popen`: other programs, other interpreters, a pass_fds/preexec_fn/user
argument, a missing cwd, and every process when MOSS_TEST_FORK=0 is set (the whole suite then
runs as before, only slower).
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading

PRELOAD = ("moss.entry", "moss.run", "moss.cli", "moss.runtime", "moss.api", "moss.context",
           "moss.llm.anthropic_client", "moss.llm.openai_client", "moss.llm.pricing", "moss.ui", "moss.trust",
           "moss.config", "lupa", "click", "rich.console", "anthropic", "openai")
ENABLED = os.environ.get("MOSS_TEST_FORK", "1") != "0"
_STATUS = 4  # bytes of a wait status on the monitor's socket


# --- the test's side ------------------------------------------------------------------------

class Zygote:
    """The zygote process of this test worker, started on first use, stopped at exit."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="moss-zygote-")
        self.path = os.path.join(self.dir, "sock")
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.python_env = _python_vars(env)
        self.proc = subprocess.Popen([sys.executable, __file__, self.path], env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        ready = self.proc.stderr.readline()  # the zygote says "ready" once it listens
        if ready.strip() != b"ready":
            rest = self.proc.stderr.read() if self.proc.poll() is not None else b""
            raise RuntimeError(f"the moss zygote did not start: {(ready + rest).decode(errors='replace')}")
        atexit.register(self.stop)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        try:
            os.unlink(self.path)
            os.rmdir(self.dir)
        except OSError:
            pass

    def serves(self, env: dict) -> bool:
        return self.proc.poll() is None and _python_vars(env) == self.python_env


_zygote: Zygote | None = None
_zygote_lock = threading.Lock()


def zygote() -> Zygote:
    global _zygote
    with _zygote_lock:
        if _zygote is None or _zygote.proc.poll() is not None:
            _zygote = Zygote()
        return _zygote


def _python_vars(env: dict) -> dict:
    """The variables a Python reads as it starts: a child is forked only when they match."""
    return {k: v for k, v in env.items() if k.startswith("PYTHON")}


class ZygotePopen(subprocess.Popen):
    """A `subprocess.Popen` of `python -m moss ARGS` whose process is forked by the zygote."""

    def _execute_child(self, args, executable, preexec_fn, close_fds, pass_fds, cwd, env, startupinfo,
                       creationflags, shell, p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite,
                       restore_signals, gid, gids, uid, umask, start_new_session, process_group):
        fds = [p2cread if p2cread != -1 else 0, c2pwrite if c2pwrite != -1 else 1,
               errwrite if errwrite != -1 else 2]
        request = {"argv": list(args[3:]), "env": dict(env), "cwd": os.fspath(cwd or os.getcwd()),
                   "new_session": bool(start_new_session),
                   "process_group": process_group if process_group is not None and process_group >= 0 else None}
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(zygote().path)
            body = json.dumps(request).encode()
            socket.send_fds(conn, [len(body).to_bytes(4, "little") + body], fds)
            pid = int.from_bytes(_read_exactly(conn, 4), "little")
        except BaseException:
            conn.close()
            raise
        finally:
            self._close_pipe_fds(p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite)
        self._conn = conn
        self.pid = pid
        self._child_created = True

    def _status(self, block: bool):
        """The child's wait status from its monitor, or None while it runs."""
        self._conn.setblocking(block)
        try:
            data = _read_exactly(self._conn, _STATUS)
        except BlockingIOError:
            return None
        self._conn.close()
        return int.from_bytes(data, "little", signed=True)

    def _try_wait(self, wait_flags):
        sts = self._status(block=not (wait_flags & os.WNOHANG))
        return (0, 0) if sts is None else (self.pid, sts)

    def _internal_poll(self, _deadstate=None, **_ignored):
        if self.returncode is None and self._waitpid_lock.acquire(False):
            try:
                if self.returncode is None:
                    sts = self._status(block=False)
                    if sts is not None:
                        self._handle_exitstatus(sts)
            except OSError:
                if _deadstate is not None:
                    self.returncode = _deadstate
            finally:
                self._waitpid_lock.release()
        return self.returncode


def _read_exactly(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise ConnectionError("the moss zygote went away")
        data += chunk
        conn.setblocking(True)  # once a status has begun, the rest is read in full
    return data


def popen(argv: list[str], *, fresh: bool = False, **kw) -> subprocess.Popen:
    """`subprocess.Popen(argv, **kw)`, forked by the zygote when argv is `python -m moss ...` and
    nothing asks for a fresh interpreter."""
    env = kw.get("env")
    cwd = kw.get("cwd")
    forkable = (ENABLED and not fresh and env is not None and len(argv) >= 3
                and list(argv[:3]) == [sys.executable, "-m", "moss"]
                and not set(kw) - {"env", "cwd", "stdin", "stdout", "stderr", "text", "encoding", "errors",
                                   "start_new_session", "process_group", "bufsize"}
                and (cwd is None or os.path.isdir(cwd)))
    if forkable and zygote().serves(env):
        return ZygotePopen(argv, **kw)
    return subprocess.Popen(argv, **kw)


def run(argv: list[str], *, input=None, timeout=None, capture_output=False, fresh: bool = False,
        **kw) -> subprocess.CompletedProcess:
    """`subprocess.run` through `popen`."""
    if input is not None:
        kw["stdin"] = subprocess.PIPE
    if capture_output:
        kw["stdout"] = kw["stderr"] = subprocess.PIPE
    with popen(argv, fresh=fresh, **kw) as p:
        try:
            out, err = p.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            raise
        except BaseException:
            p.kill()
            raise
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


# --- the zygote's side ----------------------------------------------------------------------

def _serve(path: str):
    """Imports PRELOAD, then forks a monitor per request. Returns only in a forked moss child:
    what to run there."""
    import gc
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    assert threading.active_count() == 1, "a preloaded module started a thread: forking would lose it"
    del sys.path[0]  # this file's folder; a child puts its own working directory there
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # monitors are reaped by the kernel
    gc.collect()
    gc.freeze()  # what was imported stays shared with the children (no collection copies it)
    os.write(2, b"ready\n")
    parent = os.getppid()
    listener.settimeout(1.0)
    while True:
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            if os.getppid() != parent:
                raise SystemExit(0) from None  # the test worker that started this zygote is gone
            continue
        conn.setblocking(True)
        try:
            msg, fds, _flags, _addr = socket.recv_fds(conn, 1 << 20, 3)
            size = int.from_bytes(msg[:4], "little")
            msg = msg[4:] + _read_exactly(conn, size - len(msg) + 4) if len(msg) - 4 < size else msg[4:]
            request = json.loads(msg)
        except (OSError, ValueError):
            conn.close()
            continue
        if os.fork() == 0:
            listener.close()
            if _monitor(conn, fds):
                return lambda: _child(conn, fds, request)
        conn.close()
        for fd in fds:
            os.close(fd)


def _monitor(conn: socket.socket, fds: list[int]) -> bool:
    """In the monitor: forks the moss child (there, returns True), sends the test its pid,
    waits for it, sends its wait status and exits."""
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        pid = os.fork()
        if pid == 0:
            return True
        for fd in fds:
            os.close(fd)
        conn.sendall(pid.to_bytes(4, "little"))
        _, sts = os.waitpid(pid, 0)
        conn.sendall(sts.to_bytes(_STATUS, "little", signed=True))
    except BaseException:  # noqa: BLE001 - a monitor never goes back to the zygote's loop
        pass
    os._exit(0)


def _child(conn: socket.socket, fds: list[int], request: dict) -> None:
    """Makes this process what `python -m moss ARGS` starts as, and runs moss/__main__.py; what
    it raises (SystemExit, KeyboardInterrupt, an error) ends the interpreter the usual way:
    threads joined, atexit, streams flushed, modules finalized (a database closed), exit status."""
    import runpy

    if request.get("new_session"):
        os.setsid()
    elif request.get("process_group") is not None:
        os.setpgid(0, request["process_group"])
    conn.close()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in set(fds):
        if fd > 2:
            os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.path.insert(0, os.getcwd())
    _fresh_stdio()
    sys.argv = ["-m", *request["argv"]]
    runpy.run_module("moss", run_name="__main__", alter_sys=True)


_FIRST_STDIO = []  # the zygote's own streams, kept so that dropping them closes nothing


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
        stream.mode = mode
        setattr(sys, name, stream)
        setattr(sys, "__" + name + "__", stream)


if __name__ == "__main__":
    _serve(sys.argv[1])()  # the loop returns only in a forked moss child: run moss there
