"""grammar: the cost of parsing a reply's `$(...)` commands, before and after issue 39.

Issue 39 made fenced blocks and `$(run ...)` heredoc bodies opaque to the command parser
(scripts/lib/machine/parser.lua) and had it report a command left open. The goals: parsing a
1 MB reply of 1,000 fenced commands costs no more than 10% over the parser before, and every
parse stays linear, whatever the reply holds.

- before: the parser as it was on main at BEFORE (read with `git show`, loaded as a module of
  its own into the same runtime); after: the one in this tree. Both run in the runtime `moss
  @NAME` builds (moss.run.build), taking turns round after round (common.interleaved); each
  round's figure is the CPU time of the parse (os.clock in Lua: not the copy of the text into
  Lua, nor what other processes take on a busy machine), and the median is shown.
- inputs: a 1 MB reply of 1,000 `$(edit F replace ```python ... ```)` commands between lines of
  prose (balanced code, so both parsers find all 1,000); 1 MB of prose with 1,000 one-line
  commands; and the megabytes a hostile or broken model could send: one command holding 1 MB of
  backticks, 1 MB of fence lines, 1 MB of heredoc markers in `$(run ...)`, 1 MB of `$(`.
- linearity: each input at 0.5, 1 and 2 MB, parsed by the parser after; time(2 MB) / time(1 MB)
  near 2 is linear (a quadratic parse would show 4).
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from common import REPO, Settings, fmt_s, interleaved

NAME = "grammar"
BEFORE = "17f085f"  # main before issue 39 (the commit the issue measured)

CODE = '''def handle(request, retries=3):
    """Serve one request: parse it, look it up, answer (retrying on a timeout)."""
    for attempt in range(retries):
        try:
            key = parse(request.path)
            value = lookup(key, default=None)
            return respond(200, {"key": key, "value": value, "attempt": attempt})
        except TimeoutError as e:
            log.warning("timeout on %s (attempt %d): %s", request.path, attempt, e)
    return respond(503, {"error": "gave up after %d attempts" % retries})
'''


def _fenced(n: int, size: int) -> str:
    """`n` fenced edit commands between prose lines, about `size` bytes."""
    body = (CODE * (size // (n * len(CODE)) + 1))[: max(size // n - 80, 10)]
    body = body[: body.rfind("\n") + 1] or CODE
    return "".join(f"Now file {i}.\n$(edit src/f{i}.py replace ```python\n{body}```)\n" for i in range(n))


def _prose(n: int, size: int) -> str:
    line = "The parser reads every reply, so its cost is paid on every turn of every session. " * 3 + "\n"
    per = max(size // n, len(line))
    chunk = (line * (per // len(line) + 1))[:per]
    return "".join(f"{chunk}$(view src/f{i}.py)\n" for i in range(n))


INPUTS = {
    "1,000 fenced commands": lambda size: _fenced(1000, size),
    "prose, 1,000 commands": lambda size: _prose(1000, size),
    "a command of backticks": lambda size: "$(edit a.py replace " + "`" * size + ")",
    "fence lines": lambda size: "$(edit a.py replace " + "```\n" * (size // 4) + ")",
    "heredoc markers": lambda size: "$(run cat <<EOF\n" + "<<EOF\n" * (size // 6) + ")",
    "command openers": lambda size: "$(note " + "$(" * (size // 2),
}


def _old_parser() -> str | None:
    r = subprocess.run(["git", "show", f"{BEFORE}:scripts/lib/machine/parser.lua"], cwd=REPO,
                       capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else None


def run(s: Settings) -> dict:
    from moss.run import build

    mb = 1_000_000
    reps = 3 if s.quick else 7
    ctx, rt = build("bench", [], {}, root=Path(tempfile.mkdtemp(prefix="moss-bench-grammar-")))
    after = rt.execute(b"return require('lib.machine.parser')", "=bench")
    old_src = _old_parser()
    before = rt.execute(old_src.encode(), "=parser-before") if old_src else None
    # the CPU time of the parse alone (os.clock, in Lua): not the copy of the text into Lua, and
    # not what other processes on a busy machine take from the wall clock
    count = rt.execute(b"""return function(P, text)
        local t0 = os.clock()
        local cmds, problems = P.parse(text)
        return os.clock() - t0, #cmds, problems and #problems or 0
    end""", "=bench")

    res: dict = {"before": BEFORE if before is not None else None, "rows": [], "scaling": []}
    for name, make in INPUTS.items():
        text = make(mb)
        jobs = {"after": lambda text=text: float(rt.call(count, after, text)[0])}
        if before is not None:
            jobs["before"] = lambda text=text: float(rt.call(count, before, text)[0])
        found = {k: rt.call(count, p, text)[1:] for k, p in (("after", after), ("before", before)) if p is not None}
        t = interleaved(jobs, reps)
        res["rows"].append({"input": name, "bytes": len(text), "found": {k: list(v) for k, v in found.items()},
                            **{k: t[k] for k in t}})
        sizes = {f"{x / mb:g} MB": make(int(x)) for x in (mb / 2, mb, 2 * mb)}
        ts = interleaved({k: (lambda v=v: float(rt.call(count, after, v)[0])) for k, v in sizes.items()}, reps)
        res["scaling"].append({"input": name, **{k: ts[k] for k in sizes}})
    return res


def _found(found: dict, k: str) -> str:
    n = found.get(k)
    return f"{n[0]:,} ({n[1]} problem{'s' if n[1] != 1 else ''})" if n else "–"


def tables(res: dict) -> list[dict]:
    rows = []
    for r in res["rows"]:
        b, a = r.get("before"), r["after"]
        rows.append([r["input"], f"{r['bytes'] / 1e6:.2f} MB", _found(r["found"], "before"), _found(r["found"], "after"),
                     fmt_s(b["median"]) if b else "–", fmt_s(a["median"]),
                     f"{a['median'] / b['median']:.2f}×" if b else "–"])
    scale = [[r["input"], fmt_s(r["0.5 MB"]["median"]), fmt_s(r["1 MB"]["median"]), fmt_s(r["2 MB"]["median"]),
              f"{r['2 MB']['median'] / r['1 MB']['median']:.2f}×"] for r in res["scaling"]]
    return [
        {"title": f"grammar: parse() of a reply: before (main at {res['before'] or 'unavailable'}) and after, median of the "
                  "rounds; commands found (and problems reported)",
         "columns": ["reply", "size", "found before", "found after", "before", "after", "after / before"],
         "rows": rows},
        {"title": "grammar: parse() after, at 0.5, 1 and 2 MB: 2 MB / 1 MB near 2 is linear",
         "columns": ["reply", "0.5 MB", "1 MB", "2 MB", "2 MB / 1 MB"], "rows": scale},
    ]


def summary_rows(res: dict) -> list[list[str]]:
    out = []
    fenced = res["rows"][0]
    if fenced.get("before"):
        out.append(["grammar: 1 MB, 1,000 fenced commands", f"{fenced['after']['median'] / fenced['before']['median']:.2f}×",
                    "parse() after / before (goal: at most 1.10×)"])
    worst = max(res["scaling"], key=lambda r: r["2 MB"]["median"] / r["1 MB"]["median"])
    out.append(["grammar: linearity, worst input", f"{worst['2 MB']['median'] / worst['1 MB']['median']:.2f}×",
                f"time(2 MB) / time(1 MB) of {worst['input']} (linear: 2×)"])
    return out
