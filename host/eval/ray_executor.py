"""``moss eval --executor ray``: each attempt one Ray job, through the cluster's Jobs REST API.

The driver never imports Ray (host/tools/ray_jobs.py speaks HTTP). Per attempt it submits
``python3 -P -m moss.eval.remote SPEC`` (host/eval/remote.py) with these content-hashed packages as
the job's ``py_modules``, each uploaded once (GET, then PUT only when the cluster lacks it):

- moss's own source (``moss/``, Lua scripts included), so the job runs the driver's moss;
  moss's dependencies must be installed in the nodes' ``python3`` (docs/fleet.md);
- the task's repository (a tar inside the zip: links stay links, modes kept, ``.git`` too);
- the project's ``.moss/config.toml`` and ``.moss/scripts/``, only when the project is trusted
  (what ``--executor local`` lays into each copy);
- the cell's variant folder, when it has one.

The job runs the attempt as ``LocalAttempts`` does, in a fresh copy on the node, and prints
its row as one ``MOSS-ATTEMPT`` line; the driver reads the job's log when it ends and returns
that row, with the session log and stderr the job sent (``MOSS-FILE`` lines) written under the
results folder. Nothing needs a shared filesystem.

Submission ids are deterministic, ``moss-eval-RUN-HASH-tN`` (RUN from ``ray.json`` in the results
folder, HASH from the attempt's key, N the try), so a resumed eval finds its jobs on the
cluster: it waits for one still running, collects one that ended while no driver watched, and
submits only what is missing. A job that ends without a row (stopped on the cluster, its node
lost, its process killed) makes the attempt an ``infra_error``, never the agent's failure; the
runner runs it again up to ``--retries`` times, each time as the next N (earlier failed jobs
on the cluster count, so a resume does not start more than ``--retries`` + 1 jobs for one
attempt). A job the eval stopped itself (the budget, Ctrl-C) is listed in ``ray.json`` and not
counted as a failed try.

No credential travels: the job's ``env_vars`` carry only ``*_BASE_URL`` variables (where the
model is, not how to sign in: scheme, host, port and a plain path; one that holds more is
refused, job_env) and the entrypoint only the attempt; the job reads its key from the node
(host/eval/remote.py).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import os
import re
import secrets
import stat
import tarfile
import threading
import time
import zipfile
from dataclasses import asdict
from pathlib import Path, PurePosixPath

from .. import redact
from ..errors import MossError
from ..tools import ray_jobs
from . import attempt as att
from . import remote, results
from .executors import AttemptExecutor

STATE = "ray.json"     # in the results folder: the run's id, the cluster, the jobs the eval stopped
POLL = 0.5             # seconds between status requests for one job
STOP_WAIT = 15.0       # seconds a stopped attempt waits for its job to end (Ray: SIGTERM, SIGKILL after 3 s)
UNREACHABLE = 120.0    # seconds the cluster may not answer before a watched attempt is an infra_error
PYTHON = "python3"     # the nodes' interpreter (it must have moss's dependencies)
MAX_INLINE = 32 * 1024  # bytes of spec in the entrypoint (one argument of `sh -c`: Linux takes 128 KiB)
_TRAVELS = re.compile(r"^[A-Z][A-Z0-9_]*_BASE_URL$")  # not secret: where a provider is


def travels(name: str, value: str) -> bool:
    """Whether the driver's variable `name` may go in a job's `env_vars`, which anyone who can
    read the cluster's job list sees: only `*_BASE_URL` (where a provider is), and only a plain
    one (base_url_problem)."""
    return bool(_TRAVELS.match(name)) and base_url_problem(value) is None


_PLAIN_PATH = re.compile(r"^[A-Za-z0-9._~/-]*$")
_KEYLIKE = re.compile(r"^(?=[A-Za-z0-9]*[A-Za-z])(?=[A-Za-z0-9]*[0-9])[A-Za-z0-9]{20,}$")


def base_url_problem(value: str) -> str | None:
    """Why `value` is more than where a provider is (so it must not reach the job list), or
    None for scheme://host[:port][/path] alone. Gateways take keys in a query (`?key=`,
    `?code=`, `?subscription-key=`), a user:password part or the path; a run of 20 or more
    letters and digits, mixed, between the path's `/`, `-`, `_` and `.` counts as a key (a
    model's name, `gpt-4o-mini-2024-07-18`, or a UUID has none)."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - a port that is not a number raises here
    except ValueError:
        return "it is not a URL moss can read"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "it is not an http(s) URL with a host"
    if parts.username is not None or parts.password is not None:
        return "it holds a user name or password (user:password@)"
    if parts.query or "?" in value:
        return "it has a query (?...), where gateways take keys"
    if parts.fragment or "#" in value:
        return "it has a fragment (#...)"
    if not _PLAIN_PATH.match(parts.path):
        return "its path holds characters a plain path does not (only letters, digits and . _ ~ - /)"
    if redact.text(value) != value or any(_KEYLIKE.match(w) for w in re.split(r"[/_.-]", parts.path)):
        return "its path holds a part that looks like a key"
    return None


