"""The ``local`` executor: a run is ``sh -c CMD`` in its own process group on this machine.

It runs under the session's access level (bubblewrap for ``edit``, plain for ``full``; see
moss.tools.sandbox) with the scrubbed environment every command gets, stdout and stderr
going straight to ``<id>.log``. At most ``max_parallel`` of them run at once (0: no limit);
the others wait as ``queued`` and start, in order, as slots free.

A run dies with the moss process that started it (SIGTERM to its group, SIGKILL after
``KILL_GRACE`` s) unless started with ``detach=True``: then a shell outside the sandbox waits
for the command and writes its exit code to ``<id>.exit``, and the next moss process that
opens the runs folder adopts it (tails its log, notices its end by its pid and start time).

Below ``full``, git metadata is off limits to runs as to shell commands: bound read-only at
launch, and checked while edit-level runs go and when each ends (the manager does both; see
moss.tools.gitguard).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

from ....errors import MossError
from ....tools import gitguard, procs
from ....tools.sandbox import SHELL, command_plan
from ..live import Live
from .base import Executor, StartRequest

KILL_GRACE = 2.0  # SIGTERM -> SIGKILL

_proc_start = procs.start_time  # the kernel's start time of a pid (to tell a reused pid)
_alive = procs.alive_since


class LocalExecutor(Executor):
    """Process groups on this machine, sandboxed by access level, queued by max_parallel."""

    name = "local"
    remote = False

    def start(self, req: StartRequest) -> dict:
        m = self.runs

        def plan(protect: list[str]):
            return command_plan(req.cmd, access=req.access, root=str(req.root), cwd=str(req.wd),
                                allow_full=req.allow_full, unsandboxed_ok=req.unsandboxed_ok, env=req.env,
                                setup=req.setup, protect=protect)

        sandbox = plan([]).sandbox  # refuses now (kind "denied") rather than at launch
        rec = m.new_record(req, sandbox=sandbox, detached=bool(req.detach), executor="local",
                           results=req.env.get("MOSS_RESULTS_DIR"))
        live = Live(req.rules, plan=plan, cwd=str(req.wd), access=req.access if sandbox != "bwrap-ro" else None)
        with m.lock:
            if m.closed:
                raise MossError("runs.start: moss is shutting down", kind="usage")
            m.watch(rec, live)
            self.start_queued()
            return m.public(rec)

    # ---- the queue -------------------------------------------------------------------------
    def each_tick(self) -> None:
        self.start_queued()

    def start_queued(self) -> None:
        """Launch queued runs of this process, oldest first, while max_parallel allows (lock held)."""
        m = self.runs
        mine = m.watched_by(self)
        running = sum(1 for rec, _ in mine if rec["status"] == "running")
        for rec, live in mine:
            if rec["status"] != "queued" or live.plan is None:
                continue
            if m.max_parallel and running >= m.max_parallel:
                return
            self._launch(rec["id"])
            running += 1

    def _launch(self, rid: str) -> None:
        m = self.runs
        rec, live = m.run(rid)
        m.store.ensure_dir()
        protect: list[str] = []
        if live.access == "edit":
            notes, protect = gitguard.guard_for(m.root).before()
            m.git_notes(notes, [rid])
        make, live.plan = live.plan, None
        assert make is not None and live.cwd is not None  # start() set both: only its runs are launched
        try:
            plan = make(protect)
        except MossError as e:
            m.set_status(rec, "failed", error=f"could not start: {e}")
            return
        try:
            fd = m.store.open_log(rid)
            try:
                wrap, extra = None, None
                if rec.get("detached"):
                    # A shell outside the sandbox waits for the command and records its exit
                    # code, so a later moss process can tell finished from failed.
                    extra = {"MOSS_RUN_EXIT": str(m.store.path(rid, "exit"))}
                    wrap = lambda argv: [SHELL, "-c", '"$@"; c=$?; echo "$c" > "$MOSS_RUN_EXIT"; exit "$c"',  # noqa: E731
                                         "moss-run", *argv]
                proc = procs.start(plan, cwd=live.cwd, stdout=fd, stderr=subprocess.STDOUT, argv_wrap=wrap,
                                   env_extra=extra)
            finally:
                os.close(fd)
        except OSError as e:
            m.set_status(rec, "failed", error=f"could not start: {e}")
            return
        live.proc = proc
        rec["pid"], rec["pid_start"] = proc.pid, _proc_start(proc.pid)
        rec["started_at"] = m.now()
        if rec.get("timeout"):
            live.deadline = time.monotonic() + float(rec["timeout"])
        m.set_status(rec, "running")
        m.log("run_start", {"run": rid, "name": rec["name"], "cmd": rec["cmd"], "sandbox": rec["sandbox"],
                            "workdir": rec["workdir"], "pid": proc.pid})

    # ---- watching ----------------------------------------------------------------------------
    def status(self, rid: str, *, force: bool = False) -> None:
        m = self.runs
        rec, live = m.run(rid)
        if rec["status"] != "running":
            return  # a queued run waits for a slot (start_queued)
        m.drain(rid, final=False)
        now = time.monotonic()
        with m.lock:
            if live.deadline is not None and live.term_at is None and now >= live.deadline:
                self._signal_stop(rid, f"timeout after {rec.get('timeout'):g} s")
            if live.term_at is not None and not live.killed and now >= live.term_at + KILL_GRACE:
                live.killed = True
                procs.signal_group(rec.get("pid"), signal.SIGKILL)
        code = self._poll(rid)
        if code is not False:
            m.finish(rid, code)

    def _poll(self, rid: str):
        """The run's exit code, None when it ended with an unknown one, False while it runs."""
        m = self.runs
        rec, live = m.run(rid)
        if live.proc is not None:
            code = live.proc.poll()
            return False if code is None else code
        if _alive(rec.get("pid"), rec.get("pid_start")):
            return False
        return m.store.exit_code(rid)

    def settle(self, rec: dict) -> None:
        m = self.runs
        if rec["status"] == "queued":
            m.set_status(rec, "stopped", error="moss exited before the run could start", emit=False)
            return
        pid, start = rec.get("pid"), rec.get("pid_start")
        if _alive(pid, start):
            if rec.get("detached"):
                m.adopt(rec)
                return
            # An attached run whose moss died without cleaning up (killed hard): runs do
            # not outlive moss unless detached, so finish the job.
            procs.signal_group(pid, signal.SIGKILL)
            m.set_status(rec, "stopped", error="stopped: the moss process that started it had ended", emit=False)
            return
        code = m.store.exit_code(rec["id"])
        if code is not None:
            m.set_status(rec, "finished" if code == 0 else "failed", code=code, emit=False)
        else:
            m.set_status(rec, "failed", error="lost: the run ended while no moss process watched it "
                          "(exit code unknown)", emit=False)

    def outlives_moss(self, rec: dict) -> bool:
        return bool(rec.get("detached")) and rec["status"] == "running"

    # ---- stopping --------------------------------------------------------------------------
    def _signal_stop(self, rid: str, reason: str) -> None:
        m = self.runs
        if not m.watches(rid):
            return
        rec, live = m.run(rid)
        if live.stop_reason is None:
            live.stop_reason = reason
        if live.term_at is None:
            live.term_at = time.monotonic()
            procs.signal_group(rec.get("pid"), signal.SIGTERM)

    def stop(self, rid: str, reason: str, wait: float) -> dict:
        """SIGTERM to the run's group, SIGKILL after KILL_GRACE s; waits up to `wait` s."""
        m = self.runs
        with m.lock:
            rec, live = m.run(rid)
            self._signal_stop(rid, reason)
        end = time.monotonic() + wait
        while time.monotonic() < end:
            if live.proc is not None:
                try:
                    code = live.proc.wait(timeout=0.05)
                except subprocess.TimeoutExpired:
                    code = None
                if code is not None:
                    m.finish(rid, code)
                    break
            else:
                if not _alive(rec.get("pid"), rec.get("pid_start")):
                    m.finish(rid, m.store.exit_code(rid))
                    break
                time.sleep(0.05)
            if time.monotonic() >= (live.term_at or 0) + KILL_GRACE and not live.killed:
                live.killed = True
                procs.signal_group(rec.get("pid"), signal.SIGKILL)
        with m.lock:
            return m.public(rec)

    def stop_elsewhere(self, rec: dict) -> None:
        procs.signal_group(rec.get("pid"), signal.SIGTERM)

    def shutdown(self, rids: list[str]) -> None:
        """moss exits: SIGTERM to every group at once, SIGKILL to those left after KILL_GRACE s."""
        m = self.runs
        with m.lock:
            for rid in rids:
                self._signal_stop(rid, "stopped: moss exited")
        end = time.monotonic() + KILL_GRACE
        pending = list(rids)
        while pending:
            for rid in list(pending):
                rec, live = m.run(rid)
                alive = live.proc.poll() is None if live.proc is not None else \
                    _alive(rec.get("pid"), rec.get("pid_start"))
                if not alive:
                    pending.remove(rid)
            if not pending:
                break
            if time.monotonic() >= end:
                for rid in pending:
                    rec, live = m.run(rid)
                    procs.signal_group(rec.get("pid"), signal.SIGKILL)
                    if live.proc is not None:
                        try:
                            live.proc.wait(timeout=1)
                        except subprocess.TimeoutExpired:
                            pass
                break
            time.sleep(0.02)
        for rid in rids:
            _rec, live = m.run(rid)
            code = live.proc.poll() if live.proc is not None else None
            try:
                m.finish(rid, code)
            except Exception:
                pass
