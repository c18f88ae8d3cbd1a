"""1. Context cost per answer: the same 30-step exploration through moss V2, moss V1 and
mini-swe-agent; prompt tokens per turn, totals, ratios at turns 10, 20 and 30.

moss runs as users run it (`moss @agent --v2|--v1 -n ...`) against tests/fakeapi.py, whose
record of request bodies gives exactly what was sent. mini-swe-agent runs in its own venv
with its DeterministicModel; the message list handed to each `query()` is what its API
client would send.

A prompt is counted as the text of the system prompt plus every message (roles and JSON
framing are not counted, for anyone). Tokens: one tokenizer for all (see common.Tokens).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

from common import BENCH, TESTS, Settings, Tokens, clean_sessions, moss_env, peer_env, run_json, stdlib_tree
from exploration import ANSWER, STEPS, TASK, MossModel, n_steps, same_output_command, shell_command

NAME = "context"

# Price ratios for "cost per answer", in input-token equivalents: Anthropic's list prices for
# its Sonnet/Opus models have cache reads at 0.1x input, 5-minute cache writes at 1.25x and
# output at 5x; a prefix is cached only from 1,024 tokens on.
CACHE_READ, CACHE_WRITE, OUTPUT_PRICE, CACHE_MIN = 0.1, 1.25, 5.0, 1024


def cache_accounting(tokens: list[list[int]], texts: list[list[str]], breakpoints) -> dict[str, int]:
    """Where a run's input tokens go under Anthropic prompt caching: read from the cache,
    written to it, billed in full (see `cached_input` for the price of each).

    Each call is a list of parts (system, then message blocks). `breakpoints` is "system",
    "end", or a list (one per call) of the part counts at which that call marks a cache
    breakpoint: moss marks its system prompt and the end of the stable part of its context
    (task and working memory, each its own block); mini marks the last message, so each
    call writes its whole prompt and the next one reads it back. A call reads the longest
    earlier-cached prefix that starts it (Anthropic looks back up to 20 blocks from a
    breakpoint); it writes what lies between that and its own last breakpoint.
    """
    cached: set[tuple] = set()
    total = {"read": 0, "write": 0, "full": 0}
    for n, (toks, parts) in enumerate(zip(tokens, texts)):
        if isinstance(breakpoints, list):
            ends = breakpoints[n]
        else:
            ends = [1] if breakpoints == "system" else [len(parts)]
        sizes = [sum(toks[:i]) for i in range(len(parts) + 1)]
        read = 0
        for i in range(len(parts), max(0, len(parts) - 20), -1):
            if tuple(parts[:i]) in cached:
                read = sizes[i]
                break
        write = 0
        for e in ends:
            if sizes[e] >= CACHE_MIN:
                write = max(write, sizes[e] - read)
                cached.add(tuple(parts[:e]))
        total["read"] += read
        total["write"] += write
        total["full"] += sizes[-1] - read - write
    return total


def cached_input(tokens: list[list[int]], texts: list[list[str]], breakpoints) -> float:
    """Input cost of a run under Anthropic prompt caching, in input-token equivalents."""
    acc = cache_accounting(tokens, texts, breakpoints)
    return CACHE_READ * acc["read"] + CACHE_WRITE * acc["write"] + acc["full"]


def _moss_run(s: Settings, root, machine: str, steps: int) -> dict:
    sys.path.insert(0, str(TESTS))
    from fakeapi import FakeAPI, system_text

    clean_sessions(root)
    model = MossModel(steps)
    with FakeAPI() as api:
        api.push(*([model] * (4 * steps + 10)))
        cmd = [str(s.moss_bin), "@agent", f"--{machine}", "-n", "--output-format", "json", "--max-turns",
               str(3 * steps + 5), "--provider", "anthropic", TASK]
        r = subprocess.run(cmd, cwd=root, env=moss_env(api.env()), capture_output=True, text=True, timeout=600)
        bodies = [q.body for q in api.requests]
    try:
        result = json.loads(r.stdout)
    except ValueError:
        raise RuntimeError(f"moss {machine} failed ({r.returncode}): {r.stderr[-3000:]}") from None
    if result.get("reason") != "answered" or model.errors:
        raise RuntimeError(f"moss {machine} did not follow the script: {result.get('reason')} {model.errors[:3]}"
                           f"\n{r.stderr[-2000:]}")
    calls, ends = [], []
    for b in bodies:
        parts, marks = [system_text(b)], [1]
        for m in b.get("messages", []):
            content = m.get("content")
            blocks = [{"text": content}] if isinstance(content, str) else content
            for blk in blocks:
                parts.append(blk.get("text", ""))
                if "cache_control" in blk:
                    marks.append(len(parts))
        calls.append(parts)
        ends.append(marks)
    ckpt = sorted((root / ".moss" / "agent").glob("session-*.json"))
    return {"calls": calls, "states": model.calls, "answer": result.get("answer"), "replies": model.replies,
            "breakpoints": ends,
            "checkpoint_bytes": ckpt[-1].stat().st_size if ckpt else None}


def _mini_run(s: Settings, root, steps: int, variant: str) -> dict:
    if variant == "same":
        cmds = [same_output_command(st, s.moss_bin) for st in STEPS[:steps]]
    else:
        cmds = [shell_command(st, root) for st in STEPS[:steps]]
    payload = {"config": "default" if variant == "default" else "textbased", "task": TASK, "cwd": str(root),
               "steps": [{"thought": st[3], "command": c} for st, c in zip(STEPS, cmds)],
               "answer": ANSWER, "trajectory": str(s.work / f"mini-{variant}.traj.json")}
    env = peer_env(s, {"PATH": str(s.moss_bin.parent) + ":" + peer_env(s).get("PATH", "")}) if variant == "same" \
        else peer_env(s)
    out = run_json([str(s.peer_python), str(BENCH / "peer_mini.py")], payload, env=env, timeout=900)
    if out["exit_status"] != "Submitted":
        raise RuntimeError(f"mini ({variant}) ended with {out['exit_status']}")
    msgs = [m["content"] for m in out["messages"]]
    extra = [out["extra_prompt"]] if out["extra_prompt"] else []
    replies = [m["content"] for m in out["messages"] if m["role"] == "assistant"]
    # the shell output of each step as mini's template shows it: the user messages after the
    # task, up to the last call (the answer's own output is never sent)
    seen = out["messages"][:out["calls"][-1]]
    users = [i for i, m in enumerate(seen) if m["role"] == "user"]
    observations = [seen[i]["content"] for i in users[1:]]
    # mini's LitellmModel marks the last message for Anthropic's prompt cache ("default_end")
    return {"calls": [extra + msgs[:n] for n in out["calls"]], "commands": cmds, "replies": replies,
            "breakpoints": "end", "observations": observations}


def _lcp(a: str, b: str) -> int:
    """Length of the common prefix of two strings (binary search over C-speed slice compares)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def auto_cached_input(tokens: list[list[int]], texts: list[list[str]]) -> float:
    """Input cost under automatic prefix caching (OpenAI style), in input-token equivalents:
    the longest prefix shared with any earlier prompt of the run is read at 0.1x once it
    reaches 1,024 tokens (in steps of 128), the rest is billed in full, no write premium."""
    seen: list[str] = []
    total = 0.0
    for toks, parts in zip(tokens, texts):
        full = "".join(parts)
        size = sum(toks)
        common = max((_lcp(full, old) for old in seen), default=0)
        read = int(size * common / max(1, len(full)))
        read = read // 128 * 128 if read >= CACHE_MIN else 0
        total += CACHE_READ * read + (size - read)
        seen.append(full)
    return total


