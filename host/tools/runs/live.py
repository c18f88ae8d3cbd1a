"""What one moss process knows about a run it watches (never persisted): `Live`.

The RunManager makes one when it takes a run under watch (adopting one another process
left), an executor when it starts one; both change it under the manager's lock. The fields
below `deadline` are for a remote executor's polling.
"""

from __future__ import annotations

import subprocess
import threading
from typing import Any, Callable

from .alerts import Rule


class Live:
    def __init__(self, rules: list[Rule], plan: Callable[[list[str]], Any] | None = None,
                 cwd: str | None = None, access: str | None = None):
        self.rules = rules
        self.plan = plan      # protect paths -> sandbox.Plan; None once launched (or not ours)
        self.cwd = cwd
        self.access = access
        self.proc: subprocess.Popen | None = None  # a local run this process launched
        self.offset = 0       # bytes of <id>.log already checked against the rules
        self.partial = b""
        self.stop_reason: str | None = None
        self.term_at: float | None = None
        self.killed = False
        self.deadline: float | None = None
        self.read_lock = threading.Lock()
        self.trigger_offset = 0   # bytes of <id>.alert (manual alerts) already read
        self.resolve_offset = 0   # bytes of <id>.resolve (alerts resolved elsewhere) already read
        self.client: Any = None   # a remote executor's client (its own kind: ray_jobs.RayJobs for Ray)
        self.copied = 0           # bytes of the job's log already copied to <id>.log
        self.next_poll = 0.0      # monotonic time of the next status/log poll
        self.poll_errors = 0
        self.poll_lock = threading.Lock()  # one status/log poll of a remote job at a time
