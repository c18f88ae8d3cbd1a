"""`moss eval --record DIR` / `--replay DIR`: each attempt's LLM cassette, and where a replayed
attempt left its recording.

Recording, an attempt's agent gets `--record DIR/<key>.jsonl` (the key made a file name,
attempt.safe_name): every request it sent and every answer (host/llm/cassette.py). Replaying,
it gets `--provider replay --replay` that file. The replay provider answers a request only
when the same request was recorded; the first one it cannot answer fails the agent's call with
an `llm_error` event carrying ``divergence`` (cassette.divergence), which this module reads
from the copy's session logs after the agent ended. An agent whose requests all had answers
but that sent fewer or more of them than the recording holds diverged too (it stopped early,
or asked one again and got a repeated answer).
"""

from __future__ import annotations

import json
from pathlib import Path

from . import attempt as att

MAX_LOG = 64 << 20  # a session log larger than this is not searched


def file_for(folder: Path, key: str) -> Path:
    return Path(folder) / f"{att.safe_name(key)}.jsonl"


def recorded_requests(cassette: Path) -> int:
    """How many requests a cassette holds (one JSON line each)."""
    n = 0
    with open(cassette, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                n += 1
    return n


def _divergences(log: Path):
    if not log.is_file() or log.is_symlink() or log.stat().st_size > MAX_LOG:
        return
    with open(log, encoding="utf-8", errors="replace") as f:
        for line in f:
            if '"divergence"' not in line:
                continue
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            d = ev.get("divergence") if isinstance(ev, dict) and ev.get("event") == "llm_error" else None
            if isinstance(d, dict) and isinstance(d.get("request"), int):
                yield d


def divergence(copy: Path, cassette: Path, calls: int | None) -> dict | None:
    """Where the replayed attempt in `copy` left `cassette`: the first request the replay could
    not answer (over every session of the attempt, children's too), else a request count that
    differs from the recording's (`calls`: the agent's own count of answered requests), else None."""
    logs = copy / ".moss" / "agent" / "logs"
    found = []
    if logs.is_dir() and not logs.is_symlink():
        for log in sorted(logs.glob("*.jsonl")):
            found.extend(_divergences(log))
    if found:
        return min(found, key=lambda d: d["request"])
    if calls is None:
        return None
    recorded = recorded_requests(cassette)
    if calls == recorded:
        return None
    if calls < recorded:
        return {"request": calls + 1, "entry": calls + 1, "field": "", "what": "fewer requests",
                "recorded": str(recorded), "now": str(calls),
                "detail": f"the agent ended after {calls} requests; the recording has {recorded} "
                          f"(request {calls + 1} was never sent)"}
    return {"request": recorded + 1, "entry": 0, "field": "", "what": "more requests", "recorded": str(recorded),
            "now": str(calls),
            "detail": f"the agent sent {calls} requests; the recording has {recorded} (from request "
                      f"{recorded + 1} on, replayed answers were repeats)"}


def describe(d: dict) -> str:
    """One line for a person: `request 3: the system prompt changed: recorded '...' vs now '...'`."""
    if d.get("field"):
        return f"request {d['request']}: {d['what']} changed: recorded {d['recorded']} vs now {d['now']}"
    return f"request {d['request']}: {d['detail']}"