WHAT_IF = "moss V1, what-if: stable first"
RESULTS_HEADING = "**New results"  # the block moss shows a step's tool output in (scripts/lib/machine/context.lua)


def floor_cost(counts: dict[str, int], calls: list[list[str]], replies: int, results_write: float) -> float | None:
    """A lower bound on a moss run's cost per answer under marked caching, whatever the
    cache layout: every call reads what precedes its new results (system, task, working
    memory) at the read price, as if it had been written for free; each distinct results
    block is paid once, at `results_write` (1.0 if only one call sees it, the write price if a
    second call reads it back); replies at the output price. None if no results block is found."""
    stable, results = 0, {}
    for c in calls:
        for p in c:
            if p.startswith(RESULTS_HEADING):
                results[p] = counts[p]
                break
            stable += counts[p]
    if not results:
        return None
    return CACHE_READ * stable + results_write * sum(results.values()) + OUTPUT_PRICE * replies


def achievable_floor(counts: dict[str, int], calls: list[list[str]], replies: int) -> tuple[float, dict[str, int]]:
    """A lower bound on a moss run's cost per answer under marked caching that keeps the
    API's rules, whatever the cache layout: (cost, tokens read / written / billed in full).

    Each call's content is taken block by block (system prompt, task, each working-memory
    item, the new results block, a closing line), and a block is the same content wherever
    it sits in the call, as if the layout could always put what is already cached first,
    in the order it was cached. The rules kept, which `floor_cost` leaves out:
    - a call under 1,024 tokens (CACHE_MIN) cannot be cached at all: every token of it is
      billed in full, and it writes nothing a later call could read;
    - a block is read (0.1x) only if an earlier call of 1,024 tokens or more wrote it;
    - a block a call has that is not yet cached is written (1.25x) if a later call of
      1,024 tokens or more has it too, else billed in full (1.0x). Content first shown in a
      call under the minimum is therefore written, or billed, again at its first call above it.
    So a results block shown once (V1) is billed once in full; one that a second call shows
    again (V2: its evaluator sees it, then its explorer) is written once and read once.
    Replies at the output price.

    What it still grants a layout, so that it stays a lower bound: blocks may be reordered
    freely (a removed item's block never forces what follows it to be written again); the
    written part of a call need not itself reach 1,024 tokens (only the whole call must);
    a call may read any set of cached blocks, not only a prefix some single earlier call
    marked; and there is no limit of 4 breakpoints or of 20 blocks looked back."""
    sizes = [sum(counts[p] for p in c) for c in calls]
    later: list[set[str]] = [set() for _ in calls]  # blocks some later call above the minimum has
    acc: set[str] = set()
    for n in range(len(calls) - 1, -1, -1):
        later[n] = set(acc)
        if sizes[n] >= CACHE_MIN:
            acc |= set(calls[n])
    cached: set[str] = set()
    total = {"read": 0, "write": 0, "full": 0}
    for n, c in enumerate(calls):
        if sizes[n] < CACHE_MIN:
            total["full"] += sizes[n]
            continue
        blocks = list(dict.fromkeys(c))  # a block repeated within one call is paid in full the second time
        read = sum(counts[p] for p in blocks if p in cached)
        new = [p for p in blocks if p not in cached and p in later[n]]
        write = sum(counts[p] for p in new)
        cached.update(new)
        total["read"] += read
        total["write"] += write
        total["full"] += sizes[n] - read - write
    cost = CACHE_READ * total["read"] + CACHE_WRITE * total["write"] + total["full"] + OUTPUT_PRICE * replies
    return cost, total


