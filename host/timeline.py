"""`moss sessions show ID`: one session's JSONL log as a readable timeline."""

from __future__ import annotations

import json
import math
from datetime import datetime

# event -> (style, function(event) -> one-line detail)
def _short(text, n=110):
    from .ui import sanitize

    text = sanitize(" ".join(str(text or "").split()))
    return text if len(text) <= n else text[: n - 1] + "…"


DETAILS = {
    "session_start": ("bold", lambda e: f"{e.get('machine', '')} machine, role {e.get('role', '')}"),
    "session_resume": ("bold", lambda e: f"resumed at turn {e.get('turn')} ({e.get('state')})"),
    "task": ("bold", lambda e: _short(e.get("task"))),
    "dispatch": ("cyan", lambda e: f"role {e.get('role')}: {e.get('why')}"),
    "turn_start": ("bold blue", lambda e: f"turn {e.get('turn')} · {e.get('state')} · "
                   f"{e.get('context_chars', 0):,} chars of context, {e.get('working_memory', 0)} kept"),
    "llm_request": ("dim", lambda e: f"{e.get('provider')} {e.get('model')}"),
    "llm_retry": ("yellow", lambda e: f"retry after {e.get('reason')} {e.get('status') or ''}: {_short(e.get('error'), 60)}"),
    "llm_error": ("red", lambda e: f"{e.get('kind')}: {_short(e.get('message'))}"),
    "llm_response": ("dim", lambda e: f"{e.get('stop_reason')} · {_tokens(e.get('usage'))} tokens · "
                     f"{e.get('duration', 0):.1f}s" + (f" · {e.get('attempts')} attempts" if (e.get('attempts') or 1) > 1 else "")),
    "response": ("", lambda e: _short(e.get("text"))),
    "command": ("green", lambda e: ("✓ " if e.get("ok") else "✗ ") + _short(e.get("cmd"), 80)),
    "command_refused": ("yellow", lambda e: f"not executed in {e.get('state')}: {_short(e.get('cmd'), 80)}"),
    "note": ("magenta", lambda e: f"[{e.get('id')}] {_short(e.get('content'))}"),
    "keep": ("magenta", lambda e: f"[{e.get('id')}] {_short(e.get('cmd'))}"),
    "validation": ("", lambda e: ("passed" if e.get("passed") else f"FAILED at {e.get('step')}") + f" ({e.get('why')})"),
    "snapshot": ("dim", lambda e: f"{str(e.get('id', ''))[:10]} {e.get('label', '')}"),
    "rollback": ("bold yellow", lambda e: f"restored {str(e.get('id', ''))[:10]}: "
                 f"{len(e.get('reverted') or [])} reverted, {len(e.get('removed') or [])} removed"),
    "ask": ("cyan", lambda e: f"{_short(e.get('question'), 60)} → {_short(e.get('answer'), 40)}"),
    "loop_detected": ("red", lambda e: f"repeated: {e.get('cmd')}"),
    "done": ("bold green", lambda e: _short(e.get("answer"))),
    "session_end": ("bold", lambda e: f"{e.get('reason')} after {e.get('turns')} turns" + _cost(e.get("usage"))),
}


def _tokens(usage):
    usage = usage or {}
    return f"{(usage.get('input_tokens') or 0) + (usage.get('output_tokens') or 0):,}"


def _cost(usage):
    if not usage:
        return ""
    tokens = (usage.get("input_tokens") or 0) + (usage.get("output_tokens") or 0)
    cost = usage.get("cost_usd")
    return f", {tokens:,} tokens" + (f", ${cost:.4f}" if cost else "")


def _other(e: dict) -> str:
    return _short(json.dumps({k: v for k, v in e.items() if k not in ("event", "ts")}, default=str))


def render(events: list[dict], sid: str, console=None) -> None:
    """Print the timeline. A log holds whatever was appended to it: a field of an unexpected
    type shows the event as raw JSON instead of failing the whole timeline, and no text in
    it is read as rich markup or reaches the terminal as a control sequence."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    def number(value):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        return value if ok else None

    t0 = number(events[0].get("ts")) if events else None
    table = Table(box=None, header_style="bold", title=f"session {sid}", title_justify="left", pad_edge=False)
    table.add_column("time", justify="right", style="dim")
    table.add_column("event")
    table.add_column("detail", overflow="fold")
    for e in events:
        name = e.get("event", "?")
        name = name if isinstance(name, str) else "?"
        style, detail = DETAILS.get(name, ("dim", _other))
        try:
            text = detail(e)
        except (TypeError, ValueError, AttributeError, KeyError):
            style, text = "dim", _other(e)
        ts = number(e.get("ts"))
        when = f"+{ts - (t0 or 0):6.1f}s" if ts is not None and t0 is not None else ""
        if name == "session_start" and ts is not None:
            try:
                when = datetime.fromtimestamp(ts).strftime("%H:%M:%S")
            except (ValueError, OverflowError, OSError):
                pass
        table.add_row(when, Text(_short(name, 40), style=style or ""), Text(text))
    (console or Console(soft_wrap=False)).print(table)
