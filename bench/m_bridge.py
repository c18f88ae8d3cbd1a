"""5. Bridge: Python -> Lua -> Python calls per second on the shipped runtime.

The runtime is the one `moss @NAME` builds (moss.run.build: lupa's Lua 5.4, the sandbox
bootstrap with its count hook, the primitive wrappers and deep value conversion). The
baseline is bare lupa (same lupa, same Lua 5.4, no sandbox, no conversion): the ratio is
what the sandbox and the conversion cost per crossing.

- Python -> Lua: Runtime.call of an empty Lua function (bare: calling the lupa function).
- Lua -> Python: a Lua loop calling a trivial primitive, moss.access.get (bare: a Python
  function in the Lua globals).
- round trip: Python calls a Lua function that calls that primitive once.
- with data: a Lua loop calling moss.json.encode on a 10-field table (conversion of the
  table to a dict and of the string back).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from common import Settings

NAME = "bridge"


def _rates(fns: dict, reps: int) -> dict:
    """Calls per second for each fn(n_calls): the best of `reps` rounds, the fns taking turns
    within a round so that the machine's noise falls on all of them alike."""
    best = {k: float("inf") for k in fns}
    for _ in range(reps):
        for k, (fn, n) in fns.items():
            t0 = time.perf_counter()
            fn(n)
            best[k] = min(best[k], time.perf_counter() - t0)
    return {k: fns[k][1] / best[k] for k in fns}


def run(s: Settings) -> dict:
    from lupa import lua54

    from moss.run import build

    n = 20_000 if s.quick else 100_000
    reps = 3 if s.quick else 5
    root = Path(tempfile.mkdtemp(prefix="moss-bench-bridge-"))
    ctx, rt = build("bench", [], {}, root=root)

    empty = rt.execute(b"return function() end", "=bench")
    loop_get = rt.execute(b"return function(n) local get = moss.access.get; for i = 1, n do get() end end", "=bench")
    one_get = rt.execute(b"return function() return moss.access.get() end", "=bench")
    loop_json = rt.execute(b"""return function(n)
        local enc = moss.json.encode
        local t = { a = 1, b = 2.5, c = "three", d = true, e = "five", f = 6, g = "seven", h = 8, i = "nine", j = 10 }
        for i = 1, n do enc(t) end
    end""", "=bench")

    bare = lua54.LuaRuntime()
    bare.globals()["pyget"] = lambda: b"read-only"
    b_empty = bare.eval("function() end")
    b_loop = bare.eval("function(n) local get = pyget; for i = 1, n do get() end end")
    b_one = bare.eval("function() return pyget() end")

    def py_to_lua(k):
        for _ in range(k):
            rt.call(empty)

    def b_py_to_lua(k):
        for _ in range(k):
            b_empty()

    def round_trip(k):
        for _ in range(k):
            rt.call(one_get)

    def b_round_trip(k):
        for _ in range(k):
            b_one()

    r = _rates({
        "p2l": (py_to_lua, n), "b_p2l": (b_py_to_lua, n),
        "l2p": (lambda k: rt.call(loop_get, k), n), "b_l2p": (lambda k: b_loop(k), n),
        "rt": (round_trip, n), "b_rt": (b_round_trip, n),
        "json": (lambda k: rt.call(loop_json, k), n // 4),
    }, reps)
    rows = {
        "Python → Lua (empty function)": (r["p2l"], r["b_p2l"]),
        "Lua → Python (trivial primitive)": (r["l2p"], r["b_l2p"]),
        "Python → Lua → Python (round trip)": (r["rt"], r["b_rt"]),
        "Lua → Python with a 10-field table (json.encode)": (r["json"], None),
    }
    return {"n": n, "reps": reps, "rows": {k: {"moss": a, "bare": b} for k, (a, b) in rows.items()}}


def tables(res: dict) -> list[dict]:
    rows = []
    for name, r in res["rows"].items():
        m, b = r["moss"], r["bare"]
        rows.append([name, f"{m:,.0f}", f"{1e6 / m:.2f} µs", f"{b:,.0f}" if b else "—",
                     f"{1e6 / b:.2f} µs" if b else "—", f"{b / m:.1f}×" if b else "—"])
    return [{"title": f"5. Bridge on the shipped runtime (best of {res['reps']} rounds of {res['n']:,} calls; moss and "
                      f"bare lupa take turns)",
             "columns": ["crossing", "moss calls/s", "moss per call", "bare lupa calls/s", "bare per call",
                         "moss cost ÷ bare"], "rows": rows}]


def summary_rows(res: dict) -> list[list[str]]:
    r = res["rows"]["Python → Lua → Python (round trip)"]
    g = res["rows"]["Lua → Python (trivial primitive)"]
    return [["bridge: Python→Lua→Python round trips/s", f"{r['moss']:,.0f}/s",
             f"{r['bare'] / r['moss']:.1f}× the cost of bare lupa"],
            ["bridge: Lua→Python primitive calls/s", f"{g['moss']:,.0f}/s",
             f"{g['bare'] / g['moss']:.1f}× the cost of bare lupa"]]
