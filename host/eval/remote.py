"""One eval attempt inside a Ray job: what ``moss eval --executor ray`` runs on the cluster.

The driver (host/eval/ray_executor.py) submits ``python3 -m moss.eval.remote SPEC`` as the
job's entrypoint (SPEC the attempt as JSON, or ``@PACKAGE`` naming a package holding it when it
is too long for a command line), with moss's own source as a ``py_modules`` package (so the job runs the
driver's moss) and the attempt's files as further packages: the task's repository, the
project's ``.moss/`` (only when the project is trusted) and the cell's variant folder. Ray
unpacks each package into a folder named after it and puts that folder on ``PYTHONPATH``; this
module finds them there by name, unpacks the tar each holds, and runs the attempt exactly as
``--executor local`` would (``LocalAttempts.run``: a fresh copy, the agent as a subprocess, the
check), in this job's own temp folder.

Everything comes back through the job's log, as lines the driver parses:

    MOSS-REMOTE {"moss": ..., "python": ..., "host": ...}    which moss ran where
    MOSS-FILE {"name": "log"|"stderr", "data": base64(gzip)}  the session log, the agent's stderr
    MOSS-ATTEMPT {row}                                          the attempt's row, printed last

Credentials never travel with the job: the agent gets the model's key from this node's
environment (the raylet's, set by whoever ran ``ray start``), or from the file named by
``MOSS_CREDENTIALS_FILE`` there (``NAME=VALUE`` lines). Every line this module prints has the
values of this process's secret-looking variables masked (host/redact.py).
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import signal
import socket
import sys
import tarfile
import tempfile
from pathlib import Path

ATTEMPT = "MOSS-ATTEMPT"
FILE = "MOSS-FILE"
REMOTE = "MOSS-REMOTE"
TAR = "moss-package.tar"       # the one member of every data package
SPEC = "moss-spec.json"        # the one member of a spec package (a spec too long for the command line)
MAX_FILE = 8 * 1024 * 1024     # bytes of a session log or stderr sent back (more: cut to the tail)
PROTOCOL = 1


def _emit(tag: str, payload: dict) -> None:
    from .. import redact

    line = redact.text(json.dumps(payload, ensure_ascii=True, default=str))
    sys.stdout.write(f"{tag} {line}\n")
    sys.stdout.flush()


def package_dir(name: str, pythonpath: str | None = None) -> Path:
    """The folder Ray unpacked the package `name` (``_ray_pkg_<hash>.zip``) into: the entry of
    PYTHONPATH named after it."""
    stem = name[:-4] if name.endswith(".zip") else name
    for entry in (pythonpath if pythonpath is not None else os.environ.get("PYTHONPATH", "")).split(os.pathsep):
        if entry and Path(entry).name == stem and Path(entry).is_dir():
            return Path(entry)
    raise RuntimeError(f"package {name} is not among this job's py_modules (PYTHONPATH)")


def unpack(name: str, dest: Path) -> Path:
    """Unpack the tar the package holds into `dest` (links kept as links; none may lead out,
    no device or absolute path: tarfile's ``data`` filter)."""
    if not hasattr(tarfile, "data_filter"):
        raise RuntimeError("moss's Ray jobs need Python 3.11.4 or later on the node (tarfile's data filter)")
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(package_dir(name) / TAR) as tf:
        tf.extractall(dest, filter="data")
    return dest


def credentials(env: dict) -> dict:
    """The node's own credentials file (MOSS_CREDENTIALS_FILE: ``NAME=VALUE`` lines, ``#``
    comments) laid over `env`; the file's variables win over the node's environment."""
    path = env.get("MOSS_CREDENTIALS_FILE")
    if not path:
        return env
    out = dict(env)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise RuntimeError(f"MOSS_CREDENTIALS_FILE {path}: {e.strerror or e}") from None
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, eq, value = line.partition("=")
        name = name.strip().removeprefix("export ").strip()
        if not eq or not name.isidentifier():
            raise RuntimeError(f"MOSS_CREDENTIALS_FILE {path}:{n}: not NAME=VALUE")
        out[name] = value.strip().strip("'\"")
    return out


def _send_file(name: str, path: str | None) -> None:
    if not path or not os.path.isfile(path) or os.path.islink(path):
        return
    from .. import redact

    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - MAX_FILE))
        data = f.read()
    text = redact.text(data.decode("utf-8", "replace"))
    _emit(FILE, {"name": name, "cut": size > MAX_FILE,
                 "data": base64.b64encode(gzip.compress(text.encode("utf-8"))).decode("ascii")})


