"""14. The public polyglot benchmark, whole, through `moss eval` (issue 41).

Given a checkout of the benchmark (Aider-AI/polyglot-benchmark: 225 exercises in C++, Go, Java,
JavaScript, Python and Rust; `--polyglot DIR` or `$MOSS_BENCH_POLYGLOT`), each language's folder
of exercises runs as users run it:

    moss eval CHECKOUT/LANG/exercises/practice --variant oracle=V1 --variant nothing=V2 --tries 2 -j 3 --json

after `moss eval --prepare` of the same folder (JavaScript's jest and babel from the npm
registry, Go's build cache, the C++ Catch main). The model is a fake API server in a process of
its own (tests/fakeapi.py): `oracle` writes each exercise's example over its stub (through the
agent's shell, gzip and base64 so any file survives the reply), `nothing` answers without
touching a file.

Per language: exercises, the oracle's passes over its counted attempts (every exercise that can
run here must pass: anything else is a bug in moss), the idle model's (none may pass), the
attempts not run and why, wall time, attempts per minute and CPU per attempt (the eval process
and what it waited for: its sandboxes, compilers and test runs, from getrusage of its children;
the agents forked from its zygote are reaped by the kernel and not in it: ~0.1-0.3 s each with
this scripted model, bench/m_fork.py). An exercise the oracle cannot pass for a reason that is not moss's (its example needs
a crate that cannot be had offline) is listed with that reason.
"""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

from common import REPO, Settings, fmt_s, loadavg, moss_env

NAME = "polyglot"
ENV = "MOSS_BENCH_POLYGLOT"
LANGUAGES = ("cpp", "go", "java", "javascript", "python", "rust")
JOBS = 3

SERVER = r"""
import base64, gzip, json, posixpath, sys
sys.path.insert(0, sys.argv[1])
from fakeapi import FakeAPI, state_of
from moss.eval.exercises import load_exercises

TASKS = [t for t in load_exercises(sys.argv[2]).tasks if t.exercise]
KEYS = [(t, json.dumps(t.exercise["instructions"], ensure_ascii=False)[1:-1]) for t in TASKS]

def find(body):
    text = json.dumps(body, ensure_ascii=False)
    found = [t for t, key in KEYS if key in text and all(f in text for f in t.exercise["solution"])]
    return max(found, key=lambda t: len(t.exercise["instructions"])) if found else None

def model(body):
    if state_of(body) == "planner":
        return "1. Write the solution.\nReady to refactor."
    if body.get("model") == "nothing":
        return "$(answer done)"
    task = find(body)
    if task is None:
        return "$(answer no exercise found in the request)"
    out = []
    for r in task.solution:
        data = base64.b64encode(gzip.compress(r.new.encode("utf-8"), mtime=0)).decode("ascii")
        folder = posixpath.dirname(r.path)
        mkdir = f"mkdir -p {folder} && " if folder else ""
        out.append(f"$(run {mkdir}printf %s {data} | base64 -d | gzip -dc > {r.path})")
    return " ".join(out) + " $(answer wrote the example)"

api = FakeAPI().start()
api.push(*[model] * 1000000)
print(api.port, flush=True)
sys.stdin.read()
"""


def checkout(s: Settings) -> Path | None:
    given = getattr(s, "polyglot", None) or os.environ.get(ENV)
    return Path(given).expanduser().resolve() if given else None


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(s: Settings) -> dict:
    root = checkout(s)
    if root is None or not any((root / lang / "exercises" / "practice").is_dir() for lang in LANGUAGES):
        why = (f"no checkout of the polyglot benchmark: give it with --polyglot DIR or ${ENV} "
               f"(git clone https://github.com/Aider-AI/polyglot-benchmark)") if root is None else \
            f"{root} holds no LANG/exercises/practice folders"
        s.notes.append(f"polyglot: {why}")
        return {"skipped": why}
    work = s.work / "polyglot"
    work.mkdir(parents=True, exist_ok=True)
    (work / ".moss").mkdir(exist_ok=True)
    variants = {}
    for name in ("oracle", "nothing"):
        v = work / "variants" / name
        v.mkdir(parents=True, exist_ok=True)
        # a local server's replies are capped at 1,024 tokens unless the config says more: the
        # oracle's largest reply (Java's connect: four files) is ~5,000 characters
        (v / "config.toml").write_text(f'[llm]\nprovider = "openai"\nmodel = "{name}"\nmax_output_tokens = 4096\n')
        variants[name] = v
    cache = os.environ.get("MOSS_EVAL_CACHE") or str(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
                                                       / "moss" / "eval")
    out: dict = {"checkout": str(root), "jobs": JOBS, "load_start": loadavg(), "languages": {}}
    for lang in LANGUAGES:
        folder = root / lang / "exercises" / "practice"
        if folder.is_dir():
            out["languages"][lang] = one_language(s, lang, folder, work, variants, cache)
    out["load_end"] = loadavg()
    return out


