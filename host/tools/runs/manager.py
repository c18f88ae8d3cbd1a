"""The RunManager: the runs of one project as one moss process sees them.

It owns what is the same for every executor: starting through the executor a run names
(moss.tools.runs.executors), the records (moss.tools.runs.store), alerts (rules from
moss.tools.runs.alerts checked on each new log line, and alerts raised by people and
scripts), the event queue ``wait()`` hands out, and the monitor thread.

Statuses: ``queued`` (waiting for a slot, or for a cluster to schedule it) -> ``running`` ->
``finished`` (exit 0) | ``failed`` (non-zero exit, could not start, or lost) | ``stopped``
(stopped on request, by a ``stop`` alert choice, its timeout, or because moss exited).

One monitor thread per process asks each watched run's executor for its status (every
0.1 s), checks alert rules on each new log line, and notices ends. Every change becomes an
event on an in-process queue that ``wait()`` hands out one at a time, alerts first; ``wait``
sleeps on a condition variable (no busy loop) and checks ``cancel()`` every 0.25 s, and a
Ctrl-C (KeyboardInterrupt in the main thread) ends it at once.

A run this process started dies with it (``close()``, also registered with atexit) unless
its executor says it outlives moss (a detached local run, a Ray job); the next moss process
that opens the runs folder adopts such a run. A record left by a moss process that ended
is settled by its executor: adopted, or closed with what can be known of its end.

Below ``full``, git metadata is off limits to runs as to shell commands: checked while
edit-level runs go (every ``GIT_CHECK`` s) and when each ends; what appeared is undone, and
every finding lands in the run's record (``git``), its next event, the session log and
stderr (see moss.tools.gitguard).
"""

from __future__ import annotations

import atexit
import builtins
import json
import os
import threading
import time
import uuid
from collections import deque
from pathlib import Path
from typing import Any, Callable

from ...errors import MossError
from ...tools import gitguard, procs
from ...tools.confine import confine
from ...tools.runs import executors
from ...tools.runs.alerts import (DEFAULT_CHOICES, SEVERITIES, SOURCES, STOP_CHOICE, Rule, check_choices,
                                    parse_rule, split_lines)
from ...tools.runs.executors.local import KILL_GRACE
from ...tools.runs.live import Live
from ...tools.runs.store import TERMINAL, RunStore
from ...tools.sandbox import Setup, check_env, check_level, require_write

__all__ = ["RunManager"]

POLL = 0.1           # monitor tick: log tailing, exit and timeout checks
CANCEL_POLL = 0.25   # how often wait() looks at cancel()
GIT_CHECK = 2.0      # seconds between git-metadata checks while edit-level runs go

_proc_start = procs.start_time  # the kernel's start time of a pid (to tell a reused pid)
_alive = procs.alive_since


def _now() -> float:
    return round(time.time(), 3)


