"""The sessions pages: the list, one session's page, its live stream, and steering it.

What a session holds is its agent script's to say (docs/architecture.md): the list and the
timeline come from the script's `sessions` entry (``json`` and ``timeline ID``, as
`moss sessions list/show` and the MCP server use it), run as a child process. What streams
live is the session's log, ``.moss/agent/logs/ID.jsonl``, tailed from a byte offset through
moss.storage (never through a link) with its events as docs/events.md declares them; the
tokens and cost shown are the host's own ``llm_response`` records in it; the reply being
streamed now is the running process's side file (host/live.py), shown below the log while the
session runs. Messages and stop /
pause / resume go through the inbox exactly as `moss say` sends them (host/inbox.py).
"""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

from .. import agentproc, inbox, live, storage
from .. import sessions as store
from ..errors import MossError
from ..sessions import checkpoint_path, log_path
from ..streamevents import ChildIsolation, SessionChild, SessionOutcome, SessionRow, SessionTimeline
from .html import Html, esc, join, render, tag

MAX_LOG_READ = 4 << 20     # bytes of a log read per step of a stream
MAX_SUMMARY_READ = 64 << 20
STREAM_TICK = 0.3           # seconds between looks at a log while streaming (server side)
TEXT_CAP = 20_000           # characters of one event's text or output on the page


async def moss_json(root: Path, argv: list[str], what: str, kind: str) -> tuple[dict, list[str]]:
    """Run `moss ARGV` in the project as a user would, without blocking the server; its last
    stdout line as a JSON object, and all its lines. No object: MossError(`kind`) naming `what`,
    with the end of its stderr."""
    return _json_of(await agentproc.run_moss(root, argv), what, kind)


def _json_of(done: agentproc.Finished, what: str, kind: str) -> tuple[dict, list[str]]:
    data = done.last_json()
    if not isinstance(data, dict):
        tail = done.stderr.decode("utf-8", "replace").strip()[-2000:]
        if done.returncode == 2 and tail:  # the person's mistake, said as moss says it on a terminal
            said = [ln.removeprefix("error: ") for ln in tail.splitlines() if ln.strip()]
            raise MossError(next((ln for ln in said if not ln.startswith(" ")), said[-1]), kind="usage")
        raise MossError(f"{what} gave no data (exit {done.returncode})" + (f": {tail}" if tail else ""), kind=kind)
    return data, done.lines()


async def entry(root: Path, *words: str) -> dict:
    """The agent script's `sessions` entry, run as `moss sessions` runs it; its one JSON line
    (read by its callers as host/sessions/row.py declares it)."""
    data, _ = _json_of(await agentproc.run_entry(root, "sessions", *words),
                       f"the agent script's sessions entry ({' '.join(words)})", "internal")
    return data


async def timeline(root: Path, sid: str) -> SessionTimeline:
    """Session `sid`'s page as the agent script's `sessions timeline ID` gives it."""
    return store.read_timeline(await entry(root, "timeline", sid))


def read_log(root: Path, sid: str, offset: int, limit: int = MAX_LOG_READ) -> tuple[list[dict], int]:
    """Whole records of session `sid`'s log from byte `offset`, and the offset after them (a
    torn last line waits for the next read; a line that is not a JSON object is skipped)."""
    try:
        return storage.read_records(log_path(root, storage.check_id(sid)), offset, limit)
    except (FileNotFoundError, storage.UnsafePath):
        return [], offset


def _num(v) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0


def spend(records: list[dict]) -> dict:
    """Tokens, cost and model from the host's own LLM records in a log."""
    tokens, cost, known, model = 0, 0.0, True, None
    for r in records:
        if r.get("event") == "llm_response":
            u = r["usage"] if isinstance(r.get("usage"), dict) else {}
            tokens += int(_num(u.get("input_tokens")) + _num(u.get("output_tokens")))
            if u.get("cost_known") is False or not isinstance(u.get("cost_usd"), (int, float)):
                known = False
            else:
                cost += _num(u.get("cost_usd"))
            if isinstance(r.get("model"), str):
                model = r["model"]
        elif r.get("event") == "llm_request" and isinstance(r.get("model"), str):
            model = r["model"]
    return {"tokens": tokens, "cost": cost if known else None, "model": model}


