"""fork: what a forked agent and its zygote cost in CPU, with the zygote's preload as it was and as
it is, and against a new interpreter, in one run.

`moss eval` forks each attempt's agent from a zygote (host/zygote.py), and the tests fork every
`python -m moss` they start from one. What the zygote does before forking is work no forked
process repeats. Two helper processes stand for two zygotes: "modules" imports the list the
zygote had before issue 24's third pass (moss, the SDKs: OLD_PRELOAD below), "prepared" runs
today's `zygote.prepare` of what an eval of this agent preloads (its SDK only, the collector
resting meanwhile; also what the first request imports, genai-prices' data, the tree-sitter
queries). Each forks one agent at a time, as the zygote does (`zygote._end`
included), taking turns with the other, round after round; the figure is the forked agent's
CPU time (os.wait4: user + system, its threads included). The agent answers the context
bench's question ("How many variants does Provider have?", V2, four requests) on the fixture
crate against tests/fakeapi.py. A third column is the same agent as a new interpreter
(`python -P -m moss @agent ...`), and the last table the CPU each helper spent getting ready:
together they say from which attempt a zygote pays for itself (LocalAttempts.FORK_FROM).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from common import REPO, TESTS, Settings, moss_env

NAME = "fork"
OLD_PRELOAD = ("moss.entry", "moss.run", "moss.runtime", "moss.api", "moss.context", "moss.llm.anthropic_client",
               "moss.llm.openai_client", "moss.llm.pricing", "moss.ui", "moss.trust", "moss.config", "lupa",
               "anthropic", "openai")
QUESTION = "How many variants does Provider have?"
ARGS = ["@agent", "--provider", "anthropic", "--v2", "-n", "--output-format", "json", QUESTION]

# The helper: prepares like a zygote, reports its own CPU, then per line on stdin ({"cwd", "env"})
# forks one agent set up as the zygote sets one up, and answers with that agent's CPU and status.
HELPER = r"""
import importlib, json, os, resource, runpy, sys
from moss import zygote
names = [m for m in sys.argv[1].split(",") if m]
if sys.argv[2] == "old":  # as before issue 24's third pass: imports only, the collector running
    for m in names:
        importlib.import_module(m)
else:
    zygote.prepare(names)
ru = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"ready": ru.ru_utime + ru.ru_stime}), flush=True)
for line in sys.stdin:
    req = json.loads(line)
    pid = os.fork()
    if pid == 0:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        sys.argv = ["-m", *req["argv"]]
        code = 0
        try:
            runpy.run_module("moss", run_name="__main__", alter_sys=True)
        except SystemExit as e:
            code = zygote._exit_code(e.code)
        zygote._end(code)
    _, status, ru = os.wait4(pid, 0)
    print(json.dumps({"cpu": ru.ru_utime + ru.ru_stime, "code": os.waitstatus_to_exitcode(status)}), flush=True)
"""


def _project(work: Path) -> tuple[Path, dict]:
    proj, home = work / "crate", work / "home"
    for d in (proj, home):
        if d.exists():
            shutil.rmtree(d)
    shutil.copytree(TESTS / "fixtures" / "rustcrate", proj)
    home.mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=proj, check=True)
    env = moss_env({"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
                    "XDG_DATA_HOME": str(home / ".local" / "share")})
    return proj, env


class _Helper:
    def __init__(self, py: str, preload: tuple[str, ...], env: dict):
        how = "old" if preload == OLD_PRELOAD else "prepare"
        self.proc = subprocess.Popen([py, "-P", "-c", HELPER, ",".join(preload), how], env=env, cwd=str(REPO),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.ready = json.loads(self._line())["ready"]

    def _line(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the fork helper ended (exit {self.proc.wait()})")
        return line

    def agent(self, cwd: Path, env: dict) -> float:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"cwd": str(cwd), "env": env, "argv": ARGS}) + "\n")
        self.proc.stdin.flush()
        got = json.loads(self._line())
        if got["code"] != 0:
            raise RuntimeError(f"a forked agent exited {got['code']}")
        return got["cpu"]

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)


def _fresh(py: str, cwd: Path, env: dict) -> float:
    p = subprocess.Popen([py, "-P", "-m", "moss", *ARGS], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError("the agent as a new interpreter failed")
    return ru.ru_utime + ru.ru_stime


def run(s: Settings) -> dict:
    sys.path.insert(0, str(TESTS))
    from agentmodel import Model
    from fakeapi import FakeAPI

    from moss import zygote

    NOW = zygote.preload_for(("anthropic",))  # what an eval of this agent (--provider anthropic) preloads
    work = s.work / "fork"
    proj, env = _project(work)
    reps = 3 if s.quick else 8
    py = str(s.moss_python)
    samples: dict[str, list[float]] = {"modules": [], "prepared": [], "fresh": []}
    ready: dict[str, list[float]] = {"modules": [], "prepared": []}
    with FakeAPI() as api:
        agent_env = dict(env, **api.env())
        helpers = {"modules": _Helper(py, OLD_PRELOAD, env), "prepared": _Helper(py, NOW, env)}
        try:
            for name, h in helpers.items():
                ready[name].append(h.ready)
            for i in range(1 + reps):  # round 0 warms the file cache and is not counted
                for name in ("modules", "prepared", "fresh"):
                    shutil.rmtree(proj / ".moss", ignore_errors=True)
                    api.push(*([Model("provider")] * 4))
                    cpu = (_fresh(py, proj, agent_env) if name == "fresh"
                           else helpers[name].agent(proj, agent_env))
                    if i:
                        samples[name].append(cpu)
        finally:
            for h in helpers.values():
                h.close()
        for name in ready:  # two more of each, for a median of three
            for _ in range(2):
                h = _Helper(py, OLD_PRELOAD if name == "modules" else NOW, env)
                ready[name].append(h.ready)
                h.close()
    med = {k: statistics.median(v) for k, v in samples.items()}
    ready_med = {k: statistics.median(v) for k, v in ready.items()}
    # a zygote pays for itself from the attempt n where ready + n * forked < n * fresh
    gain = med["fresh"] - med["prepared"]
    pays_from = int(ready_med["prepared"] // gain) + 1 if gain > 0 else None
    return {"reps": reps, "median": med, "samples": samples, "ready": ready_med, "pays_from": pays_from}


def tables(res: dict) -> list[dict]:
    m, r = res["median"], res["ready"]
    return [
        {"title": f"fork: CPU (user + system) of one agent answering the context bench's question, "
                  f"median of {res['reps']}",
         "columns": ["forked, zygote imported modules only (before)", "forked, zygote prepared (now)",
                     "now / before", "a new interpreter"],
         "rows": [[f"{m['modules']:.3f} s", f"{m['prepared']:.3f} s", f"{m['prepared'] / m['modules']:.2f}×",
                   f"{m['fresh']:.3f} s"]]},
        {"title": "fork: CPU a zygote spends getting ready, median of 3",
         "columns": ["modules only (before)", "prepared (now)", "a zygote pays for itself from attempt"],
         "rows": [[f"{r['modules']:.2f} s", f"{r['prepared']:.2f} s", str(res["pays_from"] or "never")]]},
    ]


def summary_rows(res: dict) -> list[list[str]]:
    m = res["median"]
    return [["fork: a forked agent's CPU, zygote prepared / modules only", f"{m['prepared'] / m['modules']:.2f}×",
             f"{m['prepared']:.2f} s vs {m['modules']:.2f} s; a new interpreter {m['fresh']:.2f} s; "
             f"a zygote pays for itself from attempt {res['pays_from']}"]]
