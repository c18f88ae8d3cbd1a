"""Background runs: long commands (training jobs, sweep members) that outlive one primitive call.

A run is ``sh -c CMD`` started in its own process group under the session's access level
(bubblewrap for ``edit``, plain for ``full``; see moss.tools.sandbox) with the scrubbed
environment every command gets (variables given to ``start`` are set inside the sandbox,
never on the launcher; ``LD_*`` is refused), with stdout and stderr
going to ``.moss/agent/runs/<id>.log``. Its record — status, exit code, pid, alert rules and
alerts — is ``.moss/agent/runs/<id>.json``, rewritten atomically on every change, so another
moss process (a resumed session) sees the same runs.

Statuses: ``queued`` (waiting for a slot, see ``max_parallel``) -> ``running`` ->
``finished`` (exit 0) | ``failed`` (non-zero exit, could not start, or lost) | ``stopped``
(stopped on request, by a ``stop`` alert choice, its timeout, or because moss exited).

One monitor thread per process tails the logs of the runs it watches (every 0.1 s), checks
alert rules on each new line, and notices exits. Every change becomes an event on an
in-process queue that ``wait()`` hands out one at a time, alerts first; ``wait`` sleeps on
a condition variable (no busy loop) and checks ``cancel()`` every 0.25 s, and a Ctrl-C
(KeyboardInterrupt in the main thread) ends it at once.

Runs die with the moss process that started them (``close()``, also registered with
atexit: SIGTERM to each group, SIGKILL after 2 s) unless started with ``detach=True``:
a detached run keeps going, writes its exit code to ``<id>.exit``, and the next moss
process that opens the runs folder adopts it (tails its log, notices its end).

Below ``full``, git metadata is off limits to runs as to shell commands: bound read-only at
launch, and checked while edit-level runs go (every ``GIT_CHECK`` s) and when each ends;
what appeared is undone, and every finding lands in the run's record (``git``), its next
event, the session log and stderr (see moss.tools.gitguard).

Every file of the runs folder is reached through moss.storage (moss.tools.safefs): a record,
log, alert or exit file that is a link, a fifo or a device is never followed or read. A record
moss cannot use (not JSON, or fields of the wrong type) is kept aside in ``corrupt`` (file ->
why), so a listing can name it in one line instead of failing.
"""

from __future__ import annotations

import atexit
import json
import math
import os
import re
import shlex
import signal
import subprocess
import threading
import time
import uuid
from collections import deque
from pathlib import Path
from typing import Any, Callable

from moss import storage
from moss.errors import MossError
from moss.tools.confine import confine
from moss.tools import gitguard, procs, saferegex
from moss.tools.sandbox import SHELL, Setup, check_env, check_level, command_plan, require_write

__all__ = ["RunManager", "parse_rule", "STATUSES", "TERMINAL"]

STATUSES = ("queued", "running", "finished", "failed", "stopped")
TERMINAL = frozenset({"finished", "failed", "stopped"})
SEVERITIES = ("info", "warning", "critical")
DEFAULT_CHOICES = ["continue", "stop"]
STOP_CHOICE = re.compile(r"^\s*(stop|kill|terminate)\b", re.I)

POLL = 0.1           # monitor tick: log tailing, exit and timeout checks
RAY_POLL = 0.5       # seconds between status and log requests for one Ray job
RAY_STOP_WAIT = 10.0  # Ray's own grace: SIGTERM, then SIGKILL after 3 s (RAY_JOB_STOP_WAIT_TIME_S)
EXECUTORS = ("local", "ray")
SOURCES = ("rule", "manual", "script", "judge")
CANCEL_POLL = 0.25   # how often wait() looks at cancel()
KILL_GRACE = 2.0     # SIGTERM -> SIGKILL
MAX_LINE = 64 * 1024  # a longer "line" is checked in pieces
MAX_TAIL = 100_000
MAX_RECORD = 16 << 20  # bytes of one run record (alerts included)
MAX_READ = 16 << 20   # bytes of a log or trigger file read in one go
GIT_CHECK = 2.0      # seconds between git-metadata checks while edit-level runs go

# ---- alert rules -------------------------------------------------------------------------

NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf(?:inity)?)"
OPS = {
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
}
RULE_GRAMMAR = (
    'an alert rule is "/REGEX/", "METRIC > NUMBER" (>, >=, <, <=), "METRIC is nan", "METRIC spike [K]", '
    "or a table {pattern=} | {metric=, op=, threshold=} | {metric=, nan=true} | {metric=, spike=K, "
    "min_points=}, with optional severity (info, warning, critical), message, choices, name, once"
)
DEFAULT_SPIKE = 3.0      # "loss spike": a value >= 3x the running mean of the values before it
DEFAULT_MIN_POINTS = 3   # ... once that mean has at least this many values


