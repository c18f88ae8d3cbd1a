"""Starting a planned command in a process group of its own, and signalling that group.

Every command moss runs (shell.run, background runs) goes through here: a group of its own
means a timeout, a cancel or a stop reaches everything the command started, background jobs
included.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


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
    """Send `sig` to the process group led by `pid`; a group already gone is not an error."""
    if not pid:
        return
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
