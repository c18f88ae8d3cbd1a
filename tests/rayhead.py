"""A private Ray head node on 127.0.0.1 for the tests and the bench, started and stopped by PID.

Hardened so that nothing leaves the machine and nothing else is touched:
- usage stats off (RAY_USAGE_STATS_ENABLED=0, --disable-usage-stats) and their report URL
  pointed at a closed local port;
- a private HOME holding ray_bootstrap_config.yaml with `{}`, which makes Ray skip its cloud
  metadata probes; RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 keeps it on 127.0.0.1 (otherwise it
  binds the machine's interface and probes 8.8.8.8 to find it); RAY_AUTH_MODE=disabled;
- every port chosen here (free ones), a private --temp-dir, --num-cpus=2;
- `ray start --block` in a session of its own: stopping SIGKILLs that process group and the
  descendants found by PID, then checks by PID that gcs_server and raylet are gone.
  `ray stop` is never used (it kills every Ray process on the machine).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path


def ray_bin() -> str | None:
    cand = Path(sys.executable).parent / "ray"
    if cand.exists():
        return str(cand)
    return shutil.which("ray")


def ray_importable() -> bool:
    try:
        import ray  # noqa: F401
    except Exception:
        return False
    return ray_bin() is not None


def free_ports(n: int) -> list[int]:
    socks, ports = [], []
    try:
        while len(ports) < n:
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            p = s.getsockname()[1]
            socks.append(s)
            if p not in ports:
                ports.append(p)
    finally:
        for s in socks:
            s.close()
    return ports


def free_range(width: int) -> tuple[int, int]:
    """A run of `width` consecutive ports that are free now (for the worker ports)."""
    import random

    for _ in range(200):
        lo = random.randint(20000, 29000)
        ok = True
        for p in range(lo, lo + width):
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", p))
            except OSError:
                ok = False
                break
            finally:
                s.close()
        if ok:
            return lo, lo + width - 1
    raise RuntimeError("no free port range")


def _children(pid: int) -> list[int]:
    out = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                out += [int(x) for x in (task / "children").read_text().split()]
            except OSError:
                pass
    except OSError:
        pass
    return out


def descendants(pid: int) -> list[int]:
    seen, todo = [], [pid]
    while todo:
        p = todo.pop()
        for c in _children(p):
            if c not in seen:
                seen.append(c)
                todo.append(c)
    return seen


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class RayHead:
    """`with RayHead() as head: head.address` — a started head, stopped on exit."""

    def __init__(self, num_cpus: int = 2, base: str | None = None):
        self.num_cpus = num_cpus
        self.base = Path(tempfile.mkdtemp(prefix="mossray-", dir=base or "/tmp"))
        self.proc: subprocess.Popen | None = None
        self.address = ""
        self.known: dict[int, str] = {}  # pid -> comm of every process the head started
        self.started_in = 0.0

    def env(self) -> dict:
        home = self.base / "home"
        home.mkdir(exist_ok=True)
        (home / "ray_bootstrap_config.yaml").write_text("{}\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "ANTHROPIC_", "OPENAI_"))}
        env.update(HOME=str(home), RAY_USAGE_STATS_ENABLED="0", RAY_USAGE_STATS_REPORT_URL="http://127.0.0.1:9/",
                   RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", RAY_AUTH_MODE="disabled", PYTHONUNBUFFERED="1",
                   no_proxy="127.0.0.1,localhost", NO_PROXY="127.0.0.1,localhost")
        for k in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"):
            env.pop(k, None)
        return env

    def start(self, timeout: float = 90) -> "RayHead":
        (gcs, dash, client, nm, om, metrics, agent_grpc, agent_http, agent_listen, runtime_env_agent) = free_ports(10)
        lo, hi = free_range(40)
        tmp = self.base / "t"  # a short path: Ray's unix sockets live under it
        tmp.mkdir()
        argv = [ray_bin(), "start", "--head", "--node-ip-address=127.0.0.1", "--dashboard-host=127.0.0.1",
                f"--port={gcs}", f"--dashboard-port={dash}", f"--ray-client-server-port={client}",
                f"--node-manager-port={nm}", f"--object-manager-port={om}", f"--metrics-export-port={metrics}",
                f"--dashboard-agent-grpc-port={agent_grpc}", f"--dashboard-agent-listen-port={agent_listen}",
                f"--runtime-env-agent-port={runtime_env_agent}",
                f"--min-worker-port={lo}", f"--max-worker-port={hi}", f"--num-cpus={self.num_cpus}",
                "--num-gpus=0", f"--temp-dir={tmp}", "--disable-usage-stats", "--include-dashboard=true", "--block"]
        self.log = open(self.base / "ray-start.log", "wb")
        t0 = time.monotonic()
        self.proc = subprocess.Popen(argv, env=self.env(), stdout=self.log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True, cwd=str(self.base))
        self.address = f"http://127.0.0.1:{dash}"
        end = t0 + timeout
        while time.monotonic() < end:
            self._remember()
            if self.proc.poll() is not None:
                self.stop()
                raise RuntimeError(f"ray start exited {self.proc.returncode}:\n{self.start_log()[-3000:]}")
            try:
                with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(
                        self.address + "/api/version", timeout=2) as r:
                    json.loads(r.read())
                    break
            except Exception:
                time.sleep(0.3)
        else:
            self.stop()
            raise RuntimeError(f"the Ray dashboard did not answer within {timeout} s:\n{self.start_log()[-3000:]}")
        self.started_in = time.monotonic() - t0
        end = time.monotonic() + 60  # remember the core processes before anyone can lose them (a loaded machine is slow)
        while time.monotonic() < end and not (self.pids("raylet") and self.pids("gcs_server")):
            time.sleep(0.2)
        return self

    def start_log(self) -> str:
        try:
            return (self.base / "ray-start.log").read_text(errors="replace")
        except OSError:
            return ""

    def _remember(self) -> None:
        if self.proc is None:
            return
        # A child is first seen between fork and exec still named after its parent ("ray"), so the
        # name of every live process is read again: the raylet is only a raylet once it has exec'd.
        for pid in [self.proc.pid, *descendants(self.proc.pid)]:
            self.known[pid] = _comm(pid) or self.known.get(pid, "")

    def pids(self, name: str) -> list[int]:
        self._remember()
        return [p for p, c in self.known.items() if name in c]

    def stop(self) -> list[str]:
        """Stop what this head started; returns the names of processes still alive (none)."""
        if self.proc is None:
            return []
        self._remember()
        pgid = self.proc.pid
        # SIGKILL at once: `ray start --block`, the gcs_server and the raylet were all still there
        # 8 s after a SIGTERM (the wait every stop used to pay), and nothing of a private head
        # outlives it (its temp dir is removed below).
        self._remember()
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        for pid in list(self.known):
            if pid != os.getpid() and _alive(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        end = time.monotonic() + 5
        while time.monotonic() < end and any(_alive(p) for p in self.known):
            time.sleep(0.05)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self.log.close()
        left = [f"{c}({p})" for p, c in self.known.items() if _alive(p)]
        shutil.rmtree(self.base, ignore_errors=True)
        return left

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
