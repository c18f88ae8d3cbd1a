"""7. Sweep start-up: 8 short runs, local subprocesses against Ray jobs.

What the Wild Loop does for a sweep of 8 (RunManager.start per run, as moss.runs.start), timed
from the first start call to (a) the last call returning (everything submitted) and (b) every
run reported `running` by moss (for Ray: the job is RUNNING and moss's poll saw it), then to
every run ended. Each run is `python3 -c "time.sleep(2)"`, at access full.

Ray: a private head node on 127.0.0.1 (tests/rayhead.py, the tests' hardened settings) with
--num-cpus=8 (logical CPUs: each job reserves 1, so all 8 may run at once on this 2-core
machine); the first sweep also pays the project upload and Ray's first-job warm-up and is
shown apart ("cold"); then local and Ray take turns, round after round. Skipped with a note
when Ray is not installed (pip install -e '.[ray]').
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

from common import REPO, Settings

NAME = "runs"
N = 8
CMD = "python3 -c 'import time; print(\"loss 1.0\", flush=True); time.sleep(2)'"


def _sweep(m, executor: str, address: str | None) -> dict:
    t0 = time.perf_counter()
    ids = []
    for i in range(N):
        kw = {"executor": "ray", "address": address, "resources": {"num_cpus": 1}} if executor == "ray" else {}
        ids.append(m.start(CMD, access="full", allow_full=True, name=f"bench #{i}", **kw)["id"])
    submitted = time.perf_counter() - t0
    started = ended = None
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        st = [m.status(i)["status"] for i in ids]
        if started is None and all(s != "queued" for s in st):
            started = time.perf_counter() - t0
        if all(s in ("finished", "failed", "stopped") for s in st):
            ended = time.perf_counter() - t0
            assert all(s == "finished" for s in st), st
            break
        time.sleep(0.02)
    return {"submitted": submitted, "started": started, "ended": ended}


def run(s: Settings) -> dict:
    sys.path.insert(0, str(REPO / "tests"))
    from rayhead import RayHead, ray_importable

    from moss.tools.runs import RunManager

    out: dict = {"n": N, "cmd": CMD}
    proj = Path(tempfile.mkdtemp(prefix="runs-", dir=s.work))
    (proj / ".moss").mkdir()
    (proj / "train.py").write_text("print('hi')\n")
    m = RunManager(proj)
    rounds = s.reps(3, 1)
    out["rounds"] = rounds
    if not ray_importable():
        s.notes.append("runs: Ray is not installed (pip install -e '.[ray]'): only local runs were timed")
        out["local"] = [_sweep(m, "local", None) for _ in range(rounds)]
        m.close()
        return out
    head = RayHead(num_cpus=N)
    try:
        head.start()
        out["head_start_s"] = head.started_in
        out["ray_cold"] = _sweep(m, "ray", head.address)
        out["local"], out["ray"] = [], []
        for _ in range(rounds):
            out["local"].append(_sweep(m, "local", None))
            out["ray"].append(_sweep(m, "ray", head.address))
    finally:
        m.close()
        left = head.stop()
        if left:
            s.notes.append(f"runs: still alive after the head was stopped: {left}")
    return out


def _med(rows: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def tables(res: dict) -> list[dict]:
    rows = []

    def add(label, r):
        rows.append([label, f"{r['submitted']:.2f} s", f"{r['started']:.2f} s", f"{r['ended']:.2f} s"])

    loc = {k: _med(res["local"], k) for k in ("submitted", "started", "ended")}
    add(f"local subprocesses (median of {res['rounds']})", loc)
    if "ray" in res:
        add(f"Ray jobs, warm (median of {res['rounds']})", {k: _med(res["ray"], k) for k in ("submitted", "started",
                                                                                         "ended")})
        add("Ray jobs, cold (first sweep: upload, first jobs)", res["ray_cold"])
    return [{"title": f"7. Sweep start-up: {res['n']} runs of 2 s, from the first start call "
                      "(to all submitted / all running / all ended)",
             "columns": ["executor", "submitted", "all running", "all ended"], "rows": rows}]


def summary_rows(res: dict) -> list[list[str]]:
    if "ray" not in res:
        return []
    loc, ray = _med(res["local"], "started"), _med(res["ray"], "started")
    return [["runs: 8 runs all started, Ray jobs / local subprocesses", f"{ray / loc:.0f}×",
             f"{ray:.2f} s vs {loc:.3f} s (warm; head start {res['head_start_s']:.1f} s not counted)"]]
