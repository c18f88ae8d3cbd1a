"""Executors: how a run is carried out, chosen by name (``executor("local")``, ``executor("ray")``).

An executor turns a start request into something that runs (a process group here, a job on
a cluster), tells the RunManager when it started and how it ended, brings its output into
``<id>.log`` where alert rules read it, and stops it. Everything else about a run is the
manager's and the same for every executor: its record (moss.tools.runs.store), its events
and alerts, the monitor thread, the queue of events ``wait()`` hands out, log tails.

A new executor (a fleet of machines, a batch scheduler) is a subclass of ``Executor`` with a
``name``, made known with ``@register``; ``moss.runs.start{executor = NAME}`` then reaches it,
and ``executors.names()`` lists it in the error for an unknown one. Its methods run with the
manager at hand (``self.runs``): they make and change records only through the manager's
helpers (``_new_record`` and ``_record_new`` to start one, ``_set_status`` or ``_finish`` for
its changes, ``_drain`` to check new log lines, ``_log``) and touch its files only through
``runs.store``, so events, logs and the record stay one story. ``status``, ``logs`` and ``stop`` are called from the monitor thread or the
caller's; they take the manager's lock around record changes and never hold it over I/O
that can block (a process wait, an HTTP request).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ....errors import MossError

if TYPE_CHECKING:  # pragma: no cover
    from ....tools.runs.manager import RunManager, _Live
    from ....tools.sandbox import Setup

__all__ = ["Executor", "StartRequest", "executor", "register", "names"]


@dataclass
class StartRequest:
    """A checked `runs.start` call: what every executor gets."""

    rid: str                    # the run's id (12 hex digits), chosen by the manager
    cmd: str                    # the shell command
    access: str                 # the session's access level
    root: Path                  # the project root, resolved
    wd: Path                    # the working directory, resolved and inside the root
    rules: list                 # parsed alert rules (moss.tools.runs.alerts.Rule)
    env: dict                   # variables for the run (MOSS_RUN_ID, MOSS_RESULTS_DIR, the caller's)
    allow_full: bool = False
    unsandboxed_ok: bool = False
    name: str | None = None
    detach: bool = False
    timeout: float | None = None
    meta: Any = None
    setup: "Setup | None" = None
    address: str | None = None  # where a remote executor submits (a cluster's address)
    resources: dict | None = None
    results: str | None = None
    extra: dict = field(default_factory=dict)


class Executor:
    """The interface of an executor. One instance per RunManager and name, made on first use.

    The four a run's life goes through are ``start``, ``status``, ``logs`` and ``stop`` (a
    tail of the log is the same for every executor: the manager reads ``<id>.log``). The
    others let the manager hand over runs between moss processes and end them with moss."""

    name = ""
    remote = False  # True: the run is somewhere else, and only asking tells how it is (polled)

    def __init__(self, runs: "RunManager"):
        self.runs = runs

    def start(self, req: StartRequest) -> dict:
        """Start (or queue) the run `req` describes: refuse what this executor cannot do
        (MossError with a kind: usage, denied, config, io), then record it through the
        manager (``_new_record``, ``_record_new``) and return its public record. A run that
        could not be started or submitted is never recorded; one that starts later (a free
        slot, a cluster's scheduler) is recorded as ``queued`` and moves on through ``status``."""
        raise NotImplementedError

    def status(self, rid: str, *, force: bool = False) -> None:
        """Bring the status of a run this process watches up to date: notice that it began
        running, check its timeout, and record how it ended (finished with code 0, failed,
        or stopped) once it did. Called on every monitor tick (every 0.1 s); an executor
        that asks something far away may skip calls until its own poll interval passes,
        unless `force` (a listing, or a stop waiting for the end)."""
        raise NotImplementedError

    def logs(self, rid: str) -> None:
        """Bring ``<id>.log`` up to date with what the run has written, so tails and alert
        rules see it. A local process writes the file itself (nothing to do); a remote one
        copies what its job's log gained since the last call."""

    def stop(self, rid: str, reason: str, wait: float) -> dict:
        """Stop a run this process watches, for `reason` (kept as the record's ``error``),
        and return its public record once it ended, or after about `wait` seconds."""
        raise NotImplementedError

    def stop_elsewhere(self, rec: dict) -> None:
        """Ask a run that another live moss process watches to stop; that process records
        the end (the manager has left the reason in ``<id>.stop`` for it)."""
        raise NotImplementedError

    def settle(self, rec: dict) -> None:
        """A record of an unfinished run whose moss process has ended: take it under watch
        (``self.runs._adopt(rec)``) if it may still be going, else record how it ended."""
        raise NotImplementedError

    def attach(self, rec: dict, live: "_Live") -> None:
        """Reconnect to a run being adopted (``live.offset`` is the size of its log so far)."""

    def outlives_moss(self, rec: dict) -> bool:
        """Whether the run keeps going when this moss process exits: ``close()`` leaves it
        alone, and the next moss process adopts it."""
        return False

    def shutdown(self, rids: list[str]) -> None:
        """moss exits: stop these running runs (they do not outlive it) and record their end."""
        for rid in rids:
            self.stop(rid, "stopped: moss exited", 2.0)

    def each_tick(self) -> None:
        """Once per monitor tick, the manager's lock held: start queued runs as slots free."""


_REGISTRY: dict[str, type[Executor]] = {}


def register(cls: type[Executor]) -> type[Executor]:
    """Class decorator: make an Executor subclass reachable by its ``name``."""
    if not cls.name or cls.name in _REGISTRY:
        raise ValueError(f"executor name {cls.name!r} is empty or taken")
    _REGISTRY[cls.name] = cls
    return cls


def _load_builtin() -> None:
    from ....tools.runs.executors import local, ray  # noqa: F401  (they register themselves)


def names() -> tuple[str, ...]:
    """The names of the known executors, in the order they were registered."""
    _load_builtin()
    return tuple(_REGISTRY)


def executor(name: str) -> type[Executor]:
    """The executor class called `name`; MossError(kind="usage") naming the known ones."""
    _load_builtin()
    cls = _REGISTRY.get(name) if isinstance(name, str) else None
    if cls is None:
        raise MossError(f"runs.start: executor must be one of {', '.join(_REGISTRY)}, got {name!r}", kind="usage")
    return cls
