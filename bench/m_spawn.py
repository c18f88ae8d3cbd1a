"""6. Child agents: 8 children against 1 at a slow model, and what a lock costs.

- fan-out: a root script (moss.run.build, as `moss @NAME` builds it) spawns N explorer
  children (machine v1) and waits for all; each child makes 2 LLM calls (a view, then the
  answer) to tests/fakeapi.py, which answers every call after 300 ms. N = 1 and N = 8 take
  turns, round after round, after one warm-up run (SDK import and client creation); the
  median wall time of each is compared. Serial children would make the ratio 8; the target
  is at most 1.3. Also the CPU this process spends per child (what the children cannot
  overlap: most of it holds the GIL).
- locks: acquire + release of an uncontended symbol lock, in Python (LockManager, which
  writes and removes the cross-process lock file) and from Lua (moss.lock / l:release()).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from common import REPO, Settings

NAME = "spawn"
LATENCY = 0.3

FAN = """
local n = ...
local hs = {}
for i = 1, n do
  hs[i] = moss.spawn { task = "bench child " .. i, role = "explorer", machine = "v1", max_turns = 4 }
end
local ok = 0
for _, r in ipairs(moss.wait_all(hs)) do if r.success then ok = ok + 1 end end
return ok
"""


SERVER = """
import sys, time
sys.path.insert(0, sys.argv[1])
from fakeapi import FakeAPI, last_user_text, slow

def model(body):
    if "# calc.py" in last_user_text(body):
        return slow("$(answer done)", %r)
    return slow("$(view calc.py)", %r)

api = FakeAPI().start()
api.push(*[model] * 100000)
print(api.port, flush=True)
sys.stdin.read()
""" % (LATENCY, LATENCY)


def run(s: Settings) -> dict:
    import subprocess

    from moss.run import build
    from moss.tools.locks import LockManager, Target

    proj = Path(tempfile.mkdtemp(prefix="spawn-", dir=s.work))
    (proj / ".moss").mkdir()
    (proj / "calc.py").write_text("def f1():\n    return 1\n")
    rounds = s.reps(5, 2)
    out: dict = {"latency_s": LATENCY, "rounds": rounds}
    # the fake model runs in a process of its own, like a remote API: its HTTP threads do
    # not compete with the agents for this process's GIL
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(REPO / "tests")], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    port = int(server.stdout.readline())
    env = {"ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}", "ANTHROPIC_API_KEY": "bench-key"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        ctx, rt = build("bench", [], {"provider": "anthropic", "model": "claude-bench"}, root=proj)
        rt.execute('moss.session.bind("benchroot"); moss.access.set("read-shell")', "=setup")
        fan = rt.load(FAN, "=fan")
        rt.call(fan, 8)  # warm-up: SDK import, client, tree-sitter, bwrap probe
        times: dict[int, list[float]] = {1: [], 8: []}
        cpu: dict[int, list[float]] = {1: [], 8: []}
        for _ in range(rounds):
            for n in (1, 8):
                t0, c0 = time.perf_counter(), time.process_time()
                ok = rt.call(fan, n)
                times[n].append(time.perf_counter() - t0)
                cpu[n].append((time.process_time() - c0) / n)  # this process only: the server is apart
                assert ok == n, f"{ok} of {n} children answered"
        ctx.tree.close()
    finally:
        server.kill()
        server.wait()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    out["one"] = statistics.median(times[1])
    out["eight"] = statistics.median(times[8])
    out["all"] = {str(k): [round(x, 3) for x in v] for k, v in times.items()}
    out["ratio"] = out["eight"] / out["one"]
    out["cpu_per_child_ms"] = {str(k): round(statistics.median(v) * 1e3, 1) for k, v in cpu.items()}

    n = 300 if s.quick else 2000
    m = LockManager(proj)
    t = Target("calc.py", "f1")
    m.release(m.acquire([t], "warm", "bench"))
    t0 = time.perf_counter()
    for _ in range(n):
        m.release(m.acquire([t], "bench", "bench"))
    out["lock_py_us"] = (time.perf_counter() - t0) / n * 1e6
    rt.execute('moss.session.bind("benchlua")', "=bind")
    loop = rt.load("local n = ... for _ = 1, n do moss.lock('calc.py/f1'):release() end", "=locks")
    rt.call(loop, 10)
    t0 = time.perf_counter()
    rt.call(loop, n)
    out["lock_lua_us"] = (time.perf_counter() - t0) / n * 1e6
    out["lock_n"] = n
    return out


def tables(res: dict) -> list[dict]:
    return [{"title": f"6. Child agents: wall time with a model answering after {res['latency_s'] * 1000:.0f} ms "
                      f"(2 calls per child; median of {res['rounds']} rounds, 1 and 8 taking turns)",
             "columns": ["what", "wall time", "ratio"],
             "rows": [["1 child", f"{res['one']:.2f} s", "1.00×"],
                      ["8 children at once", f"{res['eight']:.2f} s", f"{res['ratio']:.2f}×"],
                      ["8 children one after another (computed)", f"{8 * res['one']:.2f} s", "8.00×"],
                      ["CPU per child, 1 child / 8 at once (this process; the server runs apart)",
                       " / ".join(f"{res['cpu_per_child_ms'][k]:.0f} ms" for k in ("1", "8"))
                       if "cpu_per_child_ms" in res else "", ""],
                      [f"lock acquire + release, Python (mean of {res['lock_n']:,})", f"{res['lock_py_us']:.0f} µs", ""],
                      [f"moss.lock + l:release() from Lua (mean of {res['lock_n']:,})", f"{res['lock_lua_us']:.0f} µs",
                       ""]]}]


def summary_rows(res: dict) -> list[list[str]]:
    return [["spawn: 8 children / 1 child, wall time at 300 ms per LLM call", f"{res['ratio']:.2f}×",
             f"{res['eight']:.2f} s vs {res['one']:.2f} s (serial would be 8×)"],
            ["spawn: lock acquire + release", f"{res['lock_py_us']:.0f} µs",
             f"{res['lock_lua_us']:.0f} µs from Lua"]]
