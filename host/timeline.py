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
    "child_start": ("cyan", lambda e: f"{e.get('child')} ({e.get('role')}, {e.get('access')}): {_short(e.get('task'), 70)}"),
    "child_end": ("cyan", lambda e: f"{e.get('child')} {e.get('status')}: {e.get('reason')} after {e.get('turns')} "
                  f"turns" + _cost(e.get("usage")) + (f" · {_short(e.get('error'), 60)}" if e.get("error") else "")),
    "lock_wait": ("yellow", lambda e: f"{', '.join(e.get('targets') or [])} for {e.get('for')}: {e.get('blocker')}"),
    "lock_timeout": ("red", lambda e: f"{e.get('targets')}: {e.get('blocker')}"),
    "lock_takeover": ("yellow", lambda e: f"{', '.join(e.get('targets') or [])} from dead pid {e.get('dead_pid')} "
                      f"({e.get('dead_session')}): {e.get('why')}"),
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
    return _short(json.dumps({k: v for k, v in e.items() if k not in ("event", "ts", "session", "parent")},
                             default=str))


def render(events: list[dict], sid: str) -> None:
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
    Console(soft_wrap=False).print(table)
    tree = agent_tree(sid)
    if tree is not None:
        Console(soft_wrap=False).print(tree)


def agent_tree(sid: str, root=None):
    """The session and its child agents (ids `SID-N`, recursively) as a rich Tree: each
    with its role, end, turns, usage and answer. None when it has no children."""
    from pathlib import Path

    from rich.tree import Tree

    from .api.session import agent_dir
    from .context import find_project_root

    root = Path(root) if root else find_project_root()
    folder = agent_dir(root)

    def load(cid):
        try:
            return json.loads((folder / f"session-{cid}.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}

    def kids(cid):
        import re

        pat = re.compile(re.escape(cid) + r"-(\d+)$")
        found = [p.stem[len("session-"):] for p in folder.glob(f"session-{cid}-*.json")]
        return sorted((k for k in found if pat.match(k)), key=lambda k: int(pat.match(k).group(1)))

    def label(cid):
        S = load(cid)
        reason = S.get("reason") or ("running" if S else "no checkpoint")
        answer = _short(S.get("answer"), 90) if S.get("answer") else ""
        return (f"[bold]{cid}[/] {S.get('role') or '?'} · {reason} · {S.get('turn') or 0} turns"
                + _cost(S.get("usage")) + (f"\n[green]{escape(answer)}[/]" if answer else ""))

    if not kids(sid):
        return None
    tree = Tree(label(sid))

    def add(node, cid, depth=0):
        for k in kids(cid):
            add(node.add(label(k)), k, depth + 1) if depth < 8 else node.add(label(k))

    add(tree, sid)
    return tree


def escape(text):
    from rich.markup import escape as _escape

    return _escape(text)