def job_env(env) -> dict[str, str]:
    """The variables a job's `env_vars` carry from the driver's environment `env`: each plain
    `*_BASE_URL` and PYTHONUNBUFFERED. A `*_BASE_URL` that holds more is refused, saying why:
    left out, the job would send the node's key to the provider's default endpoint instead."""
    out = {}
    for name, value in sorted(env.items()):
        if not _TRAVELS.match(name):
            continue
        problem = base_url_problem(value)
        if problem:
            raise MossError(f"{name} cannot go to the Ray cluster: {problem}, and a job's environment is shown "
                            f"to anyone who can reach the cluster's dashboard. Set {name} in the environment "
                            f"`ray start` runs with on each node (as its key is) and unset it here, or use a "
                            f"base URL of only scheme://host:port/path", kind="usage")
        out[name] = value
    out["PYTHONUNBUFFERED"] = "1"
    return out


def _zip(entries: list[tuple[str, bytes, int]]) -> tuple[str, bytes]:
    """A deterministic zip of (name, data, mode) entries, named by its content's hash."""
    h = hashlib.sha1()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data, mode in sorted(entries):
            h.update(name.encode("utf-8", "surrogateescape") + b"\0" + len(data).to_bytes(8, "big"))
            h.update(data)
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = ((mode & 0o777) | 0o100000) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    return f"{ray_jobs.PKG_PREFIX}{h.hexdigest()}.zip", buf.getvalue()


def moss_package() -> tuple[str, bytes]:
    """moss's own source as a py_modules package: ``moss/`` (host/) with ``moss/scripts/``."""
    from ..roots import builtin_scripts_dir

    here = Path(__file__).resolve().parents[1]
    entries: list[tuple[str, bytes, int]] = []

    def add(root: Path, prefix: str) -> None:
        for top, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for f in sorted(files):
                p = Path(top) / f
                if f.endswith((".pyc", ".pyo")) or p.is_symlink() or not p.is_file():
                    continue
                rel = p.relative_to(root).as_posix()
                entries.append((f"{prefix}{rel}", p.read_bytes(), p.stat().st_mode))

    add(here, "moss/")
    scripts = builtin_scripts_dir().resolve()
    if here not in scripts.parents:  # a source checkout: scripts/ beside host/
        add(scripts, "moss/scripts/")
    return _zip(entries)


