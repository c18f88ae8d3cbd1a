"""Access levels and the bubblewrap sandbox that enforces them for shell commands.

The host is the one place that enforces access levels. Levels, weakest first:

- ``read-only``  : no commands at all, no writes.
- ``read-shell`` : commands run under bubblewrap with the whole filesystem read-only,
  a private /tmp, fresh /dev and /proc, no network.
- ``edit``       : like read-shell, but the project root is writable; file edits allowed.
- ``full``       : unrestricted ``sh -c``; only when the caller says full access was
  explicitly allowed (``allow_full=True``).

When bubblewrap is missing or cannot create namespaces (detected once per bwrap path with
a tiny probe, then cached), the sandboxed levels fail closed unless the configuration
explicitly opts out (``unsandboxed_ok=True``), in which case the command runs plainly and
the result says ``sandbox = "none"``.

``MOSS_BWRAP`` overrides the bwrap executable (tests point it at a missing path).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading

from moss.errors import MossError

__all__ = [
    "ACCESS_LEVELS",
    "INSTALL_HINT",
    "bwrap_argv",
    "bwrap_path",
    "bwrap_problem",
    "check_level",
    "command_plan",
    "require_write",
]

ACCESS_LEVELS = ("read-only", "read-shell", "edit", "full")
SANDBOX_NAMES = {"read-shell": "bwrap-ro", "edit": "bwrap-project"}
INSTALL_HINT = (
    "install the Debian/Ubuntu package `bubblewrap` (apt-get install bubblewrap), "
    "or set unsandboxed_ok in the configuration to run commands without a sandbox"
)
SHELL = "/bin/sh"

_probe_cache: dict[str, str | None] = {}
_probe_lock = threading.Lock()


def check_level(access: str) -> str:
    """Return `access` if it names a level, else raise MossError(kind="usage")."""
    if access not in ACCESS_LEVELS:
        raise MossError(
            f"unknown access level {access!r}; expected one of {', '.join(ACCESS_LEVELS)}",
            kind="usage",
        )
    return access


def require_write(access: str, what: str = "writing files") -> None:
    """Refuse (kind "denied") unless the level allows writing project files."""
    check_level(access)
    if access not in ("edit", "full"):
        raise MossError(
            f"{what} is not allowed at access level {access}; it needs edit or full",
            kind="denied",
        )


def bwrap_path() -> str:
    """The bwrap executable to use: $MOSS_BWRAP if set, else bwrap on PATH."""
    override = os.environ.get("MOSS_BWRAP")
    if override:
        return override
    return shutil.which("bwrap") or "/usr/bin/bwrap"


def _base_args(bwrap: str) -> list[str]:
    return [
        bwrap,
        "--ro-bind", "/", "/",
        "--dev", "/dev",
        "--proc", "/proc",
        "--tmpfs", "/tmp",
    ]


def _tmp_rebinds() -> list[str]:
    """Keep tools that live under /tmp visible (read-only) beneath the private /tmp.

    A checkout or virtualenv under /tmp (CI clones often are) would otherwise vanish
    inside the sandbox, and with it the Python or the tools on PATH.
    """
    import sys

    candidates = [sys.prefix, sys.base_prefix, *os.environ.get("PATH", "").split(os.pathsep)]
    keep: list[str] = []
    for c in candidates:
        if not c:
            continue
        p = os.path.realpath(c)
        if (p == "/tmp" or not p.startswith("/tmp/")) or not os.path.isdir(p):
            continue
        if any(p == k or p.startswith(k + "/") for k in keep):
            continue
        keep = [k for k in keep if not k.startswith(p + "/")] + [p]
    args: list[str] = []
    for p in keep:
        args += ["--ro-bind", p, p]
    return args


def _isolation_args() -> list[str]:
    # --unshare-pid: when bwrap is killed, its pid-1 dies (--die-with-parent) and the
    # kernel kills everything left in the namespace, background jobs included.
    # --cap-drop ALL: run as root, bwrap would otherwise keep every capability and the
    # command could simply `mount -o remount,rw /`.
    return [
        "--unshare-net",
        "--unshare-pid",
        "--unshare-ipc",
        "--cap-drop", "ALL",
        "--die-with-parent",
        "--new-session",
    ]


def bwrap_argv(bwrap: str, access: str, root: str, cwd: str, cmd: str) -> list[str]:
    """The full argv that runs `cmd` for a sandboxed level (read-shell or edit)."""
    if access == "read-shell":
        # Re-bind the root after the /tmp tmpfs so a project living under /tmp is visible.
        root_bind = ["--ro-bind", root, root]
    elif access == "edit":
        root_bind = ["--bind", root, root]
        # The project is writable, but not its git metadata (hooks run later, unsandboxed)
        # nor moss's own config, scripts and sessions (the agent's policy and approval rules).
        for protected in (".git", ".moss"):
            p = os.path.join(root, protected)
            if os.path.isdir(p) and not os.path.islink(p):
                root_bind += ["--ro-bind", p, p]
    else:  # pragma: no cover - callers only pass sandboxed levels
        raise ValueError(access)
    return (
        _base_args(bwrap)
        + _tmp_rebinds()
        + root_bind
        + _isolation_args()
        + ["--chdir", cwd, "--", SHELL, "-c", cmd]
    )


def bwrap_problem() -> str | None:
    """None when bubblewrap works here; otherwise a sentence saying what is wrong.

    Probed once per bwrap path (a tiny sandboxed `exit 0`) and cached.
    """
    bwrap = bwrap_path()
    with _probe_lock:
        if bwrap in _probe_cache:
            return _probe_cache[bwrap]
        problem = _probe(bwrap)
        _probe_cache[bwrap] = problem
        return problem


def _probe(bwrap: str) -> str | None:
    if os.sep in bwrap:
        if not (os.path.isfile(bwrap) and os.access(bwrap, os.X_OK)):
            return f"bubblewrap was not found at {bwrap}"
    elif shutil.which(bwrap) is None:
        return f"bubblewrap ({bwrap}) was not found on PATH"
    argv = _base_args(bwrap) + _isolation_args() + ["--", SHELL, "-c", "exit 0"]
    try:
        done = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            timeout=10,
            start_new_session=True,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bubblewrap at {bwrap} could not be started ({exc})"
    if done.returncode != 0:
        detail = done.stderr.decode("utf-8", "replace").strip().splitlines()
        why = detail[-1] if detail else f"exit status {done.returncode}"
        return f"bubblewrap at {bwrap} cannot create its sandbox here ({why})"
    return None


def command_plan(
    cmd: str,
    *,
    access: str,
    root: str,
    cwd: str,
    allow_full: bool,
    unsandboxed_ok: bool,
) -> tuple[list[str], str]:
    """Decide how to run `cmd` at `access`: (argv, sandbox name) or MossError "denied"."""
    check_level(access)
    if access == "read-only":
        raise MossError(
            "run is not allowed at access level read-only; running commands needs "
            "read-shell (read-only sandbox), edit, or full",
            kind="denied",
        )
    if access == "full":
        if not allow_full:
            raise MossError(
                "run at access level full (an unrestricted, unsandboxed shell) needs full "
                "access to be explicitly allowed (--allow-full or the configuration); "
                "refusing",
                kind="denied",
            )
        return [SHELL, "-c", cmd], "none"
    problem = bwrap_problem()
    if problem is None:
        return bwrap_argv(bwrap_path(), access, root, cwd, cmd), SANDBOX_NAMES[access]
    if unsandboxed_ok:
        return [SHELL, "-c", cmd], "none"
    raise MossError(
        f"run at access level {access} needs the bubblewrap sandbox, but {problem}; "
        f"{INSTALL_HINT}",
        kind="denied",
    )