class Rule:
    """One alert rule: `check(line)` -> (default message, matched text) or None."""

    def __init__(self, spec: dict, key: str, kind: str):
        self.spec = spec
        self.key = key
        self.kind = kind
        self.severity = spec.get("severity") or ("critical" if kind == "nan" else "warning")
        if self.severity not in SEVERITIES:
            self.severity = "warning"  # as the original normalised it
        self.message = spec.get("message")
        choices = spec.get("choices")
        if choices is None:
            choices = list(DEFAULT_CHOICES)
        if not isinstance(choices, list) or not choices or not all(isinstance(c, str) and c.strip() for c in choices):
            raise MossError(f"alert rule {key!r}: choices must be a non-empty list of strings", kind="usage")
        self.choices = choices
        self.once = spec.get("once", True) is not False
        # Patterns and metric names come from config or the model: RE2, never backtracking
        if kind == "pattern":
            self.regex = saferegex.compile(spec["pattern"], ignore_case=bool(spec.get("ignore_case")),
                                           what=f"alert rule {key!r}: bad regex")
        else:
            metric = spec["metric"]
            self.metric = metric
            # RE2 has no lookaround: the name must not follow a word character, and the
            # number must not run on into one (checked in check)
            self.regex = saferegex.compile(
                r"(?:^|\W)" + saferegex.escape(metric) + r"""["']?\s*[=:]?\s*["']?(""" + NUMBER + r")",
                ignore_case=True, what=f"alert rule {key!r}: metric")
            if kind == "threshold":
                self.op = spec.get("op") or ">"
                self.threshold = float(spec["threshold"])
                self.compare = OPS[self.op]
            if kind == "spike":
                self.factor = float(spec["spike"])
                self.min_points = int(spec.get("min_points") or DEFAULT_MIN_POINTS)
                self.count, self.total = 0, 0.0  # the running mean, per run (one Rule per run)

    def check(self, line: str) -> tuple[str, str] | None:
        if self.kind == "pattern":
            m = self.regex.search(line)
            if m:
                return f"log line matches /{self.regex.pattern}/", m.group(0)
            return None
        for m in self.regex.finditer(line):
            after = line[m.end():m.end() + 1]
            if after and (after.isalnum() or after in "._"):
                continue  # "loss=12abc": not a number of that metric
            raw = m.group(1)
            try:
                value = float(raw)
            except ValueError:
                continue
            if self.kind == "nan":
                if math.isnan(value) or math.isinf(value):
                    return f"{self.metric} is {raw} (not a finite number)", raw
            elif self.kind == "spike":
                if math.isnan(value) or math.isinf(value):
                    continue
                mean = self.total / self.count if self.count else 0.0
                hit = self.count >= self.min_points and mean > 0 and value >= self.factor * mean
                self.count += 1
                self.total += value
                if hit:
                    return (f"{self.metric} = {raw} is {value / mean:.1f}x its running mean {mean:.4g} "
                            f"(spike rule: >= {self.factor:g}x)"), raw
            elif not math.isnan(value) and self.compare(value, self.threshold):
                return f"{self.metric} = {raw} {self.op} {self.threshold:g}", raw
        return None


_SHORT_THRESHOLD = re.compile(r"^\s*([\w./-]+)\s*(>=|<=|>|<)\s*(" + NUMBER + r")\s*$", re.I)
_SHORT_NAN = re.compile(r"^\s*(?:([\w./-]+)\s+is\s+nan|nan\(\s*([\w./-]+)\s*\))\s*$", re.I)
_SHORT_REGEX = re.compile(r"^/(.*)/(i?)$", re.S)
_SHORT_SPIKE = re.compile(r"^\s*([\w./-]+)\s+spikes?(?:\s+(?:x\s*)?(\d+(?:\.\d*)?|\.\d+)\s*x?)?\s*$", re.I)


def parse_rule(spec: Any) -> Rule:
    """A Rule from a string shorthand or a table; MossError(kind="usage") otherwise."""
    if isinstance(spec, str):
        text = spec.strip()
        m = _SHORT_REGEX.match(text)
        if m:
            return parse_rule({"pattern": m.group(1), "ignore_case": bool(m.group(2)), "name": text})
        m = _SHORT_NAN.match(text)
        if m:
            return parse_rule({"metric": m.group(1) or m.group(2), "nan": True, "name": text})
        m = _SHORT_SPIKE.match(text)
        if m:
            return parse_rule({"metric": m.group(1), "spike": float(m.group(2) or DEFAULT_SPIKE), "name": text})
        m = _SHORT_THRESHOLD.match(text)
        if m:
            return parse_rule({"metric": m.group(1), "op": m.group(2), "threshold": float(m.group(3)), "name": text})
        raise MossError(f"bad alert rule {spec!r}: {RULE_GRAMMAR}", kind="usage")
    if not isinstance(spec, dict):
        raise MossError(f"bad alert rule {spec!r}: {RULE_GRAMMAR}", kind="usage")
    known = {"pattern", "ignore_case", "metric", "op", "threshold", "nan", "spike", "min_points", "severity",
             "message", "choices", "name", "once"}
    unknown = sorted(set(spec) - known)
    if unknown:
        raise MossError(f"alert rule: unknown field(s) {', '.join(unknown)}; {RULE_GRAMMAR}", kind="usage")
    spec = dict(spec)
    if spec.get("pattern") is not None:
        if not isinstance(spec["pattern"], str) or not spec["pattern"]:
            raise MossError("alert rule: pattern must be a non-empty regex string", kind="usage")
        return Rule(spec, str(spec.get("name") or f"/{spec['pattern']}/"), "pattern")
    metric = spec.get("metric")
    if not isinstance(metric, str) or not metric.strip():
        raise MossError(f"bad alert rule {spec!r}: {RULE_GRAMMAR}", kind="usage")
    if spec.get("nan"):
        return Rule(spec, str(spec.get("name") or f"{metric} is nan"), "nan")
    if spec.get("spike") is not None:
        try:
            spec["spike"] = float(spec["spike"])
            spec["min_points"] = int(spec.get("min_points") or DEFAULT_MIN_POINTS)
        except (TypeError, ValueError):
            raise MossError(f"alert rule for {metric!r}: spike and min_points must be numbers", kind="usage") from None
        if not spec["spike"] > 1 or spec["min_points"] < 1:
            raise MossError(f"alert rule for {metric!r}: spike must be a factor above 1 (e.g. 3) and min_points "
                            "at least 1", kind="usage")
        return Rule(spec, str(spec.get("name") or f"{metric} spike {spec['spike']:g}"), "spike")
    if spec.get("threshold") is None:
        raise MossError(f"alert rule for {metric!r} needs threshold= (or nan=true); {RULE_GRAMMAR}", kind="usage")
    op = spec.get("op") or ">"
    if op not in OPS:
        raise MossError(f"alert rule for {metric!r}: op must be one of {', '.join(OPS)}", kind="usage")
    try:
        spec["threshold"] = float(spec["threshold"])
    except (TypeError, ValueError):
        raise MossError(f"alert rule for {metric!r}: threshold must be a number", kind="usage") from None
    spec["op"] = op
    return Rule(spec, str(spec.get("name") or f"{metric} {op} {spec['threshold']:g}"), "threshold")


