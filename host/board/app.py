"""The board's routes and its server (`moss ui`).

Pages are rendered here from the page groups (sessions.py, runs.py, evals.py) and html.py's
escaped templates; security.Guard wraps the whole app, so no route runs before the Host,
token and Origin checks. Every id or name in a URL is checked (moss.storage.check_id, the
eval names' pattern) before it becomes a path, and every file is read under ``.moss/``
through moss.storage / safefs.

Adding a route: write a module-level ``async def name(board: Board, request: Request)`` and put
``@route("/path/{param}")`` (``methods=["POST"]`` for a form) above it. It gets the `Board` — the
project's root and how pages are framed — and the request, and returns a response; a URL
parameter is checked before use, and a MossError becomes the error page through
``board.failed``. A literal path wins over a ``{param}`` at the same place whatever the order
the routes are written in (`/evals/compare` before `/evals/{run}`).
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import re
import socket
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from .. import storage
from ..errors import MossError
from ..streamevents import TimelineRow
from . import evallist, evals, runs, security, sessions
from .html import Html, esc, join, render, tag

ALERT_ID = re.compile(r"^[0-9a-f]{6,40}$")
RUNS_TICK = 1.0  # seconds between the runs page's server-side looks (pushed only on change)
SESSIONS_TICK = 2.0  # seconds between the sessions page's looks


@dataclass(frozen=True)
class Board:
    """What every route needs: the project, the session token and how a page is framed."""

    root: Path
    token: str

    def page(self, title: str, body: Html, status: int = 200) -> HTMLResponse:
        headers = json.dumps({"X-Moss-Token": self.token})
        return HTMLResponse(render("base", title=title, body=body, headers=headers, project=self.root.name),
                            status_code=status)

    def failed(self, e: MossError) -> HTMLResponse:
        status = 404 if e.kind == "not_found" else 400
        return self.page("error", tag("p", e.message, class_="error"), status)

    def no_session(self, sid: str) -> HTMLResponse:
        return self.page("No such session",
                         tag("p", f"There is no session {sid!r} in this project.", class_="error")
                         + Html('<p><a href="/sessions">All sessions</a></p>'), 404)


Handler = Callable[[Board, Request], Awaitable[Response]]
_ROUTES: list[Route] = []


def route(path: str, methods: list[str] | None = None) -> Callable[[Handler], Handler]:
    """Register `handler` at `path` (GET, and HEAD, unless `methods` says otherwise)."""
    def register(handler: Handler) -> Handler:
        @functools.wraps(handler)
        async def endpoint(request: Request) -> Response:
            return await handler(request.app.state.board, request)
        _ROUTES.append(Route(path, endpoint, methods=methods))
        return handler
    return register


def build(root: Path, token: str, hosts: list[str], port: int) -> security.Guard:
    """The board for project `root`, behind its Guard."""
    static = StaticFiles(directory=str(resources.files(__package__).joinpath("static")))
    # a stable sort: a route with fewer {params} first, so a literal segment is never shadowed
    table: list[BaseRoute] = [*sorted(_ROUTES, key=lambda r: r.path.count("{")),
                              Mount("/static", app=static, name="static")]
    app = Starlette(routes=table)
    app.state.board = Board(Path(root), token)
    return security.Guard(app, token, hosts, port)


# --- sessions


@route("/")
async def home(board: Board, request: Request) -> Response:
    return RedirectResponse("/sessions", status_code=303)


@route("/sessions")
async def sessions_page(board: Board, request: Request) -> Response:
    try:
        rows = await sessions.list_rows(board.root)
    except MossError as e:
        return board.failed(e)
    return board.page("Sessions", render("sessions", table=sessions.list_table(board.root, rows, board.token)))


@route("/sessions/stream")
async def sessions_stream(board: Board, request: Request) -> Response:
    async def gen():
        last = None
        yield b": start\n\n"
        while not await request.is_disconnected():
            try:
                html = str(sessions.list_table(board.root, await sessions.list_rows(board.root), board.token))
            except MossError as e:
                html = str(tag("p", e.message, class_="error"))
            if html != last:
                yield sessions.sse("sessions", html)
                last = html
            await asyncio.sleep(SESSIONS_TICK)
    return _sse(gen())


@route("/sessions/{sid}")
async def session_page(board: Board, request: Request) -> Response:
    root = board.root
    try:
        sid = storage.check_id(request.path_params["sid"])
        if not sessions.exists(root, sid):
            return board.no_session(sid)
        running = sessions.is_running(root, sid)
        data = await sessions.timeline(root, sid)
        rows = [r for r in await sessions.list_rows(root) if r["id"] == sid]
    except MossError as e:
        return board.failed(e)
    task = rows[0].get("task", "") if rows else ""
    failure = data.get("last_failure", [])
    tree = sessions.child_tree(data.get("children", []))
    body = render("session", id=sid, task=task, running="1" if running else "0",
                  status=sessions.status_block(root, sid, running, data.get("outcome")),
                  timeline=render("timeline", rows=_timeline_rows(data.get("rows", []))),
                  failure=tag("pre", "\n".join(failure), class_="output") if failure else Html(""),
                  tree=(tag("h2", "Child agents") + tree) if tree else Html(""))
    return board.page(f"Session {sid}", body)


def _timeline_rows(rows: list[TimelineRow]) -> Html:
    """The `timeline` entry's rows as table rows, each styled by its (sanitised) style."""
    out = []
    for r in rows:
        style = "tl-" + re.sub(r"[^a-z]+", "-", r.get("style") or "plain")
        out.append(Html(f'<tr class="{esc(style)}">') + join(
            tag("td", v) for v in (r.get("time"), r.get("event"), r.get("detail"))) + Html("</tr>"))
    return join(out)


