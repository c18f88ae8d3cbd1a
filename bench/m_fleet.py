"""9. `moss eval --executor ray` (issue 27): attempts as Ray jobs against attempts here.

16 question attempts (m_eval's generated suite: view calc.py, then answer; 2 LLM calls each,
machine v1), the fake API server in a process of its own answering every call after 300 ms.
`moss eval SUITE -j 2 --executor local` against `-j 2 --executor ray` on a private Ray head on
127.0.0.1 with 2 CPUs (tests/rayhead.py, the tests' hardened settings; the model's key in the
head's environment, as an operator would start a cluster for moss). Whole-process wall time,
the head's start not counted; the first Ray run pays the package uploads (moss's source, the
repository) and is shown apart, then local and Ray take turns.

Ray's per-job overhead, two ways: from the rows, the driver's wait for each job (submission,
queue, Ray's start of a job supervisor and driver process, the log fetched at the end) minus the
attempt's own time on the node; and from the totals, (Ray wall - local wall) x 2 / 16 (the
extra time each of the 2 slots spent per attempt). Skipped with a note when Ray is not installed.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from common import REPO, Settings, loadavg
from m_eval import ARGS, LATENCY, bench_env, make_suite

NAME = "fleet"
N = 16
JOBS = 2

# m_eval's model, but it answers once the view's output is back, whatever form the view takes (an
# outline of calc.py's functions since compact output, where m_eval waits for `# calc.py`)
SERVER = """
import json, re, sys
sys.path.insert(0, sys.argv[1])
from fakeapi import FakeAPI, slow
ASK = re.compile(r"What number does f(\\d+) in calc\\.py return")

def model(body):
    text = json.dumps(body)
    if "f1() L1" in text or "# calc.py" in text:  # the view's output (outline or whole file) is back
        m = ASK.search(text)
        return slow("$(answer %%d)" %% (1000 + int(m.group(1))) if m else "$(answer ?)", %r)
    return slow("$(view calc.py)", %r)