_spend_cache: dict[str, tuple[int, dict]] = {}


def spend_of(root: Path, sid: str) -> dict:
    st = storage.lstat(log_path(root, sid))
    size = st.st_size if st is not None else 0
    hit = _spend_cache.get(sid)
    if hit and hit[0] == size:
        return hit[1]
    records, _ = read_log(root, sid, 0, MAX_SUMMARY_READ)
    out = spend(records)
    _spend_cache[sid] = (size, out)
    return out


def ago(t) -> str:
    if not isinstance(t, (int, float)):
        return ""
    d = max(0, int(time.time() - t))
    return f"{d}s" if d < 120 else f"{d // 60}m" if d < 7200 else f"{d // 3600}h" if d < 172800 else f"{d // 86400}d"


def money(c) -> str:
    return "unknown" if c is None else f"${c:.4f}"


def exists(root: Path, sid: str) -> bool:
    """Whether the project has session `sid`: its checkpoint or its log, or a moss process
    running it (which may not have written either yet)."""
    return any(storage.lstat(p) is not None for p in (log_path(root, sid), checkpoint_path(root, sid))) \
        or is_running(root, sid)


def is_running(root: Path, sid: str) -> bool:
    return store.is_running(root, sid)


def status_block(root: Path, sid: str, running: bool, outcome: SessionOutcome | None) -> Html:
    """Above the live view: while the session runs, its state and the controls (message box,
    pause, resume, stop); once it does not, how it ended (the agent script's `outcome`: the
    reason, the exit status, turns; the cost from its log) and the command that goes on."""
    if running:
        return render("controls", id=sid, textarea=render("say_box", oob=""))
    o: SessionOutcome = outcome or {}
    exit_ = o.get("exit")
    resume = o.get("resume")
    return render("outcome", text=o.get("text") or "ended", reason=o.get("reason") or "?",
                  exit="-" if exit_ is None else exit_, turns=o.get("turns") if o.get("turns") is not None
                  else "-", cost=money(spend_of(root, sid)["cost"]),
                  resume=(Html('<span class="resume">') + "go on with it: " + tag("code", resume, id="resume") + Html("</span>"))
                  if resume else Html(""))


def status_of(row: SessionRow) -> str:
    if row.get("running"):
        return "running"
    return str(row.get("reason") or row.get("state") or "")


LIST_TTL = 1.5  # seconds a listing is reused (each one runs the agent script once)
_listed: dict[str, tuple[float, list[SessionRow]]] = {}


async def list_rows(root: Path) -> list[SessionRow]:
    """The saved sessions (the agent script's `sessions json`), running ones first, newest first."""
    hit = _listed.get(str(root))
    if hit and time.monotonic() - hit[0] < LIST_TTL:
        return hit[1]
    rows = await _list_rows(root)
    _listed[str(root)] = (time.monotonic(), rows)
    return rows


async def _list_rows(root: Path) -> list[SessionRow]:
    rows = store.read_rows(await entry(root, "json"))
    rows.sort(key=lambda r: (not r.get("running"), -r.get("mtime", 0.0)))
    return rows


def list_table(root: Path, rows: list[SessionRow], token: str) -> Html:
    body = []
    for r in rows:
        s = spend_of(root, r["id"])
        link = tag("a", r["id"], href=f"/sessions/{r['id']}")
        cls = "running" if r.get("running") else None
        body.append(Html(f'<tr class="{esc(cls or "")}"><td>{link}</td>')
                    + join(tag("td", v) for v in (
                        status_of(r), r.get("machine"), r.get("role"), s["model"] or "", r.get("turn") or 0,
                        f"{s['tokens']:,}", money(s["cost"]), ago(r.get("mtime")) + " ago" if r.get("mtime") else ""))
                    + tag("td", str(r.get("task") or "")[:120], class_="task") + Html("</tr>"))
    if not body:
        return render("empty", text="no saved sessions in this project yet: start one with moss @agent \"...\"")
    return render("sessions_table", rows=join(body))


