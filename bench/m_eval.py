"""8. `moss eval` (issue 26): attempts in parallel at a slow model, and the harness's own cost.

A suite of N question tasks (40; 16 with --quick) generated into the scratch folder, on one
small repository (calc.py: f1..f40, each returning its own number). Task k asks what fk
returns. The fake API server (tests/fakeapi.py, in a process of its own like a remote API)
answers every request after 300 ms: the first with `$(view calc.py)`, the one after seeing
the file with `$(answer NUMBER)`; two LLM calls per attempt, machine v1.

- parallel: `moss eval SUITE -j 8` against `-j 1`, the same suite, whole-process wall time,
  one round (40 attempts at -j 1 take minutes on 2 shared cores), the bare runs below split
  before and after them. Target ≤ 0.2, ideal 0.125.
- harness: `-j 1` wall / N (the eval's start-up shared over its attempts) against the mean
  wall of a bare `moss @agent --output-format stream-json -n --trust ARGS -- PROMPT` (the
  command an attempt runs) on one of the same tasks, in a fresh copy of the repository made
  before the clock starts. Target ≤ 1.2.
- the floor: with C cores, X s of CPU per attempt (the bare run's own CPU, from
  getrusage(RUSAGE_CHILDREN) around it) and W = 0.3 s × LLM calls of waiting, N attempts at
  -j 8 take at least max(N·X/C, N·(X+W)/8) and at -j 1 about N·(X+W): the ratio can at best be
  max(X/C, (X+W)/8) / (X+W). The same with the eval's own CPU per attempt (its rusage over the
  -j 1 run / N) is printed beside it.
- profile: the same eval at -j 1 in-process (this file's --child mode), with timers around the
  harness's parts: copying the repository, the agent subprocess (spawn to exit, and its stream),
  the check, keeping the log, recording the row and removing the copy; then a change task's
  check (`python3 test_f1.py`), as the sandboxed check and fail_before run it, beside the same
  command run bare.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import REPO, Settings, fmt_s, loadavg, moss_env

NAME = "eval"
LATENCY = 0.3
CALLS = 2  # LLM calls per attempt: the view, then the answer
ARGS = ["--machine", "v1", "--provider", "anthropic", "--model", "claude-bench"]

SERVER = """
import re, sys
sys.path.insert(0, sys.argv[1])
from fakeapi import FakeAPI, last_user_text, slow
ASK = re.compile(r"What number does f(\\d+) in calc\\.py return")

def model(body):
    text = last_user_text(body)
    if "f1() L1" in text or "# calc.py" in text:  # the view's output is back (compact outline or whole file)
        import json
        m = ASK.search(json.dumps(body))
        return slow("$(answer %%d)" %% (1000 + int(m.group(1))) if m else "$(answer ?)", %r)
    return slow("$(view calc.py)", %r)