def one_language(s: Settings, lang: str, folder: Path, work: Path, variants: dict, cache: str) -> dict:
    env = moss_env({"MOSS_EVAL_CACHE": cache})
    prep = subprocess.run([str(s.moss_bin), "eval", "--prepare", str(folder)], cwd=work, env=env,
                          capture_output=True, text=True, timeout=3600)
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(REPO / "tests"), str(folder)], cwd=work,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        env.update(OPENAI_BASE_URL=f"http://127.0.0.1:{port}/v1", OPENAI_API_KEY="bench-key")
        results = work / f"results-{lang}"
        if results.exists():
            import shutil

            shutil.rmtree(results)
        cpu0, t0 = children_cpu(), time.monotonic()
        r = subprocess.run([str(s.moss_bin), "eval", str(folder), "--variant", f"oracle={variants['oracle']}",
                            "--variant", f"nothing={variants['nothing']}", "--tries", "2", "-j", str(JOBS),
                            "--json", "--out", str(results)], cwd=work, env=env, capture_output=True, text=True,
                           timeout=4 * 3600)
        wall, cpu = time.monotonic() - t0, children_cpu() - cpu0
    finally:
        if server.stdin:
            server.stdin.close()
        server.wait(timeout=30)
    rows = [json.loads(line) for line in (results / "attempts.jsonl").read_text().splitlines() if line.strip()] \
        if (results / "attempts.jsonl").exists() else []
    return derive(lang, rows, wall, cpu, r.returncode, prep, r.stderr)


_CRATES = re.compile(r"its Cargo\.toml needs the crates? (.+?), not available offline")
_GOROOT = re.compile(r"package (\S+) is not in GOROOT \(\S*?go-?([\d.]+)/src")


def _changed(row: dict) -> bool:
    stat = row.get("patch_stat")
    return not isinstance(stat, dict) or bool(stat.get("files"))


def derive(lang: str, rows: list[dict], wall: float, cpu: float, code: int, prep, stderr: str) -> dict:
    oracle = {r["task"]: r for r in rows if r.get("cell") == "variant=oracle"}
    idle = {r["task"]: r for r in rows if r.get("cell") == "variant=nothing"}
    not_run, not_moss, bugs = {}, {}, {}
    for task, row in sorted(oracle.items()):
        if row.get("passed") is None:
            not_run[task] = str(row.get("detail") or row.get("reason"))
        elif row.get("passed") is False:
            detail = str((row.get("check") or {}).get("detail") or row.get("verdict") or row.get("reason"))
            output = str((row.get("check") or {}).get("output") or "")
            m, g = _CRATES.search(detail), _GOROOT.search(output)
            if m:
                not_moss[task] = f"its example's Cargo.toml needs {m.group(1)}, not available offline"
            elif g:
                not_moss[task] = (f"its example imports Go's standard package {g.group(1)!r}, which this "
                                  f"machine's Go ({g.group(2)}) does not have")
            else:
                bugs[task] = detail[:300]
    counted_o = [r for r in oracle.values() if r.get("passed") is not None]
    counted_i = [r for r in idle.values() if r.get("passed") is not None]
    attempts = len(rows)
    return {
        "exercises": len(oracle), "exit": code, "wall": round(wall, 1), "cpu": round(cpu, 1), "attempts": attempts,
        "per_minute": round(attempts / (wall / 60), 1) if wall else None,
        "cpu_per_attempt": round(cpu / attempts, 2) if attempts else None,
        "oracle_passed": sum(1 for r in counted_o if r["passed"]), "oracle_counted": len(counted_o),
        "oracle_pass1": sum(1 for r in counted_o if r["passed"] and r.get("passed_on", 1) == 1),
        "idle_passed": sum(1 for r in counted_i if r["passed"]), "idle_counted": len(counted_i),
        "not_run": not_run, "not_moss": not_moss, "bugs": bugs,
        # an idle pass that changed nothing: the exercise's tests pass on its stub as shipped (a
        # refactoring exercise; the leaderboard counts it alike); one that changed files is a bug
        "shipped_passing": sorted(t for t, r in idle.items() if r.get("passed") and not _changed(r)),
        "idle_passes": sorted(t for t, r in idle.items() if r.get("passed") and _changed(r)),
        "prepare": (prep.stdout + prep.stderr).strip().splitlines()[-6:],
        "stderr_tail": stderr.strip().splitlines()[-5:] if code not in (0, 1) else [],
    }