def child_tree(nodes: list[SessionChild], depth: int = 0) -> Html:
    """The child agents (the agent script's `children` of `sessions timeline ID`) as a nested
    list: each child's id linked to its page, its role and state; its answer under it."""
    items = []
    for n in nodes:
        if "id" not in n:
            continue
        sid, state, turns, answer = n["id"], n.get("state") or "?", n.get("turns", 0), n.get("answer")
        items.append(Html(f'<li data-id="{esc(sid)}">') + tag("a", sid, href=f"/sessions/{sid}")
                     + tag("span", f" {n.get('role') or '?'}", class_="role")
                     + tag("span", state, class_="state " + re.sub(r"[^a-z]+", "-", state.lower()))
                     + tag("span", f" · {turns} turn{'' if turns == 1 else 's'}", class_="turns")
                     + (tag("div", answer, class_="answer") if answer is not None else Html(""))
                     + isolation(n.get("isolation"))
                     + (child_tree(store.read_children(n.get("children")), depth + 1) if depth < 8 else Html(""))
                     + Html("</li>"))
    if not items:
        return Html("")
    return Html('<ul class="tree">' if depth == 0 else "<ul>") + join(items) + Html("</ul>")


def isolation(iso: ChildIsolation | None) -> Html:
    """An isolated child's change (`isolation` of a node: its text, merge state and patch), as
    templates/child_isolation.html draws it; nothing for a child that shared the tree."""
    if iso is None or "text" not in iso:
        return Html("")
    patch = iso.get("patch")
    shown = (Html("<details><summary>patch</summary>") + tag("pre", patch, class_="output patch")
             + Html("</details>")) if patch else Html("")
    state = re.sub(r"[^a-z]+", "-", iso.get("state", "").lower())
    return render("child_isolation", state=state, text=iso["text"], patch=shown)


# ---- one event of the live stream -------------------------------------------------------------
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def shown(text) -> str:
    """Text as the page shows it: a CR LF is a line end, and every other control character (a
    lone CR, an ANSI escape's ESC) its visible symbol (␍, ␛), so nothing of it is hidden."""
    s = ("" if text is None else str(text)).replace("\r\n", "\n")
    return _CONTROL.sub(lambda m: "␡" if m.group() == "\x7f" else chr(0x2400 + ord(m.group())), s)


def _cap(text) -> str:
    s = shown(text)
    return s if len(s) <= TEXT_CAP else s[:TEXT_CAP] + f"\n… ({len(s) - TEXT_CAP:,} more characters)"


def live_fragment(data: dict | None) -> Html:
    """The reply being streamed (host/live.py's file), escaped; nothing when none is."""
    if not data:
        return Html("")
    cut: int = data["cut"] if isinstance(data.get("cut"), int) else 0
    text = shown(data.get("text"))
    return (Html('<div class="item text live" data-event="streaming">') + tag("span", "", class_="when")
            + tag("span", "streaming…", class_="ev")
            + (tag("span", f"… ({cut:,} earlier characters)", class_="note") if cut > 0 else Html(""))
            + tag("pre", text, class_="model") + Html("</div>"))


