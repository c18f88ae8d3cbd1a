"""A client for the Ray Jobs REST API (the cluster's dashboard, e.g. http://127.0.0.1:8265).

moss uses an existing distributed engine rather than a scheduler of its own: a run of the
``ray`` executor is one Ray job, its command the job's entrypoint. This module speaks the
API over HTTP with the standard library, so the host never imports Ray:

    POST   /api/jobs/                     submit {entrypoint, submission_id, runtime_env,
                                          metadata, entrypoint_num_cpus, entrypoint_num_gpus}
    GET    /api/jobs/                     every job the cluster knows (its specs and metadata)
    GET    /api/jobs/{id}                 status (PENDING RUNNING SUCCEEDED FAILED STOPPED)
    GET    /api/jobs/{id}/logs            {"logs": the whole driver log so far}
    POST   /api/jobs/{id}/stop            SIGTERM, then SIGKILL (Ray's grace)
    DELETE /api/jobs/{id}                 forget a terminal job
    GET    /api/version                   reachability and versions
    GET|PUT /api/packages/gcs/{name}      the working directory as a content-addressed zip

The project is uploaded the way Ray's own client does it (ray/dashboard/modules/
dashboard_sdk.py, ray/_private/runtime_env/packaging.py): a zip of the directory named
``_ray_pkg_<hash of the content>.zip``, uploaded only when the cluster does not have it yet,
and named in the job's ``runtime_env.working_dir`` as ``gcs://<name>``. Files are those
ripgrep would list (.gitignore respected, git or not), never ``.git/`` or ``.moss/``.
"""

from __future__ import annotations

import hashlib
import io
import ipaddress
import json
import os
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path
from typing import Any

from ..errors import MossError

__all__ = ["RayJobs", "resolve_address", "STATUS", "RAY_TERMINAL"]

# Ray's job status -> moss's run status
STATUS = {"PENDING": "queued", "RUNNING": "running", "SUCCEEDED": "finished", "FAILED": "failed",
          "STOPPED": "stopped"}
RAY_TERMINAL = frozenset({"SUCCEEDED", "FAILED", "STOPPED"})
MAX_PACKAGE = 512 * 1024 * 1024  # Ray's GCS limit for a package (GCS_STORAGE_MAX_SIZE)
PKG_PREFIX = "_ray_pkg_"


def resolve_address(explicit: str | None, env=os.environ) -> str:
    """The dashboard URL: `explicit` (from [agent.wild] ray_address or the call), else
    $RAY_ADDRESS; a bare host:port gets http://. MossError(kind="config") when neither is set."""
    addr = (explicit or env.get("RAY_ADDRESS") or "").strip()
    if not addr:
        raise MossError("the ray executor needs the cluster's dashboard address: set [agent.wild] ray_address "
                        '(e.g. "http://127.0.0.1:8265") or RAY_ADDRESS', kind="config")
    if addr.startswith("ray://"):
        raise MossError(f"ray_address {addr!r} is a Ray Client address; moss talks to the Jobs API of the "
                        "dashboard: use http://HEAD:8265", kind="config")
    if "://" not in addr:
        addr = "http://" + addr
    scheme = urllib.parse.urlsplit(addr).scheme
    if scheme not in ("http", "https"):
        raise MossError(f"ray_address {addr!r}: only http:// and https:// are supported", kind="config")
    return addr.rstrip("/")


def _loopback(host: str | None) -> bool:
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def package_files(root: Path) -> list[str]:
    """The files that make up the job's working directory, root-relative, sorted."""
    from .resolve import list_files

    return sorted(f for f in list_files(root) if not (f == ".moss" or f.startswith(".moss/")))


def fingerprint(root: Path, files: list[str]) -> tuple:
    """Path, size and mtime of every file: unchanged, the package need not be rebuilt."""
    out = []
    for rel in files:
        try:
            st = (Path(root) / rel).stat()
        except OSError:
            continue
        out.append((rel, st.st_size, st.st_mtime_ns))
    return tuple(out)


