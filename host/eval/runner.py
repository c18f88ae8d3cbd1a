"""Attempts in parallel under one budget.

``Runner`` starts ``jobs`` worker threads; each takes the next attempt, hands it to the
executor and, when it ends, adds what it spent to the eval's total and puts its row on a
queue that ``next()`` (the policy's loop, in the main thread) reads from. The budget
(``max_cost`` USD, ``max_tokens``) is checked before each attempt starts and after each ends:
once it is reached no attempt starts, and the running ones are stopped cleanly (SIGINT: the
agent ends ``interrupted`` with its checkpoint) and reported with reason ``budget``. Each
attempt is also given what is left of the budget as its own ``--max-cost``/``--max-tokens``,
so no single attempt can spend past it (or past its own ``max_cost``/``max_tokens``, when its
spec has them: the smaller holds).

``retries``: an attempt whose row says ``infra_error`` (the copy, the agent process or the
executor failed; never the agent's own outcome) is run again, at once and by the same worker,
up to that many times; the executor discards the failed try (its copy). The row that stays
says how many ``tries`` it took and, in ``retried``, why each earlier one failed; one that
still fails is kept as the infrastructure error it is.
"""

from __future__ import annotations

import queue
import threading
from collections import deque

from . import attempt as att

STOP_WAIT = 30.0  # seconds a stop waits for running attempts to end


class Runner:
    def __init__(self, specs: list[att.Spec], executor, *, jobs: int, max_cost: float | None = None,
                 max_tokens: int | None = None, spent_cost: float = 0.0, spent_tokens: int = 0, progress=None,
                 retries: int = 0):
        self.pending = deque(specs)
        self.executor = executor
        self.jobs = max(1, int(jobs))
        self.max_cost, self.max_tokens = max_cost, max_tokens
        self.spent_cost, self.spent_tokens = spent_cost, spent_tokens
        self.progress = progress
        self.retries = max(0, int(retries))
        self.stop_reason: str | None = None
        self.running: dict[str, att.Control] = {}
        self._results: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self.peak = 0  # the most attempts that ran at once

    # ---- the budget -------------------------------------------------------------------------
    def _over(self) -> bool:
        return ((self.max_cost is not None and self.spent_cost >= self.max_cost)
                or (self.max_tokens is not None and self.spent_tokens >= self.max_tokens))

    def _share(self, spec: att.Spec) -> None:
        """What is left of the budget becomes the attempt's own limit (its own, when smaller, stays)."""
        if self.max_cost is not None:
            left = max(self.max_cost - self.spent_cost, 0.0)
            spec.max_cost = left if spec.max_cost is None else min(spec.max_cost, left)
        if self.max_tokens is not None:
            left_t = max(self.max_tokens - self.spent_tokens, 1)
            spec.max_tokens = left_t if spec.max_tokens is None else min(spec.max_tokens, left_t)

    # ---- running ----------------------------------------------------------------------------
    def start(self) -> None:
        self.executor.expect(len(self.pending))
        with self._lock:
            if self._over() and self.pending:
                self.stop_reason = "budget"
        for n in range(min(self.jobs, len(self.pending))):
            t = threading.Thread(target=self._worker, name=f"moss-eval-{n}", daemon=True)
            self._threads.append(t)
            t.start()

    def _worker(self) -> None:
        while True:
            with self._lock:
                if self.stop_reason is not None or not self.pending:
                    return
                if self._over():
                    self._stop_locked("budget")
                    return
                spec = self.pending.popleft()
                control = att.Control()
                self.running[spec.key] = control
                self.peak = max(self.peak, len(self.running))
            if self.progress is not None:
                self.progress.started(spec.key)
            failed: list[str] = []
            while True:
                with self._lock:
                    self._share(spec)
                try:
                    row = self.executor.run(spec, control)
                except Exception as e:  # a bug in an executor: this attempt is an infrastructure failure
                    row = {**att.base_row(spec), "reason": "infra_error", "detail": f"{type(e).__name__}: {e}"}
                with self._lock:
                    self.spent_tokens += int(row.get("tokens") or 0)
                    self.spent_cost += float(row.get("cost") or 0.0)
                    again = (row.get("reason") == "infra_error" and len(failed) < self.retries
                             and control.reason is None and self.stop_reason is None and not self._over())
                    if not again:  # ended: from now on a stop of what runs is not about this attempt
                        self.running.pop(spec.key, None)
                if not again:
                    if self.progress is not None:
                        self.progress.stopped(spec.key)
                    break
                failed.append(str(row.get("detail") or "infra_error"))
                self.executor.discard(row)
                if self.progress is not None:
                    self.progress.note(f"{row.get('task')}: infrastructure error ({failed[-1]}); "
                                       f"retry {len(failed)} of {self.retries}")
            row["tries"] = len(failed) + 1
            if failed:
                row["retried"] = failed
            with self._lock:
                if control.reason is not None:
                    row["reason"] = control.reason
                elif row.get("reason") == "budget":
                    pass  # the attempt's own share of the budget ran out
                if self.stop_reason is None and self._over() and (self.pending or self.running):
                    self._stop_locked("budget")  # spent: nothing more starts, what runs is stopped
            self._results.put(row)

    def next(self) -> dict | None:
        """The next attempt that ended (its raw row), or None once every worker is done."""
        while True:
            try:
                return self._results.get(timeout=0.1)
            except queue.Empty:
                if not any(t.is_alive() for t in self._threads):
                    try:
                        return self._results.get_nowait()
                    except queue.Empty:
                        return None

    def stop(self, reason: str) -> None:
        with self._lock:
            self._stop_locked(reason)

    def _stop_locked(self, reason: str) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason
        for control in list(self.running.values()):
            control.stop(reason)

    def drain(self, wait: float = STOP_WAIT) -> list[dict]:
        """After a stop: wait for the running attempts to end; their rows."""
        for t in self._threads:
            t.join(wait)
        rows = []
        while True:
            try:
                rows.append(self._results.get_nowait())
            except queue.Empty:
                return rows

    @property
    def not_started(self) -> int:
        return len(self.pending)
