"""Starting a planned command in a process group of its own, and signalling that group.

Every command moss runs (shell.run, background runs) goes through here: a group of its own
means a timeout, a cancel or a stop reaches everything the command started, background jobs
included.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def moss_command(*args: str) -> list[str]:
    """The argv that runs this moss again as a new process: `python -P -m moss ARGS`.

    `-P` because moss starts itself with the working directory in a repository (an eval or
    batch attempt in its copy, the MCP server's and the board's sessions in the project), and
    `python -m` alone puts that directory first on sys.path: a repository's own `click.py` or
    `json.py` would be imported in place of the real one and run outside any sandbox
    (docs/security.md)."""
    return [sys.executable, "-P", "-m", "moss", *args]


def start(plan, *, cwd: str, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
          argv_wrap=None, env_extra: dict | None = None) -> subprocess.Popen:
    """Popen `plan` (host.tools.sandbox.Plan) in a new session. `argv_wrap(argv)` may wrap the
    final argv (e.g. in a shell that records the exit code); `env_extra` is added to the
    environment of the process moss starts."""
    with plan.launch() as (argv, env, fds):
        if env_extra:
            env.update(env_extra)
        if argv_wrap:
            argv = argv_wrap(argv)
        return subprocess.Popen(argv, stdin=stdin, stdout=stdout, stderr=stderr, cwd=cwd, env=env,
                                start_new_session=True, close_fds=True, pass_fds=fds)


def alive(pid) -> bool:
    """Whether a process with this pid exists (one we may not signal counts: it exists)."""
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except (OSError, ValueError, TypeError):
        return False
    return True


def start_time(pid) -> str | None:
    """The kernel's start time of `pid` (/proc/PID/stat, field 22), to tell a live process
    from a later one that reused its pid; None when there is no such process (or no /proc)."""
    try:
        data = Path(f"/proc/{int(pid)}/stat").read_text()
        fields = data.rsplit(")", 1)[1].split()
        return fields[19] if fields[0] != "Z" else None
    except (OSError, IndexError, ValueError, TypeError):
        return None


def alive_since(pid, start: str | None) -> bool:
    """Whether process `pid` runs and is the one that started at `start` (start_time(pid)
    when it was recorded; None: any process with that pid)."""
    if not pid or not alive(pid):
        return False
    now = start_time(pid)
    if now is None:
        return not Path("/proc").is_dir()  # no /proc: trust kill(0)
    return start is None or now == str(start)


def signal_group(pid: int | None, sig: int) -> None:
    """Send `sig` to the process group led by `pid`; a group already gone is not an error.

    A sandbox is stopped from inside first: its pid 1 (in a session of its own, out of the
    group's reach, and deaf to SIGTERM as a namespace's init) gets SIGKILL, which ends
    everything in the sandbox, and bwrap reaps it and exits. Killed before that, bwrap would
    leave the sandbox's pid 1 to the host's pid 1 (an orphan, a zombie in a container)."""
    if not pid:
        return
    inits = sandbox_inits(pid)
    for init in inits:
        try:
            os.kill(init, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    if inits and _ends_within(pid, BWRAP_EXIT_WAIT):
        return
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


BWRAP_EXIT_WAIT = 1.0  # seconds bwrap gets to reap its sandbox and exit by itself


def sandbox_inits(pid: int) -> list[int]:
    """The pid 1 of each bubblewrap sandbox `pid` runs: `pid` is bwrap, or the shell that
    waits for a detached run's bwrap."""
    found = []
    for p in [pid, *_children(pid)]:
        if _comm(p) == "bwrap":
            found += _children(p)
    return found


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for task in os.listdir(f"/proc/{int(pid)}/task"):
            with open(f"/proc/{int(pid)}/task/{task}/children") as f:
                out += [int(c) for c in f.read().split()]
    except (OSError, ValueError):
        pass  # gone, or a kernel without /proc/PID/task/TID/children
    return out


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{int(pid)}/comm") as f:
            return f.read().strip()
    except (OSError, ValueError):
        return ""


def _ends_within(pid: int, seconds: float) -> bool:
    """Whether `pid` exits (or is a zombie, waiting for its parent) within `seconds`."""
    deadline = time.monotonic() + seconds
    while start_time(pid) is not None:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True