def _tar(members: list[tuple[str, Path]]) -> bytes:
    """A deterministic tar of (name, path) members: folders, regular files and links as links."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for name, path in sorted(members):
            st = os.lstat(path)
            info = tarfile.TarInfo(name)
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            info.mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISLNK(st.st_mode):
                info.type, info.linkname = tarfile.SYMTYPE, os.readlink(path)
                tf.addfile(info)
            elif stat.S_ISDIR(st.st_mode):
                info.type = tarfile.DIRTYPE
                tf.addfile(info)
            elif stat.S_ISREG(st.st_mode):
                data = path.read_bytes()
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _walk(root: Path, prefix: str = "", skip: frozenset = frozenset()) -> list[tuple[str, Path]]:
    """Every folder, file and link under `root` (links not followed), minus the `skip` paths."""
    out: list[tuple[str, Path]] = []
    for top, dirs, files in os.walk(root):
        rel_top = PurePosixPath(Path(top).relative_to(root).as_posix())
        keep = []
        for name in dirs + files:
            rel = rel_top / name if str(rel_top) != "." else PurePosixPath(name)
            if rel in skip:
                continue
            p = Path(top) / name
            out.append((prefix + rel.as_posix(), p))
            if name in dirs and not p.is_symlink():
                keep.append(name)
        dirs[:] = [d for d in dirs if d in keep]
    return out


def data_package(members: list[tuple[str, Path]]) -> tuple[str, bytes]:
    """Files as a package: one tar (remote.TAR) inside the zip Ray unpacks."""
    return _zip([(remote.TAR, _tar(members), 0o644)])


class RayAttempts(AttemptExecutor):
    """Each attempt one Ray job on the cluster at ``--ray-address`` / ``[eval] ray_address`` /
    $RAY_ADDRESS (the dashboard, e.g. http://HEAD:8265)."""

    name = "ray"

    def __init__(self, **kw):
        super().__init__(**kw)
        self.client: ray_jobs.RayJobs | None = None
        self.address = ""
        self.num_cpus: float = 1
        self.retries = 1
        self.run_id = ""
        self.out: Path | None = None
        self._stopped: set[str] = set()     # submission ids the eval stopped (budget, Ctrl-C)
        self._lock = threading.Lock()
        self._pkg_lock = threading.Lock()
        self._save_lock = threading.Lock()
        self._names: dict[tuple, str] = {}  # what a package holds -> its name
        self._checked: dict[str, float] = {}  # package name -> when the cluster last had it

    # ---- the run ---------------------------------------------------------------------------
    def prepare(self, out: Path, opts: dict) -> None:
        """Before any attempt: the cluster answers, the options are sane, the run has its id
        (``ray.json``; a resumed run keeps the one it had)."""
        if opts.get("record") or opts.get("replay"):
            raise MossError("--record and --replay need --executor local: a Ray job's cassette would stay on the "
                            "cluster", kind="usage")
        state: dict = {}
        file = Path(out) / STATE
        if file.exists():
            try:
                state = json.loads(results._read_text(file))
            except ValueError:
                raise MossError(f"{file} is not JSON: cannot find this eval's Ray jobs", kind="config") from None
        cpus = opts.get("num_cpus")
        if cpus is None:
            cpus = state.get("num_cpus", 1)
        if isinstance(cpus, bool) or not isinstance(cpus, (int, float)) or not 0 < cpus <= 1024:
            raise MossError(f"--num-cpus must be a number above 0, got {cpus!r}", kind="usage")
        retries = opts.get("retries")  # the runner's (--retries): here also how many failed jobs a resume allows
        if retries is None:
            retries = 0
        if isinstance(retries, bool) or not isinstance(retries, (int, float)) or retries != int(retries) \
                or not 0 <= retries <= 100:
            raise MossError(f"--retries must be a whole number from 0 to 100, got {retries!r}", kind="usage")
        job_env(self.env)  # a base URL that cannot travel: said before the cluster is asked
        self.address = ray_jobs.resolve_address(opts.get("ray_address") or state.get("address"), self.env)
        self.client = ray_jobs.RayJobs(self.address)
        self.client.version()  # unreachable: one clear line before any attempt
        self.num_cpus = int(cpus) if float(cpus).is_integer() else float(cpus)
        self.retries = int(retries)
        self.run_id = str(state.get("run") or secrets.token_hex(4))
        self._stopped = {str(s) for s in state.get("stopped") or []}
        self.out = Path(out)
        self._save()

    def _save(self) -> None:
        assert self.out is not None
        with self._save_lock:
            with self._lock:
                data = {"run": self.run_id, "address": self.address, "num_cpus": self.num_cpus,
                        "stopped": sorted(self._stopped)}
            results.write(self.out / STATE, json.dumps(data, indent=2) + "\n")

    def submission_id(self, key: str, n: int) -> str:
        return f"moss-eval-{self.run_id}-{hashlib.sha1(key.encode()).hexdigest()[:12]}-t{n}"

    # ---- packages --------------------------------------------------------------------------
    def _package(self, what: tuple, build) -> str:
        """The package `what` names (built once), on the cluster: asked for before a job at most
        every 30 s (the cluster drops a package no job uses; each GET pins it for 10 minutes,
        RAY_RUNTIME_ENV_URI_PIN_EXPIRATION_S) and uploaded when missing."""
        assert self.client is not None
        with self._pkg_lock:
            name = self._names.get(what)
            data = None
            if name is None:
                name, data = build()
                self._names[what] = name
            if time.monotonic() - self._checked.get(name, -1e9) > 30:
                if not self.client.has_package(name):
                    if data is None:
                        name2, data = build()
                        if name2 != name:  # the files changed under the eval: use what is there now
                            self._names[what] = name = name2
                    self.client.put_package(name, data)
                self._checked[name] = time.monotonic()
            return name

    def _project_members(self) -> list[tuple[str, Path]]:
        from ..tools import safefs

        out: list[tuple[str, Path]] = []
        root = Path(self.project_root)
        with safefs.Tree(root) as tree:  # the project's own files, never through a planted link
            st = tree.lstat(".moss/config.toml")
            if st is not None and stat.S_ISREG(st.st_mode):
                out.append((".moss/config.toml", root / ".moss/config.toml"))
            st = tree.lstat(".moss/scripts")
            if st is not None and stat.S_ISDIR(st.st_mode):
                out += [(".moss/scripts", root / ".moss/scripts"),
                        *_walk(root / ".moss/scripts", ".moss/scripts/")]
        return out

    def _packages(self, spec: att.Spec) -> dict:
        task = spec.task
        skip = frozenset(PurePosixPath(e) for e in getattr(task, "exclude", []) or [])
        pk = {"moss": self._package(("moss",), moss_package),
              "repo": self._package(("repo", str(task.repo), tuple(sorted(map(str, skip)))),
                                    lambda: data_package(_walk(Path(task.repo), "", skip))),
              "project": None, "variant": None}
        if self.project_trusted:
            members = self._project_members()
            if members:
                pk["project"] = self._package(("project",), lambda: data_package(self._project_members()))
        if spec.variant is not None:
            v = Path(spec.variant)
            if not v.is_dir():
                raise MossError(f"--variant: {v} is not a folder", kind="usage")
            pk["variant"] = self._package(("variant", str(v)), lambda: data_package(_walk(v)))
        return pk

    def _submission(self, spec: att.Spec) -> tuple[str, dict]:
        pk = self._packages(spec)
        t = spec.task
        doc = {"protocol": remote.PROTOCOL, "key": spec.key, "cell": spec.cell, "trial": spec.trial,
               "args": list(spec.args), "info": spec.info, "max_cost": spec.max_cost, "max_tokens": spec.max_tokens,
               "task": {"id": t.id, "commit": t.commit, "prompt": t.prompt, "setup": list(t.setup),
                        "tags": list(t.tags), "check": {**asdict(t.check), "run": list(t.check.run)}},
               "repo": pk["repo"], "project": pk["project"], "variant": pk["variant"]}
        import shlex

        text = json.dumps(doc, ensure_ascii=False)
        mods = [f"gcs://{pk['moss']}", *(f"gcs://{pk[k]}" for k in ("repo", "project", "variant") if pk[k])]
        if len(text.encode("utf-8")) > MAX_INLINE:  # a long prompt: the spec travels as a package of its own
            data = text.encode("utf-8")
            name = self._package(("spec", hashlib.sha1(data).hexdigest()), lambda: _zip([(remote.SPEC, data, 0o644)]))
            mods.append(f"gcs://{name}")
            text = "@" + name
        entry = f"{PYTHON} -P -m moss.eval.remote {shlex.quote(text)}"  # -P: never a module from the job's folder
        return entry, {"py_modules": mods, "env_vars": job_env(self.env)}

    # ---- one attempt -------------------------------------------------------------------------
    def run(self, spec: att.Spec, control: att.Control) -> dict:
        row = att.base_row(spec)
        start = time.monotonic()
        try:
            self._attempt(spec, control, row)
        except MossError as e:
            row.update(reason="infra_error", detail=e.message)
        except OSError as e:
            row.update(reason="infra_error", detail=f"{type(e).__name__}: {e}")
        waited = round(time.monotonic() - start, 3)
        if isinstance(row.get("ray"), dict):
            row["ray"].pop("submitted", None)
            row["ray"]["waited"] = waited  # submission, queue, the job's start-up and the attempt
        if not isinstance(row.get("wall"), (int, float)):
            row["wall"] = waited
        return row

    def _attempt(self, spec: att.Spec, control: att.Control, row: dict) -> None:
        if self.client is None:
            raise MossError("the ray executor was not prepared (no cluster address)", kind="usage")
        failures: list[str] = []
        wake = threading.Event()
        current: list[str] = []  # the job this attempt is on (submitted, or about to be)

        def stop_now() -> None:
            """The eval stops (the budget, Ctrl-C): ask the cluster to stop the job at once, from
            a thread of its own, so a process that exits right after still stopped it."""
            wake.set()
            if current:
                threading.Thread(target=self._stop_job, args=(current[-1],), daemon=True).start()

        control.on_stop(stop_now)
        try:
            n = 0
            submitted = False  # one new job per call: after a failed one the runner decides (--retries)
            while True:
                sid = self.submission_id(spec.key, n)
                current.append(sid)
                info = self._known(sid, control)
                if info is None:  # never submitted: the first try left to make
                    if control.stopped:
                        row.update(reason=control.reason or "interrupted")
                        return
                    if len(failures) > self.retries:
                        break
                    self._submit(spec, sid, n, control)
                    submitted = True
                    row["ray"] = {"submission_id": sid, "try": n + 1, "submitted": round(time.time(), 3)}
                else:
                    row["ray"] = {"submission_id": sid, "try": n + 1, "attached": True}
                info, out = self._watch(sid, control, wake, info)
                got = out.get("row")
                if got is not None and got.get("reason") != "stopped":
                    self._collect(spec, row, got, out)
                    self._timings(row["ray"], info, got.get("remote"))
                    return
                with self._lock:
                    ours = sid in self._stopped
                if control.stopped:
                    row.update(reason=control.reason or "interrupted")
                    row["ray"]["stopped"] = True
                    return
                if not ours:  # stopped on the cluster, lost, or ended without a row: a failed try
                    failures.append(self._why(sid, info, out))
                    if submitted or len(failures) > self.retries:
                        break
                n += 1
        finally:
            control.on_stop(None)
        row.update(reason="infra_error",
                   detail=f"the Ray job failed {len(failures)} time{'s' if len(failures) != 1 else ''} "
                          f"({'; '.join(failures)}); an infrastructure failure, not the agent's")

    def _submit(self, spec: att.Spec, sid: str, n: int, control: att.Control) -> None:
        """Submit try `n` of the attempt as job `sid` (a submission whose answer was lost but
        which the cluster took counts as made)."""
        assert self.client is not None
        entry, runtime_env = self._submission(spec)
        try:
            self.client.submit(entry, sid, runtime_env=runtime_env, num_cpus=self.num_cpus,
                               metadata={"moss_eval": self.run_id, "moss_attempt": spec.key, "moss_try": n,
                                         "moss_task": spec.task.id})
        except MossError:
            if self._known(sid, control) is None:  # not a lost answer to a submission that took
                raise
        with self._lock:  # a stop asked before this job existed is not this job's
            was = sid in self._stopped and not control.stopped
            if was:
                self._stopped.discard(sid)
        if was:
            self._save()

    def _known(self, sid: str, control: att.Control) -> dict | None:
        """The job's status on the cluster, or None when it was never submitted; a cluster that
        does not answer is asked again for up to UNREACHABLE s (unless the eval stops)."""
        assert self.client is not None
        first = time.monotonic()
        while True:
            try:
                return self.client.status(sid)
            except MossError as e:
                if e.kind == "not_found":
                    return None
                if e.kind != "io" or control.stopped or time.monotonic() - first > UNREACHABLE:
                    raise
            time.sleep(2.0)

    def _watch(self, sid: str, control: att.Control, wake: threading.Event, info: dict | None) -> tuple[dict, dict]:
        """Wait for the job to end (stopping it when the eval says so); (its status, what its
        log says). A job the cluster forgot is ``{"status": "LOST"}``."""
        assert self.client is not None
        stop_at: float | None = None
        unreachable: float | None = None
        while True:
            if control.stopped and stop_at is None:
                stop_at = time.monotonic()
                self._stop_job(sid)  # again: the first may have come before the job was submitted
            if info is not None and str(info.get("status")) in ray_jobs.RAY_TERMINAL:
                try:
                    return info, parse(self.client.logs(sid))
                except MossError as e:
                    return info, {"error": e.message}
            if stop_at is not None and time.monotonic() - stop_at > STOP_WAIT:
                return info or {}, {}
            if stop_at is None:
                wake.wait(POLL)  # set by a stop: it is handled at once
                if control.stopped:
                    continue
            else:
                time.sleep(POLL)
            try:
                info = self.client.status(sid)
                unreachable = None
            except MossError as e:
                if e.kind == "not_found":
                    return {"status": "LOST", "message": f"the cluster at {self.address} no longer knows it"}, {}
                unreachable = unreachable or time.monotonic()
                if time.monotonic() - unreachable > UNREACHABLE:
                    raise
                info = None
                (wake.wait if stop_at is None else time.sleep)(min(10.0, POLL * 4))

    def _stop_job(self, sid: str) -> None:
        """Remember that the eval stopped `sid` (not a failed try), then ask the cluster to stop it."""
        assert self.client is not None
        with self._lock:
            new = sid not in self._stopped
            self._stopped.add(sid)
        if new:
            self._save()
        try:
            self.client.stop(sid)
        except MossError:
            pass  # not submitted yet, or ended meanwhile: the job's status says

    @staticmethod
    def _timings(ray: dict, info: dict, remote_times) -> None:
        """Where a job's time went, from the cluster's clocks and ours (one machine, or NTP):
        ``started`` s from submission to the job's start in Ray, ``boot`` s from then to moss's
        code running on the node (Ray's job supervisor, the runtime env, the interpreter),
        ``ran`` s the job ran, ``ended`` s from moss's last line to the job's end in Ray,
        ``seen`` s from then to the driver having its log."""
        start, end, sub = info.get("start_time"), info.get("end_time"), ray.pop("submitted", None)
        if not (isinstance(start, (int, float)) and isinstance(end, (int, float)) and start and end):
            return
        if isinstance(sub, (int, float)):
            ray["started"] = round(start / 1000 - sub, 3)
        ray["ran"] = round((end - start) / 1000, 3)
        ray["seen"] = round(time.time() - end / 1000, 3)
        t = remote_times if isinstance(remote_times, dict) else {}
        if isinstance(t.get("t0"), (int, float)) and isinstance(t.get("t1"), (int, float)):
            ray["boot"] = round(t["t0"] - start / 1000, 3)
            ray["ended"] = round(end / 1000 - t["t1"], 3)

    @staticmethod
    def _why(sid: str, info: dict, out: dict) -> str:
        status = str(info.get("status") or "?")
        msg = str(info.get("message") or out.get("error") or "").strip().splitlines()
        what = f"{sid} {status}" + (f": {msg[0][:200]}" if msg else "")
        if out.get("row") is None and status == "SUCCEEDED":
            what += " without a result line"
        return what

    def _collect(self, spec: att.Spec, row: dict, got: dict, out: dict) -> None:
        ray = row.get("ray") or {}
        for k, v in got.items():  # wall: the attempt on the node, as --executor local counts it
            if k not in ("key", "task", "cell", "trial", "kind", "remote", "home", "copy", "kept"):
                row[k] = v
        ray.update({k: v for k, v in (out.get("remote") or {}).items() if k in ("moss", "host", "python")})
        row["ray"] = ray
        safe = att.safe_name(spec.key)
        for name, suffix in (("log", "jsonl"), ("stderr", "stderr")):
            data = out.get("files", {}).get(name)
            if data is not None:
                path = self.logs / f"{safe}.{suffix}"
                results.write(path, data)
                row[name] = str(path)


def parse(log: str) -> dict:
    """What a job's log says: ``row`` (the last MOSS-ATTEMPT line), ``files`` (name -> bytes of
    each MOSS-FILE line), ``remote`` (the MOSS-REMOTE line)."""
    out: dict = {"files": {}}
    for line in log.splitlines():
        tag, _, rest = line.partition(" ")
        if tag not in (remote.ATTEMPT, remote.FILE, remote.REMOTE):
            continue
        try:
            doc = json.loads(rest)
        except ValueError:
            continue
        if not isinstance(doc, dict):
            continue
        if tag == remote.ATTEMPT:
            out["row"] = doc
        elif tag == remote.REMOTE:
            out["remote"] = doc
        elif isinstance(doc.get("name"), str) and isinstance(doc.get("data"), str):
            try:
                out["files"][doc["name"]] = gzip.decompress(base64.b64decode(doc["data"]))
            except (ValueError, OSError, EOFError):
                continue
    return out