@route("/sessions/{sid}/stream")
async def session_stream(board: Board, request: Request) -> Response:
    try:
        sid = storage.check_id(request.path_params["sid"])
    except MossError as e:
        return Response(e.message, status_code=400)
    if not sessions.exists(board.root, sid):
        return Response(f"no session {sid!r} in this project", status_code=404)
    shown = {"1": True, "0": False}.get(request.query_params.get("running", ""))
    return _sse(sessions.stream(board.root, sid, request, shown_running=shown))


@route("/sessions/{sid}/say", methods=["POST"])
async def session_say(board: Board, request: Request) -> Response:
    form = await request.form()
    try:
        sid = storage.check_id(request.path_params["sid"])
        rec = sessions.post_message(board.root, sid, str(form.get("text") or ""))
    except MossError as e:
        return HTMLResponse(str(tag("span", e.message, class_="error")), status_code=200)
    sent = tag("span", f"sent to {sid} ({rec['id']}); it answers in the live view", class_="ok")
    return HTMLResponse(str(sent + render("say_box", oob=Html(' hx-swap-oob="true"'))))  # the box emptied


@route("/sessions/{sid}/control", methods=["POST"])
async def session_control(board: Board, request: Request) -> Response:
    form = await request.form()
    try:
        sid = storage.check_id(request.path_params["sid"])
        action = str(form.get("action") or "")
        sessions.post_control(board.root, sid, action)
    except MossError as e:
        return HTMLResponse(str(tag("span", e.message, class_="error")))
    return HTMLResponse(str(tag("span", f"asked session {sid} to {action}", class_="ok")))


# --- runs and their alerts


async def _runs_parts(root: Path) -> dict[str, str]:
    """The runs page's three live parts (banner, alerts, runs table) as HTML."""
    all_runs = runs.manager(root).list()
    alerts = runs.pending(all_runs)
    rows = await sessions.list_rows(root)
    return {"banner": str(runs.wild_banner(root, rows, all_runs, alerts)),
            "alerts": str(runs.alerts_list(alerts)), "runs": str(runs.runs_table(all_runs))}


@route("/runs")
async def runs_page(board: Board, request: Request) -> Response:
    try:
        parts = await _runs_parts(board.root)
    except MossError as e:
        return board.failed(e)
    return board.page("Runs", render("runs", **{k: Html(v) for k, v in parts.items()}))


@route("/runs/stream")
async def runs_stream(board: Board, request: Request) -> Response:
    async def gen():
        last: dict[str, str] = {}
        yield b": start\n\n"
        while not await request.is_disconnected():
            try:
                parts = await _runs_parts(board.root)
            except MossError as e:
                parts = {"banner": str(tag("p", e.message, class_="error"))}
            for k in ("banner", "alerts", "runs"):
                if k in parts and parts[k] != last.get(k):
                    yield sessions.sse(k, parts[k])
                    last[k] = parts[k]
            await asyncio.sleep(RUNS_TICK)
    return _sse(gen())


@route("/runs/metrics")
async def runs_metrics(board: Board, request: Request) -> Response:
    return JSONResponse(runs.chart_data(runs.manager(board.root)))


