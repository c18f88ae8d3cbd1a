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
"""

from __future__ import annotations

import atexit
import json
import math
import os
import re
import signal
import subprocess
import threading
import time
import uuid
from collections import deque
from pathlib import Path
from typing import Any, Callable

from moss.errors import MossError
from moss.tools.atomic import write_atomic
from moss.tools.confine import confine
from moss.tools import gitguard, procs
from moss.tools.sandbox import SHELL, Setup, check_env, check_level, command_plan, require_write

__all__ = ["RunManager", "parse_rule", "STATUSES", "TERMINAL"]

STATUSES = ("queued", "running", "finished", "failed", "stopped")
TERMINAL = frozenset({"finished", "failed", "stopped"})
SEVERITIES = ("info", "warning", "critical")
DEFAULT_CHOICES = ["continue", "stop"]
STOP_CHOICE = re.compile(r"^\s*(stop|kill|terminate)\b", re.I)

POLL = 0.1           # monitor tick: log tailing, exit and timeout checks
CANCEL_POLL = 0.25   # how often wait() looks at cancel()
KILL_GRACE = 2.0     # SIGTERM -> SIGKILL
MAX_LINE = 64 * 1024  # a longer "line" is checked in pieces
MAX_TAIL = 100_000
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
    'an alert rule is "/REGEX/", "METRIC > NUMBER" (>, >=, <, <=), "METRIC is nan", or a table '
    "{pattern=} | {metric=, op=, threshold=} | {metric=, nan=true}, with optional severity "
    "(info, warning, critical), message, choices, name, once"
)


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
        if kind == "pattern":
            flags = re.I if spec.get("ignore_case") else 0
            try:
                self.regex = re.compile(spec["pattern"], flags)
            except re.error as e:
                raise MossError(f"alert rule {key!r}: bad regex: {e}", kind="usage") from None
        else:
            metric = spec["metric"]
            self.metric = metric
            self.regex = re.compile(
                r"(?<![\w])" + re.escape(metric) + r"""["']?\s*[=:]?\s*["']?(""" + NUMBER + r")(?![\w.])",
                re.I,
            )
            if kind == "threshold":
                self.op = spec.get("op") or ">"
                self.threshold = float(spec["threshold"])
                self.compare = OPS[self.op]

    def check(self, line: str) -> tuple[str, str] | None:
        if self.kind == "pattern":
            m = self.regex.search(line)
            if m:
                return f"log line matches /{self.regex.pattern}/", m.group(0)
            return None
        for m in self.regex.finditer(line):
            raw = m.group(1)
            try:
                value = float(raw)
            except ValueError:
                continue
            if self.kind == "nan":
                if math.isnan(value) or math.isinf(value):
                    return f"{self.metric} is {raw} (not a finite number)", raw
            elif not math.isnan(value) and self.compare(value, self.threshold):
                return f"{self.metric} = {raw} {self.op} {self.threshold:g}", raw
        return None


_SHORT_THRESHOLD = re.compile(r"^\s*([\w./-]+)\s*(>=|<=|>|<)\s*(" + NUMBER + r")\s*$", re.I)
_SHORT_NAN = re.compile(r"^\s*(?:([\w./-]+)\s+is\s+nan|nan\(\s*([\w./-]+)\s*\))\s*$", re.I)
_SHORT_REGEX = re.compile(r"^/(.*)/(i?)$", re.S)


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
        m = _SHORT_THRESHOLD.match(text)
        if m:
            return parse_rule({"metric": m.group(1), "op": m.group(2), "threshold": float(m.group(3)), "name": text})
        raise MossError(f"bad alert rule {spec!r}: {RULE_GRAMMAR}", kind="usage")
    if not isinstance(spec, dict):
        raise MossError(f"bad alert rule {spec!r}: {RULE_GRAMMAR}", kind="usage")
    known = {"pattern", "ignore_case", "metric", "op", "threshold", "nan", "severity", "message", "choices",
             "name", "once"}
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


# ---- processes -----------------------------------------------------------------------------

def _proc_start(pid: int) -> str | None:
    """The kernel's start time of `pid` (to tell a live process from a reused pid)."""
    try:
        data = Path(f"/proc/{pid}/stat").read_text()
        fields = data.rsplit(")", 1)[1].split()
        return fields[19] if fields[0] != "Z" else None
    except (OSError, IndexError):
        return None