# ---- records ---------------------------------------------------------------------------------

_RECORD_TYPES = {"name": str, "cmd": str, "alerts": list, "created_at": (int, float), "started_at": (int, float),
                 "ended_at": (int, float), "duration": (int, float), "code": int, "pid": int, "host_pid": int}


def _unusable(rec, stem: str) -> str | None:
    """Why a run record read from `<stem>.json` cannot be used, or None."""
    if not isinstance(rec, dict):
        return "not a JSON object"
    if rec.get("id") != stem:
        return f"its id is {rec.get('id')!r}, not the file's name {stem!r}"
    if rec.get("status") not in STATUSES:
        return f"status {rec.get('status')!r} is not one of {', '.join(STATUSES)}"
    for key, want in _RECORD_TYPES.items():
        value = rec.get(key)
        if value is not None and (not isinstance(value, want) or isinstance(value, bool)):
            return f"{key} is {type(value).__name__}, not what a run record holds there"
    if not isinstance(rec.get("name"), str) or not isinstance(rec.get("cmd"), str):
        return "it has no name or command"
    alert_keys = ("id", "status", "message")
    if not all(isinstance(a, dict) and all(isinstance(a.get(k), str) for k in alert_keys)
               for a in rec.get("alerts") or []):
        return "an alert in it is not an object with an id, a status and a message"
    return None


# ---- processes -----------------------------------------------------------------------------

_proc_start = procs.start_time  # the kernel's start time of a pid (to tell a reused pid)
_alive = procs.alive_since


def _now() -> float:
    return round(time.time(), 3)


class _Live:
    """What this process knows about a run it watches (never persisted)."""

    def __init__(self, rules: list[Rule], plan: Callable[[list[str]], Any] | None = None,
                 cwd: str | None = None, access: str | None = None):
        self.rules = rules
        self.plan = plan      # protect paths -> sandbox.Plan; None once launched (or not ours)
        self.cwd = cwd
        self.access = access
        self.proc: subprocess.Popen | None = None
        self.offset = 0
        self.partial = b""
        self.stop_reason: str | None = None
        self.term_at: float | None = None
        self.killed = False
        self.deadline: float | None = None
        self.read_lock = threading.Lock()
        self.ray = None           # moss.tools.ray_jobs.RayJobs for a run of the ray executor
        self.ray_len = 0          # bytes of the job's log already copied to <id>.log
        self.next_poll = 0.0      # monotonic time of the next status/log poll (ray)
        self.poll_errors = 0
        self.trigger_offset = 0   # bytes of <id>.alert (manual alerts) already read
        self.poll_lock = threading.Lock()  # one status/log poll of a Ray job at a time


