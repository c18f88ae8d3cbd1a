"""`moss runs ...`: background runs (local processes and Ray jobs) for people.

    moss runs list                 every run of the project, a table
    moss runs show RUN             one run: command, executor, status, resources, alerts
    moss runs logs RUN [--tail N]  its log (a Ray job's is fetched from the cluster first)
    moss runs stop RUN             stop it (a Ray job through the cluster)
    moss runs alert RUN "message"  raise a manual alert the Wild Loop shows its model

RUN is a run id or a unique prefix of one. Looking at the runs is what any moss process
does: a Ray job or a detached run that no live moss process watches is brought up to date
(and a run left behind by a moss that was killed is settled).
"""

from __future__ import annotations

import time

import click

from .errors import MossError


def _manager():
    from .context import find_project_root
    from .tools.runs import RunManager

    m = RunManager(find_project_root())
    m.sync()
    return m


def _find(m, run: str) -> dict:
    runs = m.list()
    exact = [r for r in runs if r["id"] == run]
    hits = exact or [r for r in runs if r["id"].startswith(run)]
    if not hits:
        raise MossError(f"no run with id {run!r} (moss runs list shows them)", kind="not_found")
    if len(hits) > 1:
        raise MossError(f"run id {run!r} is ambiguous: " + ", ".join(r["id"] for r in hits), kind="ambiguous")
    return hits[0]


def _age(t) -> str:
    if not t:
        return ""
    s = time.time() - t
    return f"{int(s)}s ago" if s < 120 else f"{int(s // 60)}m ago" if s < 7200 else f"{int(s // 3600)}h ago"


def _duration(r: dict) -> str:
    d = r.get("duration")
    if d is None and r.get("started_at") and r["status"] == "running":
        d = time.time() - r["started_at"]
    return "" if d is None else f"{d:.1f}s"


def _where(r: dict) -> str:
    if r.get("executor") == "ray":
        ray = r.get("ray") or {}
        res = f"{ray.get('num_cpus', 1)} CPU" + (f", {ray.get('num_gpus')} GPU" if ray.get("num_gpus") else "")
        return f"ray ({res})"
    return f"local ({r.get('sandbox')})"


@click.group("runs")
def runs():
    """Background runs (the Wild Loop's sweeps): list, show, logs, stop, alert."""


@runs.command("list")
def runs_list():
    """A table of runs: id, name, executor, status, exit code, duration, alerts, started."""
    from .tables import show

    rows = []
    m = _manager()
    for r in m.list():
        pending = sum(1 for a in r["alerts"] if a["status"] == "pending")
        alerts = f"{pending} pending / {len(r['alerts'])}" if r["alerts"] else ""
        rows.append([r["id"], r["name"], _where(r), r["status"], "" if r.get("code") is None else r["code"],
                     _duration(r), alerts, _age(r.get("started_at") or r.get("created_at"))])
    for file in sorted(m.corrupt):
        rows.append([file.rsplit("/", 1)[-1][:-len(".json")], "", "", "corrupt", "", "", "", ""])
    if not rows:
        click.echo("no runs in this project", err=True)
        return
    show(["id", "name", "executor", "status", "code", "duration", "alerts", "started"], rows)
    # As `moss sessions list` does: the good ones are listed, each corrupt one is listed too
    # and named on stderr in one line, and the exit status (2) says there is one to act on.
    from .ui import sanitize

    for file, why in sorted(m.corrupt.items()):
        click.echo("error: " + sanitize(why if why.startswith(file) else
                                        f"{file} is not a usable run record ({why}); delete it"), err=True)
    if m.corrupt:
        raise SystemExit(2)


@runs.command("show")
@click.argument("run")
def runs_show(run):
    """One run: its command, where it runs, status, and its alerts."""
    import json

    from .tables import show

    r = _find(_manager(), run)
    rows = [["id", r["id"]], ["name", r["name"]], ["command", r["cmd"]], ["workdir", r.get("workdir")],
            ["executor", _where(r)], ["status", r["status"]], ["exit code", r.get("code")],
            ["duration", _duration(r)], ["started", _age(r.get("started_at"))], ["error", r.get("error")],
            ["log", r.get("log")]]
    if r.get("executor") == "ray":
        ray = r.get("ray") or {}
        rows += [["cluster", ray.get("address")], ["ray job", ray.get("submission_id")],
                 ["working dir", ray.get("working_dir")]]
    else:
        rows += [["pid", r.get("pid")], ["detached", r.get("detached")]]
    if r.get("results"):
        rows.append(["results", r["results"]])
    if r.get("meta") not in (None, {}, []):
        rows.append(["meta", json.dumps(r["meta"], ensure_ascii=False)])
    show(["field", "value"], rows)
    if r["alerts"]:
        click.echo()
        show(["alert", "severity", "source", "status", "message", "choice"],
             [[a["id"], a["severity"], a.get("source", "rule"), a["status"], a["message"], a.get("choice")]
              for a in r["alerts"]])


@runs.command("logs")
@click.argument("run")
@click.option("--tail", "tail", type=int, default=0, metavar="N", help="Only the last N characters.")
def runs_logs(run, tail):
    """Print a run's log (stdout and stderr; a Ray job's driver log)."""
    m = _manager()
    r = _find(m, run)
    text = m.log_tail(r["id"], tail if tail > 0 else 100_000)
    if tail <= 0:
        from .storage import read_text

        try:
            text = read_text(m.dir / f"{r['id']}.log")  # never through a link, never a fifo
        except (OSError, MossError):
            pass
    click.echo(text, nl=not text.endswith("\n"))


@runs.command("stop")
@click.argument("run")
def runs_stop(run):
    """Stop a run: SIGTERM to its process group (SIGKILL after 2 s), or the Ray job's stop."""
    m = _manager()
    r = _find(m, run)
    out = m.stop(r["id"], reason="stopped with moss runs stop")
    click.echo(f"{out['id']} {out['name']}: {out['status']}")


@runs.command("alert")
@click.argument("run")
@click.argument("message")
@click.option("--severity", type=click.Choice(["info", "warning", "critical"]), default="warning",
              show_default=True)
def runs_alert(run, message, severity):
    """Raise a manual alert on RUN; the Wild Loop shows it to its model like any other."""
    m = _manager()
    r = _find(m, run)
    a = m.alert(r["id"], message, severity=severity, source="manual")
    if a.get("queued"):
        click.echo(f"alert for {r['id']} handed to the moss process watching it")
    elif a.get("duplicate"):
        click.echo(f"the same alert is already pending: {a['id']}")
    else:
        click.echo(f"alert {a['id']} raised on {r['id']} ({a['severity']})")
