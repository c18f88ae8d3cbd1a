"""3. Cold start: `moss --help`, `moss @agent --help` and the time to the first LLM request
of `moss @agent` (against tests/fakeapi.py), each against `python -c pass` (the floor) and
`python -c "import anthropic"` until the import is done (the first request minus that, per
round, is what moss adds to the SDK's own import), and
mini-swe-agent's `mini --help` / `mini`'s first request (through litellm to the same fake
server). Plus what each moss command imports (python -X importtime), since the SDKs are
heavy: `import anthropic` and `import openai` are timed on their own.

"Cold" means a new process each time; the OS file cache is warm (one warm-up round
first), which is what a user typing commands sees. The commands take turns, round after
round, so the machine's noise falls on all of them alike.
"""

from __future__ import annotations

import os
import re
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from common import TESTS, Settings, command, fmt_s, interleaved, moss_env, peer_env, stdlib_tree

NAME = "coldstart"
REF = 'python -c "import anthropic" (until imported)'
# moss pauses the cyclic garbage collector while it imports an SDK (host/llm/warm.py), which
# makes its import ~0.1 s cheaper than a plain one; against this reference the difference
# is what moss's own work adds, with that gain taken out.
REF_GC = 'python -c "import gc; gc.disable(); import anthropic" (until imported)'
FIRST = "moss @agent: first LLM request"
TASK = "What is this project?"


def first_request(cmd: list[str], env_of, cwd: Path, reply: str, kill: bool):
    """A job: seconds from spawning `cmd` to the fake server receiving its first request."""
    sys.path.insert(0, str(TESTS))
    from fakeapi import FakeAPI

    def job() -> float:
        with FakeAPI() as api:
            seen: list[float] = []

            def answer(body, _seen=seen):
                _seen.append(time.perf_counter())
                return reply
            api.push(*([answer] * 5))
            full = [c.replace("{OPENAI_URL}", api.openai_url) for c in cmd]
            t0 = time.perf_counter()
            p = subprocess.Popen(full, cwd=cwd, env=env_of(api), stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, start_new_session=True)
            while not seen and p.poll() is None and time.perf_counter() - t0 < 120:
                time.sleep(0.002)
            if kill and p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
            err = p.communicate(timeout=120)[1].decode(errors="replace")
            if not seen:
                raise RuntimeError(f"{cmd[0]} sent no request: {err[-2000:]}")
            return seen[0] - t0
    return job


def import_time(py: str, module: str, env: dict):
    """A job: seconds one `import module` takes in a fresh interpreter (not counting the
    interpreter's own start and exit)."""
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"

    def job() -> float:
        r = subprocess.run([py, "-c", code], env=env, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"import {module} failed: {r.stderr[-1000:]}")
        return float(r.stdout.strip())
    return job