def run(spec_json: str) -> int:
    import time

    t0 = time.time()  # when moss's code began on the node (the job's own start is Ray's)
    from . import attempt as att
    from .executors import LocalAttempts
    from .. import __version__
    from .suite import Check, Task

    spec_pkg = spec_json[1:] if spec_json.startswith("@") else None
    if spec_pkg:
        spec_json = (package_dir(spec_pkg) / SPEC).read_text(encoding="utf-8")
    d = json.loads(spec_json)
    if d.get("protocol") != PROTOCOL:
        print(f"moss.eval.remote: protocol {d.get('protocol')!r}, this moss speaks {PROTOCOL}", file=sys.stderr)
        return 2
    try:  # first: the file's secrets are masked in every line printed from here on
        os.environ.update(credentials(dict(os.environ)))
        trouble = None
    except RuntimeError as e:
        trouble = str(e)
    _emit(REMOTE, {"moss": str(Path(__file__).resolve().parents[1]), "version": __version__,
                   "python": sys.executable, "host": socket.gethostname(), "pid": os.getpid()})
    control = att.Control()
    signal.signal(signal.SIGTERM, lambda *_: control.stop("stopped"))  # Ray's stop: end cleanly, say so
    key = str(d["key"])
    row: dict = {"key": key}
    base = Path(tempfile.mkdtemp(prefix="moss-ray-"))
    try:
        if trouble:
            raise RuntimeError(trouble)
        t = d["task"]
        repo = unpack(d["repo"], base / "repo")
        project = unpack(d["project"], base / "project") if d.get("project") else (base / "project")
        project.mkdir(exist_ok=True)
        variant = unpack(d["variant"], base / "variant") if d.get("variant") else None
        task = Task(id=t["id"], repo=repo, commit=t.get("commit") or "", prompt=t["prompt"],
                    setup=list(t.get("setup") or []), tags=list(t.get("tags") or []),
                    check=Check(**{**t["check"], "run": tuple(t["check"].get("run") or ())}),
                    solution=[], solution_answer=None)
        spec = att.Spec(key=key, task=task, cell=str(d["cell"]), trial=int(d["trial"]),
                        args=[str(a) for a in d.get("args") or []], variant=variant, info=dict(d.get("info") or {}),
                        max_cost=d.get("max_cost"), max_tokens=d.get("max_tokens"))
        ours = {str(package_dir(n)) for n in (d["repo"], d.get("project"), d.get("variant"), spec_pkg) if n}
        env = dict(os.environ)
        # the agent imports moss from its package; the data packages are no module path of its
        env["PYTHONPATH"] = os.pathsep.join(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p not in ours)
        logs = base / "logs"
        logs.mkdir()
        ex = LocalAttempts(project_root=project, project_trusted=bool(d.get("project")), logs=logs, env=env)
        ex.forked = False  # one attempt per job: a zygote would only add a process
        row = ex.run(spec, control)
        _send_file("stderr", row.pop("stderr", None))
        _send_file("log", row.pop("log", None))
    except Exception as e:  # whatever went wrong is this attempt's infrastructure, said in its row
        row.update(reason="infra_error", detail=f"on the Ray node: {type(e).__name__}: {e}")
    finally:
        for k in ("home", "copy"):
            home = row.pop(k, None)
            if k == "home" and home:
                from . import copies

                copies.remove(Path(home))
        import shutil

        shutil.rmtree(base, ignore_errors=True)
    if control.stopped:
        row["reason"] = "stopped"
    row["remote"] = {"host": socket.gethostname(), "t0": round(t0, 3), "t1": round(time.time(), 3)}
    _emit(ATTEMPT, row)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m moss.eval.remote SPEC_JSON (moss eval --executor ray submits it)", file=sys.stderr)
        return 2
    return run(argv[0])


if __name__ == "__main__":
    sys.exit(main())