_ORDER = ["**Task", "**Plan", "**Working memory", "**Notes", "**Warning", "**Messages", "**New results"]


def stable_first(user: str) -> str:
    """A what-if, not moss: the same V1 message with its sections reordered from stable to
    volatile (task, kept items, notes, new results), so consecutive prompts share a long
    prefix that a provider's prompt cache can reuse."""
    parts = re.split(r"\n\n(?=\*\*)", user)

    def rank(p: str) -> int:
        return next((i for i, h in enumerate(_ORDER) if p.startswith(h)), len(_ORDER))
    return "\n\n".join(sorted(parts, key=rank))


def run(s: Settings) -> dict:
    root = stdlib_tree(s)
    steps = n_steps(s.quick)
    runs = {"moss V2": _moss_run(s, root, "v2", steps), "moss V1": _moss_run(s, root, "v1", steps)}
    v1 = runs["moss V1"]
    runs[WHAT_IF] = {**v1, "calls": [[c[0], stable_first("".join(c[1:]))] for c in v1["calls"]],
                     "breakpoints": "system", "checkpoint_bytes": None}
    if s.peer_python:
        runs["mini"] = _mini_run(s, root, steps, "shell")
        runs["mini (same outputs)"] = _mini_run(s, root, steps, "same")
        runs["mini (mini.yaml)"] = _mini_run(s, root, steps, "default")
    else:
        s.notes.append("context: no peer venv, mini-swe-agent not measured")

    tok = Tokens(s)
    texts = sorted({p for r in runs.values() for c in r["calls"] for p in c} |
                   {t for r in runs.values() for t in r["replies"]} |
                   {t for r in runs.values() for t in r.get("observations", [])})
    counts = dict(zip(texts, tok.count_many(texts)))
    out = {"steps": steps, "tokenizer": tok.name, "agents": {}}
    for name, r in runs.items():
        per_call = [sum(counts[p] for p in c) for c in r["calls"]]
        per_call_bytes = [sum(len(p.encode()) for p in c) for c in r["calls"]]
        if name == "moss V2":  # a turn = the explorer call that runs step k + the evaluator call that judges it
            turns = [per_call[i] + per_call[i + 1] for i in range(0, len(per_call) - 1, 2)]
            answer_turn = None
        else:  # a turn = one call that runs step k (and sees step k-1); one more call answers
            turns, answer_turn = per_call[:steps], (per_call[steps] if len(per_call) > steps else None)
        replies = sum(counts[t] for t in r["replies"])
        acc = cache_accounting([[counts[p] for p in c] for c in r["calls"]], r["calls"], r["breakpoints"])
        cached = CACHE_READ * acc["read"] + CACHE_WRITE * acc["write"] + acc["full"]
        auto = auto_cached_input([[counts[p] for p in c] for c in r["calls"]], r["calls"])
        out["agents"][name] = {"calls": len(per_call), "per_call": per_call, "per_call_bytes": per_call_bytes,
                               "turns": turns, "answer_turn": answer_turn, "total": sum(per_call),
                               "total_bytes": sum(per_call_bytes), "reply_tokens": replies,
                               "cached_input": cached, "cost": cached + OUTPUT_PRICE * replies, "accounting": acc,
                               "auto_input": auto, "cost_auto": auto + OUTPUT_PRICE * replies,
                               "checkpoint_bytes": r.get("checkpoint_bytes")}
        if name in ("moss V1", "moss V2"):  # V2's evaluator writes the results its explorer reads back
            out["agents"][name]["floor"] = floor_cost(counts, r["calls"], replies,
                                                      CACHE_WRITE if name == "moss V2" else 1.0)
            out["agents"][name]["floor_rules"], out["agents"][name]["floor_rules_accounting"] = \
                achievable_floor(counts, r["calls"], replies)
    # tool output: what each agent was shown of its looks, frame included (moss: each distinct
    # new-results block; mini: each observation message)
    out["tool_output"] = {n: sum(counts[p] for p in {p for c in runs[n]["calls"] for p in c
                                                     if p.startswith(RESULTS_HEADING)})
                          for n in ("moss V2", "moss V1")}
    if "mini" in runs:
        out["tool_output"]["mini"] = sum(counts[t] for t in runs["mini"]["observations"])
    if "moss V2" in runs:
        out["v2_states"] = runs["moss V2"]["states"][:4]
    return out