api = FakeAPI().start()
api.push(*[model] * 1000000)
print(api.port, flush=True)
sys.stdin.read()
""" % (LATENCY, LATENCY)


def make_suite(work: Path, n: int, name: str = "") -> Path:
    """A project with a suite of n question tasks on one small repository."""
    proj = work / f"eval-project{name}-{n}"
    if proj.exists():
        shutil.rmtree(proj)
    repo = proj / "suite" / "repos" / "calc"
    repo.mkdir(parents=True)
    (proj / ".moss").mkdir()
    (repo / "calc.py").write_text("".join(f"def f{k}():\n    return {1000 + k}\n\n\n" for k in range(1, 41)))
    (repo / "test_f1.py").write_text("from calc import f1\n\nassert f1() == 1001, f1()\nprint('ok')\n")
    (repo / "README.md").write_text("A calculator of forty constant functions.\n")
    tasks = ['[suite]\nname = "bench"\n']
    for k in range(1, n + 1):
        tasks.append(f'[[task]]\nid = "f{k}"\nrepo = "repos/calc"\n'
                     f'prompt = "What number does f{k} in calc.py return? Answer with the number."\n'
                     f'[task.check]\nanswer = "{1000 + k}"\n')
    (proj / "suite" / "suite.toml").write_text("\n".join(tasks))
    return proj


def bench_env(s: Settings, port: int) -> dict:
    tmp = s.work / "eval-tmp"  # the attempts' copies (and the bare runs') go here
    tmp.mkdir(exist_ok=True)
    cache = s.work / "eval-cache"  # the structure cache: never the user's
    cache.mkdir(exist_ok=True)
    return moss_env({"ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}", "ANTHROPIC_API_KEY": "bench-key",
                     "TMPDIR": str(tmp), "XDG_CACHE_HOME": str(cache)})


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_eval(s: Settings, proj: Path, env: dict, jobs: int, n: int, tag: str) -> dict:
    out = s.work / f"eval-out-{tag}"
    shutil.rmtree(out, ignore_errors=True)
    cmd = [str(s.moss_bin), "eval", "suite", *ARGS, "-j", str(jobs), "--out", str(out), "--json"]
    c0, t0 = children_cpu(), time.perf_counter()
    r = subprocess.run(cmd, cwd=proj, env=env, capture_output=True, text=True, timeout=1800)
    wall, cpu = time.perf_counter() - t0, children_cpu() - c0
    if r.returncode != 0:
        raise RuntimeError(f"moss eval -j {jobs} failed ({r.returncode}): {r.stderr[-2000:]}")
    cells = json.loads(r.stdout)["cells"]
    passed = sum(c["passed"] for c in cells)
    if passed != n:
        raise RuntimeError(f"moss eval -j {jobs}: {passed} of {n} attempts passed: {r.stderr[-2000:]}")
    rows = [json.loads(line) for line in (out / "attempts.jsonl").read_text().splitlines()]
    shutil.rmtree(out, ignore_errors=True)
    return {"wall": wall, "cpu": cpu, "turns": statistics.mean(r["turns"] for r in rows),
            "attempt_wall": statistics.median(r["wall"] for r in rows)}


def fresh_copy(proj: Path, env: dict) -> Path:
    """The kind of copy an attempt gets: the repository's files and an empty .moss/."""
    home = Path(tempfile.mkdtemp(prefix="moss-bare-", dir=env["TMPDIR"]))
    dest = home / "repo"
    shutil.copytree(proj / "suite" / "repos" / "calc", dest, symlinks=True)
    (dest / ".moss").mkdir()
    (dest / ".moss" / ".gitignore").write_text("*\n")
    return dest


def bare_argv(s: Settings, k: int) -> list[str]:
    return [str(s.moss_bin), "@agent", "--output-format", "stream-json", "-n", "--trust", *ARGS, "--",
            f"What number does f{k} in calc.py return? Answer with the number."]


def run_bare(s: Settings, proj: Path, env: dict, k: int) -> dict:
    copy = fresh_copy(proj, env)
    c0, t0 = children_cpu(), time.perf_counter()
    r = subprocess.run(bare_argv(s, k), cwd=copy, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                       text=True, timeout=600)
    wall, cpu = time.perf_counter() - t0, children_cpu() - c0
    shutil.rmtree(copy.parent, ignore_errors=True)
    result = next((json.loads(line) for line in r.stdout.splitlines() if '"type": "result"' in line
                   or '"type":"result"' in line), None)
    if r.returncode != 0 or not result or str(result.get("answer", "")).strip() != str(1000 + k):
        raise RuntimeError(f"bare moss @agent failed ({r.returncode}): {r.stderr[-2000:]}")
    return {"wall": wall, "cpu": cpu, "turns": result.get("turns")}


