"""startup: the CPU time (user + system) of moss's common commands, before and after, in one run.

"Before" is a git revision (MOSS_BENCH_STARTUP_BEFORE, default the main commit issue 24's
start-up work began from), "after" the work tree as it is. Both are laid out alike, as a
wheel lays moss out (moss/ with moss/scripts/ inside, bytecode compiled), and put first on
PYTHONPATH of the bench's own python, so the two differ only in moss's code. Each command
runs as a new process in a small project with its own HOME and XDG folders, before and after
taking turns round after round; the figure is the child's CPU time (os.wait4), which other
work on a shared machine inflates far less than wall time. `moss @agent` runs a one-request
session against tests/fakeapi.py, so its figure includes the SDK's import (~1.3-1.8 s of CPU
for anthropic, which moss cannot avoid when it makes a request).

The last column says which heavy packages the command imported (after): an LLM SDK must
appear only where a request is made.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import io
from pathlib import Path

from common import REPO, TESTS, Settings, moss_env

NAME = "startup"
BEFORE = os.environ.get("MOSS_BENCH_STARTUP_BEFORE", "300e0a5")
HEAVY = ("anthropic", "openai", "mcp", "prompt_toolkit", "rich", "tree_sitter", "genai_prices", "re2",
         "pydantic", "httpx", "starlette", "uvicorn")
COMMANDS = [
    ("moss --help", ["--help"]),
    ("moss sessions", ["sessions"]),
    ("moss config", ["config"]),
    ("moss runs", ["runs"]),
    ("moss scripts", ["scripts"]),
    ("moss trust (status)", ["trust"]),
    ("moss memory", ["memory"]),
    ("moss view a.py", ["view", "a.py"]),
    ("moss text-search def", ["text-search", "def"]),
    ("moss eval --help", ["eval", "--help"]),
    ("moss @hi (a one-line script)", ["@hi"]),
    ("moss @agent --help", ["@agent", "--help"]),
    ("moss @agent, a one-request session", ["@agent", "--provider", "anthropic", "--model", "claude-test",
                                            "what is 6*7?"]),
]
AGENT = COMMANDS[-1][0]


def _layout(dest: Path, host: Path, scripts: Path) -> Path:
    """dest/moss = host, dest/moss/scripts = scripts (as in a wheel); compiled. Returns dest."""
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(host, dest / "moss", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(scripts, dest / "moss" / "scripts", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(dest / "moss")], check=True,
                   stdout=subprocess.DEVNULL)
    return dest


def _trees(work: Path) -> dict[str, Path]:
    src = work / "before-src"
    if src.exists():
        shutil.rmtree(src)
    src.mkdir(parents=True)
    tar = subprocess.run(["git", "-C", str(REPO), "archive", BEFORE, "host", "scripts"], check=True,
                         capture_output=True).stdout
    tarfile.open(fileobj=io.BytesIO(tar)).extractall(src)
    return {"before": _layout(work / "before", src / "host", src / "scripts"),
            "after": _layout(work / "after", REPO / "host", REPO / "scripts")}


def _project(work: Path) -> tuple[Path, dict]:
    proj, home = work / "proj", work / "home"
    for d in (proj, home):
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
    (proj / "a.py").write_text("def f():\n    return 1\n")
    subprocess.run(["git", "init", "-q"], cwd=proj, check=True)
    env = moss_env({"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
                    "XDG_DATA_HOME": str(home / ".local" / "share"), "PYTHONDONTWRITEBYTECODE": "1"})
    scripts = home / ".config" / "moss" / "scripts"
    scripts.mkdir(parents=True)
    (scripts / "hi.lua").write_text('print("hi")\n')
    return proj, env


def _cpu(cmd: list[str], env: dict, cwd: Path) -> tuple[float, int, str]:
    """(user + system seconds, exit status, stderr) of one process."""
    p = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    err = p.stderr.read().decode(errors="replace") if p.stderr else ""
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return ru.ru_utime + ru.ru_stime, p.returncode, err


def _heavy(cmd: list[str], env: dict, cwd: Path) -> list[str]:
    r = subprocess.run([cmd[0], "-X", "importtime", *cmd[1:]], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seen = {line.rsplit("|", 1)[1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")}
    return [h for h in HEAVY if h in seen]


def run(s: Settings) -> dict:
    sys.path.insert(0, str(TESTS))
    from fakeapi import FakeAPI

    work = s.work / "startup"
    trees = _trees(work)
    proj, env = _project(work)
    reps = 3 if s.quick else 7
    py = str(s.moss_python)
    samples: dict = {name: {"before": [], "after": []} for name, _ in COMMANDS}
    heavy: dict = {}
    with FakeAPI() as api:
        api.models = ["claude-test"]
        base = dict(env, **api.env())

        def env_of(tree: str) -> dict:
            return dict(base, PYTHONPATH=str(trees[tree]))

        for i in range(1 + reps):  # round 0 warms the file cache and is not counted
            for name, args in COMMANDS:
                for tree in ("before", "after"):
                    if name == AGENT:
                        api.push("$(answer 42)", "$(answer 42)")
                    cpu, code, err = _cpu([py, "-m", "moss", *args], env_of(tree), proj)
                    if code != 0 and name == AGENT:
                        raise RuntimeError(f"{name} ({tree}) exited {code}: {err[-2000:]}")
                    if i:
                        samples[name][tree].append(cpu)
        for name, args in COMMANDS:
            if name == AGENT:
                api.push("$(answer 42)", "$(answer 42)")
            heavy[name] = _heavy([py, "-m", "moss", *args], env_of("after"), proj)
    rows = {name: {t: statistics.median(v) for t, v in by.items()} | {"samples": by}
            for name, by in samples.items()}
    return {"reps": reps, "before": BEFORE, "rows": rows, "heavy": heavy}


def tables(res: dict) -> list[dict]:
    out = []
    for name, r in res["rows"].items():
        out.append([name, f"{r['before'] * 1e3:.0f} ms", f"{r['after'] * 1e3:.0f} ms",
                    f"{r['after'] / r['before']:.2f}×", ", ".join(res["heavy"].get(name, [])) or "-"])
    return [{"title": f"startup: CPU time (user + system) of one process, median of {res['reps']}; "
                      f"before = {res['before']}, after = this tree",
             "columns": ["command", "before", "after", "after / before", "heavy packages imported (after)"],
             "rows": out}]


def summary_rows(res: dict) -> list[list[str]]:
    rows = res["rows"]
    plain = [r["after"] / r["before"] for n, r in rows.items() if n != AGENT]
    geo = statistics.geometric_mean(plain)
    a = rows[AGENT]
    return [["startup: CPU after / before, geometric mean of the commands that make no request",
             f"{geo:.2f}×", f"{len(plain)} commands; before = {res['before']}"],
            ["startup: CPU after / before, `moss @agent` one-request session", f"{a['after'] / a['before']:.2f}×",
             f"{a['after']:.2f} s vs {a['before']:.2f} s (the SDK's import is most of it)"]]