def fragment(rec: dict) -> Html | None:
    """One log record as the stream shows it: the model's text, commands with their output,
    validations and rollbacks with theirs, messages and how the agent took them. Everything
    in it is escaped; records of other kinds are one dim line."""
    ev = str(rec.get("event") or "?")
    ts = rec.get("ts")
    when = time.strftime("%H:%M:%S", time.localtime(ts)) if isinstance(ts, (int, float)) else ""
    head = tag("span", when, class_="when") + tag("span", ev, class_="ev")

    def item(cls: str, *parts) -> Html:
        return Html(f'<div class="item {esc(cls)}" data-event="{esc(ev)}">') + head + join(parts) + Html("</div>")

    if ev == "turn_start":
        return item("turn", tag("span", f"turn {rec.get('turn')} · {rec.get('state')}"))
    if ev == "response":
        return item("text", tag("pre", _cap(rec.get("text")), class_="model"))
    if ev == "command":
        ok = rec.get("ok")
        line = tag("code", ("✓ " if ok else "✗ ") + str(rec.get("cmd") or ""))
        out = rec.get("output") or rec.get("error")
        more = tag("pre", _cap(out), class_="output") if out else Html("")
        return item("cmd ok" if ok else "cmd failed", line, more)
    if ev == "validation":
        passed = rec.get("passed")
        what = "passed" if passed else f"FAILED at {rec.get('step')} (`{rec.get('command')}`, " + (
            "timed out" if rec.get("timed_out") else f"exit {rec.get('exit')}") + ")"
        out = rec.get("output_tail") or rec.get("report")
        return item("validation " + ("ok" if passed else "failed"), tag("span", what),
                    tag("pre", _cap(out), class_="output") if out else Html(""))
    if ev in ("rollback_done", "turn_rolled_back", "rollback", "rollback_failed", "turn_rollback_failed"):
        paths = [p for k in ("reverted", "removed", "restored", "paths") for p in (rec.get(k) or [])
                 if isinstance(p, str)]
        text = rec.get("error") or ("undone: " + ", ".join(paths) if paths else "nothing to undo")
        return item("rollback", tag("span", f"{rec.get('step') or rec.get('turn') or ''} {text}"))
    if ev == "input_received":
        said = rec.get("text") if rec.get("text") is not None else rec.get("action")
        return item("message", tag("span", f"message received ({rec.get('source')}, read as {rec.get('class')}): "),
                    tag("q", said))
    if ev == "aside":
        return item("message", tag("span", f"{rec.get('question')} → "), tag("q", rec.get("answer")))
    if ev in ("done", "session_end", "error", "paused", "resumed", "ask", "blocked_ask", "escalate"):
        detail = rec.get("answer") or rec.get("reason") or rec.get("message") or rec.get("question") or ""
        return item("mark", tag("span", _cap(detail)))
    if ev in ("llm_request", "llm_attempt", "llm_response", "snapshot", "write", "action_start", "action_done",
              "checkpoint", "fs_write"):
        return None  # bookkeeping: in the timeline, not the stream
    return item("other", tag("span", ""))


def sse(event: str, data: str) -> bytes:
    """One server-sent event; each line of `data` its own data: line. A CR ends a line for
    an EventSource as LF does, so a log's "\revent: ..." is split here too, never a field."""
    lines = "".join(f"data: {line}\n" for line in re.split(r"\r\n|\r|\n", data))
    return f"event: {event}\n{lines}\n".encode()


async def stream(root: Path, sid: str, request, offset: int = 0, shown_running: bool | None = None):
    """The session's log from `offset` as it grows, as SSE `entry` events (HTML fragments),
    and a `state` event (status_block) whenever running or not differs from what the page
    shows (`shown_running`: what it was rendered with); ends when the client goes."""
    was_running = shown_running
    live_seen: tuple | None = None
    last_ping = time.monotonic()
    yield b": stream start\n\n"
    while True:
        records, offset = read_log(root, sid, offset)
        parts = [f for f in (fragment(r) for r in records) if f is not None]
        if parts:
            yield sse("entry", "".join(parts))
        running = is_running(root, sid)
        # the reply streaming now (its side file, looked at again only when it changed); a
        # file a session that stopped running left behind is not shown
        seen = live.stamp(root, sid) if running else None
        if seen != live_seen:
            yield sse("live", str(live_fragment(live.read(root, sid) if seen else None)))
            live_seen = seen
        if running != was_running:
            outcome = None
            if not running:
                try:  # how it ended is the agent script's to say (its timeline's outcome)
                    outcome = (await timeline(root, sid)).get("outcome")
                except MossError:
                    outcome = None
            yield sse("state", str(status_block(root, sid, running, outcome)))
            was_running = running
        if time.monotonic() - last_ping > 10:
            yield b": ping\n\n"
            last_ping = time.monotonic()
        if await request.is_disconnected():
            return
        await asyncio.sleep(STREAM_TICK)


def post_message(root: Path, sid: str, text: str) -> dict:
    """What `moss say -s ID TEXT` does."""
    inbox.require_running(root, sid)
    return inbox.post(root, sid, text, source="board")


def post_control(root: Path, sid: str, action: str) -> dict:
    """What `moss say -s ID --stop/--pause/--resume` does."""
    inbox.require_running(root, sid)
    return inbox.post(root, sid, source="board", action=action)