@route("/alerts/{aid}/resolve", methods=["POST"])
async def alert_resolve(board: Board, request: Request) -> Response:
    form = await request.form()
    alert_id = request.path_params["aid"]
    if not ALERT_ID.match(alert_id):
        return HTMLResponse(str(tag("span", f"bad alert id {alert_id!r}", class_="error")))
    choice = str(form.get("choice") or "")
    try:
        out = await asyncio.to_thread(runs.resolve, board.root, alert_id, choice)
    except MossError as e:
        return HTMLResponse(str(tag("span", e.message, class_="error")))
    if out.get("queued"):
        text = f"alert {alert_id}: {out['choice']!r} handed to the moss process watching run {out['run_id']}"
    else:
        text = f"alert {alert_id} resolved with {out.get('choice')!r}; run {out.get('run_status')}"
    return HTMLResponse(str(tag("span", text, class_="ok")))


# --- evaluations and batches


@route("/evals")
async def evals_page(board: Board, request: Request) -> Response:
    body = (evallist.evals_table(board.root) + tag("h2", "Batches") + evallist.batches_table(board.root))
    return board.page("Evaluations", body)


@route("/evals/compare")
async def eval_compare(board: Board, request: Request) -> Response:
    a = request.query_params.get("a") or ""
    b = request.query_params.get("b") or None
    kind = "batch" if request.query_params.get("kind") == "batch" else "eval"
    cell = request.query_params.get("cell") or None
    try:
        data = await evals.compare(board.root, a, b, kind, cell)
    except MossError as e:
        return board.failed(e)
    cells = data["cells"]
    fixed, broke = list(data.get("fixed") or []), list(data.get("broke") or [])
    p = data.get("p")
    note = data.get("note")
    body = render("compare", a=a, b=b or a, cell_a=cells[0], cell_b=cells[1], verdict=data.get("verdict"),
                  pairs=data.get("pairs"), fixed_n=len(fixed), broke_n=len(broke),
                  p=f"{p:.3g}" if isinstance(p, (int, float)) else "?",
                  note=tag("p", note, class_="note power") if isinstance(note, str) else Html(""),
                  fixed=evals.flip_links(board.root, a, b, cells, fixed, kind),
                  broke=evals.flip_links(board.root, a, b, cells, broke, kind))
    return board.page("Compare", body)


@route("/evals/{run}")
async def eval_page(board: Board, request: Request) -> Response:
    try:
        run = evals.check_name(request.path_params["run"], "eval run")
        rows = evals.rows_of(board.root, run)
    except MossError as e:
        return board.failed(e)
    cells = evals.results.summary(rows)
    options = join(tag("option", n, value=n) for n in evals.runs(board.root) if n != run)
    return board.page(f"Evaluation {run}",
                      render("eval", cells=evals.cells_table(cells), chart=evals.chart(cells), run=run,
                             options=options, attempts=evals.attempts_table(run, rows)))


@route("/evals/{run}/logs/{name}")
async def eval_log(board: Board, request: Request) -> Response:
    try:
        run = evals.check_name(request.path_params["run"], "eval run")
        name = evals.check_name(request.path_params["name"], "attempt")
        records = evals.log_records(board.root, run, name)
    except (MossError, FileNotFoundError) as e:
        return board.failed(e if isinstance(e, MossError) else MossError("no such attempt log", kind="not_found"))
    return board.page(f"Attempt {name}", _log_page(records))


@route("/batches/{name}")
async def batch_page(board: Board, request: Request) -> Response:
    try:
        name = evals.check_name(request.path_params["name"], "batch")
        rows = evals.batch_rows(board.root, name)
    except MossError as e:
        return board.failed(e)
    counts: dict[str, int] = {}
    for r in rows:
        counts[str(r.get("outcome") or "-")] = counts.get(str(r.get("outcome") or "-"), 0) + 1
    summary = f"{len(rows)} tasks: " + ", ".join(f"{n} {o}" for o, n in counts.items()) if rows else "no tasks yet"
    return board.page(f"Batch {name}", tag("p", summary, class_="summary") + evals.batch_table(name, rows))


@route("/batches/{name}/logs/{log}")
async def batch_log(board: Board, request: Request) -> Response:
    try:
        name = evals.check_name(request.path_params["name"], "batch")
        log = evals.check_name(request.path_params["log"], "task")
        records = evals.log_records(board.root, name, log, batch=True)
    except (MossError, FileNotFoundError) as e:
        return board.failed(e if isinstance(e, MossError) else MossError("no such task log", kind="not_found"))
    return board.page(f"Batch {name}: {log}", _log_page(records))


def _log_page(records: list[dict]) -> Html:
    """An attempt's or a task's log, as the live view shows a session's."""
    items = [f for f in (sessions.fragment(r) for r in records) if f is not None]
    return Html('<div id="stream">') + join(items) + Html("</div>")


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