def build_package(root: Path, files: list[str] | None = None) -> tuple[str, bytes]:
    """(package name, zip bytes) for the project at `root`; the name is the content's hash."""
    root = Path(root)
    files = package_files(root) if files is None else files
    h = hashlib.sha1()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, strict_timestamps=False) as zf:
        for rel in files:
            path = root / rel
            try:
                if not path.is_file():
                    continue
                data = path.read_bytes()
            except OSError:
                continue
            h.update(rel.encode("utf-8", "surrogateescape") + b"\0" + len(data).to_bytes(8, "big"))
            h.update(data)
            info = zipfile.ZipInfo(rel, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = (path.stat().st_mode & 0o777 | 0o100000) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
            if buf.tell() > MAX_PACKAGE:
                raise MossError(f"the project is over {MAX_PACKAGE >> 20} MiB zipped, Ray's limit for a working "
                                "directory: list large files in .gitignore", kind="usage")
    return f"{PKG_PREFIX}{h.hexdigest()}.zip", buf.getvalue()


class RayJobs:
    """One Ray cluster's Jobs API. Every failure is a MossError naming the address."""

    def __init__(self, address: str, timeout: float = 10.0):
        self.address = address.rstrip("/")
        self.timeout = timeout
        host = urllib.parse.urlsplit(self.address).hostname
        # never route a loopback cluster through a proxy from the environment
        handlers = [urllib.request.ProxyHandler({})] if _loopback(host) else []
        self._opener = urllib.request.build_opener(*handlers)
        self._uploaded: set[str] = set()
        self._last: tuple | None = None  # (root, fingerprint, name) of the last package

    # ---- HTTP ---------------------------------------------------------------------------------
    def _request(self, method: str, path: str, body=None, *, raw: bytes | None = None,
                 ok=(200,), timeout: float | None = None) -> tuple[int, bytes]:
        url = self.address + path
        data, headers = raw, {"Accept": "application/json"}
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with self._opener.open(req, timeout=timeout or self.timeout) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as e:
            payload = e.read()
            if e.code in ok:
                return e.code, payload
            detail = payload.decode("utf-8", "replace").strip()
            try:
                detail = json.loads(detail).get("message") or detail
            except (ValueError, AttributeError):
                pass
            kind = "not_found" if e.code == 404 else "usage" if 400 <= e.code < 500 else "io"
            raise MossError(f"Ray cluster at {self.address}: {method} {path} answered {e.code}: "
                            f"{str(detail)[:500]}", kind=kind) from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise MossError(f"cannot reach the Ray cluster at {self.address} ({reason}); is its dashboard "
                            "running (ray start --head) and ray_address right?", kind="io") from None

    def _json(self, method: str, path: str, body=None, **kw):
        status, payload = self._request(method, path, body, **kw)
        try:
            return json.loads(payload.decode("utf-8") or "null")
        except ValueError:
            raise MossError(f"Ray cluster at {self.address}: {method} {path} did not answer JSON",
                            kind="io") from None

    # ---- the API --------------------------------------------------------------------------------
    def version(self) -> dict:
        return self._json("GET", "/api/version")

    def upload_project(self, root: Path) -> str:
        """Upload the project as a package unless the cluster has it; its gcs:// URI."""
        files = package_files(root)
        fp = fingerprint(root, files)
        if self._last and self._last[:2] == (str(root), fp) and self._last[2] in self._uploaded:
            return f"gcs://{self._last[2]}"  # a sweep's runs share one package: zipped once
        name, data = build_package(root, files)
        self._last = (str(root), fp, name)
        if name not in self._uploaded:
            status, _ = self._request("GET", f"/api/packages/gcs/{name}", ok=(200, 404))
            if status != 200:
                self._request("PUT", f"/api/packages/gcs/{name}", raw=data, timeout=max(self.timeout, 120))
            self._uploaded.add(name)
        return f"gcs://{name}"

    def has_package(self, name: str) -> bool:
        status, _ = self._request("GET", f"/api/packages/gcs/{name}", ok=(200, 404))
        return status == 200

    def put_package(self, name: str, data: bytes) -> str:
        """Upload a package (a zip named by its content's hash); its gcs:// URI."""
        if len(data) > MAX_PACKAGE:
            raise MossError(f"package {name} is {len(data) >> 20} MiB, over Ray's limit of {MAX_PACKAGE >> 20} MiB "
                            "for one package", kind="usage")
        self._request("PUT", f"/api/packages/gcs/{name}", raw=data, timeout=max(self.timeout, 120))
        self._uploaded.add(name)
        return f"gcs://{name}"

    def jobs(self) -> list[dict]:
        """Every job the cluster knows, with its entrypoint, runtime_env and metadata."""
        out = self._json("GET", "/api/jobs/")
        return out if isinstance(out, list) else []

    def submit(self, entrypoint: str, submission_id: str, *, runtime_env: dict | None = None,
               metadata: dict | None = None, num_cpus: float | None = None, num_gpus: float | None = None) -> str:
        body: dict[str, Any] = {"entrypoint": entrypoint, "submission_id": submission_id, "runtime_env": runtime_env or {},
                "metadata": {str(k): str(v) for k, v in (metadata or {}).items()}}
        if num_cpus is not None:
            body["entrypoint_num_cpus"] = num_cpus
        if num_gpus:
            body["entrypoint_num_gpus"] = num_gpus
        out = self._json("POST", "/api/jobs/", body)
        return (out or {}).get("submission_id") or submission_id

    def status(self, submission_id: str) -> dict:
        """The job's details: status, message, driver_exit_code, start_time, end_time, ..."""
        return self._json("GET", f"/api/jobs/{urllib.parse.quote(submission_id)}") or {}

    def logs(self, submission_id: str) -> str:
        out = self._json("GET", f"/api/jobs/{urllib.parse.quote(submission_id)}/logs") or {}
        return out.get("logs") or ""

    def stop(self, submission_id: str) -> bool:
        out = self._json("POST", f"/api/jobs/{urllib.parse.quote(submission_id)}/stop") or {}
        return bool(out.get("stopped"))

    def delete(self, submission_id: str) -> bool:
        out = self._json("DELETE", f"/api/jobs/{urllib.parse.quote(submission_id)}") or {}
        return bool(out.get("deleted"))