api = FakeAPI().start()
api.push(*[model] * 1000000)
print(api.port, flush=True)
sys.stdin.read()
""" % (LATENCY, LATENCY)


def _eval(s: Settings, proj: Path, env: dict, tag: str, extra: list[str]) -> dict:
    out = s.work / f"fleet-out-{tag}"
    shutil.rmtree(out, ignore_errors=True)
    cmd = [str(s.moss_bin), "eval", "suite", *ARGS, "-j", str(JOBS), "--out", str(out), "--json", *extra]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=proj, env=env, capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError(f"moss eval {' '.join(extra)} failed ({r.returncode}): {r.stderr[-2000:]}")
    rows = [json.loads(line) for line in (out / "attempts.jsonl").read_text().splitlines()]
    passed = sum(1 for row in rows if row.get("passed"))
    if passed != N:
        raise RuntimeError(f"moss eval {' '.join(extra)}: {passed} of {N} passed: {r.stderr[-2000:]}")
    res = {"wall": wall, "attempt_wall": statistics.median(row["wall"] for row in rows)}
    ray = [row for row in rows if isinstance(row.get("ray"), dict)]
    if ray:
        res["job_overhead"] = statistics.median(row["ray"]["waited"] - row["wall"] for row in ray)
        # where it went: submission to the job's start, the job around the attempt, its end to the row
        res["to_start"] = statistics.median(row["ray"]["started"] for row in ray)
        res["around"] = statistics.median(row["ray"]["ran"] - row["wall"] for row in ray)
        res["boot"] = statistics.median(row["ray"]["boot"] for row in ray)
        res["ended"] = statistics.median(row["ray"]["ended"] for row in ray)
        res["to_row"] = statistics.median(row["ray"]["seen"] for row in ray)
        res["moss_on_node"] = sorted({row["ray"].get("moss", "") for row in ray})
    shutil.rmtree(out, ignore_errors=True)
    return res


def run(s: Settings) -> dict:
    sys.path.insert(0, str(REPO / "tests"))
    from rayhead import RayHead, ray_importable

    out: dict = {"attempts": N, "jobs": JOBS, "latency_s": LATENCY, "cores": os.cpu_count(),
                 "load_start": loadavg()}
    proj = make_suite(s.work, N, "-fleet")
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(REPO / "tests")], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    port = int(server.stdout.readline())
    env = bench_env(s, port)
    rounds = s.reps(2, 1)
    out["rounds"] = rounds
    try:
        if not ray_importable():
            s.notes.append("fleet: Ray is not installed (pip install -e '.[ray]'): nothing was timed")
            return out

        class Head(RayHead):  # the nodes hold the key and moss's interpreter first on PATH
            def env(self) -> dict:
                e = super().env()
                e["ANTHROPIC_API_KEY"] = env["ANTHROPIC_API_KEY"]
                e["PATH"] = str(Path(s.moss_python).parent) + os.pathsep + e.get("PATH", "")
                return e

        head = Head(num_cpus=2)
        try:
            head.start()
            out["head_start_s"] = head.started_in
            ray = ["--executor", "ray", "--ray-address", head.address, "--num-cpus", "1"]
            out["ray_cold"] = _eval(s, proj, env, "ray-cold", ray)
            out["local"], out["ray"] = [], []
            for i in range(rounds):
                out["local"].append(_eval(s, proj, env, f"local-{i}", ["--executor", "local"]))
                out["ray"].append(_eval(s, proj, env, f"ray-{i}", ray))
        finally:
            left = head.stop()
            if left:
                s.notes.append(f"fleet: still alive after the head was stopped: {left}")
    finally:
        server.kill()
        server.wait()
    out["load_end"] = loadavg()
    med = statistics.median
    out["local_wall"] = med(r["wall"] for r in out["local"])
    out["ray_wall"] = med(r["wall"] for r in out["ray"])
    out["ratio"] = out["ray_wall"] / out["local_wall"]
    out["job_overhead"] = med(r["job_overhead"] for r in out["ray"])
    out["overhead_from_totals"] = (out["ray_wall"] - out["local_wall"]) * JOBS / N
    out["attempt_local"] = med(r["attempt_wall"] for r in out["local"])
    out["attempt_ray"] = med(r["attempt_wall"] for r in out["ray"])
    for k in ("to_start", "around", "boot", "ended", "to_row"):
        out[k] = med(r[k] for r in out["ray"])
    return out


def tables(res: dict) -> list[dict]:
    if "ray" not in res:
        return []
    rows = [
        [f"local, -j {JOBS} (median of {res['rounds']})", f"{res['local_wall']:.1f} s", f"{res['attempt_local']:.2f} s",
         ""],
        [f"Ray, 2-CPU head, -j {JOBS} (median of {res['rounds']})", f"{res['ray_wall']:.1f} s",
         f"{res['attempt_ray']:.2f} s", f"{res['job_overhead']:.2f} s"],
        ["Ray, cold (first run: package uploads)", f"{res['ray_cold']['wall']:.1f} s",
         f"{res['ray_cold']['attempt_wall']:.2f} s", f"{res['ray_cold']['job_overhead']:.2f} s"],
    ]
    rows.append(["Ray overhead, where (medians): submission to the job's start / the job around the attempt "
                 "(of which: to moss's code running, moss's last line to the job's end) / its end to the row", "", "",
                 f"{res['to_start']:.2f} / {res['around']:.2f} ({res['boot']:.2f}, {res['ended']:.2f}) / "
                 f"{res['to_row']:.2f} s"])
    return [{"title": f"9. {res['attempts']} eval attempts at {res['latency_s'] * 1000:.0f} ms model latency: "
                      "whole eval, attempt on its machine (median), Ray's per-job overhead (median)",
             "columns": ["executor", "eval wall", "attempt", "per-job overhead"], "rows": rows}]


def summary_rows(res: dict) -> list[list[str]]:
    if "ray" not in res:
        return []
    return [["fleet: 16 eval attempts, Ray (2-CPU local head) / local, -j 2", f"{res['ratio']:.2f}×",
             f"{res['ray_wall']:.1f} s vs {res['local_wall']:.1f} s; per job +{res['job_overhead']:.2f} s "
             f"(rows), +{res['overhead_from_totals']:.2f} s (totals)"]]
