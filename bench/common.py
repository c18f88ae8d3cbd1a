"""Shared plumbing for the benchmarks: the work tree, the peer virtualenv, timing, tokens.

Nothing here is a test. Every measurement returns plain data (dicts and lists) that
run.py renders as tables and, with --markdown, as Markdown for RESULTS.md.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
TESTS = REPO / "tests"  # fakeapi.py lives there; the bench only imports it


# --------------------------------------------------------------------------- settings

@dataclass
class Settings:
    quick: bool = False
    work: Path = Path(tempfile.gettempdir()) / "moss-bench"
    peer_python: Path | None = None  # a venv with mini-swe-agent (bench/requirements.txt)
    moss_python: Path = Path(sys.executable)
    baseline_moss: Path | None = None  # another install's `moss`, timed in the same rounds (tools)
    polyglot: Path | None = None  # a checkout of the polyglot benchmark (--polyglot, $MOSS_BENCH_POLYGLOT)
    notes: list[str] = field(default_factory=list)  # warnings collected during the run

    @property
    def moss_bin(self) -> Path:
        return self.moss_python.parent / "moss"

    @property
    def mini_bin(self) -> Path | None:
        return self.peer_python.parent / "mini" if self.peer_python else None

    def reps(self, full: int, quick: int = 3) -> int:
        return quick if self.quick else full


def find_peer_python(explicit: str | None) -> Path | None:
    """The python of the peers' venv: --peer-python, $MOSS_BENCH_PEER_PYTHON, bench/.venv."""
    for cand in (explicit, os.environ.get("MOSS_BENCH_PEER_PYTHON"), BENCH / ".venv" / "bin" / "python"):
        if cand and Path(cand).exists():
            p = Path(cand)
            ok = subprocess.run([str(p), "-c", "import minisweagent"], capture_output=True,
                                env={**os.environ, "MSWEA_SILENT_STARTUP": "1", "MSWEA_GLOBAL_CONFIG_DIR":
                                     tempfile.gettempdir()}).returncode == 0
            if ok:
                return p
    return None


# --------------------------------------------------------------------------- the tree

def stdlib_source() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def stdlib_tree(s: Settings) -> Path:
    """A copy of this interpreter's standard library source (tests included; no
    site-packages, __pycache__ or compiled extensions), with `moss init` run in it.

    A copy, because moss writes its sessions under .moss/ at the project root and the
    benchmark must not write into the interpreter's own directory."""
    ver = "%d.%d.%d" % sys.version_info[:3]
    dest = s.work / f"stdlib-{ver}"
    stamp = dest / ".moss" / "bench-stamp"
    if not stamp.exists():
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(stdlib_source(), dest, symlinks=True,
                        ignore=shutil.ignore_patterns("site-packages", "__pycache__", "lib-dynload", "config-*",
                                                      "*.so", "*.a", "*.pyc"))
        subprocess.run([str(s.moss_bin), "init"], cwd=dest, check=True, capture_output=True)
        stamp.write_text(str(stdlib_source()) + "\n")
    clean_sessions(dest)
    return dest


def clean_sessions(root: Path) -> None:
    shutil.rmtree(root / ".moss" / "agent", ignore_errors=True)


def tree_stats(root: Path) -> dict:
    files = nbytes = py = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".moss"]
        for f in filenames:
            files += 1
            try:
                nbytes += os.lstat(os.path.join(dirpath, f)).st_size
            except OSError:
                pass
            py += f.endswith(".py")
    return {"files": files, "bytes": nbytes, "py_files": py}


# --------------------------------------------------------------------------- processes

def moss_env(extra: dict | None = None) -> dict:
    """A clean environment for moss children: no API keys from the caller's shell, no
    colour, user config isolated (so ~/.config/moss cannot change the figures)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ANTHROPIC_", "OPENAI_", "MOSS_")) and k not in ("FORCE_COLOR",)}
    env["XDG_CONFIG_HOME"] = str(Path(tempfile.gettempdir()) / "moss-bench-xdg")
    env["NO_COLOR"] = "1"
    env["COLUMNS"] = "120"
    env.update(extra or {})
    return env


def peer_env(s: Settings, extra: dict | None = None) -> dict:
    cfg = s.work / "mini-config"
    cfg.mkdir(parents=True, exist_ok=True)
    env = moss_env({
        "MSWEA_SILENT_STARTUP": "1", "MSWEA_CONFIGURED": "true", "MSWEA_GLOBAL_CONFIG_DIR": str(cfg),
        "MSWEA_COST_TRACKING": "ignore_errors", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    })
    env.update(extra or {})
    return env


def run_json(cmd: list[str], payload: dict, env: dict, cwd: Path | None = None, timeout: float = 600) -> dict:
    """Run a helper that reads JSON on stdin and writes JSON on stdout."""
    r = subprocess.run(cmd, input=json.dumps(payload), capture_output=True, text=True, env=env,
                       cwd=cwd, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd[:3]))} failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])




def interleaved(jobs: dict, reps: int, warmup: int = 1) -> dict:
    """Run each job once per round, round after round, and time it (a job may instead
    return its own measurement, a float of seconds): noise from the machine then falls on every job alike, which keeps the ratios
    honest on a busy machine. Returns {name: summary}."""
    samples: dict = {k: [] for k in jobs}
    for i in range(warmup + reps):
        for name, fn in jobs.items():
            t0 = time.perf_counter()
            got = fn()
            dt = got if isinstance(got, float) else time.perf_counter() - t0
            if i >= warmup:
                samples[name].append(dt)
    return {k: summary(v) for k, v in samples.items()}


def command(cmd: list[str], *, env: dict | None = None, cwd: Path | None = None, check: bool = True):
    """A job for `interleaved`: run a command, output discarded."""
    def job():
        r = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if check and r.returncode != 0:
            raise RuntimeError(f"{' '.join(map(str, cmd))} exited {r.returncode}: {r.stderr.decode()[-2000:]}")
    return job


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def summary(samples: list[float]) -> dict:
    return {"median": statistics.median(samples), "min": min(samples), "n": len(samples),
            "samples": [round(x, 6) for x in samples]}




# --------------------------------------------------------------------------- tokens

class Tokens:
    """Token counts with one tokenizer for every agent: OpenAI's o200k_base (tiktoken,
    from the peer venv, using the encoding file litellm ships, so no download), or
    bytes/4 when that is not available. `name` says which was used."""

    def __init__(self, s: Settings):
        self.s = s
        self.name = "bytes/4"
        self._cache: dict[str, int] = {}

    def count_many(self, texts: list[str]) -> list[int]:
        todo = sorted({t for t in texts if t not in self._cache})
        if todo and self.s.peer_python:
            try:
                counts = run_json([str(self.s.peer_python), str(BENCH / "peer_tokens.py")], {"texts": todo},
                                  env=peer_env(self.s), timeout=300)
                self._cache.update(zip(todo, counts["counts"]))
                self.name = counts["encoding"]
            except Exception as e:  # fall back for everything, so one run uses one counter
                self.s.notes.append(f"tokenizer unavailable ({e.__class__.__name__}); counting bytes/4")
        if self.name == "bytes/4":
            return [len(t.encode()) // 4 for t in texts]
        return [self._cache[t] for t in texts]


def fmt_s(x: float) -> str:
    if x >= 1:
        return f"{x:.2f} s"
    if x >= 1e-3:
        return f"{x * 1e3:.1f} ms"
    return f"{x * 1e6:.0f} µs"



