"""What an executor is (``Executor``), what it is asked to start (``StartRequest``), and all
it may ask of the RunManager that runs it (``Runs``).

An executor turns a start request into something that runs (a process group here, a job on
a cluster), tells the manager when it started and how it ended, brings its output into
``<id>.log`` where alert rules read it, and stops it. Everything else about a run is the
manager's and the same for every executor: its record (moss.tools.runs.store), its events
and alerts, the monitor thread, the queue of events ``wait()`` hands out, log tails.

An executor's methods run with the manager at hand (``self.runs``), and use only what
``Runs`` lists: they make and change records through it (``new_record`` and ``watch`` to
start one, ``set_status`` or ``finish`` for its changes, ``drain`` to check new log lines,
``log``) and touch its files only through ``runs.store``, so events, logs and the
record stay one story. ``status``, ``logs`` and ``stop`` are called from the monitor thread
or the caller's; they take ``runs.lock`` around record changes and never hold it over I/O
that can block (a process wait, an HTTP request).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ....tools.sandbox import Setup
from ..live import Live
from ..store import RunStore


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
    setup: Setup | None = None
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

    def __init__(self, runs: Runs):
        self.runs = runs

    def start(self, req: StartRequest) -> dict:
        """Start (or queue) the run `req` describes: refuse what this executor cannot do
        (MossError with a kind: usage, denied, config, io), then record it through the
        manager (``new_record``, ``watch``) and return its public record. A run that
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
        (``self.runs.adopt(rec)``) if it may still be going, else record how it ended."""
        raise NotImplementedError

    def attach(self, rec: dict, live: Live) -> None:
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


class Runs(Protocol):
    """What an executor may ask of the RunManager (moss.tools.runs.manager) that made it."""

    root: Path                  # the project
    store: RunStore             # the files under .moss/agent/runs
    max_parallel: int           # runs at once (0: no limit)

    @property
    def lock(self) -> threading.RLock: ...   # held around every change of a record or a Live

    @property
    def closed(self) -> bool: ...            # moss is shutting down: start nothing new

    def now(self) -> float: ...              # a record's time stamp

    def new_record(self, req: StartRequest, **fields) -> dict:
        """The record of a run about to be queued; `fields` are the executor's own."""

    def watch(self, rec: dict, live: Live) -> None:
        """Take a new run under watch: record it, queue its first event, run the monitor
        (lock held)."""

    def adopt(self, rec: dict) -> None:
        """Watch a run another (ended) moss process started; its executor's ``attach`` is called."""

    def run(self, rid: str) -> tuple[dict, Live]:
        """The record and Live of a run this process watches (KeyError for another)."""

    def watches(self, rid: str) -> bool: ...

    def watched_by(self, executor: Executor) -> list[tuple[dict, Live]]:
        """(record, Live) of each run this process watches with `executor`, oldest first."""

    def public(self, rec: dict) -> dict:
        """What callers see of a record."""

    def set_status(self, rec: dict, status: str, *, code: int | None = None, error: str | None = None,
                   emit: bool = True) -> None:
        """Record a new status (and its event, unless `emit` is False)."""

    def finish(self, rid: str, code: int | None) -> None:
        """Record how a run ended: stopped (a reason was given), finished, or failed."""

    def drain(self, rid: str, final: bool) -> None:
        """Check what the run's log gained against its alert rules."""

    def git_notes(self, notes: list[str], rids: list[str]) -> None:
        """Record and report git-metadata findings about these runs."""

    def log(self, event: str, data: dict) -> None:
        """An event for the session log."""