class RunManager:
    """The runs of one project, as seen by this process. Thread-safe."""

    def __init__(self, root: Path, *, max_parallel: int = 0, log: Callable[[str, dict], None] | None = None,
                 prepare_dir: Callable[[Path], None] | None = None,
                 report: Callable[[list[str], dict], None] | None = None):
        self.root = Path(root)
        self.dir = self.root / ".moss" / "agent" / "runs"
        self.max_parallel = max(0, int(max_parallel or 0))
        self._log_cb = log
        self._report_cb = report  # git-metadata findings: shown on stderr and logged by the caller
        self._git_checked = 0.0
        self._prepare_dir = prepare_dir
        self._dir_ready = False
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._events: deque = deque()
        self._runs: dict[str, dict] = {}
        self.corrupt: dict[str, str] = {}  # record file (relative to the project) -> why moss cannot use it
        self._live: dict[str, _Live] = {}
        self._thread: threading.Thread | None = None
        self._wake = threading.Event()
        self._closed = False
        self._ray_clients: dict = {}
        self._load()
        atexit.register(self.close)

    # ---- persistence ---------------------------------------------------------------------
    def _ensure_dir(self) -> None:
        if self._dir_ready:
            return
        if self._prepare_dir:
            self._prepare_dir(self.dir)
        storage.ensure_dir(self.dir)
        self._dir_ready = True

    def _path(self, rid: str, ext: str) -> Path:
        return self.dir / f"{rid}.{ext}"

    def _rel(self, rid: str, ext: str) -> str:
        return f".moss/agent/runs/{rid}.{ext}"

    def _tree(self):
        from moss.tools import safefs

        return safefs.tree(self.root)

    def _save(self, rec: dict) -> None:
        self._ensure_dir()
        self._tree().write_atomic(self._rel(rec["id"], "json"), json.dumps(rec, indent=1, ensure_ascii=False),
                                  create_dirs=False)

    def _read(self, path: Path) -> dict | None:
        """The record in `path`, or None (the file is gone, or it is noted in `corrupt`)."""
        shown = f".moss/agent/runs/{path.name}"
        try:
            rec = json.loads(self._tree().read_bytes(shown, MAX_RECORD))
        except FileNotFoundError:
            return None
        except storage.UnsafePath as e:
            self.corrupt[shown] = e.message
            return None
        except (OSError, ValueError, MossError) as e:
            self.corrupt[shown] = f"not valid JSON ({getattr(e, 'msg', None) or e})"
            return None
        why = _unusable(rec, path.stem)
        if why:
            self.corrupt[shown] = why
            return None
        self.corrupt.pop(shown, None)
        rec.setdefault("alerts", [])
        return rec

    def _records(self) -> list[Path]:
        """The record files of the runs folder ([] when it is missing or refused)."""
        return [self.dir / n for n in storage.listed(self.dir) if n.endswith(".json") and not n.startswith(".")]

    def _read_from(self, rid: str, ext: str, offset: int, limit: int = MAX_READ) -> bytes:
        """Bytes of `<rid>.<ext>` from `offset` (b"" when it is missing or not a regular file)."""
        try:
            fd = self._tree().open(self._rel(rid, ext))
        except (OSError, MossError):
            return b""
        with os.fdopen(fd, "rb") as fh:
            if offset < 0:
                fh.seek(0, os.SEEK_END)
                offset = max(0, fh.tell() + offset)
            fh.seek(offset)
            return fh.read(limit)

    def _log(self, event: str, data: dict) -> None:
        if self._log_cb:
            try:
                self._log_cb(event, data)
            except Exception:
                pass

    def _load(self) -> None:
        """Read every record; settle what the processes that wrote them left behind."""
        for path in self._records():
            rec = self._read(path)
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
        host_alive = bool(host) and host != me and _alive(host, rec.get("host_start"))
        if host_alive:
            return  # another moss process is watching it
        if rec.get("executor") == "ray":
            self._adopt(rec)  # a Ray job outlives moss: watch it again, wherever it got to
            return
        if rec["status"] == "queued":
            self._set_status(rec, "stopped", error="moss exited before the run could start", emit=False)
            return
        pid, start = rec.get("pid"), rec.get("pid_start")
        if _alive(pid, start):
            if rec.get("detached"):
                self._adopt(rec)
                return
            # An attached run whose moss died without cleaning up (killed hard): runs do
            # not outlive moss unless detached, so finish the job.
            procs.signal_group(pid, signal.SIGKILL)
            self._set_status(rec, "stopped", error="stopped: the moss process that started it had ended",
                             emit=False)
            return
        code = self._exit_code(rec["id"])
        if code is not None:
            self._set_status(rec, "finished" if code == 0 else "failed", code=code, emit=False)
        else:
            self._set_status(rec, "failed", error="lost: the run ended while no moss process watched it "
                             "(exit code unknown)", emit=False)

    def _adopt(self, rec: dict) -> None:
        """Watch a run another (ended) moss process started: a detached local run whose
        process is alive, or a Ray job. Log lines it wrote meanwhile are checked against the
        rules only for a Ray job (copied from the cluster now); alerts already raised stay."""
        rules = []
        for spec in rec.get("alert_rules") or []:
            try:
                rules.append(parse_rule(spec))
            except MossError:
                pass
        live = _Live(rules)
        st = self._tree().lstat(self._rel(rec["id"], "log"))
        live.offset = st.st_size if st is not None else 0
        if rec.get("executor") == "ray":
            live.ray = self._ray_client((rec.get("ray") or {}).get("address") or "")
            live.ray_len = live.offset
        if rec.get("timeout") and rec.get("started_at"):
            live.deadline = time.monotonic() + max(0.0, rec["started_at"] + rec["timeout"] - time.time())
        self._live[rec["id"]] = live
        me = os.getpid()
        rec["host_pid"], rec["host_start"] = me, _proc_start(me)
        self._save(rec)
        self._log("run_adopted", {"run": rec["id"], "name": rec["name"], "executor": rec.get("executor", "local"),
                                  "status": rec["status"]})
        self._ensure_thread()

    def _ray_client(self, address: str):
        from moss.tools.ray_jobs import RayJobs

        client = self._ray_clients.get(address)
        if client is None:
            client = self._ray_clients[address] = RayJobs(address)
        return client

    def _exit_code(self, rid: str) -> int | None:
        try:
            return int(self._tree().read_text(self._rel(rid, "exit"), 64).strip())
        except (OSError, ValueError, MossError):  # missing, not a number, or not a regular file
            return None

    def _refresh(self) -> None:
        """Re-read active records that another process owns (they change behind our back)."""
        for path in self._records():
            rid = path.stem
            if rid in self._live:
                continue
            old = self._runs.get(rid)
            if old is not None and old["status"] in TERMINAL:
                continue
            rec = self._read(path)
            if rec is not None:
                self._runs[rid] = rec
                self._settle(rec)

    # ---- status changes --------------------------------------------------------------------
    def _set_status(self, rec: dict, status: str, *, code: int | None = None, error: str | None = None,
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
        self._log("run_status", {"run": rec["id"], "name": rec["name"], "status": status, "code": rec.get("code"),
                                 "error": error})

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
        self._log("run_alert", {"run": rid, "alert": alert["id"], "severity": alert["severity"],
                                "message": alert["message"], "source": source})
        return dict(alert)

    # ---- alerts raised by people and scripts -----------------------------------------------------
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
        if choices is not None and (not isinstance(choices, list) or not choices
                                    or not all(isinstance(c, str) and c.strip() for c in choices)):
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
        self._ensure_dir()
        self._tree().append(self._rel(rid, "alert"), json.dumps(entry) + "\n", create_dirs=False)
        return {"queued": True, "run_id": rid, "message": message, "severity": severity}

    def _read_triggers(self, rid: str) -> None:
        """Manual alerts appended to ``<id>.alert`` (a JSON object or plain text per line)."""
        live = self._live[rid]
        data = self._read_from(rid, "alert", live.trigger_offset)
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
                severity = entry.get("severity") if entry.get("severity") in SEVERITIES else "warning"
                choices = entry.get("choices")
                if not (isinstance(choices, list) and choices and all(isinstance(c, str) and c.strip() for c in choices)):
                    choices = DEFAULT_CHOICES
                source = entry.get("source") if entry.get("source") in SOURCES else "manual"
                self._add_alert(rec, key=f"{source}: {message}", severity=severity,
                                message=f"{message} (run {rec['name']})", choices=choices, line="",
                                source=source, trigger=tid)

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
                    self._log("run_monitor_error", {"run": rid, "error": f"{type(e).__name__}: {e}"})
            with self._lock:
                self._start_queued()
            try:
                self._check_git_while_running()
            except Exception as e:
                self._log("run_monitor_error", {"error": f"git check: {type(e).__name__}: {e}"})
            self._wake.wait(POLL)
            self._wake.clear()

    def _drain(self, rid: str, final: bool) -> None:
        """Read what the run wrote since last time; check each complete line against the rules."""
        live = self._live[rid]
        with live.read_lock:
            data = self._read_from(rid, "log", live.offset)
            live.offset += len(data)
            buf = live.partial + data
            lines = buf.split(b"\n")
            live.partial = lines.pop()
            if len(live.partial) > MAX_LINE:
                lines.append(live.partial)
                live.partial = b""
            if final and live.partial:
                lines.append(live.partial)
                live.partial = b""
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

    def _tick(self, rid: str) -> None:
        live = self._live[rid]
        rec = self._runs[rid]
        self._read_triggers(rid)
        if live.ray is not None:
            self._tick_ray(rid)
            return
        if rec["status"] != "running":
            return
        self._drain(rid, final=False)
        now = time.monotonic()
        with self._lock:
            if live.deadline is not None and live.term_at is None and now >= live.deadline:
                self._signal_stop(rid, f"timeout after {rec.get('timeout'):g} s")
            if live.term_at is not None and not live.killed and now >= live.term_at + KILL_GRACE:
                live.killed = True
                procs.signal_group(rec.get("pid"), signal.SIGKILL)
        if live.proc is not None:
            code = live.proc.poll()
            if code is None:
                return
        else:
            if _alive(rec.get("pid"), rec.get("pid_start")):
                return
            code = self._exit_code(rid)
        self._finish(rid, code)

    # ---- Ray jobs -------------------------------------------------------------------------------
    def _copy_ray_log(self, rid: str) -> None:
        """Append what the job's log gained since last time to <id>.log (the log is the one
        place metrics come back from the cluster)."""
        live, rec = self._live[rid], self._runs[rid]
        data = live.ray.logs(rec["ray"]["submission_id"]).encode("utf-8", "replace")
        if len(data) > live.ray_len:
            self._tree().append(self._rel(rid, "log"), data[live.ray_len:], create_dirs=False)
            live.ray_len = len(data)

    def _tick_ray(self, rid: str, force: bool = False) -> None:
        with self._live[rid].poll_lock:
            self._poll_ray(rid, force)

    def _poll_ray(self, rid: str, force: bool) -> None:
        live, rec = self._live[rid], self._runs[rid]
        if rec["status"] in TERMINAL:
            return
        now = time.monotonic()
        if not force and now < live.next_poll:
            return
        live.next_poll = now + RAY_POLL
        sid = rec["ray"]["submission_id"]
        try:
            info = live.ray.status(sid)
            self._copy_ray_log(rid)
            live.poll_errors = 0
        except MossError as e:
            live.poll_errors += 1
            if e.kind == "not_found":
                self._drain(rid, final=True)
                with self._lock:
                    self._set_status(rec, "failed", error=f"lost: the Ray job {sid} is gone from the cluster "
                                     f"at {rec['ray']['address']}")
                return
            if live.poll_errors in (1, 10) or live.poll_errors % 100 == 0:
                self._log("run_monitor_error", {"run": rid, "error": e.message, "tries": live.poll_errors})
            live.next_poll = now + min(30.0, RAY_POLL * (2 ** min(live.poll_errors, 6)))
            return
        ray_status = str(info.get("status") or "")
        from moss.tools.ray_jobs import RAY_TERMINAL, STATUS

        status = STATUS.get(ray_status)
        self._drain(rid, final=ray_status in RAY_TERMINAL)
        with self._lock:
            if rec["status"] in TERMINAL:
                return
            if status == "running" and rec["status"] == "queued":
                start = info.get("start_time")
                rec["started_at"] = round(start / 1000, 3) if isinstance(start, (int, float)) and start else _now()
                if rec.get("timeout"):
                    live.deadline = time.monotonic() + float(rec["timeout"])
                self._set_status(rec, "running")
                self._log("run_start", {"run": rid, "name": rec["name"], "cmd": rec["cmd"], "executor": "ray",
                                        "submission_id": sid, "address": rec["ray"]["address"]})
            elif ray_status in RAY_TERMINAL:
                code = info.get("driver_exit_code")
                code = code if isinstance(code, int) else None
                if not rec.get("started_at"):
                    start = info.get("start_time")
                    rec["started_at"] = round(start / 1000, 3) if isinstance(start, (int, float)) and start else None
                reason = live.stop_reason or self._stop_marker(rid)
                if status == "stopped" or reason:
                    self._set_status(rec, "stopped", code=code, error=reason or info.get("message") or "stopped")
                elif status == "finished":
                    self._set_status(rec, "finished", code=0 if code is None else code)
                else:
                    self._set_status(rec, "failed", code=code, error=(info.get("message") or "the job failed")[:1000])
                return
            if live.deadline is not None and live.term_at is None and time.monotonic() >= live.deadline:
                live.stop_reason = f"timeout after {rec.get('timeout'):g} s"
                live.term_at = time.monotonic()
        if live.term_at is not None and not live.killed:
            live.killed = True  # one stop request; Ray escalates to SIGKILL itself
            try:
                live.ray.stop(sid)
            except MossError as e:
                live.killed = False
                self._log("run_monitor_error", {"run": rid, "error": f"stop: {e.message}"})

    def _stop_marker(self, rid: str) -> str | None:
        """The reason `moss runs stop` left in <id>.stop for the process that watches the run."""
        try:
            return self._tree().read_text(self._rel(rid, "stop"), 64 << 10).strip() or "stopped on request"
        except (OSError, MossError):
            return None

    def sync(self) -> None:
        """Bring every watched Ray job up to date now (status and log), e.g. before a listing."""
        with self._lock:
            rids = [rid for rid, live in self._live.items() if live.ray is not None]
        for rid in rids:
            try:
                self._tick_ray(rid, force=True)
            except Exception as e:
                self._log("run_monitor_error", {"run": rid, "error": f"{type(e).__name__}: {e}"})

    def _finish(self, rid: str, code: int | None) -> None:
        self._drain(rid, final=True)  # alerts from the last lines come before the run event
        if self._live[rid].access in ("edit", "read-shell") and self._runs[rid]["status"] not in TERMINAL:
            self._git_notes(gitguard.guard_for(self.root).check(), [rid])
        with self._lock:
            rec, live = self._runs[rid], self._live[rid]
            if rec["status"] in TERMINAL:
                return
            reason = live.stop_reason or self._stop_marker(rid)
            if reason is not None:
                self._set_status(rec, "stopped", code=code, error=reason)
            elif code == 0:
                self._set_status(rec, "finished", code=0)
            elif code is None:
                self._set_status(rec, "failed", error="the run ended; its exit code is unknown")
            else:
                self._set_status(rec, "failed", code=code)

    def _start_queued(self) -> None:
        running = sum(1 for rid, live in self._live.items()
                      if self._runs[rid]["status"] == "running" and live.ray is None)
        for rid, live in list(self._live.items()):
            rec = self._runs[rid]
            if rec["status"] != "queued" or live.plan is None or live.ray is not None:
                continue
            if self.max_parallel and running >= self.max_parallel:
                return
            self._launch(rid)
            running += 1

    def _launch(self, rid: str) -> None:
        rec, live = self._runs[rid], self._live[rid]
        self._ensure_dir()
        protect: list[str] = []
        if live.access == "edit":
            notes, protect = gitguard.guard_for(self.root).before()
            self._git_notes(notes, [rid])
        make, live.plan = live.plan, None
        try:
            plan = make(protect)
        except MossError as e:
            self._set_status(rec, "failed", error=f"could not start: {e}")
            return
        try:
            fd = self._tree().open(self._rel(rid, "log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                wrap, extra = None, None
                if rec.get("detached"):
                    # A shell outside the sandbox waits for the command and records its exit
                    # code, so a later moss process can tell finished from failed.
                    extra = {"MOSS_RUN_EXIT": str(self._path(rid, "exit"))}
                    wrap = lambda argv: [SHELL, "-c", '"$@"; c=$?; echo "$c" > "$MOSS_RUN_EXIT"; exit "$c"',  # noqa: E731
                                         "moss-run", *argv]
                proc = procs.start(plan, cwd=live.cwd, stdout=fd, stderr=subprocess.STDOUT, argv_wrap=wrap,
                                   env_extra=extra)
            finally:
                os.close(fd)
        except OSError as e:
            self._set_status(rec, "failed", error=f"could not start: {e}")
            return
        live.proc = proc
        rec["pid"], rec["pid_start"] = proc.pid, _proc_start(proc.pid)
        rec["started_at"] = _now()
        if rec.get("timeout"):
            live.deadline = time.monotonic() + float(rec["timeout"])
        self._set_status(rec, "running")
        self._log("run_start", {"run": rid, "name": rec["name"], "cmd": rec["cmd"], "sandbox": rec["sandbox"],
                                "workdir": rec["workdir"], "pid": proc.pid})

    def _git_notes(self, notes: list[str], rids: list[str]) -> None:
        """Record git-metadata findings on the runs concerned; report them at once."""
        if not notes:
            return
        with self._lock:
            for rid in rids:
                rec = self._runs.get(rid)
                if rec is not None:
                    rec.setdefault("git", []).extend(notes)
                    self._save(rec)
        self._log("git_metadata", {"runs": rids, "notes": notes})
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
        self._git_notes(gitguard.guard_for(self.root).check(), rids)

    def _signal_stop(self, rid: str, reason: str) -> None:
        rec, live = self._runs[rid], self._live.get(rid)
        if live is None:
            return
        if live.stop_reason is None:
            live.stop_reason = reason
        if live.term_at is None:
            live.term_at = time.monotonic()
            procs.signal_group(rec.get("pid"), signal.SIGTERM)

    # ---- the API -------------------------------------------------------------------------------
    def start(self, cmd: str, *, access: str, allow_full: bool = False, unsandboxed_ok: bool = False,
              name: str | None = None, workdir: str | None = None, alerts: list | None = None,
              detach: bool = False, timeout: float | None = None, meta: Any = None,
              env: dict | None = None, setup: Setup | None = None, executor: str = "local",
              address: str | None = None, resources: dict | None = None, results: str | None = None) -> dict:
        """Start (or queue) a run; `env` is set inside the sandbox over the scrubbed
        environment, `setup` is what the user's own config adds (see moss.tools.sandbox).
        `executor="ray"` submits it as a Ray job to the cluster at `address` (else
        $RAY_ADDRESS) with `resources` ({num_cpus, num_gpus}); `results` is where the run
        should leave the files it returns (MOSS_RESULTS_DIR = RESULTS/<run id>)."""
        if not isinstance(cmd, str) or not cmd.strip():
            raise MossError("runs.start: cmd must be a non-empty command string", kind="usage")
        check_level(access)
        if executor not in EXECUTORS:
            raise MossError(f"runs.start: executor must be one of {', '.join(EXECUTORS)}, got {executor!r}",
                            kind="usage")
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
        if executor == "ray":
            return self._start_ray(rid, cmd, access=access, allow_full=allow_full, name=name, root=real_root, wd=wd,
                                   rules=rules, timeout=timeout, meta=meta, env=extra, address=address,
                                   resources=resources, results=results)

        def plan(protect: list[str]):
            return command_plan(cmd, access=access, root=str(real_root), cwd=str(wd), allow_full=allow_full,
                                unsandboxed_ok=unsandboxed_ok, env=extra, setup=setup, protect=protect)

        sandbox = plan([]).sandbox  # refuses now (kind "denied") rather than at launch
        rel_wd = os.path.relpath(wd, real_root)
        rec = {
            "id": rid, "name": name or (cmd if len(cmd) <= 60 else cmd[:59] + "…"), "cmd": cmd,
            "workdir": rel_wd, "status": "queued", "access": access, "sandbox": sandbox,
            "detached": bool(detach), "created_at": _now(), "started_at": None, "ended_at": None,
            "timeout": timeout, "log": str(Path(".moss", "agent", "runs", f"{rid}.log")),
            "alert_rules": [r.spec for r in rules], "meta": meta, "host_pid": os.getpid(),
            "host_start": _proc_start(os.getpid()), "alerts": [], "executor": "local",
            "results": extra.get("MOSS_RESULTS_DIR"),
        }
        with self._lock:
            if self._closed:
                raise MossError("runs.start: moss is shutting down", kind="usage")
            self._runs[rid] = rec
            self._live[rid] = _Live(rules, plan=plan, cwd=str(wd),
                                    access=access if sandbox != "bwrap-ro" else None)
            self._save(rec)
            self._events.append({"type": "run", "id": rid, "name": rec["name"], "status": "queued",
                                 "previous": None})
            self._start_queued()
            self._ensure_thread()
            return self._public(rec)

    def _start_ray(self, rid: str, cmd: str, *, access: str, allow_full: bool, name: str | None, root: Path,
                   wd: Path, rules: list, timeout, meta, env: dict, address: str | None, resources: dict | None,
                   results: str | None) -> dict:
        """Submit one Ray job for the run: the project as its working directory, the command
        as its entrypoint (from `wd`), at least one CPU so Ray queues rather than oversubscribes."""
        from moss.tools.ray_jobs import resolve_address

        if access != "full":
            raise MossError("the ray executor runs each command as a Ray job on the cluster, outside moss's "
                            f"sandbox, so it needs access full (the session has {access}): pass --allow-full "
                            "or set [agent] allow_full = true in your user config", kind="denied")
        if not allow_full:
            raise MossError("the ray executor needs full access, which is not allowed: pass --allow-full",
                            kind="denied")
        res = dict(resources or {})
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
        addr = resolve_address(address)
        client = self._ray_client(addr)
        rel_wd = os.path.relpath(wd, root)
        entry = cmd if rel_wd == "." else f"cd {shlex.quote(rel_wd)} && {cmd}"
        sid = f"moss-{rid}"
        rec = {
            "id": rid, "name": name or (cmd if len(cmd) <= 60 else cmd[:59] + "…"), "cmd": cmd,
            "workdir": rel_wd, "status": "queued", "access": access, "sandbox": "ray", "executor": "ray",
            "detached": True, "created_at": _now(), "started_at": None, "ended_at": None, "timeout": timeout,
            "log": str(Path(".moss", "agent", "runs", f"{rid}.log")), "alert_rules": [r.spec for r in rules],
            "meta": meta, "host_pid": os.getpid(), "host_start": _proc_start(os.getpid()), "alerts": [],
            "results": env.get("MOSS_RESULTS_DIR"),
            "ray": {"address": addr, "submission_id": sid, "num_cpus": cpus, "num_gpus": gpus},
        }
        with self._lock:
            if self._closed:
                raise MossError("runs.start: moss is shutting down", kind="usage")
        self._ensure_dir()
        # submitted before it is recorded: a run that could not be submitted does not exist
        uri = client.upload_project(root)
        rec["ray"]["working_dir"] = uri
        env_vars = {k: v for k, v in env.items() if v is not None}
        metadata = {"moss_run_id": rid, "moss_run_name": rec["name"], "moss_project": str(root)}
        client.submit(entry, sid, runtime_env={"working_dir": uri, "env_vars": env_vars}, metadata=metadata,
                      num_cpus=cpus, num_gpus=gpus or None)
        with self._lock:
            self._runs[rid] = rec
            live = _Live(rules)
            live.ray = client
            self._live[rid] = live
            self._save(rec)
            self._tree().append(self._rel(rid, "log"), b"", create_dirs=False)
            self._events.append({"type": "run", "id": rid, "name": rec["name"], "status": "queued",
                                 "previous": None})
            self._cond.notify_all()
            self._log("run_submit", {"run": rid, "name": rec["name"], "cmd": cmd, "executor": "ray",
                                     "submission_id": sid, "address": addr, "num_cpus": cpus, "num_gpus": gpus})
            self._ensure_thread()
            return self._public(rec)

    def _public(self, rec: dict) -> dict:
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
            return [self._public(r) for r in recs]

    def status(self, rid: str) -> dict:
        with self._lock:
            return self._public(self._get(rid))

    def log_tail(self, rid: str, chars: int = 2000) -> str:
        with self._lock:
            self._get(rid)
        chars = max(0, min(int(chars), MAX_TAIL))
        if chars == 0:
            return ""
        data = self._read_from(rid, "log", -4 * chars)
        return data.decode("utf-8", "replace")[-chars:]

    def stop(self, rid: str, reason: str = "stopped on request", wait: float = KILL_GRACE + 1.0) -> dict:
        """Stop a run (SIGTERM to its group, SIGKILL after 2 s; a Ray job through the cluster's
        stop); returns its record once it ended."""
        with self._lock:
            rec = self._get(rid)
            if rec["status"] in TERMINAL:
                return self._public(rec)
            live = self._live.get(rid)
            ray = live is not None and live.ray is not None
            if ray:
                pass  # below, without holding the lock over HTTP
            elif rec["status"] == "queued" and rec.get("executor") != "ray":
                self._set_status(rec, "stopped", error=reason)
                return self._public(rec)
            elif live is None:  # owned by another live moss process: it records the end
                self._ensure_dir()
                self._tree().write_atomic(self._rel(rid, "stop"), reason, create_dirs=False)
                if rec.get("executor") == "ray":
                    self._ray_client(rec["ray"]["address"]).stop(rec["ray"]["submission_id"])
                else:
                    procs.signal_group(rec.get("pid"), signal.SIGTERM)
                return self._public(rec)
            else:
                self._signal_stop(rid, reason)
        if ray:
            return self._stop_ray(rid, reason)
        end = time.monotonic() + wait
        while time.monotonic() < end:
            if live.proc is not None:
                try:
                    code = live.proc.wait(timeout=0.05)
                except subprocess.TimeoutExpired:
                    code = None
                if code is not None:
                    self._finish(rid, code)
                    break
            else:
                if not _alive(rec.get("pid"), rec.get("pid_start")):
                    self._finish(rid, self._exit_code(rid))
                    break
                time.sleep(0.05)
            if time.monotonic() >= (live.term_at or 0) + KILL_GRACE and not live.killed:
                live.killed = True
                procs.signal_group(rec.get("pid"), signal.SIGKILL)
        with self._lock:
            return self._public(rec)

    def _stop_ray(self, rid: str, reason: str) -> dict:
        rec, live = self._runs[rid], self._live[rid]
        if live.stop_reason is None:
            live.stop_reason = reason
        live.term_at = live.term_at or time.monotonic()
        live.killed = True
        live.ray.stop(rec["ray"]["submission_id"])
        end = time.monotonic() + RAY_STOP_WAIT
        while time.monotonic() < end and rec["status"] not in TERMINAL:
            self._tick_ray(rid, force=True)
            if rec["status"] not in TERMINAL:
                time.sleep(0.2)
        return self._public(rec)

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

    def alerts(self, status: str | None = None, run_id: str | None = None) -> list[dict]:
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
        """Resolve a pending alert with one of its choices; a stop/kill/terminate choice stops the run."""
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
            alert.update(status="resolved", choice=pick, resolved_at=_now())
            self._save(rec)
            self._log("run_alert_resolved", {"run": rec["id"], "alert": alert_id, "choice": pick})
            stops = bool(STOP_CHOICE.match(pick))
        out = dict(alert)
        if stops:
            run = self.stop(rec["id"], reason=f"stopped: alert {alert_id} resolved with {pick!r}")
            out["run_status"] = run["status"]
        else:
            out["run_status"] = rec["status"]
        return out

    def close(self) -> None:
        """Stop every attached run this process started (detached ones keep going)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            targets = []
            for rid, live in self._live.items():
                rec = self._runs[rid]
                if live.ray is not None or (rec.get("detached") and rec["status"] == "running"):
                    continue  # Ray jobs outlive moss by nature; detached runs by request
                if rec["status"] == "queued":
                    self._set_status(rec, "stopped", error="moss exited before the run could start", emit=False)
                elif rec["status"] == "running":
                    self._signal_stop(rid, "stopped: moss exited")
                    targets.append(rid)
        self._wake.set()
        end = time.monotonic() + KILL_GRACE
        pending = list(targets)
        while pending:
            for rid in list(pending):
                live = self._live[rid]
                alive = live.proc.poll() is None if live.proc is not None else \
                    _alive(self._runs[rid].get("pid"), self._runs[rid].get("pid_start"))
                if not alive:
                    pending.remove(rid)
            if not pending:
                break
            if time.monotonic() >= end:
                for rid in pending:
                    procs.signal_group(self._runs[rid].get("pid"), signal.SIGKILL)
                    live = self._live[rid]
                    if live.proc is not None:
                        try:
                            live.proc.wait(timeout=1)
                        except subprocess.TimeoutExpired:
                            pass
                break
            time.sleep(0.02)
        for rid in targets:
            live = self._live[rid]
            code = live.proc.poll() if live.proc is not None else None
            try:
                self._finish(rid, code)
            except Exception:
                pass
