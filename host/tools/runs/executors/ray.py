"""The ``ray`` executor: a run is one Ray job on a cluster, through its Jobs REST API.

The project is uploaded as the job's working directory, the command is its entrypoint (run
from the run's workdir), and it asks for at least one CPU so Ray queues rather than
oversubscribes. The job runs outside moss's sandbox, so this executor needs access ``full``.
Its status and driver log are asked for every ``RAY_POLL`` s (backing off while the cluster
does not answer); what the log gained is appended to ``<id>.log``, the one place metrics come
back from the cluster. A Ray job outlives moss by nature: the next moss process adopts it.
The HTTP client is moss.tools.ray_jobs.
"""

from __future__ import annotations

import os
import shlex
import time

from ....errors import MossError
from ..live import Live
from ..store import TERMINAL
from .base import Executor, StartRequest

RAY_POLL = 0.5        # seconds between status and log requests for one Ray job
RAY_STOP_WAIT = 10.0  # Ray's own grace: SIGTERM, then SIGKILL after 3 s (RAY_JOB_STOP_WAIT_TIME_S)


class RayExecutor(Executor):
    """Ray jobs on the cluster at a dashboard address ([agent.wild] ray_address or $RAY_ADDRESS)."""

    name = "ray"
    remote = True

    def __init__(self, runs):
        super().__init__(runs)
        self._clients: dict = {}

    def client(self, address: str):
        """The Jobs API client of the cluster at `address` (one per address and manager)."""
        from ....tools.ray_jobs import RayJobs

        client = self._clients.get(address)
        if client is None:
            client = self._clients[address] = RayJobs(address)
        return client

    def start(self, req: StartRequest) -> dict:
        """Submit one Ray job for the run: the project as its working directory, the command
        as its entrypoint (from `wd`), at least one CPU so Ray queues rather than oversubscribes."""
        from ....tools.ray_jobs import resolve_address

        m = self.runs
        if req.access != "full":
            raise MossError("the ray executor runs each command as a Ray job on the cluster, outside moss's "
                            f"sandbox, so it needs access full (the session has {req.access}): pass --allow-full "
                            "or set [agent] allow_full = true in your user config", kind="denied")
        if not req.allow_full:
            raise MossError("the ray executor needs full access, which is not allowed: pass --allow-full",
                            kind="denied")
        res = dict(req.resources or {})
        unknown = sorted(set(res) - {"num_cpus", "num_gpus"})
        if unknown:
            raise MossError(f"runs.start: unknown resource(s) {', '.join(map(str, unknown))}; known: num_cpus, "
                            "num_gpus", kind="usage")
        try:
            cpus = max(1.0, float(res.get("num_cpus") or 1))
            gpus = float(res.get("num_gpus") or 0)
        except (TypeError, ValueError):
            raise MossError("runs.start: num_cpus and num_gpus must be numbers", kind="usage") from None
        cpus, gpus = (int(x) if float(x).is_integer() else x for x in (cpus, gpus))
        addr = resolve_address(req.address)
        client = self.client(addr)
        rel_wd = os.path.relpath(req.wd, req.root)
        entry = req.cmd if rel_wd == "." else f"cd {shlex.quote(rel_wd)} && {req.cmd}"
        rid = req.rid
        sid = f"moss-{rid}"
        rec = m.new_record(req, sandbox="ray", executor="ray", detached=True,
                           results=req.env.get("MOSS_RESULTS_DIR"),
                           ray={"address": addr, "submission_id": sid, "num_cpus": cpus, "num_gpus": gpus})
        with m.lock:
            if m.closed:
                raise MossError("runs.start: moss is shutting down", kind="usage")
        m.store.ensure_dir()
        # submitted before it is recorded: a run that could not be submitted does not exist
        uri = client.upload_project(req.root)
        rec["ray"]["working_dir"] = uri
        env_vars = {k: v for k, v in req.env.items() if v is not None}
        metadata = {"moss_run_id": rid, "moss_run_name": rec["name"], "moss_project": str(req.root)}
        client.submit(entry, sid, runtime_env={"working_dir": uri, "env_vars": env_vars}, metadata=metadata,
                      num_cpus=cpus, num_gpus=gpus or None)
        with m.lock:
            live = Live(req.rules)
            live.client = client
            m.watch(rec, live)
            m.store.append(rid, "log", b"")
            m.log("run_submit", {"run": rid, "name": rec["name"], "cmd": req.cmd, "executor": "ray",
                                 "submission_id": sid, "address": addr, "num_cpus": cpus, "num_gpus": gpus})
            return m.public(rec)

    # ---- watching ----------------------------------------------------------------------------
    def settle(self, rec: dict) -> None:
        self.runs.adopt(rec)  # a Ray job outlives moss: watch it again, wherever it got to

    def attach(self, rec: dict, live) -> None:
        live.client = self.client((rec.get("ray") or {}).get("address") or "")
        live.copied = live.offset

    def outlives_moss(self, rec: dict) -> bool:
        return True

    def logs(self, rid: str) -> None:
        m = self.runs
        rec, live = m.run(rid)
        data = live.client.logs(rec["ray"]["submission_id"]).encode("utf-8", "replace")
        if len(data) > live.copied:
            m.store.append(rid, "log", data[live.copied:])
            live.copied = len(data)

    def status(self, rid: str, *, force: bool = False) -> None:
        with self.runs.run(rid)[1].poll_lock:  # one status/log poll of a job at a time
            self._poll(rid, force)

    def _poll(self, rid: str, force: bool) -> None:
        from ....tools.ray_jobs import RAY_TERMINAL, STATUS

        m = self.runs
        rec, live = m.run(rid)
        if rec["status"] in TERMINAL:
            return
        now = time.monotonic()
        if not force and now < live.next_poll:
            return
        live.next_poll = now + RAY_POLL
        sid = rec["ray"]["submission_id"]
        try:
            info = live.client.status(sid)
            self.logs(rid)
            live.poll_errors = 0
        except MossError as e:
            self._poll_failed(rid, rec, live, e, now)
            return
        ray_status = str(info.get("status") or "")
        status = STATUS.get(ray_status)
        m.drain(rid, final=ray_status in RAY_TERMINAL)
        with m.lock:
            if rec["status"] in TERMINAL:
                return
            if status == "running" and rec["status"] == "queued":
                start = info.get("start_time")
                rec["started_at"] = round(start / 1000, 3) if isinstance(start, (int, float)) and start else m.now()
                if rec.get("timeout"):
                    live.deadline = time.monotonic() + float(rec["timeout"])
                m.set_status(rec, "running")
                m.log("run_start", {"run": rid, "name": rec["name"], "cmd": rec["cmd"], "executor": "ray",
                                    "submission_id": sid, "address": rec["ray"]["address"]})
            elif ray_status in RAY_TERMINAL:
                self._ended(rid, rec, live, info, status)
                return
            if live.deadline is not None and live.term_at is None and time.monotonic() >= live.deadline:
                live.stop_reason = f"timeout after {rec.get('timeout'):g} s"
                live.term_at = time.monotonic()
        if live.term_at is not None and not live.killed:
            live.killed = True  # one stop request; Ray escalates to SIGKILL itself
            try:
                live.client.stop(sid)
            except MossError as e:
                live.killed = False
                m.log("run_monitor_error", {"run": rid, "error": f"stop: {e.message}"})

    def _poll_failed(self, rid: str, rec: dict, live: Live, e: MossError, now: float) -> None:
        """A status poll that failed: a job the cluster forgot fails the run; otherwise the
        next poll backs off (and the first, tenth and every hundredth failure is logged)."""
        m = self.runs
        live.poll_errors += 1
        if e.kind == "not_found":
            m.drain(rid, final=True)
            with m.lock:
                m.set_status(rec, "failed", error=f"lost: the Ray job {rec['ray']['submission_id']} is gone "
                                                  f"from the cluster at {rec['ray']['address']}")
            return
        if live.poll_errors in (1, 10) or live.poll_errors % 100 == 0:
            m.log("run_monitor_error", {"run": rid, "error": e.message, "tries": live.poll_errors})
        live.next_poll = now + min(30.0, RAY_POLL * (2 ** min(live.poll_errors, 6)))

    def _ended(self, rid: str, rec: dict, live: Live, info: dict, status: str | None) -> None:
        """The run's last status from its job's (under the manager's lock): stopped (by moss,
        or on the cluster), finished, or failed with Ray's message."""
        m = self.runs
        code = info.get("driver_exit_code")
        code = code if isinstance(code, int) else None
        if not rec.get("started_at"):
            start = info.get("start_time")
            rec["started_at"] = round(start / 1000, 3) if isinstance(start, (int, float)) and start else None
        reason = live.stop_reason or m.store.stop_marker(rid)
        if status == "stopped" or reason:
            m.set_status(rec, "stopped", code=code, error=reason or info.get("message") or "stopped")
        elif status == "finished":
            m.set_status(rec, "finished", code=0 if code is None else code)
        else:
            m.set_status(rec, "failed", code=code, error=(info.get("message") or "the job failed")[:1000])

    # ---- stopping --------------------------------------------------------------------------
    def stop(self, rid: str, reason: str, wait: float) -> dict:
        """The cluster's stop (SIGTERM, then Ray's own SIGKILL); waits up to RAY_STOP_WAIT s
        for the job to end, whatever `wait` says (Ray's grace is longer than moss's)."""
        m = self.runs
        rec, live = m.run(rid)
        if live.stop_reason is None:
            live.stop_reason = reason
        live.term_at = live.term_at or time.monotonic()
        live.killed = True
        live.client.stop(rec["ray"]["submission_id"])
        end = time.monotonic() + RAY_STOP_WAIT
        while time.monotonic() < end and rec["status"] not in TERMINAL:
            self.status(rid, force=True)
            if rec["status"] not in TERMINAL:
                time.sleep(0.2)
        return m.public(rec)

    def stop_elsewhere(self, rec: dict) -> None:
        self.client(rec["ray"]["address"]).stop(rec["ray"]["submission_id"])