def _alive(pid: int | None, start: str | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    now = _proc_start(pid)
    if now is None:
        return not Path("/proc").is_dir()  # no /proc: trust kill(0)
    return start is None or now == start


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
        self._live: dict[str, _Live] = {}
        self._thread: threading.Thread | None = None
        self._wake = threading.Event()
        self._closed = False
        self._load()
        atexit.register(self.close)

    # ---- persistence ---------------------------------------------------------------------
    def _ensure_dir(self) -> None:
        if self._dir_ready:
            return
        if self._prepare_dir:
            self._prepare_dir(self.dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._dir_ready = True

    def _path(self, rid: str, ext: str) -> Path:
        return self.dir / f"{rid}.{ext}"

    def _save(self, rec: dict) -> None:
        self._ensure_dir()
        write_atomic(self._path(rec["id"], "json"), json.dumps(rec, indent=1, ensure_ascii=False))

    def _read(self, path: Path) -> dict | None:
        try:
            rec = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(rec, dict) or not isinstance(rec.get("id"), str) or rec.get("status") not in STATUSES:
            return None
        rec.setdefault("alerts", [])
        return rec

    def _log(self, event: str, data: dict) -> None:
        if self._log_cb:
            try:
                self._log_cb(event, data)
            except Exception:
                pass

    def _load(self) -> None:
        """Read every record; settle what the processes that wrote them left behind."""
        if not self.dir.is_dir():
            return
        for path in sorted(self.dir.glob("*.json")):
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
        if rec["status"] == "queued":
            self._set_status(rec, "stopped", error="moss exited before the run could start", emit=False)
            return
        pid, start = rec.get("pid"), rec.get("pid_start")
        if _alive(pid, start):
            if rec.get("detached"):
                rules = []
                for spec in rec.get("alert_rules") or []:
                    try:
                        rules.append(parse_rule(spec))
                    except MossError:
                        pass
                live = _Live(rules)
                try:
                    live.offset = self._path(rec["id"], "log").stat().st_size
                except OSError:
                    live.offset = 0
                if rec.get("timeout"):
                    live.deadline = time.monotonic() + max(0.0, rec["started_at"] + rec["timeout"] - time.time())
                self._live[rec["id"]] = live
                rec["host_pid"], rec["host_start"] = me, _proc_start(me)
                self._save(rec)
                self._ensure_thread()
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

    def _exit_code(self, rid: str) -> int | None:
        try:
            return int(self._path(rid, "exit").read_text().strip())
        except (OSError, ValueError):
            return None

    def _refresh(self) -> None:
        """Re-read active records that another process owns (they change behind our back)."""
        if not self.dir.is_dir():
            return
        for path in self.dir.glob("*.json"):
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
        rid = rec["id"]
        for a in rec["alerts"]:
            if a.get("rule") == rule.key and (rule.once or a["status"] == "pending"):
                return
        alert = {
            "id": uuid.uuid4().hex[:12], "run_id": rid, "run_name": rec["name"], "rule": rule.key,
            "severity": rule.severity, "message": f"{rule.message or default} (run {rec['name']})",
            "choices": list(rule.choices), "status": "pending", "line": line[:500], "created_at": _now(),
        }
        rec["alerts"].append(alert)
        self._save(rec)
        self._events.append({"type": "alert", **{k: alert[k] for k in (
            "id", "run_id", "run_name", "severity", "message", "choices", "status", "line")}, "alert_id": alert["id"]})
        self._cond.notify_all()
        self._log("run_alert", {"run": rid, "alert": alert["id"], "severity": alert["severity"],
                                "message": alert["message"]})

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
            try:
                with open(self._path(rid, "log"), "rb") as fh:
                    fh.seek(live.offset)
                    data = fh.read()
            except OSError:
                data = b""
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

    def _finish(self, rid: str, code: int | None) -> None:
        self._drain(rid, final=True)  # alerts from the last lines come before the run event
        if self._live[rid].access in ("edit", "read-shell") and self._runs[rid]["status"] not in TERMINAL:
            self._git_notes(gitguard.guard_for(self.root).check(), [rid])
        with self._lock:
            rec, live = self._runs[rid], self._live[rid]
            if rec["status"] in TERMINAL:
                return
            if live.stop_reason is not None:
                self._set_status(rec, "stopped", code=code, error=live.stop_reason)
            elif code == 0:
                self._set_status(rec, "finished", code=0)
            elif code is None:
                self._set_status(rec, "failed", error="the run ended; its exit code is unknown")
            else:
                self._set_status(rec, "failed", code=code)

    def _start_queued(self) -> None:
        running = sum(1 for rid in self._live if self._runs[rid]["status"] == "running")
        for rid, live in list(self._live.items()):
            rec = self._runs[rid]
            if rec["status"] != "queued" or live.plan is None:
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
            fd = os.open(self._path(rid, "log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
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
              env: dict | None = None, setup: Setup | None = None) -> dict:
        """Start (or queue) a run; `env` is set inside the sandbox over the scrubbed
        environment, `setup` is what the user's own config adds (see moss.tools.sandbox)."""
        if not isinstance(cmd, str) or not cmd.strip():
            raise MossError("runs.start: cmd must be a non-empty command string", kind="usage")
        check_level(access)
        extra = check_env(env, "runs.start")
        require_write(access, "starting a run (runs write files)")
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
            "host_start": _proc_start(os.getpid()), "alerts": [],
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

    def _public(self, rec: dict) -> dict:
        out = {k: v for k, v in rec.items() if k not in ("pid_start", "host_start", "host_pid")}
        out["alerts"] = [dict(a) for a in rec["alerts"]]
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
        path = self._path(rid, "log")
        try:
            with open(path, "rb") as fh:
                fh.seek(0, os.SEEK_END)
                size = fh.tell()
                fh.seek(max(0, size - 4 * chars))
                data = fh.read()
        except OSError:
            return ""
        return data.decode("utf-8", "replace")[-chars:]

    def stop(self, rid: str, reason: str = "stopped on request", wait: float = KILL_GRACE + 1.0) -> dict:
        """Stop a run (SIGTERM to its group, SIGKILL after 2 s); returns its record once it ended."""
        with self._lock:
            rec = self._get(rid)
            if rec["status"] in TERMINAL:
                return self._public(rec)
            live = self._live.get(rid)
            if rec["status"] == "queued":
                self._set_status(rec, "stopped", error=reason)
                return self._public(rec)
            if live is None:  # owned by another live moss process
                procs.signal_group(rec.get("pid"), signal.SIGTERM)
                return self._public(rec)
            self._signal_stop(rid, reason)
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
                if rec.get("detached") and rec["status"] == "running":
                    continue
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