CHECKS = (10, 20, 30)


def checkpoints(steps: int) -> list[int]:
    marks = [k for k in CHECKS if k <= steps]
    return marks or [max(1, steps // 2), steps]


def cumulative(turns: list[int], k: int) -> int:
    return sum(turns[:k])


def break_even(a: list[int], m: list[int]) -> tuple[str, str]:
    """First turn from which moss's per-turn prompt stays below mini's; first turn at which
    moss's cumulative prompt is below mini's."""
    per = next((k for k in range(1, len(a) + 1) if all(x < y for x, y in zip(a[k - 1:], m[k - 1:]))), None)
    cum = next((k for k in range(1, len(a) + 1) if cumulative(a, k) < cumulative(m, k)), None)
    return (str(per) if per else "never"), (str(cum) if cum else "never")


def tables(res: dict) -> list[dict]:
    """Tables (title, columns, rows) for the console and for Markdown."""
    agents = res["agents"]
    names = [n for n in ("moss V2", "moss V1", "mini") if n in agents]
    steps = res["steps"]
    rows = []
    for k in range(1, steps + 1):
        row = [str(k)] + [f"{agents[n]['turns'][k - 1]:,}" for n in names]
        if "mini" in agents:
            for n in names[:2]:
                row.append(f"{agents[n]['turns'][k - 1] / agents['mini']['turns'][k - 1]:.2f}")
        rows.append(row)
    ans = ["answer"] + [("(in turn %d)" % steps) if agents[n]["answer_turn"] is None
                        else f"{agents[n]['answer_turn']:,}" for n in names]
    rows.append(ans + [""] * (len(rows[0]) - len(ans)))
    cols = ["turn"] + [f"{n} prompt" for n in names] + ([f"{n}/mini" for n in names[:2]] if "mini" in agents else [])
    per_turn = {"title": f"1. Context: prompt tokens per turn ({res['tokenizer']}; a V2 turn is its explorer call "
                         f"plus its evaluator call)", "columns": cols, "rows": rows}

    marks = checkpoints(steps)
    rows2 = []
    for n, a in agents.items():
        t = a["turns"]
        grow = (t[marks[-1] - 1] - t[marks[0] - 1]) / max(1, marks[-1] - marks[0])
        rows2.append([n, str(a["calls"]), f"{a['total']:,}", f"{a['total_bytes']:,}",
                      " / ".join(f"{t[m - 1]:,}" for m in marks), f"{grow:+,.0f}", f"{a['reply_tokens']:,}",
                      *(["—", "—"] if n == WHAT_IF else [f"{a['cached_input']:,.0f}", f"{a['cost']:,.0f}"]),
                      f"{a['cost_auto']:,.0f}",
                      f"{a['checkpoint_bytes']:,}" if a.get("checkpoint_bytes") else "—"])
    totals = {"title": "1. Context: totals per answer. Costs in input-token equivalents, output at 5×; "
                       "'marked': Anthropic caching (marked prefixes of ≥1,024 tokens, reads 0.1×, writes 1.25×); "
                       "'auto': automatic prefix caching (longest shared prefix read at 0.1×)",
              "columns": ["agent", "LLM calls", "prompt tokens", "prompt bytes",
                          "prompt at turns " + "/".join(map(str, marks)), f"growth/turn ({marks[0]}→{marks[-1]})",
                          "reply tokens", "input, marked cache", "cost/answer, marked", "cost/answer, auto",
                          "session file B"], "rows": rows2}

    mini_cost = agents["mini"]["cost"] if "mini" in agents else None

    def vs_mini(x: float | None) -> str:
        if x is None:
            return "—"
        return f"{x:,.0f}" + (f" ({x / mini_cost:.2f}×)" if mini_cost else "")

    rows4 = []
    for n, a in agents.items():
        if n == WHAT_IF:
            continue
        acc, rep = a["accounting"], a["reply_tokens"]
        rows4.append([n, f"{acc['read']:,} ({CACHE_READ * acc['read']:,.0f})",
                      f"{acc['write']:,} ({CACHE_WRITE * acc['write']:,.0f})", f"{acc['full']:,}",
                      f"{rep:,} ({OUTPUT_PRICE * rep:,.0f})", vs_mini(a["cost"]), vs_mini(a.get("floor")),
                      vs_mini(a.get("floor_rules"))])
    where = {"title": "1. Context: where the cost per answer goes, Anthropic prompt caching: tokens "
                      "(input-token equivalents)",
             "columns": ["agent", f"read from cache (×{CACHE_READ})", f"written to cache (×{CACHE_WRITE})",
                         "billed in full (×1)", f"replies (×{OUTPUT_PRICE:g})", "cost/answer",
                         "floor: prefix only read, results paid once",
                         "floor within the API's rules (achievable_floor)"], "rows": rows4}

    out = [per_turn, totals, where]
    if "mini" in agents:
        rows3 = []
        m = agents["mini"]
        for n in ("moss V2", "moss V1"):
            a = agents[n]
            for k in marks:
                rows3.append([n, str(k), f"{a['turns'][k - 1] / m['turns'][k - 1]:.2f}",
                              f"{cumulative(a['turns'], k) / cumulative(m['turns'], k):.2f}", "", "", ""])
            per, cum = break_even(a["turns"], m["turns"])
            rows3.append([n, "answer", "", f"{a['total'] / m['total']:.2f}",
                          f"{a['cost'] / m['cost']:.2f}", f"{a['cost_auto'] / m['cost_auto']:.2f}",
                          f"per turn from {per}; cumulative from {cum}"])
        out.append({"title": "1. Context: ratio moss / mini (below 1: moss sends less)",
                    "columns": ["agent", "turn", "this turn", "cumulative prompt", "cost/answer, marked cache",
                                "cost/answer, auto cache", "moss's prompt below mini's"], "rows": rows3})
    return out


def summary_rows(res: dict) -> list[list[str]]:
    agents = res["agents"]
    if "mini" not in agents:
        return []
    rows = []
    m = agents["mini"]
    k = checkpoints(res["steps"])[-1]
    tools = res.get("tool_output", {})
    for n in ("moss V2", "moss V1"):
        if tools.get("mini") and tools.get(n):
            rows.append([f"context: {n} tool-output tokens / mini shell-output tokens, same looks",
                         f"{tools[n] / tools['mini']:.2f}×", f"{tools[n]:,} vs {tools['mini']:,} tokens"])
    for n in ("moss V2", "moss V1"):
        a = agents[n]
        rows.append([f"context: {n}/mini prompt tokens at turn {k}", f"{a['turns'][k - 1] / m['turns'][k - 1]:.2f}×",
                     f"{a['turns'][k - 1]:,} vs {m['turns'][k - 1]:,} tokens"])
        rows.append([f"context: {n}/mini prompt tokens per answer", f"{a['total'] / m['total']:.2f}×",
                     f"{a['total']:,} vs {m['total']:,} tokens"])
        rows.append([f"context: {n}/mini cost per answer, Anthropic prompt caching", f"{a['cost'] / m['cost']:.2f}×",
                     f"{a['cost']:,.0f} vs {m['cost']:,.0f} input-token equivalents"])
        if a.get("floor_rules"):
            rows.append([f"context: {n} floor within the API's rules / mini cost, Anthropic prompt caching",
                         f"{a['floor_rules'] / m['cost']:.2f}×",
                         f"{a['floor_rules']:,.0f} vs {m['cost']:,.0f}" +
                         (f" (the floor without them: {a['floor']:,.0f}, {a['floor'] / m['cost']:.2f}×)"
                          if a.get("floor") else "")])
        rows.append([f"context: {n}/mini cost per answer, automatic prefix caching",
                     f"{a['cost_auto'] / m['cost_auto']:.2f}×",
                     f"{a['cost_auto']:,.0f} vs {m['cost_auto']:,.0f} input-token equivalents"])
    return rows