def imported(py: str, module: str, env: dict, prelude: str = ""):
    """A job: seconds from spawning `python -c "import module"` to the import being done (the
    child says so on stdout; its exit, which for the SDKs' thousands of modules takes another
    0.3 s, is not counted, as moss's exit is not counted in its first-request time)."""
    code = f"{prelude}import {module}, sys; sys.stdout.write('ok\\n'); sys.stdout.flush()"

    def job() -> float:
        t0 = time.perf_counter()
        p = subprocess.Popen([py, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        line = p.stdout.readline()
        dt = time.perf_counter() - t0
        err = p.communicate(timeout=120)[1]
        if line.strip() != b"ok":
            raise RuntimeError(f"import {module} failed: {err.decode(errors='replace')[-1000:]}")
        return dt
    return job


def compile_moss(py: str, env: dict) -> None:
    """Byte-compile moss's package once, as a wheel install is: in a dev checkout with
    PYTHONDONTWRITEBYTECODE set, every run would otherwise compile ~50 modules from source
    (~90 ms) that no installed moss compiles."""
    import moss

    subprocess.run([py, "-m", "compileall", "-q", str(Path(moss.__file__).parent)], env=env, check=True,
                   capture_output=True)


def importtime(cmd: list[str], env: dict, cwd: Path) -> dict:
    """Top-level imports of a moss command: total, the biggest packages, and which SDKs."""
    r = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=120)
    per_pkg: dict[str, int] = {}
    names = set()
    for line in r.stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|( +)(\S+)", line)
        if not m:
            continue
        names.add(m.group(4))
        if len(m.group(3)) == 1:  # imported directly by the program, not by another module
            top = m.group(4).split(".")[0]
            per_pkg[top] = per_pkg.get(top, 0) + int(m.group(2))
    heavy = [p for p in ("anthropic", "openai", "httpx", "pydantic", "rich", "lupa", "tree_sitter", "click")
             if p in names or any(n.startswith(p + ".") for n in names)]
    top = sorted(per_pkg.items(), key=lambda kv: -kv[1])[:6]
    return {"total_us": sum(per_pkg.values()), "top": top, "loads": heavy}


def run(s: Settings) -> dict:
    root = stdlib_tree(s)
    reps = s.reps(10, 1)
    warm = 0 if s.quick else 1
    py = str(s.moss_python)
    menv = moss_env()
    compile_moss(py, menv)
    jobs = {
        "python -c pass (floor)": command([py, "-c", "pass"], env=menv),
        REF: imported(py, "anthropic", menv),
        REF_GC: imported(py, "anthropic", menv, prelude="import gc; gc.disable(); "),
        "import anthropic (in-process, alone)": import_time(py, "anthropic", menv),
        "import openai (in-process, alone)": import_time(py, "openai", menv),
        "moss --help": command([str(s.moss_bin), "--help"], env=menv, cwd=root),
        "moss @agent --help": command([str(s.moss_bin), "@agent", "--help"], env=menv, cwd=root),
        FIRST: first_request(
            [str(s.moss_bin), "@agent", "-n", "--provider", "anthropic", TASK], lambda api: moss_env(api.env()),
            root, "$(answer ok)", kill=False),
        "moss @agent --provider openai: first LLM request": first_request(
            [str(s.moss_bin), "@agent", "-n", "--provider", "openai", TASK], lambda api: moss_env(api.env()),
            root, "$(answer ok)", kill=False),
    }
    if s.peer_python:
        penv = peer_env(s)
        jobs["peer python -c pass"] = command([str(s.peer_python), "-c", "pass"], env=penv)
        jobs["mini --help"] = command([str(s.mini_bin), "--help"], env=penv, cwd=root)
        jobs["mini: first LLM request"] = first_request(
            [str(s.mini_bin), "-m", "openai/fake-model", "-t", TASK, "-y", "--exit-immediately", "-o",
             str(s.work / "coldstart-mini.traj.json"), "-c", "mini.yaml", "-c",
             "model.model_kwargs.api_base={OPENAI_URL}"], lambda api: peer_env(s, {"OPENAI_API_KEY": "test-key"}),
            root, "ok", kill=True)
    else:
        s.notes.append("coldstart: no peer venv, mini-swe-agent not measured")
    rows = interleaved(jobs, reps, warmup=warm)

    imports = {
        "moss --help": importtime([py, "-X", "importtime", str(s.moss_bin), "--help"], menv, root),
        "moss @agent --help": importtime([py, "-X", "importtime", str(s.moss_bin), "@agent", "--help"], menv, root),
    }
    sys.path.insert(0, str(TESTS))
    from fakeapi import FakeAPI

    with FakeAPI() as api:
        api.push("$(answer ok)")
        imports["moss @agent (one LLM call)"] = importtime(
            [py, "-X", "importtime", str(s.moss_bin), "@agent", "-n", "--provider", "anthropic", TASK],
            moss_env(api.env()), root)
    # the first request's cost beyond the SDK's import: round by round, both from the same round
    def over(ref: str) -> dict:
        d = [a - b for a, b in zip(rows[FIRST]["samples"], rows[ref]["samples"])]
        return {"median": statistics.median(d), "min": min(d), "samples": [round(x, 4) for x in d]}
    return {"reps": reps, "rows": rows, "imports": imports, "over_sdk": over(REF), "over_sdk_gc": over(REF_GC)}


def signed(seconds: float) -> str:
    """A difference of two times, with its sign (moss can beat the reference)."""
    return ("+" if seconds >= 0 else "−") + fmt_s(abs(seconds))


def tables(res: dict) -> list[dict]:
    rows = res["rows"]
    floor = rows["python -c pass (floor)"]["median"]
    mini_help = rows.get("mini --help", {}).get("median")
    mini_first = rows.get("mini: first LLM request", {}).get("median")
    out = []
    for name, r in rows.items():
        vs_mini = ""
        if name.startswith("moss") and mini_help:
            ref = mini_first if "request" in name else mini_help
            vs_mini = f"{r['median'] / ref:.2f}×"
        process = not name.startswith("import ") and name not in (REF, REF_GC)  # not a process's wall time
        out.append([name, fmt_s(r["median"]), fmt_s(r["min"]), f"{r['median'] / floor:.1f}×" if process else "",
                    f"+{fmt_s(max(0.0, r['median'] - floor))}" if process else "", vs_mini])
    if "over_sdk" in res:
        o = res["over_sdk"]
        out.append([f"{FIRST} − {REF}, same round (median, min)", signed(o["median"]), signed(o["min"]), "", "", ""])
    if "over_sdk_gc" in res:
        o = res["over_sdk_gc"]
        out.append([f"{FIRST} − {REF_GC}, same round", signed(o["median"]), signed(o["min"]), "", "", ""])
    t1 = {"title": f"3. Cold start (median of {res['reps']} fresh processes)",
          "columns": ["command", "median", "min", "× floor", "above floor",
                      "vs mini (--help / first request)"], "rows": out}
    rows2 = [[name, f"{v['total_us'] / 1e3:.0f} ms", ", ".join(f"{p} {us / 1e3:.0f} ms" for p, us in v["top"][:5]),
              ", ".join(v["loads"])] for name, v in res["imports"].items()]
    t2 = {"title": "3. What moss imports at start-up (python -X importtime; times inflated by the tracing)",
          "columns": ["command", "imports", "biggest (cumulative)", "heavy packages loaded"], "rows": rows2}
    return [t1, t2]


def summary_rows(res: dict) -> list[list[str]]:
    rows = res["rows"]
    floor = rows["python -c pass (floor)"]["median"]
    out = []
    if "over_sdk" in res:
        out.append(["cold start: first LLM request − import anthropic (seconds, target ≤ 0.1)",
                    signed(res["over_sdk"]["median"]),
                    f"{fmt_s(rows[FIRST]['median'])} vs {fmt_s(rows[REF]['median'])} (median of the per-round "
                    f"differences)"])
    if "over_sdk_gc" in res:
        out.append(["cold start: first LLM request − import anthropic with the collector paused, as moss imports it",
                    signed(res["over_sdk_gc"]["median"]),
                    "moss's own work, without the cheaper SDK import it makes (median of per-round differences)"])
    for name, ref in (("moss --help", "mini --help"), ("moss @agent --help", "mini --help"),
                      ("moss @agent: first LLM request", "mini: first LLM request")):
        r = rows[name]["median"]
        if ref in rows:
            out.append([f"cold start: {name} / {ref}", f"{r / rows[ref]['median']:.2f}×",
                        f"{fmt_s(r)} vs {fmt_s(rows[ref]['median'])} (floor {fmt_s(floor)})"])
        else:
            out.append([f"cold start: {name} / floor", f"{r / floor:.1f}×", fmt_s(r)])
    return out
