"""What one run of a script knows about its surroundings (mechanism state only)."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
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


@dataclass
class Context:
    root: Path
    config: dict
    options: dict = field(default_factory=dict)  # host options: provider, model, record, ...
    args: list[str] = field(default_factory=list)
    script: str = ""
    env: Any = field(default_factory=lambda: os.environ)
    runtime: Any = None  # set once the Runtime exists
    services: dict = field(default_factory=dict)  # lazily created per-run services (llm, ...)
    user_config: dict = field(default_factory=dict)  # the user's file alone (for permissions)
    session_id: str | None = None  # set by moss.session.bind; host events are logged there
    interrupted: bool = False  # the run was interrupted (Ctrl-C, SIGINT from MCP's cancel)
    access: str = "read-only"  # tool access level, raised by policy via moss.access.set
    trust: Any = None  # host.trust.Trust: whether the project's .moss/ content is in use
    # Agent trees (host/api/agents.py): a child agent's context knows its parent, the tree it
    # belongs to (shared registry, budget, locks, live view), the most access it may take,
    # and its own record (pause/cancel at turn boundaries).
    parent_id: str | None = None
    tree: Any = None
    max_access: str | None = None
    role: str = ""
    resume: str | None = None  # the command that goes on with the bound session (moss.session.bind)
    child: Any = None
    parent_llm: Any = None
    # a project file that replaces one of moss's own scripts or modules runs in this session
    # (its shown path): access is then held to the user's [trust] max_access (host/api/access.py)
    project_code: str | None = None
    _log_path: Any = field(default=None, repr=False)  # (session id, its log's path), for log()

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

            from .api.session import append_line, log_path

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
        """A project file replacing one of moss's own runs from now on: whatever that code asks
        for, this session's access stays within [trust] max_access (lowered now if above)."""
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
