"""7. Memory: peak resident set size (RSS) of one `moss @agent` session against
`python -c "import anthropic"`, the least any process that talks to Claude through the SDK
holds.

The session is real: `moss @agent -n --provider anthropic TASK` against tests/fakeapi.py,
answered by the scripted model of the context bench (bench/exploration.py) for a few steps
(a listing, outlines, a symbol, a text search) and an answer, so the SDK, the Lua runtime,
tree-sitter and ripgrep's output all take their part. Peak RSS is the child's own
`ru_maxrss` from wait4(2) (the kernel's high-water mark of that one process, VmHWM), for
each command in a fresh process forked by a small launcher (a process forked from the bench
itself would count the bench's own pages from before its exec); the commands take turns, round after round, and the
median of the rounds is compared.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile

from common import TESTS, Settings, clean_sessions, moss_env, stdlib_tree
from exploration import TASK, MossModel

NAME = "memory"
STEPS = 6


# A small launcher forks the command and reports its rusage: ru_maxrss of a process that was
# forked from this (large) bench process would include the pages of the fork before exec.
LAUNCHER = """
import os, sys
pid = os.fork()
if pid == 0:
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.execv(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
print(usage.ru_maxrss, os.waitstatus_to_exitcode(status))
"""


def peak_rss(cmd: list[str], env: dict, cwd=None) -> tuple[int, int, str]:
    """(peak RSS in KiB, exit status, stderr's tail) of `cmd` run to its end in a fresh process."""
    with tempfile.TemporaryFile() as err:
        r = subprocess.run([sys.executable, "-S", "-c", LAUNCHER, *cmd], env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=err, text=True)
        err.seek(0)
        tail = err.read()[-2000:].decode(errors="replace")
        if r.returncode != 0 or not r.stdout.strip():
            raise RuntimeError(f"launcher failed ({r.returncode}): {tail}")
        kib, code = (int(x) for x in r.stdout.split()[-2:])
        return kib, code, tail


def _command(cmd: list[str], env: dict, cwd=None):
    def job() -> int:
        kib, code, err = peak_rss(cmd, env, cwd)
        if code != 0:
            raise RuntimeError(f"{' '.join(cmd[:3])} exited {code}: {err}")
        return kib
    return job


def _session(s: Settings, root):
    sys.path.insert(0, str(TESTS))
    from fakeapi import FakeAPI

    def job() -> int:
        clean_sessions(root)
        model = MossModel(STEPS)
        with FakeAPI() as api:
            api.push(*([model] * (4 * STEPS + 10)))
            cmd = [str(s.moss_bin), "@agent", "-n", "--provider", "anthropic", TASK]
            kib, code, err = peak_rss(cmd, moss_env(api.env()), root)
            calls = len(api.requests)
        if code != 0 or model.errors:
            raise RuntimeError(f"moss @agent failed ({code}): {model.errors[:3]} {err}")
        job.calls = calls
        return kib
    job.calls = 0
    return job


def run(s: Settings) -> dict:
    root = stdlib_tree(s)
    py = str(s.moss_python)
    env = moss_env()
    jobs = {
        "python -c pass (floor)": _command([py, "-c", "pass"], env),
        'python -c "import anthropic" (reference)': _command([py, "-c", "import anthropic"], env),
        "moss @agent --help": _command([str(s.moss_bin), "@agent", "--help"], env, root),
        f"moss @agent session ({STEPS} steps)": _session(s, root),
    }
    reps = s.reps(5, 1)
    samples: dict[str, list[int]] = {k: [] for k in jobs}
    for _ in range(reps):
        for name, job in jobs.items():
            samples[name].append(job())
    rows = {k: {"median_kib": statistics.median(v), "min_kib": min(v), "max_kib": max(v), "samples": v}
            for k, v in samples.items()}
    session = f"moss @agent session ({STEPS} steps)"
    return {"reps": reps, "rows": rows, "session": session, "calls": jobs[session].calls,
            "reference": 'python -c "import anthropic" (reference)'}


def _mib(kib: float) -> str:
    return f"{kib / 1024:.1f} MiB"


def tables(res: dict) -> list[dict]:
    ref = res["rows"][res["reference"]]["median_kib"]
    rows = [[name, _mib(r["median_kib"]), f"{_mib(r['min_kib'])} – {_mib(r['max_kib'])}", f"{r['median_kib'] / ref:.2f}×"]
            for name, r in res["rows"].items()]
    return [{"title": f"7. Peak RSS (ru_maxrss of each process; median of {res['reps']} rounds; the session made "
                      f"{res['calls']} LLM calls)",
             "columns": ["process", "peak RSS", "range", "/ import anthropic"], "rows": rows}]


def summary_rows(res: dict) -> list[list[str]]:
    rows = res["rows"]
    ref = rows[res["reference"]]["median_kib"]
    r = rows[res["session"]]["median_kib"]
    return [[f"memory: peak RSS of {res['session']} / python -c \"import anthropic\"", f"{r / ref:.2f}×",
             f"{_mib(r)} vs {_mib(ref)}"]]
