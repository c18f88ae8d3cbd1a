"""What one run of a script knows about its surroundings (mechanism state only)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any


def _agent(cfg: dict) -> dict:
    agent = cfg.get("agent") if isinstance(cfg, dict) else None
    return agent if isinstance(agent, dict) else {}


def find_project_root(start: Path | None = None) -> Path:
    """The nearest ancestor holding .moss/, else the nearest holding .git, else cwd."""
    start = (start or Path.cwd()).resolve()
    for marker in (".moss", ".git"):
        for d in (start, *start.parents):
            if (d / marker).exists():
                return d
    return start


class Context:
    """What one run of a script knows (a plain class: building a dataclass at import costs
    every command that only wants find_project_root, `moss text-search` among them, about
    3 ms). Fields, in order, with their defaults:

    root, config; options (host options: provider, model, record, ...); args; script; env
    (os.environ); runtime (set once the Runtime exists); services (per-run services made
    lazily: llm, ...); user_config (the user's file alone, for permissions); session_id
    (set by moss.session.bind; host events are logged there); interrupted (Ctrl-C, SIGINT
    from MCP's cancel); access (raised by policy via moss.access.set); trust
    (host.trust.Trust: whether the project's .moss/ content is in use).

    Agent trees (host/api/agents.py): a child agent's context knows its parent, the tree it
    belongs to (shared registry, budget, locks, live view), the most access it may take,
    and its own record (pause/cancel at turn boundaries): parent_id, tree, max_access, role,
    resume (the command that goes on with the bound session), child, parent_llm.

    project_code: a project file that replaces one of moss's own scripts or modules runs in
    this session (its shown path): access is then held to the user's [trust] max_access
    (host/api/access.py).

    workdir: the tree this agent's files are in, what its views, edits, shell commands,
    snapshots and locks act on: `root` itself, or an isolated child's own copy of it
    (host/tools/worktree/); its sessions, logs and memory stay under `root`. bind_as: where
    its sandbox shows `workdir` (the project's own path; None: where it is)."""

    FIELDS = ("root", "config", "options", "args", "script", "env", "runtime", "services",
              "user_config", "session_id", "interrupted", "access", "trust", "parent_id", "tree",
              "max_access", "role", "resume", "child", "parent_llm", "project_code", "workdir", "bind_as")

    def __init__(self, root: Path, config: dict, options: dict | None = None,
                 args: list[str] | None = None, script: str = "", env: Any = None,
                 runtime: Any = None, services: dict | None = None,
                 user_config: dict | None = None, session_id: str | None = None,
                 interrupted: bool = False, access: str = "read-only", trust: Any = None,
                 parent_id: str | None = None, tree: Any = None, max_access: str | None = None,
                 role: str = "", resume: str | None = None, child: Any = None,
                 parent_llm: Any = None, project_code: str | None = None, workdir: Path | None = None,
                 bind_as: Path | None = None):
        self.root = root
        self.config = config
        self.options = {} if options is None else options
        self.args = [] if args is None else args
        self.script = script
        self.env = os.environ if env is None else env
        self.runtime = runtime
        self.services = {} if services is None else services
        self.user_config = {} if user_config is None else user_config
        self.session_id = session_id
        self.interrupted = interrupted
        self.access = access
        self.trust = trust
        self.parent_id = parent_id
        self.tree = tree
        self.max_access = max_access
        self.role = role
        self.resume = resume
        self.child = child
        self.parent_llm = parent_llm
        self.project_code = project_code
        self.workdir = root if workdir is None else workdir
        self.bind_as = bind_as
        self._log_path: Any = None  # (session id, its log's path), for log()

    def __repr__(self) -> str:
        return "Context(" + ", ".join(f"{k}={getattr(self, k)!r}" for k in self.FIELDS) + ")"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, k) == getattr(other, k) for k in self.FIELDS)

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value

    @property
    def tree_id(self) -> str | None:
        """The root session of this agent's tree: children's writes are attributed to it
        (a parent's rollback covers what its children changed, never another tree's)."""
        if self.tree is not None and self.tree.root_id:
            return self.tree.root_id
        return self.session_id

    @property
    def project_keys(self) -> frozenset:
        """Dotted config keys whose value came from the project's .moss/config.toml."""
        return frozenset(self.trust.project_keys) if self.trust is not None else frozenset()

    @property
    def project_trusted(self) -> bool:
        return bool(self.trust.trusted) if self.trust is not None else True

    # Permissions come from the command line or the user's own config, never from the
    # project's .moss/config.toml, which arrives with whatever repository was cloned.
    @property
    def allow_full(self) -> bool:
        return bool(self.options.get("allow_full") or _agent(self.user_config).get("allow_full"))

    @property
    def unsandboxed_ok(self) -> bool:
        return bool(_agent(self.user_config).get("unsandboxed_ok"))

    @property
    def interactive(self) -> bool:
        return bool(sys.stdin and sys.stdin.isatty()) and not self.options.get("non_interactive")

    def log(self, event: str, data: dict) -> None:
        """Append a host-side event to the bound session's log, if any."""
        if self.session_id:
            import time

            from .sessions import log_path
            from .storage import append_line

            path = self._log_path
            if path is None or path[0] != self.session_id:  # made once per session (pathlib is slow)
                path = self._log_path = (self.session_id, log_path(self.root, self.session_id))
            append_line(path[1], {"event": event, "ts": round(time.time(), 3), **data,
                                  "session": self.session_id, "parent": self.parent_id})

    def cancelled(self) -> bool:
        return bool(self.runtime and self.runtime.cancelled)

    @property
    def trust_cap(self) -> str | None:
        """The user's [trust] max_access for a trusted project's choices (None: no project content)."""
        return self.trust.max_access if self.trust is not None and self.trust.trusted else None

    def project_override(self, shown: str) -> None:
        """A project file replacing one of moss's own or the user's own runs from now on: whatever
        that code asks for, this session's access stays within [trust] max_access (lowered now if
        above)."""
        from .tools.sandbox import ACCESS_LEVELS

        if self.project_code is None:
            self.project_code = shown
        cap = self.trust_cap
        if cap is not None and ACCESS_LEVELS.index(self.access) > ACCESS_LEVELS.index(cap):
            self.access = cap

    def user_interrupt(self) -> bool:
        """Whether the user's latest message (moss.inbox, handled by the Lua policy) asks to
        stop waiting for the model or a command."""
        poll = getattr(self, "inbox_poll", None)
        return bool(poll and poll())