def tables(res: dict) -> list[dict]:
    if res.get("skipped"):
        return [{"title": "14. The polyglot benchmark through moss eval: not run", "columns": ["why"],
                 "rows": [[res["skipped"]]]}]
    rows, why, shipped = [], [], []
    total = {"exercises": 0, "op": 0, "oc": 0, "run": 0, "ip": 0, "ic": 0, "no": 0, "wall": 0.0, "cpu": 0.0, "n": 0}
    for lang, r in res["languages"].items():
        runnable = r["exercises"] - len(r["not_run"]) - len(r["not_moss"])
        for k, v in (("exercises", r["exercises"]), ("op", r["oracle_passed"]), ("oc", r["oracle_counted"]),
                     ("run", runnable), ("ip", r["idle_passed"]), ("ic", r["idle_counted"]),
                     ("no", len(r["not_run"]) + len(r["not_moss"])), ("wall", r["wall"]), ("cpu", r["cpu"]),
                     ("n", r["attempts"])):
            total[k] += v
        rows.append([lang, str(r["exercises"]), f"{r['oracle_passed']}/{r['oracle_counted']}",
                     f"{r['oracle_passed']}/{runnable}",
                     f"{r['idle_passed']}/{r['idle_counted']}", str(len(r["not_run"]) + len(r["not_moss"])),
                     fmt_s(r["wall"]), f"{r['per_minute']}", fmt_s(r["cpu_per_attempt"]) if r["cpu_per_attempt"]
                     else "-"])
        why += [[lang, task, text] for task, text in {**r["not_run"], **r["not_moss"]}.items()]
        why += [[lang, task, "FAILED with the oracle (a bug in moss): " + text] for task, text in r["bugs"].items()]
        why += [[lang, task, "PASSED while doing nothing, with files changed (a bug in moss)"]
                for task in r["idle_passes"]]
        shipped += [f"{lang}/{task}" for task in r.get("shipped_passing", [])]
    if len(rows) > 1:
        rows.append(["all", str(total["exercises"]), f"{total['op']}/{total['oc']}", f"{total['op']}/{total['run']}",
                     f"{total['ip']}/{total['ic']}", str(total["no"]), fmt_s(total["wall"]),
                     f"{total['n'] / (total['wall'] / 60):.1f}" if total["wall"] else "-",
                     fmt_s(total["cpu"] / total["n"]) if total["n"] else "-"])
    if shipped:
        why.append(["-", ", ".join(shipped), "ran and counted: their tests pass on the stub as shipped (refactoring "
                    "exercises, and Go's counter, which asks for tests), so the idle model passes them, on the "
                    "leaderboard too"])
    t1 = {"title": f"14. The polyglot benchmark through moss eval ({res['checkout']}): an oracle and an idle model, "
                   f"--tries 2, -j {res['jobs']} (load {res['load_start']} at the start, {res['load_end']} at the end)",
          "columns": ["language", "exercises", "oracle passed/counted", "oracle passed/runnable here",
                      "idle passed/counted", "not run, or example not passable here", "wall", "attempts/min",
                      "CPU/attempt"], "rows": rows}
    t2 = {"title": "14. Exercises that could not run here, or whose own example cannot pass here, and why; and those "
                   "that pass as shipped",
          "columns": ["language", "exercise", "why"], "rows": why or [["-", "-", "none"]]}
    return [t1, t2]


def summary_rows(res: dict) -> list[list[str]]:
    if res.get("skipped"):
        return []
    langs = res["languages"].values()
    passed = sum(r["oracle_passed"] for r in langs)
    runnable = sum(r["exercises"] - len(r["not_run"]) - len(r["not_moss"]) for r in langs)
    total = sum(r["exercises"] for r in langs)
    idle = sum(r["idle_passed"] for r in langs)
    return [["polyglot: the oracle's passes / exercises that can run here", f"{passed}/{runnable}",
             f"of {total} exercises; the idle model passed {idle}"]]