class RunManager:
    """The runs of one project, as seen by this process. Thread-safe. What its executors may
    use of it is ``executors.Runs``, a Protocol mypy holds this class to."""

    now = staticmethod(_now)

    def __init__(self, root: Path, *, max_parallel: int = 0, log: Callable[[str, dict], None] | None = None,
                 prepare_dir: Callable[[Path], None] | None = None,
                 report: Callable[[list[str], dict], None] | None = None):
        self.root = Path(root)
        self.store = RunStore(self.root, prepare_dir=prepare_dir)
        self.max_parallel = max(0, int(max_parallel or 0))
        self._log_cb = log
        self._report_cb = report  # git-metadata findings: shown on stderr and logged by the caller
        self._git_checked = 0.0
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._events: deque = deque()
        self._runs: dict[str, dict] = {}
        self._live: dict[str, Live] = {}
        self._executors: dict[str, executors.Executor] = {}
        self._thread: threading.Thread | None = None
        self._wake = threading.Event()
        self._closed = False
        self._load()
        atexit.register(self.close)

    @property
    def dir(self) -> Path:
        """The runs folder, .moss/agent/runs."""
        return self.store.dir

    @property
    def corrupt(self) -> dict[str, str]:
        """Record files moss cannot use (relative to the project) -> why."""
        return self.store.corrupt

    # ---- for executors (executors.Runs) -------------------------------------------------------
    @property
    def lock(self) -> threading.RLock:
        """Held around every change of a record or a Live."""
        return self._lock

    @property
    def closed(self) -> bool:
        """moss is shutting down (close()): nothing new starts."""
        return self._closed

    def run(self, rid: str) -> tuple[dict, Live]:
        """The record and Live of a run this process watches (KeyError for another)."""
        return self._runs[rid], self._live[rid]

    def watches(self, rid: str) -> bool:
        return rid in self._live

    def watched_by(self, executor: executors.Executor) -> list[tuple[dict, Live]]:
        """(record, Live) of each run this process watches with `executor`, oldest first."""
        return [(self._runs[rid], live) for rid, live in list(self._live.items())
                if self._executor_of(self._runs[rid]) is executor]

    # ---- executors -------------------------------------------------------------------------
    def _executor(self, name: str) -> executors.Executor:
        ex = self._executors.get(name)
        if ex is None:
            ex = self._executors[name] = executors.executor(name)(self)
        return ex

    def _executor_of(self, rec: dict) -> executors.Executor:
        """The executor of a record; one moss does not know is treated as local, as before
        executors had names."""
        name = rec.get("executor") or "local"
        return self._executor(name if name in executors.names() else "local")

    # ---- records -------------------------------------------------------------------------
    def _save(self, rec: dict) -> None:
        self.store.save(rec)

    def new_record(self, req: executors.StartRequest, **fields) -> dict:
        """The record of a run about to be queued; `fields` are the executor's own."""
        rid, cmd = req.rid, req.cmd
        rec = {
            "id": rid, "name": req.name or (cmd if len(cmd) <= 60 else cmd[:59] + "…"), "cmd": cmd,
            "workdir": os.path.relpath(req.wd, req.root), "status": "queued", "access": req.access,
            "created_at": _now(), "started_at": None, "ended_at": None, "timeout": req.timeout,
            "log": str(Path(".moss", "agent", "runs", f"{rid}.log")), "alert_rules": [r.spec for r in req.rules],
            "meta": req.meta, "host_pid": os.getpid(), "host_start": _proc_start(os.getpid()), "alerts": [],
        }
        rec.update(fields)
        return rec

    def watch(self, rec: dict, live: Live) -> None:
        """Take a new run under watch: record it, queue its first event and have the monitor
        thread running (lock held)."""
        rid = rec["id"]
        self._runs[rid] = rec
        self._live[rid] = live
        self._save(rec)
        self._events.append({"type": "run", "id": rid, "name": rec["name"], "status": "queued", "previous": None})
        self._cond.notify_all()
        self._ensure_thread()

    def log(self, event: str, data: dict) -> None:
        if self._log_cb:
            try:
                self._log_cb(event, data)
            except Exception:
                pass

    def _load(self) -> None:
        """Read every record; settle what the processes that wrote them left behind."""
        for path in self.store.records():
            rec = self.store.read(path)
            if rec is None:
                continue
            self._runs[rec["id"]] = rec
            self._settle(rec)

    def _settle(self, rec: dict) -> None:
        """A record from another (perhaps finished) moss process: adopt, close or leave it."""
        if rec["status"] in TERMINAL:
            return
        me = os.getpid()
        host = rec.get("host_pid")
        if bool(host) and host != me and _alive(host, rec.get("host_start")):
            return  # another moss process is watching it
        self._executor_of(rec).settle(rec)

    def adopt(self, rec: dict) -> None:
        """Watch a run another (ended) moss process started. Log lines it wrote meanwhile are
        checked against the rules only when its executor copies them now (a Ray job's);
        alerts already raised stay."""
        rules = []
        for spec in rec.get("alert_rules") or []:
            try:
                rules.append(parse_rule(spec))
            except MossError:
                pass
        live = Live(rules)
        live.offset = self.store.size(rec["id"], "log")
        self._executor_of(rec).attach(rec, live)
        if rec.get("timeout") and rec.get("started_at"):
            live.deadline = time.monotonic() + max(0.0, rec["started_at"] + rec["timeout"] - time.time())
        self._live[rec["id"]] = live
        me = os.getpid()
        rec["host_pid"], rec["host_start"] = me, _proc_start(me)
        self._save(rec)
        self.log("run_adopted", {"run": rec["id"], "name": rec["name"],
                                 "executor": rec.get("executor", "local"), "status": rec["status"]})
        self._ensure_thread()

    def _refresh(self) -> None:
        """Re-read active records that another process owns (they change behind our back)."""
        for path in self.store.records():
            rid = path.stem
            if rid in self._live:
                continue
            old = self._runs.get(rid)
            if old is not None and old["status"] in TERMINAL:
                continue
            rec = self.store.read(path)
            if rec is not None:
                self._runs[rid] = rec
                self._settle(rec)

    # ---- status changes --------------------------------------------------------------------
    def set_status(self, rec: dict, status: str, *, code: int | None = None, error: str | None = None,
                   emit: bool = True) -> None:
        prev = rec["status"]
        rec["status"] = status
        if code is not None:
            rec["code"] = code
        if error:
            rec["error"] = error
        if status in TERMINAL:
            rec["ended_at"] = _now()
            if rec.get("started_at"):
                rec["duration"] = round(rec["ended_at"] - rec["started_at"], 3)
        self._save(rec)
        if emit:
            event = {"type": "run", "id": rec["id"], "name": rec["name"], "status": status, "previous": prev}
            if rec.get("code") is not None:
                event["code"] = rec["code"]
            if rec.get("git") and status in TERMINAL:
                event["git"] = list(rec["git"])
            if error:
                event["error"] = error
            self._events.append(event)
            self._cond.notify_all()
        self.log("run_status", {"run": rec["id"], "name": rec["name"], "status": status,
                                "code": rec.get("code"), "error": error})

    def finish(self, rid: str, code: int | None) -> None:
        """Record how a run ended: stopped (a reason was given), finished, or failed."""
        self.drain(rid, final=True)  # alerts from the last lines come before the run event
        if self._live[rid].access in ("edit", "read-shell") and self._runs[rid]["status"] not in TERMINAL:
            self.git_notes(gitguard.guard_for(self.root).check(), [rid])
        with self._lock:
            rec, live = self._runs[rid], self._live[rid]
            if rec["status"] in TERMINAL:
                return
            reason = live.stop_reason or self.store.stop_marker(rid)
            if reason is not None:
                self.set_status(rec, "stopped", code=code, error=reason)
            elif code == 0:
                self.set_status(rec, "finished", code=0)
            elif code is None:
                self.set_status(rec, "failed", error="the run ended; its exit code is unknown")
            else:
                self.set_status(rec, "failed", code=code)

    # ---- alerts ------------------------------------------------------------------------------
    def _raise_alert(self, rec: dict, rule: Rule, default: str, line: str) -> None:
        for a in rec["alerts"]:
            if a.get("rule") == rule.key and (rule.once or a["status"] == "pending"):
                return
        self._add_alert(rec, key=rule.key, severity=rule.severity,
                        message=f"{rule.message or default} (run {rec['name']})", choices=rule.choices,
                        line=line, source="rule")

    def _add_alert(self, rec: dict, *, key: str, severity: str, message: str, choices: list, line: str,
                   source: str, trigger: str | None = None) -> dict:
        """Record a pending alert and queue its event — unless the same message is already
        pending on this run (de-duplication across rules and sources): then that one is returned."""
        rid = rec["id"]
        for a in rec["alerts"]:
            if a["status"] == "pending" and a.get("message") == message:
                if trigger:
                    a.setdefault("triggers", []).append(trigger)
                    self._save(rec)
                return dict(a, duplicate=True)
        alert = {
            "id": uuid.uuid4().hex[:12], "run_id": rid, "run_name": rec["name"], "rule": key,
            "severity": severity, "message": message, "source": source,
            "choices": list(choices), "status": "pending", "line": line[:500], "created_at": _now(),
        }
        if trigger:
            alert["triggers"] = [trigger]
        rec["alerts"].append(alert)
        self._save(rec)
        self._events.append({"type": "alert", **{k: alert[k] for k in (
            "id", "run_id", "run_name", "severity", "message", "choices", "status", "line")}, "alert_id": alert["id"]})
        self._cond.notify_all()
        self.log("run_alert", {"run": rid, "alert": alert["id"], "severity": alert["severity"],
                               "message": alert["message"], "source": source})
        return dict(alert)

    def alert(self, rid: str, message: str, *, severity: str = "warning", choices: list | None = None,
              source: str = "script") -> dict:
        """Raise an alert on a run by hand (`moss runs alert`, moss.runs.alert, the LLM judge).
        A run that another live moss process watches gets it through its trigger file
        (``<id>.alert``), which that process reads on its next tick; otherwise it is recorded now.
        Returns the alert (``duplicate=true`` when the same message was already pending), or
        ``{queued=true, run_id, message}`` when it went to the trigger file."""
        if not isinstance(message, str) or not message.strip():
            raise MossError("runs.alert: a message is required", kind="usage")
        if severity not in SEVERITIES:
            raise MossError(f"runs.alert: severity must be one of {', '.join(SEVERITIES)}, got {severity!r}",
                            kind="usage")
        if source not in SOURCES:
            raise MossError(f"runs.alert: source must be one of {', '.join(SOURCES)}", kind="usage")
        if choices is not None and not check_choices(choices):
            raise MossError("runs.alert: choices must be a non-empty list of strings", kind="usage")
        message = " ".join(message.split())[:2000]
        with self._lock:
            rec = self._get(rid)
            owner = rec.get("host_pid")
            elsewhere = (rid not in self._live and rec["status"] not in TERMINAL and bool(owner)
                         and owner != os.getpid() and _alive(owner, rec.get("host_start")))
            if not elsewhere:
                return self._add_alert(rec, key=f"{source}: {message}", severity=severity,
                                       message=f"{message} (run {rec['name']})",
                                       choices=choices or DEFAULT_CHOICES, line="", source=source)
        entry = {"id": uuid.uuid4().hex[:12], "message": message, "severity": severity, "source": source,
                 "choices": choices, "at": _now()}
        self.store.append(rid, "alert", json.dumps(entry) + "\n")
        return {"queued": True, "run_id": rid, "message": message, "severity": severity}

    def _read_triggers(self, rid: str) -> None:
        """Manual alerts appended to ``<id>.alert`` (a JSON object or plain text per line)."""
        live = self._live[rid]
        data = self.store.read_from(rid, "alert", live.trigger_offset)
        end = data.rfind(b"\n")
        if end < 0:
            return
        pos = live.trigger_offset
        live.trigger_offset += end + 1
        with self._lock:
            rec = self._runs[rid]
            seen = {t for a in rec["alerts"] for t in a.get("triggers", [])}
            for raw in data[:end].split(b"\n"):
                line_at, pos = pos, pos + len(raw) + 1
                text = raw.decode("utf-8", "replace").strip()
                if not text:
                    continue
                try:
                    entry = json.loads(text)
                    if not isinstance(entry, dict):
                        raise ValueError
                except ValueError:
                    entry = {"message": text}
                tid = str(entry.get("id") or f"byte{line_at}")
                message = " ".join(str(entry.get("message") or "").split())[:2000]
                if tid in seen or not message:
                    continue
                severity = str(entry["severity"]) if entry.get("severity") in SEVERITIES else "warning"
                offered = entry.get("choices")
                choices = offered if check_choices(offered) else DEFAULT_CHOICES
                source = str(entry["source"]) if entry.get("source") in SOURCES else "manual"
                self._add_alert(rec, key=f"{source}: {message}", severity=severity,
                                message=f"{message} (run {rec['name']})", choices=choices, line="",
                                source=source, trigger=tid)

    def _read_resolutions(self, rid: str) -> None:
        """Alerts of this run resolved by another process (`moss ui`'s buttons), one JSON line
        each in ``<id>.resolve``: resolved here, by the process that owns the record, so the
        resolution is not lost to this process's next save; a stop choice stops the run
        without waiting (this is the monitor thread, which notices the end)."""
        live = self._live[rid]
        data = self.store.read_from(rid, "resolve", live.resolve_offset)
        end = data.rfind(b"\n")
        if end < 0:
            return
        live.resolve_offset += end + 1
        for raw in data[:end].split(b"\n"):
            try:
                entry = json.loads(raw)
                alert_id, choice = entry["alert_id"], entry["choice"]
            except (ValueError, TypeError, KeyError):
                continue
            try:
                self._resolve(alert_id, choice, stop_wait=0.0)
            except MossError as e:  # already resolved here, or a choice it does not offer
                self.log("run_monitor_error", {"run": rid, "error": f"resolve from elsewhere: {e.message}"})

    # ---- the monitor thread ------------------------------------------------------------------
    def _ensure_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._monitor, name="moss-runs", daemon=True)
            self._thread.start()
        self._wake.set()

    def _monitor(self) -> None:
        while True:
            with self._lock:
                if self._closed:
                    return
                watched = [rid for rid in self._live if self._runs[rid]["status"] in ("running", "queued")]
            if not watched:
                self._wake.wait()
                self._wake.clear()
                continue
            for rid in watched:
                try:
                    self._tick(rid)
                except Exception as e:  # never let one run's trouble stop the watching
                    self.log("run_monitor_error", {"run": rid, "error": f"{type(e).__name__}: {e}"})
            with self._lock:
                for ex in list(self._executors.values()):
                    ex.each_tick()
            try:
                self._check_git_while_running()
            except Exception as e:
                self.log("run_monitor_error", {"error": f"git check: {type(e).__name__}: {e}"})
            self._wake.wait(POLL)
            self._wake.clear()

    def _tick(self, rid: str) -> None:
        self._read_triggers(rid)
        self._read_resolutions(rid)
        self._executor_of(self._runs[rid]).status(rid)

    def drain(self, rid: str, final: bool) -> None:
        """Read what the run wrote since last time; check each complete line against the rules."""
        live = self._live[rid]
        with live.read_lock:
            data = self.store.read_from(rid, "log", live.offset)
            live.offset += len(data)
            lines, live.partial = split_lines(live.partial, data, final)
            if not live.rules or not lines:
                return
            with self._lock:
                rec = self._runs[rid]
                for raw in lines:
                    line = raw.decode("utf-8", "replace").rstrip("\r")
                    for rule in live.rules:
                        hit = rule.check(line)
                        if hit:
                            self._raise_alert(rec, rule, hit[0], line)

    def sync(self) -> None:
        """Bring every watched remote run up to date now (status and log), e.g. before a listing."""
        with self._lock:
            rids = [rid for rid in self._live if self._executor_of(self._runs[rid]).remote]
        for rid in rids:
            try:
                self._executor_of(self._runs[rid]).status(rid, force=True)
            except Exception as e:
                self.log("run_monitor_error", {"run": rid, "error": f"{type(e).__name__}: {e}"})

    # ---- git metadata ----------------------------------------------------------------------------
    def git_notes(self, notes: list[str], rids: list[str]) -> None:
        """Record git-metadata findings on the runs concerned; report them at once."""
        if not notes:
            return
        with self._lock:
            for rid in rids:
                rec = self._runs.get(rid)
                if rec is not None:
                    rec.setdefault("git", []).extend(notes)
                    self._save(rec)
        self.log("git_metadata", {"runs": rids, "notes": notes})
        if self._report_cb:
            try:
                self._report_cb(notes, {"runs": rids})
            except Exception:
                pass

    def _check_git_while_running(self) -> None:
        """Between launch and end, an edit-level run may create git metadata: look now and then."""
        now = time.monotonic()
        if now - self._git_checked < GIT_CHECK:
            return
        with self._lock:
            rids = [rid for rid, live in self._live.items()
                    if live.access in ("edit", "read-shell") and live.proc is not None
                    and self._runs[rid]["status"] == "running"]
        if not rids:
            return
        self._git_checked = now
        self.git_notes(gitguard.guard_for(self.root).check(), rids)

    # ---- the API -------------------------------------------------------------------------------
    def start(self, cmd: str, *, access: str, allow_full: bool = False, unsandboxed_ok: bool = False,
              name: str | None = None, workdir: str | None = None, alerts: list | None = None,
              detach: bool = False, timeout: float | None = None, meta: Any = None,
              env: dict | None = None, setup: Setup | None = None, executor: str = "local",
              address: str | None = None, resources: dict | None = None, results: str | None = None) -> dict:
        """Start (or queue) a run with the executor called `executor` (see
        moss.tools.runs.executors); `env` is set inside the sandbox over the scrubbed
        environment, `setup` is what the user's own config adds (see moss.tools.sandbox).
        `executor="ray"` submits it as a Ray job to the cluster at `address` (else
        $RAY_ADDRESS) with `resources` ({num_cpus, num_gpus}); `results` is where the run
        should leave the files it returns (MOSS_RESULTS_DIR = RESULTS/<run id>)."""
        if not isinstance(cmd, str) or not cmd.strip():
            raise MossError("runs.start: cmd must be a non-empty command string", kind="usage")
        check_level(access)
        if executor not in executors.names():
            executors.executor(executor)  # refuses, naming the executors there are
        ex = self._executor(executor)
        extra = check_env(env, "runs.start")
        require_write(access, "starting a run (runs write files)")
        if results is not None and (not isinstance(results, str) or not results.strip()):
            raise MossError("runs.start: results must be a path or URI string", kind="usage")
        if timeout is not None and not (isinstance(timeout, (int, float)) and timeout > 0):
            raise MossError(f"runs.start: timeout must be a positive number of seconds, got {timeout!r}",
                            kind="usage")
        rules = [parse_rule(r) for r in (alerts or [])]
        real_root = confine(self.root, ".", must_exist=True)
        wd = confine(real_root, workdir if workdir not in (None, "") else ".", must_exist=True)
        if not wd.is_dir():
            raise MossError(f"runs.start: workdir {workdir!r} is not a directory", kind="usage")
        rid = uuid.uuid4().hex[:12]
        extra = {"PYTHONUNBUFFERED": "1", "MOSS_RUN_ID": rid, **extra}
        if results:
            extra["MOSS_RESULTS_DIR"] = results.rstrip("/") + "/" + rid
        req = executors.StartRequest(rid=rid, cmd=cmd, access=access, root=real_root, wd=wd, rules=rules, env=extra,
                                     allow_full=allow_full, unsandboxed_ok=unsandboxed_ok, name=name,
                                     detach=detach, timeout=timeout, meta=meta, setup=setup, address=address,
                                     resources=resources, results=results)
        return ex.start(req)

    def public(self, rec: dict) -> dict:
        out = {k: v for k, v in rec.items() if k not in ("pid_start", "host_start", "host_pid")}
        out["alerts"] = [dict(a) for a in rec["alerts"]]
        out.setdefault("executor", "local")
        return out

    def _get(self, rid: str) -> dict:
        if not isinstance(rid, str):
            raise MossError("runs: a run id string is required", kind="usage")
        rec = self._runs.get(rid)
        if rec is None:
            self._refresh()
            rec = self._runs.get(rid)
        if rec is None:
            raise MossError(f"no run with id {rid!r}", kind="not_found")
        return rec

    def list(self) -> list[dict]:
        with self._lock:
            self._refresh()
            recs = sorted(self._runs.values(), key=lambda r: (r.get("created_at") or 0, r["id"]))
            return [self.public(r) for r in recs]

    def status(self, rid: str) -> dict:
        with self._lock:
            return self.public(self._get(rid))

    def log_tail(self, rid: str, chars: int = 2000) -> str:
        with self._lock:
            self._get(rid)
        return self.store.tail(rid, chars)

    def stop(self, rid: str, reason: str = "stopped on request", wait: float = KILL_GRACE + 1.0) -> dict:
        """Stop a run (SIGTERM to its group, SIGKILL after 2 s; a Ray job through the cluster's
        stop); returns its record once it ended."""
        with self._lock:
            rec = self._get(rid)
            if rec["status"] in TERMINAL:
                return self.public(rec)
            ex = self._executor_of(rec)
            live = self._live.get(rid)
            if live is None or not ex.remote:
                if rec["status"] == "queued" and not ex.remote:
                    self.set_status(rec, "stopped", error=reason)
                    return self.public(rec)
                if live is None:  # owned by another live moss process: it records the end
                    self.store.write(rid, "stop", reason)
                    ex.stop_elsewhere(rec)
                    return self.public(rec)
        return ex.stop(rid, reason, wait)

    def wait(self, timeout: float | None = None, cancel: Callable[[], bool] | None = None) -> dict | None:
        """The next event, alerts first; None once `timeout` seconds pass without one."""
        end = None if timeout is None else time.monotonic() + max(0.0, float(timeout))
        with self._cond:
            while True:
                if self._events:
                    for i, ev in enumerate(self._events):
                        if ev["type"] == "alert":
                            del self._events[i]
                            return ev
                    return self._events.popleft()
                if cancel is not None and cancel():
                    raise MossError("interrupted", kind="interrupted")
                step = CANCEL_POLL
                if end is not None:
                    remaining = end - time.monotonic()
                    if remaining <= 0:
                        return None
                    step = min(step, remaining)
                self._cond.wait(step)

    def alerts(self, status: str | None = None, run_id: str | None = None) -> builtins.list[dict]:  # `list` is a method here
        with self._lock:
            self._refresh()
            out = []
            for rec in self._runs.values():
                if run_id is not None and rec["id"] != run_id:
                    continue
                for a in rec["alerts"]:
                    if status is None or a["status"] == status:
                        out.append(dict(a))
            out.sort(key=lambda a: (a.get("created_at") or 0, a["id"]))
            return out

    def resolve(self, alert_id: str, choice: str) -> dict:
        """Resolve a pending alert with one of its choices; a stop/kill/terminate choice stops the run.
        An alert of a run another live moss process watches (a Wild Loop's) is handed to that
        process through ``<id>.resolve``, as a manual alert is through ``<id>.alert``: it owns
        the record and resolves it on its next tick. Returns ``{queued=true, ...}`` then."""
        return self._resolve(alert_id, choice, stop_wait=KILL_GRACE + 1.0, hand_over=True)

    def _resolve(self, alert_id: str, choice: str, *, stop_wait: float, hand_over: bool = False) -> dict:
        if not isinstance(alert_id, str) or not isinstance(choice, str):
            raise MossError("runs.resolve(alert_id, choice) takes two strings", kind="usage")
        with self._lock:
            self._refresh()
            found = None
            for rec in self._runs.values():
                for a in rec["alerts"]:
                    if a["id"] == alert_id:
                        found = (rec, a)
            if found is None:
                raise MossError(f"no alert with id {alert_id!r}", kind="not_found")
            rec, alert = found
            if alert["status"] != "pending":
                raise MossError(f"alert {alert_id} is already resolved (choice {alert.get('choice')!r})",
                                kind="usage")
            pick = next((c for c in alert["choices"] if c.strip().lower() == choice.strip().lower()), None)
            if pick is None:
                raise MossError(f"alert {alert_id}: choice {choice!r} is not one of "
                                + ", ".join(repr(c) for c in alert["choices"]), kind="usage")
            owner = rec.get("host_pid")
            if (hand_over and rec["id"] not in self._live and rec["status"] not in TERMINAL and bool(owner)
                    and owner != os.getpid() and _alive(owner, rec.get("host_start"))):
                self.store.append(rec["id"], "resolve", json.dumps({"alert_id": alert_id, "choice": pick}) + "\n")
                return {"queued": True, "id": alert_id, "run_id": rec["id"], "choice": pick}
            alert.update(status="resolved", choice=pick, resolved_at=_now())
            self._save(rec)
            self.log("run_alert_resolved", {"run": rec["id"], "alert": alert_id, "choice": pick})
            stops = bool(STOP_CHOICE.match(pick))
        out = dict(alert)
        if stops:
            run = self.stop(rec["id"], reason=f"stopped: alert {alert_id} resolved with {pick!r}", wait=stop_wait)
            out["run_status"] = run["status"]
        else:
            out["run_status"] = rec["status"]
        return out

    def close(self) -> None:
        """Stop every run this process started that does not outlive moss (detached runs and
        Ray jobs keep going)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            ending: dict = {}  # executor -> the ids of its runs to end
            for rid in self._live:
                rec = self._runs[rid]
                ex = self._executor_of(rec)
                if ex.outlives_moss(rec):
                    continue
                if rec["status"] == "queued":
                    self.set_status(rec, "stopped", error="moss exited before the run could start", emit=False)
                elif rec["status"] == "running":
                    ending.setdefault(ex, []).append(rid)
        self._wake.set()
        for ex, rids in ending.items():
            ex.shutdown(rids)
