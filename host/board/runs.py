"""The runs page: the Wild Loop's banner, each run's metrics over steps, alerts as buttons.

Runs are host mechanism (moss.tools.runs): their records, logs and alerts are read through a
RunManager as `moss runs` reads them, and an alert is resolved through the same
``RunManager.resolve`` the Wild Loop's `<resolve_alert>` uses (a run another moss process
watches gets it through ``<id>.resolve``; that process resolves it). Metrics are the numbers
a run's log prints beside a step ("step 3 loss 0.41 acc=0.9"), the same lines alert rules
read. The banner's stage is the Wild Loop session's state (its checkpoint, as the sessions
listing gives it), its iteration the loop's own ``wild_prompt`` records in its log
(docs/events.md).
"""

from __future__ import annotations

import json
import math
import re
import time
from pathlib import Path

from ..streamevents import SessionRow
from ..tools.runs import RunManager
from ..tools.runs.store import TERMINAL
from .html import Html, esc, join, render, tag
from .sessions import read_log

MAX_LINE = 2000          # characters of a log line looked at for metrics
MAX_POINTS = 5000        # points per series
MAX_METRIC_READ = 8 << 20
STEP = re.compile(r"\b(?:step|iter|iteration|epoch)[\s=:]+(\d{1,12})\b", re.I)
PAIR = re.compile(r"\b([A-Za-z_][A-Za-z0-9_./-]{0,40})[\s]*[=:]?[\s]*"
                  r"(nan|[-+]?inf|[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)(?![\w.])", re.I)
SKIP = {"step", "iter", "iteration", "epoch"}


def metrics_of(text: str) -> dict[str, list[tuple[int, float | None]]]:
    """metric name -> [(step, value)] from a log: each line with a step number, and the
    `name value` / `name=value` pairs beside it (nan and inf become gaps)."""
    out: dict[str, list[tuple[int, float | None]]] = {}
    for line in text.splitlines():
        line = line[:MAX_LINE]
        m = STEP.search(line)
        if not m:
            continue
        step = int(m.group(1))
        for name, raw in PAIR.findall(line):
            if name.lower() in SKIP:
                continue
            v = float(raw)
            series = out.setdefault(name, [])
            if len(series) < MAX_POINTS:
                series.append((step, v if math.isfinite(v) else None))
    return out


_managers: dict[str, RunManager] = {}


def manager(root: Path) -> RunManager:
    """The board's one RunManager for `root`, kept for the server's life: looking at the runs
    settles what dead moss processes left (a detached run is adopted, and then watched by
    this process's monitor thread, as by any moss process), so it must outlive a request."""
    m = _managers.get(str(root))
    if m is None:
        m = _managers[str(root)] = RunManager(root)
    m.sync()
    return m


def params_of(run: dict) -> str:
    meta = run["meta"] if isinstance(run.get("meta"), dict) else {}
    p = meta.get("params")
    if isinstance(p, dict):
        return ", ".join(f"{k}={v}" for k, v in sorted(p.items()))
    return str(p) if p is not None else ""


_parsed: dict[str, tuple[int, dict]] = {}  # run id -> (its log's size, its metrics)


def chart_data(m: RunManager) -> dict:
    """{metrics: {name: {steps: [...], series: [{run, label, values: [...]}]}}}: every run's
    series of each metric on one step axis, runs in the order of their parameters (a sweep's
    colours go from the lowest value to the highest)."""
    runs = sorted(m.list(), key=lambda r: (params_of(r), r.get("created_at") or 0))
    per_run = {}
    for r in runs:
        size = m.store.size(r["id"], "log")
        hit = _parsed.get(r["id"])
        if hit is None or hit[0] != size:  # read again only a log that grew
            text = m.store.read_from(r["id"], "log", 0, MAX_METRIC_READ).decode("utf-8", "replace")
            hit = _parsed[r["id"]] = (size, metrics_of(text))
        per_run[r["id"]] = hit[1]
    names = sorted({n for ms in per_run.values() for n in ms})
    out = {}
    for name in names:
        steps = sorted({s for ms in per_run.values() for s, _ in ms.get(name, [])})
        index = {s: i for i, s in enumerate(steps)}
        series = []
        for r in runs:
            pts = per_run[r["id"]].get(name)
            if not pts:
                continue
            values: list[float | None] = [None] * len(steps)
            for s, v in pts:
                values[index[s]] = v
            series.append({"run": r["id"], "label": f"{r['name']} {params_of(r)}".strip(), "values": values,
                           "rank": runs.index(r), "of": len(runs)})  # its colour: the same in every chart
        out[name] = {"steps": steps, "series": series}
    return {"metrics": out}


