"""3. Long sessions: host time per turn near turn 10 and near turn 300, zero-latency model.

moss runs `moss @agent --v2|--v1 -n --provider script` (answers from a list, no HTTP) for
300 LLM calls (turns): the V2 script is m_overhead's (explorer views five lines, evaluator
notes it), the V1 one views and notes in one call. Per-turn times come from the session's own
JSONL log: the `turn_start` event's timestamp of every turn, so the time of turns A..B is
ts(B) - ts(A) over B - A turns (a mean over the window; the log's millisecond timestamps make
a single turn too coarse to time alone). The windows are turns 5-25 and the last twenty; the
figure is the best of the repetitions for each window (the least disturbed by the machine).

What grows with a session is what a turn carries: the session table a checkpoint saves, the
working memory a prompt shows, the history a context keeps. A ratio of 1.0 means a turn
costs the same at turn 300 as at turn 10. Quick mode runs 60 turns (windows 5-25 and 40-60).

Each machine runs twice: its model notes every step and keeps every note ("memory grows":
at turn 300 the V1 prompt shows 300 notes, so each turn has more to build, send and save),
and the same model also forgets the note of 20 steps before ("memory bounded": from its
20th step on, the prompt holds 20 notes whatever the turn). The second isolates what moss's
own machinery (checkpoints, logs, history) adds as a session grows from what a growing prompt
costs. A V1 step is one turn, so V1's early window (turns 5-25) already holds 5-20 notes; a
V2 step is two turns (explorer, evaluator), so V2's early window holds 2-12 notes against
20 late, and only the late window forgets: V2's bounded ratio still includes that growth.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from common import Settings, clean_sessions, moss_env, stdlib_tree
from m_overhead import TASK, moss_script

NAME = "long"


KEEP_NOTES = 20  # "memory bounded": the model forgets the note it wrote this many steps before


def bounded_script(machine: str, steps: int) -> list[str]:
    """m_overhead's script, whose notes also forget the note of KEEP_NOTES steps before."""
    out = moss_script(machine, steps)
    for i, reply in enumerate(out):
        k = i // 2 + 1 if machine == "v2" else i  # the step this reply's note is about
        if "$(note" in reply and k > KEEP_NOTES:
            old = f"step {k - KEEP_NOTES}: saw" if machine == "v2" else f"step {k - KEEP_NOTES} seen"
            out[i] = f'$(forget "{old}") ' + reply
    return out


def _run(s: Settings, root: Path, machine: str, turns: int, bounded: bool = False) -> dict[int, float]:
    steps = turns // 2 if machine == "v2" else turns
    script = s.work / f"long-{machine}-{turns}{'-bounded' if bounded else ''}.json"
    script.write_text(json.dumps((bounded_script if bounded else moss_script)(machine, steps)))
    clean_sessions(root)
    r = subprocess.run([str(s.moss_bin), "@agent", f"--{machine}", "-n", "--max-turns", str(turns + 5),
                        "--provider", "script", "--script", str(script), TASK], cwd=root, env=moss_env(),
                       capture_output=True, text=True, timeout=900)
    if r.returncode != 0 or r.stdout.strip() != "done":
        raise RuntimeError(f"moss {machine} long session failed ({r.returncode}): {r.stderr[-2000:]}")
    (log,) = (root / ".moss" / "agent" / "logs").glob("*.jsonl")
    ts = {}
    for line in log.read_text().splitlines():
        e = json.loads(line)
        if e.get("event") == "turn_start":
            ts[e["turn"]] = e["ts"]
    return ts


def run(s: Settings) -> dict:
    root = stdlib_tree(s)
    turns = 60 if s.quick else 300
    reps = 1 if s.quick else 5
    early = (5, 25)
    late = (turns - 20, turns)
    res = {"turns": turns, "reps": reps, "early": early, "late": late, "agents": {}}
    variants = [(f"moss {m.upper()}, memory {'bounded' if b else 'grows'}", m, b)
                for b in (False, True) for m in ("v2", "v1")]
    samples: dict = {label: {"early": [], "late": []} for label, _, _ in variants}
    for _ in range(reps):
        for label, machine, bounded in variants:  # taking turns, so the machine's noise falls on all
            ts = _run(s, root, machine, turns, bounded)
            for name, (a, b) in (("early", early), ("late", late)):
                samples[label][name].append((ts[b] - ts[a]) / (b - a))
    for label, _, _ in variants:
        early, late = min(samples[label]["early"]), min(samples[label]["late"])
        res["agents"][label] = {"early": early, "late": late, "ratio": late / early if early else None,
                                "samples": samples[label]}
    return res


def tables(res: dict) -> list[dict]:
    from common import fmt_s

    (a1, b1), (a2, b2) = res["early"], res["late"]
    rows = [[name, fmt_s(r["early"]), fmt_s(r["late"]), f"{r['ratio']:.2f}" if r["ratio"] else "—"]
            for name, r in res["agents"].items()]
    return [{"title": f"3. Long session: host time per turn, zero-latency model, {res['turns']} turns "
                      f"(mean of the window, best of {res['reps']})",
             "columns": ["agent", f"turns {a1}-{b1}", f"turns {a2}-{b2}", f"ratio {b2} / {b1}"], "rows": rows}]


def summary_rows(res: dict) -> list[list[str]]:
    from common import fmt_s

    (_, b1), (_, b2) = res["early"], res["late"]
    return [[f"long session: {name}, per turn at turn {b2} / at turn {b1}", f"{r['ratio']:.2f}",
             f"{fmt_s(r['late'])} vs {fmt_s(r['early'])}"] for name, r in res["agents"].items() if r["ratio"]]