def run(s: Settings) -> dict:
    n = 16 if s.quick else 40
    rounds = 1  # 40 attempts at -j 1 take minutes on 2 shared cores: the bare runs straddle them instead
    bare_per_round = 4 if s.quick else 6
    proj = make_suite(s.work, n)
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(REPO / "tests")], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    port = int(server.stdout.readline())
    env = bench_env(s, port)
    out: dict = {"latency_s": LATENCY, "attempts": n, "rounds": rounds, "cores": os.cpu_count(),
                 "load_start": loadavg()}
    try:
        run_bare(s, proj, env, 1)  # warm-up: file cache, byte-compiled modules
        j1: list[dict] = []
        j8: list[dict] = []
        bare: list[dict] = []
        k = 0
        for i in range(rounds):
            for _ in range(bare_per_round // 2):
                k = k % n + 1
                bare.append(run_bare(s, proj, env, k))
            j1.append(run_eval(s, proj, env, 1, n, f"j1-{i}"))
            j8.append(run_eval(s, proj, env, 8, n, f"j8-{i}"))
            for _ in range(bare_per_round - bare_per_round // 2):
                k = k % n + 1
                bare.append(run_bare(s, proj, env, k))
        out["profile"] = profile(s, proj, env, 6 if s.quick else 10)
        # what part of X no harness can touch: the interpreter and the SDK's import
        sdk = []
        for _ in range(3):
            c0 = children_cpu()
            subprocess.run([str(s.moss_python), "-c", "import anthropic"], env=env, check=True)
            sdk.append(children_cpu() - c0)
        out["sdk_cpu"] = statistics.median(sdk)
    finally:
        server.kill()
        server.wait()
    out["load_end"] = loadavg()
    med = statistics.median
    out["j1"] = med(r["wall"] for r in j1)
    out["j8"] = med(r["wall"] for r in j8)
    out["j1_cpu"] = med(r["cpu"] for r in j1)
    out["j8_cpu"] = med(r["cpu"] for r in j8)
    out["turns"] = statistics.mean(r["turns"] for r in j1)
    out["all"] = {"j1": [round(r["wall"], 2) for r in j1], "j8": [round(r["wall"], 2) for r in j8],
                  "bare": [round(r["wall"], 3) for r in bare]}
    out["bare_wall"] = statistics.mean(r["wall"] for r in bare)
    out["bare_cpu"] = statistics.mean(r["cpu"] for r in bare)
    out["bare_n"] = len(bare)
    return derive(out)


def derive(out: dict) -> dict:
    """The ratios and floors from the raw figures."""
    n = out["attempts"]
    out["ratio"] = out["j8"] / out["j1"]
    out["per_attempt"] = out["j1"] / n
    out["harness_ratio"] = out["per_attempt"] / out["bare_wall"]
    c = os.cpu_count() or 1
    w = LATENCY * out["turns"]
    x = out["bare_cpu"]
    out["wait"] = w
    out["floor"] = max(x / c, (x + w) / 8) / (x + w)
    xe = out["j1_cpu"] / n  # the eval's CPU per attempt: the agent, the copy, the eval's own work
    out["cpu_per_attempt_eval"] = xe
    out["floor_eval"] = max(xe / c, (xe + w) / 8) / (xe + w)
    # the cores each run had on average (CPU / wall): on a machine shared with other work, a
    # run with more processes takes a larger share of it, which moves the ratio by itself
    out["cores_j1"] = out["j1_cpu"] / out["j1"]
    out["cores_j8"] = out["j8_cpu"] / out["j8"]
    out["cores_bare"] = out["bare_cpu"] / out["bare_wall"]
    # load-robust harness figures: CPU per attempt against the bare run's; and the harness's
    # timed parts (profile) added to the time the bare agent needs on a quiet machine (X + W)
    out["harness_cpu_ratio"] = xe / x
    p = out["profile"]
    sp, na = p["spent"], max(1, p["attempts"])
    # around the agent (folder, copy, check), keeping its log, recording the row and removing the
    # copy, and the eval's start and end shared over its attempts (Popen is in the bare run too)
    out["harness_parts"] = (sp.get("executor", 0.0) - sp.get("agent", 0.0) + sp.get("write", 0.0)
                            + sp.get("record", 0.0) + p["before_first"] + p["after_last"]) / na
    out["harness_parts_ratio"] = (x + w + out["harness_parts"]) / (x + w)
    return out


# --------------------------------------------------------------------------- profile

def profile(s: Settings, proj: Path, env: dict, n: int) -> dict:
    """The eval at -j 1 in a child process with timers around the harness's parts (--child)."""
    dest = s.work / "eval-profile.json"
    proj = make_suite(s.work, n, "-profile")  # a suite of its own, n tasks
    r = subprocess.run([str(s.moss_python), str(Path(__file__).resolve()), "--child", str(proj), str(n),
                        str(dest), str(s.moss_bin)], cwd=proj, env=env, capture_output=True, text=True,
                       timeout=1800)
    if r.returncode != 0:
        raise RuntimeError(f"eval profile child failed: {r.stderr[-3000:]}")
    return json.loads(dest.read_text())


def _child(proj: str, n: int, dest: str, moss_bin: str) -> None:
    import functools
    from collections import defaultdict

    t_start = time.perf_counter()
    import moss.agentproc as agentproc
    import moss.eval.attempt as att
    import moss.eval.copies as copies
    import moss.eval.executors as ex
    import moss.eval.results as results
    import moss.eval.session as sess
    import moss.run as run_mod

    spent: dict[str, float] = defaultdict(float)
    calls: dict[str, int] = defaultdict(int)
    marks: dict[str, float] = {}
    pc = time.perf_counter

    def timed(owner, attr: str, name: str) -> None:
        fn = getattr(owner, attr)

        @functools.wraps(fn)
        def t(*a, **k):
            marks.setdefault("first_" + name, pc())
            t0 = pc()
            try:
                return fn(*a, **k)
            finally:
                spent[name] += pc() - t0
                calls[name] += 1
                marks["last_" + name] = pc()
        setattr(owner, attr, t)

    timed(copies, "new_home", "new_home")
    timed(copies, "make", "copy")
    timed(copies, "remove", "remove")
    timed(att, "check", "check")
    timed(att, "run_commands", "commands")
    timed(results, "write", "write")
    timed(results, "append", "append")
    timed(ex.LocalAttempts, "run", "executor")
    timed(ex.LocalAttempts, "_agent", "agent")
    timed(sess.EvalRun, "record", "record")

    # the agent subprocess: the time Popen takes to return (fork + exec of the agent)
    real_popen = agentproc.subprocess.Popen

    class Popen(real_popen):  # type: ignore[misc,valid-type]
        def __init__(self, *a, **k):
            t0 = pc()
            super().__init__(*a, **k)
            spent["spawn"] += pc() - t0
            calls["spawn"] += 1

    agentproc.subprocess.Popen = Popen  # type: ignore[misc]

    out_dir = Path(proj) / ".moss" / "eval-profile"
    shutil.rmtree(out_dir, ignore_errors=True)
    args = ["suite", *ARGS, "-j", "1", "--out", str(out_dir), "--json"]
    real_out = sys.stdout
    sys.stdout = open(os.devnull, "w")
    t0 = pc()
    try:
        code = run_mod.run_script("eval", args)
    finally:
        sys.stdout = real_out
        agentproc.subprocess.Popen = real_popen  # type: ignore[misc]
    total = pc() - t0
    if code != 0:
        raise SystemExit(f"moss eval in-process exited {code}")
    rows = [json.loads(line) for line in (out_dir / "attempts.jsonl").read_text().splitlines()]
    shutil.rmtree(out_dir, ignore_errors=True)
    nrows = len(rows)
    # the bare agent, same tasks, same process's children: what the agent costs without the eval
    env = dict(os.environ)
    bare = []
    for k in range(1, min(nrows, 6) + 1):
        copy = fresh_copy(Path(proj), env)
        t1 = pc()
        subprocess.run(bare_argv_bin(moss_bin, k), cwd=copy, env=env, stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=600)
        bare.append(pc() - t1)
        shutil.rmtree(copy.parent, ignore_errors=True)
    # a change task's check: python3 test_f1.py in the sandbox (as the check and fail_before run
    # it) beside the same command run bare
    copy = fresh_copy(Path(proj), env)
    sand, plain = [], []
    for _ in range(5):
        t1 = pc()
        ok, why = att.run_commands(["python3 test_f1.py"], copy)
        sand.append(pc() - t1)
        assert ok, why
        t1 = pc()
        subprocess.run(["python3", "test_f1.py"], cwd=copy, capture_output=True, check=True)
        plain.append(pc() - t1)
    shutil.rmtree(copy.parent, ignore_errors=True)
    Path(dest).write_text(json.dumps({
        "attempts": nrows, "total": total, "import": t_start and (t0 - t_start),
        "before_first": marks.get("first_new_home", t0) - t0,
        "after_last": t0 + total - marks.get("last_record", t0 + total),
        "spent": dict(spent), "calls": dict(calls),
        "bare": statistics.median(bare), "bare_all": [round(b, 3) for b in bare],
        "check_sandboxed": statistics.median(sand), "check_plain": statistics.median(plain),
    }))


def bare_argv_bin(moss_bin: str, k: int) -> list[str]:
    return [moss_bin, *bare_argv(Settings(), k)[1:]]


# --------------------------------------------------------------------------- rendering

def tables(res: dict) -> list[dict]:
    n = res["attempts"]
    met = "met" if res["ratio"] <= 0.2 else "not met"
    if res["ratio"] < res["floor"]:
        met += " (below the quiet-machine floor: see cores used)"
    elif res["ratio"] <= res["floor"] * 1.1:
        met += " (at the floor)"
    rows = [[f"{n} attempts, -j 1", f"{res['j1']:.1f} s", "1.00×", f"CPU {res['j1_cpu']:.1f} s"],
            [f"{n} attempts, -j 8", f"{res['j8']:.1f} s", f"{res['ratio']:.3f}×",
             f"CPU {res['j8_cpu']:.1f} s; target ≤ 0.2×: {met}"],
            [f"floor on a quiet machine: {res['cores']} cores, X = {res['bare_cpu']:.2f} s CPU per bare attempt, "
             f"W = {res['wait']:.1f} s waiting", "", f"{res['floor']:.3f}×",
             "max(X/C, (X+W)/8) / (X+W)"],
            *([["  of X: python -c 'import anthropic' alone (CPU, median of 3)", "", "", fmt_s(res["sdk_cpu"])]]
              if "sdk_cpu" in res else []),
            [f"floor with the eval's own CPU per attempt ({res['cpu_per_attempt_eval']:.2f} s)", "",
             f"{res['floor_eval']:.3f}×", "max(Xe/C, (Xe+W)/8) / (Xe+W)"],
            ["-j 1 wall / attempt (harness)", fmt_s(res["per_attempt"]), f"{res['harness_ratio']:.2f}×",
             f"target ≤ 1.2×: {'met' if res['harness_ratio'] <= 1.2 else 'not met'}"],
            [f"bare moss @agent, same task (mean of {res['bare_n']})", fmt_s(res["bare_wall"]), "1.00×",
             f"CPU {fmt_s(res['bare_cpu'])}"],
            ["CPU per attempt, -j 1 eval / bare", fmt_s(res["cpu_per_attempt_eval"]),
             f"{res['harness_cpu_ratio']:.2f}×", "robust to the load: CPU, not wall"],
            ["harness parts per attempt (profile) + X + W, / (X + W)", fmt_s(res["harness_parts"]),
             f"{res['harness_parts_ratio']:.2f}×", "what the harness adds on a quiet machine"],
            ["cores used on average (CPU / wall): -j 1, -j 8, bare", "",
             "", f"{res['cores_j1']:.2f}, {res['cores_j8']:.2f}, {res['cores_bare']:.2f}"]]
    t1 = {"title": f"8. moss eval: {n} question attempts, {res['turns']:.1f} LLM calls each at "
                   f"{res['latency_s'] * 1000:.0f} ms ({res['cores']} cores, load {res['load_start']} at the start, "
                   f"{res['load_end']} at the end; -j 1 then -j 8, bare runs before and after)",
          "columns": ["what", "wall time", "ratio", "detail"], "rows": rows}
    p = res["profile"]
    a = max(1, p["attempts"])
    sp = p["spent"]
    per = {k: v / a for k, v in sp.items()}
    agent = per.get("agent", 0.0)
    rows2 = [["eval start-up before the first attempt (imports, Lua, suite) / attempts",
              fmt_s(p["before_first"] / a), ""],
             ["new attempt folder", fmt_s(per.get("new_home", 0.0)), ""],
             ["copying the repository and its .moss/", fmt_s(per.get("copy", 0.0)), ""],
             ["the agent subprocess, spawn to exit (stream read alongside)", fmt_s(agent),
              f"bare run here: {fmt_s(p['bare'])}"],
             ["  of which Popen (fork + exec)", fmt_s(per.get("spawn", 0.0)), ""],
             ["  of which keeping its session log", fmt_s(per.get("write", 0.0)), ""],
             ["the check (a question: judging the answer)", fmt_s(per.get("check", 0.0)), ""],
             ["recording the row (append, removing the copy)", fmt_s(per.get("record", 0.0)),
              f"removing the copy {fmt_s(per.get('remove', 0.0))}"],
             ["after the last attempt (summary, table) / attempts", fmt_s(p["after_last"] / a), ""],
             ["whole eval in-process / attempts", fmt_s(p["total"] / a), f"{p['total'] / a / p['bare']:.2f}× bare"],
             ["a change task's check, sandboxed (once more for fail_before)", fmt_s(p["check_sandboxed"]),
              f"bare command {fmt_s(p['check_plain'])}"]]
    t2 = {"title": f"8. Where an attempt's time goes: moss eval -j 1 in-process, {p['attempts']} attempts "
                   f"(means per attempt)", "columns": ["part", "per attempt", "beside"], "rows": rows2}
    return [t1, t2]


def summary_rows(res: dict) -> list[list[str]]:
    return [["eval: -j 8 / -j 1 wall, 300 ms per LLM call", f"{res['ratio']:.3f}×",
             f"{res['j8']:.1f} s vs {res['j1']:.1f} s; floor on {res['cores']} cores {res['floor']:.3f}×"],
            ["eval: -j 1 wall per attempt / bare moss @agent", f"{res['harness_ratio']:.2f}×",
             f"{fmt_s(res['per_attempt'])} vs {fmt_s(res['bare_wall'])}; CPU {res['harness_cpu_ratio']:.2f}×, "
             f"timed parts {res['harness_parts_ratio']:.2f}×"]]


if __name__ == "__main__" and len(sys.argv) > 1 and sys.argv[1] == "--child":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    _child(sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5])