def wild_banner(root: Path, rows: list[SessionRow], runs: list[dict], alerts: list[dict]) -> Html:
    """Stage, iteration, elapsed time, runs by state, open alerts: of the latest Wild Loop
    session (running first), from its log."""
    wild = [r for r in rows if r.get("machine") == "wild"]
    counts: dict[str, int] = {}
    for r in runs:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    states = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no runs"
    if not wild:
        return render("banner", stage="no Wild Loop session", iteration="", elapsed="", runs=states,
                      alerts=str(len(alerts)), session=Html(""), cls="idle")
    s = wild[0]
    records, _ = read_log(root, s["id"], 0, 16 << 20)
    # the stage is the loop's state now (its checkpoint's: exploring, running, analyzing), not
    # the kind of the last prompt it was given (an alert it answered long ago)
    stage = s.get("state") or "starting"
    iteration, started, ended = "", None, None
    for rec in records:
        ev = rec.get("event")
        if ev == "session_start" and isinstance(rec.get("ts"), (int, float)) and started is None:
            started = rec["ts"]
        elif ev == "wild_prompt":
            if rec.get("iteration") is not None:
                iteration = str(rec.get("iteration"))
        elif ev == "session_end" and isinstance(rec.get("ts"), (int, float)):
            ended = rec["ts"]
            stage = "ended: " + str(rec.get("reason") or "")
    elapsed = ""
    if started is not None:
        secs = int((ended if ended and not s.get("running") else time.time()) - started)
        elapsed = f"{secs // 60}m {secs % 60:02d}s"
    link = tag("a", s["id"], href=f"/sessions/{s['id']}")
    return render("banner", stage=stage, iteration=iteration, elapsed=elapsed, runs=states,
                  alerts=str(len(alerts)), session=link, cls="running" if s.get("running") else "idle")


def runs_table(runs: list[dict]) -> Html:
    if not runs:
        return render("empty", text="no runs in this project (the Wild Loop's sweeps start them)")
    body = []
    for r in reversed(runs):
        dur = r.get("duration")
        if dur is None and r.get("started_at") and r["status"] == "running":
            dur = time.time() - r["started_at"]
        body.append(Html("<tr>") + join(tag("td", v) for v in (
            r["id"], r["name"], params_of(r), r["status"], "" if r.get("code") is None else r["code"],
            "" if dur is None else f"{dur:.1f}s", len(r["alerts"]))) + Html("</tr>"))
    return render("runs_table", rows=join(body))


def alerts_list(alerts: list[dict]) -> Html:
    if not alerts:
        return render("empty", text="no open alerts")
    items = []
    for a in alerts:
        buttons = join(
            Html(f'<button class="choice" hx-post="/alerts/{esc(a["id"])}/resolve" '
                 f'hx-vals="{esc(json.dumps({"choice": c}))}" hx-target="#alerts-result">') + esc(c) + Html("</button>")
            for c in a.get("choices") or [] if isinstance(c, str))
        items.append(render("alert", id=a["id"], severity=a.get("severity"), message=a.get("message"),
                            line=a.get("line") or "", buttons=buttons))
    return join(items)


def resolve(root: Path, alert_id: str, choice: str) -> dict:
    return manager(root).resolve(alert_id, choice)


def pending(runs: list[dict]) -> list[dict]:
    return [dict(a, run_status=r["status"]) for r in runs for a in r["alerts"] if a["status"] == "pending"]


def summary(runs: list[dict]) -> str:
    live = sum(1 for r in runs if r["status"] not in TERMINAL)
    return f"{len(runs)} runs, {live} not ended"
