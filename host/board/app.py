"""The board's routes and its server (`moss ui`).

Pages are rendered here from the page groups (sessions.py, runs.py, evals.py) and html.py's
escaped templates; security.Guard wraps the whole app, so no route runs before the Host,
token and Origin checks. Every id or name in a URL is checked (moss.storage.check_id, the
eval names' pattern) before it becomes a path, and every file is read under ``.moss/``
through moss.storage / safefs.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import sys
from importlib import resources
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from .. import storage
from ..errors import MossError
from . import evallist, evals, runs, security, sessions
from .html import Html, esc, join, render, tag

ALERT_ID = re.compile(r"^[0-9a-f]{6,40}$")
RUNS_TICK = 1.0  # seconds between the runs page's server-side looks (pushed only on change)


def build(root: Path, token: str, hosts: list[str], port: int) -> security.Guard:
    """The board for project `root`, behind its Guard."""
    root = Path(root)
    headers = json.dumps({"X-Moss-Token": token})

    def page(title: str, body: Html, status: int = 200) -> HTMLResponse:
        return HTMLResponse(render("base", title=title, body=body, headers=headers, project=root.name),
                            status_code=status)

    def failed(e: MossError) -> HTMLResponse:
        status = 404 if e.kind == "not_found" else 400
        return page("error", tag("p", e.message, class_="error"), status)

    async def home(request: Request):
        return RedirectResponse("/sessions", status_code=303)

    async def sessions_page(request: Request):
        try:
            rows = await sessions.list_rows(root)
        except MossError as e:
            return failed(e)
        return page("Sessions", render("sessions", table=sessions.list_table(root, rows, token)))

    async def sessions_stream(request: Request):
        async def gen():
            last = None
            yield b": start\n\n"
            while not await request.is_disconnected():
                try:
                    html = str(sessions.list_table(root, await sessions.list_rows(root), token))
                except MossError as e:
                    html = str(tag("p", e.message, class_="error"))
                if html != last:
                    yield sessions.sse("sessions", html)
                    last = html
                await asyncio.sleep(2.0)
        return _sse(gen())

    def no_session(sid: str) -> HTMLResponse:
        return page("No such session", tag("p", f"There is no session {sid!r} in this project.", class_="error")
                    + Html('<p><a href="/sessions">All sessions</a></p>'), 404)

    async def session_page(request: Request):
        try:
            sid = storage.check_id(request.path_params["sid"])
            if not sessions.exists(root, sid):
                return no_session(sid)
            running = sessions.is_running(root, sid)
            data = await sessions.entry(root, "timeline", sid)
            rows = [r for r in await sessions.list_rows(root) if r["id"] == sid]
        except MossError as e:
            return failed(e)
        row = rows[0] if rows else {"id": sid}
        body_rows = []
        for r in data.get("rows") or []:
            if not isinstance(r, dict):
                continue
            style = "tl-" + re.sub(r"[^a-z]+", "-", str(r.get("style") or "plain"))
            body_rows.append(Html(f'<tr class="{esc(style)}">') + join(
                tag("td", r.get(k)) for k in ("time", "event", "detail")) + Html("</tr>"))
        failure = [str(x) for x in data.get("last_failure") or []]
        tree = sessions.child_tree(data.get("children"))
        body = render("session", id=sid, task=row.get("task") or "", running="1" if running else "0",
                      status=sessions.status_block(root, sid, running, data.get("outcome")),
                      timeline=render("timeline", rows=join(body_rows)),
                      failure=tag("pre", "\n".join(failure), class_="output") if failure else Html(""),
                      tree=(tag("h2", "Child agents") + tree) if tree else Html(""))
        return page(f"Session {sid}", body)

    async def session_stream(request: Request):
        try:
            sid = storage.check_id(request.path_params["sid"])
        except MossError as e:
            return Response(e.message, status_code=400)
        if not sessions.exists(root, sid):
            return Response(f"no session {sid!r} in this project", status_code=404)
        shown = {"1": True, "0": False}.get(request.query_params.get("running", ""))
        return _sse(sessions.stream(root, sid, request, shown_running=shown))

    async def session_say(request: Request):
        form = await request.form()
        try:
            sid = storage.check_id(request.path_params["sid"])
            rec = sessions.post_message(root, sid, str(form.get("text") or ""))
        except MossError as e:
            return HTMLResponse(str(tag("span", e.message, class_="error")), status_code=200)
        sent = tag("span", f"sent to {sid} ({rec['id']}); it answers in the live view", class_="ok")
        return HTMLResponse(str(sent + render("say_box", oob=Html(' hx-swap-oob="true"'))))  # the box emptied

    async def session_control(request: Request):
        form = await request.form()
        try:
            sid = storage.check_id(request.path_params["sid"])
            action = str(form.get("action") or "")
            sessions.post_control(root, sid, action)
        except MossError as e:
            return HTMLResponse(str(tag("span", e.message, class_="error")))
        return HTMLResponse(str(tag("span", f"asked session {sid} to {action}", class_="ok")))

    def runs_parts() -> dict[str, str]:
        all_runs = runs.manager(root).list()
        alerts = runs.pending(all_runs)
        return {"alerts": str(runs.alerts_list(alerts)), "runs": str(runs.runs_table(all_runs)),
                "_all": all_runs, "_alerts": alerts}  # type: ignore[dict-item]

    async def runs_page(request: Request):
        try:
            parts = runs_parts()
            rows = await sessions.list_rows(root)
        except MossError as e:
            return failed(e)
        banner = runs.wild_banner(root, rows, parts["_all"], parts["_alerts"])  # type: ignore[arg-type]
        return page("Runs", render("runs", banner=banner, alerts=Html(parts["alerts"]), runs=Html(parts["runs"])))

    async def runs_stream(request: Request):
        async def gen():
            last: dict[str, str] = {}
            yield b": start\n\n"
            while not await request.is_disconnected():
                try:
                    parts = runs_parts()
                    rows = await sessions.list_rows(root)
                    parts["banner"] = str(runs.wild_banner(root, rows, parts["_all"], parts["_alerts"]))  # type: ignore[arg-type]
                except MossError as e:
                    parts = {"banner": str(tag("p", e.message, class_="error"))}
                for k in ("banner", "alerts", "runs"):
                    if k in parts and parts[k] != last.get(k):
                        yield sessions.sse(k, parts[k])
                        last[k] = parts[k]
                await asyncio.sleep(RUNS_TICK)
        return _sse(gen())

    async def runs_metrics(request: Request):
        return JSONResponse(runs.chart_data(runs.manager(root)))

    async def alert_resolve(request: Request):
        form = await request.form()
        alert_id = request.path_params["aid"]
        if not ALERT_ID.match(alert_id):
            return HTMLResponse(str(tag("span", f"bad alert id {alert_id!r}", class_="error")))
        choice = str(form.get("choice") or "")
        try:
            out = await asyncio.to_thread(runs.resolve, root, alert_id, choice)
        except MossError as e:
            return HTMLResponse(str(tag("span", e.message, class_="error")))
        if out.get("queued"):
            text = f"alert {alert_id}: {out['choice']!r} handed to the moss process watching run {out['run_id']}"
        else:
            text = f"alert {alert_id} resolved with {out.get('choice')!r}; run {out.get('run_status')}"
        return HTMLResponse(str(tag("span", text, class_="ok")))

    async def evals_page(request: Request):
        body = (evallist.evals_table(root) + tag("h2", "Batches") + evallist.batches_table(root))
        return page("Evaluations", body)

    async def batch_page(request: Request):
        try:
            name = evals.check_name(request.path_params["name"], "batch")
            rows = evals.batch_rows(root, name)
        except MossError as e:
            return failed(e)
        counts: dict[str, int] = {}
        for r in rows:
            counts[str(r.get("outcome") or "-")] = counts.get(str(r.get("outcome") or "-"), 0) + 1
        summary = f"{len(rows)} tasks: " + ", ".join(f"{n} {o}" for o, n in counts.items()) if rows else "no tasks yet"
        return page(f"Batch {name}", tag("p", summary, class_="summary") + evals.batch_table(name, rows))

    async def batch_log(request: Request):
        try:
            name = evals.check_name(request.path_params["name"], "batch")
            log = evals.check_name(request.path_params["log"], "task")
            records = evals.log_records(root, name, log, batch=True)
        except (MossError, FileNotFoundError) as e:
            return failed(e if isinstance(e, MossError) else MossError("no such task log", kind="not_found"))
        items = [f for f in (sessions.fragment(r) for r in records) if f is not None]
        return page(f"Batch {name}: {log}", Html('<div id="stream">') + join(items) + Html("</div>"))

    async def eval_page(request: Request):
        try:
            run = evals.check_name(request.path_params["run"], "eval run")
            rows = evals.rows_of(root, run)
        except MossError as e:
            return failed(e)
        cells = evals.results.summary(rows)
        options = join(tag("option", n, value=n) for n in evals.runs(root) if n != run)
        return page(f"Evaluation {run}", render("eval", cells=evals.cells_table(cells), chart=evals.chart(cells),
                                                 run=run, options=options, attempts=evals.attempts_table(run, rows)))

    async def eval_compare(request: Request):
        a = request.query_params.get("a") or ""
        b = request.query_params.get("b") or None
        kind = "batch" if request.query_params.get("kind") == "batch" else "eval"
        cell = request.query_params.get("cell") or None
        try:
            data = await evals.compare(root, a, b, kind, cell)
        except MossError as e:
            return failed(e)
        cells = data["cells"]
        fixed, broke = list(data.get("fixed") or []), list(data.get("broke") or [])
        p = data.get("p")
        note = data.get("note")
        body = render("compare", a=a, b=b or a, cell_a=cells[0], cell_b=cells[1], verdict=data.get("verdict"),
                      pairs=data.get("pairs"), fixed_n=len(fixed), broke_n=len(broke),
                      p=f"{p:.3g}" if isinstance(p, (int, float)) else "?",
                      note=tag("p", note, class_="note power") if isinstance(note, str) else Html(""),
                      fixed=evals.flip_links(root, a, b, cells, fixed, kind),
                      broke=evals.flip_links(root, a, b, cells, broke, kind))
        return page("Compare", body)

    async def eval_log(request: Request):
        try:
            run = evals.check_name(request.path_params["run"], "eval run")
            name = evals.check_name(request.path_params["name"], "attempt")
            records = evals.log_records(root, run, name)
        except (MossError, FileNotFoundError) as e:
            return failed(e if isinstance(e, MossError) else MossError("no such attempt log", kind="not_found"))
        items = [f for f in (sessions.fragment(r) for r in records) if f is not None]
        return page(f"Attempt {name}", Html('<div id="stream">') + join(items) + Html("</div>"))

    static = StaticFiles(directory=str(resources.files(__package__).joinpath("static")))
    routes = [
        Route("/", home),
        Route("/sessions", sessions_page),
        Route("/sessions/stream", sessions_stream),
        Route("/sessions/{sid}", session_page),
        Route("/sessions/{sid}/stream", session_stream),
        Route("/sessions/{sid}/say", session_say, methods=["POST"]),
        Route("/sessions/{sid}/control", session_control, methods=["POST"]),
        Route("/runs", runs_page),
        Route("/runs/stream", runs_stream),
        Route("/runs/metrics", runs_metrics),
        Route("/alerts/{aid}/resolve", alert_resolve, methods=["POST"]),
        Route("/evals", evals_page),
        Route("/evals/compare", eval_compare),
        Route("/evals/{run}", eval_page),
        Route("/evals/{run}/logs/{name}", eval_log),
        Route("/batches/{name}", batch_page),
        Route("/batches/{name}/logs/{log}", batch_log),
        Mount("/static", app=static, name="static"),
    ]
    return security.Guard(Starlette(routes=routes), token, hosts, port)


def _sse(gen) -> StreamingResponse:
    return StreamingResponse(gen, media_type="text/event-stream",
                             headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})


def _can_open_browser() -> bool:
    if os.environ.get("CI") or os.environ.get("MOSS_NO_BROWSER"):
        return False
    if sys.platform == "darwin" or sys.platform.startswith("win"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def serve(root: Path, *, host: str = "127.0.0.1", port: int = 0, open_browser: bool = True) -> None:
    """Bind, print the URL (with its token), open a browser when there is one (with a one-time
    code: security.Guard), serve until Ctrl-C."""
    import uvicorn

    if host in ("0.0.0.0", "::", ""):
        raise MossError(f"--host {host or repr(host)}: give the one address to serve on (e.g. 192.168.1.5); "
                        "the board answers only requests that name it", kind="usage")
    if host not in ("127.0.0.1", "localhost"):
        print(f"warning: moss ui on {host} answers to other machines too: anyone who gets the token "
              f"can start and steer agents that run shell commands here", file=sys.stderr, flush=True)
    bind = "127.0.0.1" if host == "localhost" else host
    family = socket.AF_INET6 if ":" in bind else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((bind, port))
    except OSError as e:
        sock.close()
        raise MossError(f"cannot listen on {bind}:{port} ({e.strerror}): choose another with --port",
                        kind="usage") from None
    sock.listen(64)
    port = sock.getsockname()[1]
    shown = f"[{bind}]" if ":" in bind else bind
    hosts = [f"127.0.0.1:{port}", f"localhost:{port}", f"{shown}:{port}"]
    token = security.new_token()
    url = f"http://{shown}:{port}/?token={token}"
    app = build(root, token, hosts, port)
    print(f"moss ui: {url}", flush=True)
    print("(Ctrl-C stops it)", file=sys.stderr, flush=True)
    if open_browser and _can_open_browser():
        # The browser's command line is every local user's to read (ps): it gets a one-time code,
        # never the token. Opened beside the server: webbrowser waits for a $BROWSER to exit.
        import threading
        import webbrowser

        opened = f"http://{shown}:{port}/?code={app.one_time_code()}"
        threading.Thread(target=webbrowser.open, args=(opened,), daemon=True, name="moss-ui-browser").start()
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=1, lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])
