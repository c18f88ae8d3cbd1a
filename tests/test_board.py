"""`moss ui`'s rules against a hostile page, a hostile log and hostile URLs, over real HTTP.

Each test starts the real `moss ui --no-open` on a project and talks to it as a browser, or
as the page of another site open in the same browser, would: raw requests with whatever Host,
Origin and cookies such a page could send (tests/boardserver.py). What a user would notice is
checked: the status, the text, and whether anything reached a session's inbox."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest
from boardserver import URL, board, request, stream_until

SID = "k3v9qz2m"
HOSTILE = '<script>window.pwned=1</script><img src=x onerror="window.pwned=2">\revent: state\rdata: x'


def saved_session(project, sid=SID, text=HOSTILE):
    """A session as a finished `moss @agent` leaves it: checkpoint and log, with hostile text
    (what a model or a repository may write) in its task and its reply."""
    agent = project.root / ".moss" / "agent"
    (agent / "logs").mkdir(parents=True, exist_ok=True)
    (agent / f"session-{sid}.json").write_text(json.dumps(
        {"id": sid, "task": "task " + text, "state": "explorer", "machine": "v1", "role": "explorer",
         "turn": 1, "done": True, "reason": "answered"}))
    now = time.time()
    events = [{"event": "session_start", "session_id": sid, "root": str(project.root), "machine": "v1"},
              {"event": "turn_start", "turn": 1, "state": "explorer", "context_chars": 10, "working_memory": 0,
               "pending": 0},
              {"event": "response", "turn": 1, "state": "explorer", "text": "reply " + text},
              {"event": "command", "cmd": "view " + text, "ok": False, "turn": 1, "output": "out " + text},
              {"event": "session_end", "reason": "answered", "turns": 1}]
    with open(agent / "logs" / f"{sid}.jsonl", "w") as f:
        for i, e in enumerate(events):
            f.write(json.dumps({**e, "ts": now + i, "session": sid, "parent": None}) + "\n")


def test_no_token_no_board(project):
    """Without the token every address answers 403 and says how to get in; a wrong token too.
    The printed URL sets an HttpOnly, SameSite=Strict cookie and redirects to the page
    without the token, and the cookie opens every page after."""
    with board(project) as (url, port, token):
        for path in ("/", "/sessions", "/runs", "/runs/metrics", "/evals", "/static/board.js",
                     f"/sessions/{SID}/stream"):
            status, _, text = request(port, "GET", path)
            assert status == 403 and "no token" in text, path
        status, _, text = request(port, "GET", "/sessions?token=" + "x" * len(token))
        assert status == 403 and "wrong token" in text
        status, headers, _ = request(port, "GET", "/?token=" + token)
        assert status == 303 and headers["location"] == "/"
        cookie = headers["set-cookie"]
        assert cookie.startswith(f"moss_board_{port}={token};") and "HttpOnly" in cookie and "SameSite=Strict" in cookie
        status, headers, text = request(port, "GET", "/sessions", headers={"Cookie": f"moss_board_{port}={token}"})
        assert status == 200 and "<h1>Sessions</h1>" in text
        assert "script-src 'self'" in headers["content-security-policy"]
        assert "frame-ancestors 'none'" in headers["content-security-policy"]
        assert len(token) >= 43  # secrets.token_urlsafe(32): 32 random bytes
        assert headers["referrer-policy"] == "no-referrer"
        # the redirect never leaves the board, whatever path the link had
        status, headers, _ = request(port, "GET", "//evil.example/x?token=" + token)
        assert status == 303 and headers["location"] == "/evil.example/x"


# Paths a link to the board may carry, each of which a browser reads as `//evil.example`
# (another site) if the redirect after the token repeated it: a backslash counts as a slash, and
# tabs and newlines are dropped before the URL is read.
OFFSITE = ["//evil.example/x", "/\\evil.example/", "/%5Cevil.example/", "/%5C%5Cevil.example", "/\\/evil.example",
           "/%09/evil.example", "/%0A%2Fevil.example", "/%2F%2Fevil.example", "///evil.example"]


def test_the_redirect_after_the_token_never_leaves_the_board(project):
    """The printed URL with any of these paths redirects to a page of the board itself."""
    with board(project) as (url, port, token):
        for path in OFFSITE:
            status, headers, _ = request(port, "GET", f"{path}?token={token}")
            where = headers.get("location", "")
            as_a_browser_reads_it = re.sub(r"[\t\n\r]", "", where).replace("\\", "/")
            assert status == 303 and as_a_browser_reads_it.startswith("/"), (path, status, where)
            assert not as_a_browser_reads_it.startswith("//"), (path, where)
        assert request(port, "GET", f"/sessions?token={token}")[1]["location"] == "/sessions"


def test_a_rebound_host_name_is_refused(project):
    """DNS rebinding: a hostile site's name re-pointed at 127.0.0.1 reaches the port with its
    own Host header; the board refuses it even with the right cookie, and answers at
    127.0.0.1:PORT and localhost:PORT."""
    with board(project) as (url, port, token):
        cookie = {"Cookie": f"moss_board_{port}={token}"}
        for host in (f"evil.example:{port}", "evil.example", f"127.0.0.1:{port + 1}", f"127.0.0.1.evil.example:{port}"):
            status, _, text = request(port, "GET", "/sessions", host=host, headers=cookie)
            assert status == 403 and "Host" in text, host
        for host in (f"127.0.0.1:{port}", f"localhost:{port}"):
            assert request(port, "GET", "/sessions", host=host, headers=cookie)[0] == 200


def test_a_cross_site_post_changes_nothing(project):
    """A form or fetch from another site carries the browser's cookie at most (SameSite=Strict
    keeps even that away), never the board's Origin or its X-Moss-Token header: refused
    before it reaches the inbox. GET never changes anything (the POST routes answer 405 to it)."""
    saved_session(project)
    inbox = project.root / ".moss" / "agent" / "inbox" / f"{SID}.jsonl"
    with board(project) as (url, port, token):
        own = f"http://127.0.0.1:{port}"
        body = "text=rm+-rf+%2F"
        cases = [
            ({"Cookie": f"moss_board_{port}={token}", "Origin": "http://evil.example", "X-Moss-Token": token}, "Origin"),
            ({"Cookie": f"moss_board_{port}={token}", "X-Moss-Token": token}, "Origin"),
            ({"Cookie": f"moss_board_{port}={token}", "Origin": own}, "X-Moss-Token"),
            ({"Cookie": f"moss_board_{port}={token}", "Origin": own, "X-Moss-Token": "nope"}, "X-Moss-Token"),
            ({"Origin": own, "X-Moss-Token": token}, "no token"),
        ]
        for headers, why in cases:
            status, _, text = request(port, "POST", f"/sessions/{SID}/say", headers=headers, body=body)
            assert status == 403 and why in text, (headers, text)
        status, _, _ = request(port, "GET", f"/sessions/{SID}/say?text=x", headers={"Cookie": f"moss_board_{port}={token}"})
        assert status == 405
        assert request(port, "PUT", "/sessions", headers={"Cookie": f"moss_board_{port}={token}"})[0] == 405
        assert not inbox.exists()
        # the board's own page gets through the guard; the session has ended, so it says so
        ok = {"Cookie": f"moss_board_{port}={token}", "Origin": own, "X-Moss-Token": token}
        status, _, text = request(port, "POST", f"/sessions/{SID}/say", headers=ok, body=body)
        assert status == 200 and f"session {SID} is not running" in text
        assert not inbox.exists()


def test_hostile_text_in_a_log_is_shown_as_text(project):
    """A model's reply, a command and its output, and a task holding `<script>` and an
    `<img onerror>` reach the list, the session page and its live stream escaped: the user
    reads them, the browser never parses them as markup."""
    saved_session(project)
    with board(project) as (url, port, token):
        cookie = {"Cookie": f"moss_board_{port}={token}"}
        status, _, listing = request(port, "GET", "/sessions", headers=cookie)
        assert status == 200 and SID in listing
        status, _, page = request(port, "GET", f"/sessions/{SID}", headers=cookie)
        assert status == 200
        streamed = stream_until(port, f"/sessions/{SID}/stream", token, "not running</span>")
        for text in (listing, page, streamed):
            assert "<script>window" not in text and "<img src=x" not in text
        assert "&lt;script&gt;window.pwned=1&lt;/script&gt;" in page  # the task, and the timeline's rows
        assert "answered after 1 turns" in page  # the timeline as the agent script draws it
        assert "reply &lt;script&gt;window.pwned=1&lt;/script&gt;&lt;img src=x onerror=&quot;" in streamed
        assert "out &lt;script&gt;" in streamed
        assert "\r" not in streamed  # a CR ends an SSE line: "\revent: state" would be a field
        assert streamed.splitlines().count("event: state") == 1  # the stream's own, once


def test_ids_and_names_in_urls_never_leave_moss_folders(project, tmp_path):
    """A session id, eval run or attempt name in a URL is checked before it becomes a path
    (`..`, slashes, dots refused with a one-line reason), and a log that is a link planted in
    .moss/ is not followed: its target is never shown."""
    secret = tmp_path / "secret.txt"
    secret.write_text('{"event": "response", "text": "TOP SECRET"}\n')
    logs = project.root / ".moss" / "agent" / "logs"
    logs.mkdir(parents=True)
    os.symlink(secret, logs / "planted.jsonl")
    with board(project) as (url, port, token):
        cookie = {"Cookie": f"moss_board_{port}={token}"}
        for path in ("/sessions/..%2F..%2Fetc%2Fpasswd", "/sessions/a.b", "/evals/..", "/evals/x/logs/..%2F..%2Fsecret",
                     "/evals/.hidden"):
            status, _, text = request(port, "GET", path, headers=cookie)
            assert status in (400, 404) and "TOP SECRET" not in text and "root:" not in text, path
        status, _, text = request(port, "GET", "/sessions/a.b", headers=cookie)
        assert status == 400 and "bad session id" in text
        streamed = stream_until(port, "/sessions/planted/stream", token, "TOP SECRET", timeout=3)
        assert "TOP SECRET" not in streamed and "not running" in streamed


def test_another_address_only_with_a_warning_and_never_all_of_them(project):
    """`--host` serves another address, saying on stderr that other machines reach it; the
    board then answers requests naming that address (still with the token). 0.0.0.0 is refused
    in one line: the board answers only requests that name its address."""
    r = project.moss("ui", "--no-open", "--host", "0.0.0.0", timeout=30)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "give the one address" in r.stderr
    p = project.popen("ui", "--no-open", "--host", "127.0.0.2")
    try:
        line = p.stdout.readline()
        assert line.startswith("moss ui: http://127.0.0.2:")
        port, token = int(line.split(":")[3].split("/")[0]), line.rsplit("token=", 1)[1].strip()
        cookie = {"Cookie": f"moss_board_{port}={token}"}
        status, _, _ = request(port, "GET", "/sessions", host=f"127.0.0.2:{port}", headers=cookie, addr="127.0.0.2")
        assert status == 200
        assert request(port, "GET", "/sessions", host=f"127.0.0.2:{port}", addr="127.0.0.2")[0] == 403
    finally:
        p.terminate()
        _, err = p.communicate(timeout=10)
    assert "warning: moss ui on 127.0.0.2 answers to other machines too" in err


def fake_browser(tmp_path) -> tuple[Path, dict]:
    """$BROWSER as a script that notes the command line it was started with (what `ps` shows
    every local user), and the environment of a desktop session (a CI running this sets CI)."""
    opened = tmp_path / "opened.txt"
    fake = tmp_path / "browser.sh"
    fake.write_text(f'#!/bin/sh\necho "$@" >> {opened}\n')
    fake.chmod(0o755)
    return opened, {"BROWSER": str(fake), "DISPLAY": ":0", "CI": ""}


def wait_for(path: Path, timeout: float = 20) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not path.exists():
        time.sleep(0.05)
    return path.read_text()


def test_a_browser_opens_only_when_there_is_one_and_not_under_ci(project, tmp_path):
    """With a display, `moss ui` opens the board in the user's browser; under CI, with
    --no-open, or without a display it only prints the URL."""
    opened, env = fake_browser(tmp_path)
    with board(project, env=env, open_flag="") as (url, port, token):
        [seen] = wait_for(opened).split()
        assert seen.startswith(f"http://127.0.0.1:{port}/?code=")
    for extra, flag in (({"CI": "true"}, ""), ({}, "--no-open"), ({"DISPLAY": ""}, "")):
        opened.unlink(missing_ok=True)
        with board(project, env={**env, **extra}, open_flag=flag) as (url, port, token):
            # serving: the browser's thread starts before the server does
            assert request(port, "GET", "/?token=" + token)[0] == 303
        assert not opened.exists(), (extra, flag)


class OpenedBoard:
    """`moss ui` with a display and a $BROWSER that notes its command line (fake_browser), as
    its user starts it: the port and token it printed, the browser's command line, and, once it
    stopped, what it wrote on stderr."""

    def __init__(self, project, tmp_path):
        opened, env = fake_browser(tmp_path)
        self.proc, self.stderr = project.popen("ui", env=env), ""
        try:
            seen = ""
            while (m := URL.search(seen)) is None:
                line = self.proc.stdout.readline()
                assert line, self.proc.stderr.read()
                seen += line
            self.port, self.token = int(m.group(2)), m.group(3)
            self.argv = wait_for(opened)
        except BaseException:
            self.__exit__()
            raise

    def __enter__(self) -> "OpenedBoard":
        return self

    def __exit__(self, *exc) -> None:
        self.proc.terminate()
        _, self.stderr = self.proc.communicate(timeout=10)


def test_the_browser_is_handed_a_one_time_code_never_the_token(project, tmp_path):
    """The browser's command line (and every other one on the machine, moss's own too) holds no
    token: only a code, which the board exchanges once for the cookie. A local user who read it
    from `ps` and presents it again is refused, and the terminal says the code came back."""
    with OpenedBoard(project, tmp_path) as ui:
        port, token, argv = ui.port, ui.token, ui.argv
        assert token not in argv
        [code] = re.findall(r"\?code=([A-Za-z0-9_-]+)$", argv.strip())
        assert not [pid for pid, cmdline in command_lines() if token in cmdline]
        # the opened browser's first request: the cookie, and the page without the code
        status, headers, _ = request(port, "GET", f"/sessions?code={code}")
        assert status == 303 and headers["location"] == "/sessions"
        assert headers["set-cookie"].startswith(f"moss_board_{port}={token};")
        assert request(port, "GET", "/sessions", headers={"Cookie": f"moss_board_{port}={token}"})[0] == 200
        # the same code again (read from the process list): refused, no cookie
        status, headers, text = request(port, "GET", f"/?code={code}")
        assert status == 403 and "used already" in text and "set-cookie" not in headers
        status, _, text = request(port, "GET", "/?code=" + "x" * len(code))
        assert status == 403 and "wrong code" in text
    assert "one-time code was presented again and refused" in ui.stderr


def command_lines():
    """(pid, command line) of every process this user can see, as `ps` shows them."""
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                yield int(d.name), (d / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
            except OSError:
                pass


WATCHER = r'''
moss.access.set("full")
local r = moss.runs.start{ cmd = "python3 nan.py", name = "nan", alerts = { "loss is nan" } }
print(r.id)
local ended
local deadline = os.time() + 60
while os.time() <= deadline and not ended do
  local ev = moss.runs.wait(1)
  if ev and ev.type == "run" and (ev.status == "stopped" or ev.status == "failed" or ev.status == "finished") then
    ended = ev
  end
end
print(moss.json.encode({ ended = ended, alerts = moss.runs.alerts{ run_id = r.id } }))
'''


def test_an_alert_resolved_on_the_board_reaches_the_process_watching_the_run(project):
    """A script's run logs a NaN loss and hangs; the script's moss process watches it. The
    board's "stop" on that alert is handed to that process (it owns the run's record), which
    resolves it and stops the run: the script sees the run stopped and the alert resolved
    with "stop", and the record on disk keeps it."""
    project.write("nan.py", "import time\nprint('step 0 loss nan', flush=True)\ntime.sleep(120)\n")
    project.script("watch", WATCHER)
    p = project.popen("@watch", "--allow-full")
    try:
        rid = p.stdout.readline().strip()
        record = project.root / ".moss" / "agent" / "runs" / f"{rid}.json"
        deadline, alerts = time.monotonic() + 30, []
        while time.monotonic() < deadline and not alerts:
            alerts = json.loads(record.read_text())["alerts"] if record.exists() else []
            time.sleep(0.05)
        assert alerts and alerts[0]["status"] == "pending", p.stderr.read() if p.poll() is not None else rid
        with board(project) as (url, port, token):
            own = {"Cookie": f"moss_board_{port}={token}", "Origin": f"http://127.0.0.1:{port}", "X-Moss-Token": token}
            status, _, text = request(port, "POST", f"/alerts/{alerts[0]['id']}/resolve", headers=own,
                                      body="choice=stop")
            assert status == 200 and "handed to the moss process watching run " + rid in text
            out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, err
    res = json.loads(out.splitlines()[-1])
    assert res["ended"]["status"] == "stopped"
    assert [(a["status"], a["choice"]) for a in res["alerts"]] == [("resolved", "stop")]
    assert [(a["status"], a["choice"]) for a in json.loads(record.read_text())["alerts"]] == [("resolved", "stop")]


def test_metrics_are_the_numbers_a_log_prints_beside_a_step():
    """What the runs page charts: on each log line with a step (or iter, epoch) number, every
    `name value` / `name=value` pair; NaN and inf become gaps; lines without a step (the
    command line, a banner) count for nothing."""
    from moss.board.runs import metrics_of

    log = ("args ['--lr=0.1']\nstarting, batch 32\nstep 0 loss 2.5 acc=0.1\nstep 1 loss nan acc=0.2\n"
           "epoch: 2, val_loss: 1.25e-1, lr=1e-3\n")
    assert metrics_of(log) == {"loss": [(0, 2.5), (1, None)], "acc": [(0, 0.1), (1, 0.2)],
                               "val_loss": [(2, 0.125)], "lr": [(2, 0.001)]}


def test_a_taken_port_is_said_in_one_line(project):
    """`moss ui --port N` on a port something else holds: one line naming it and the flag, exit 2."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        r = project.moss("ui", "--no-open", "--port", str(port), timeout=30)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and f"cannot listen on 127.0.0.1:{port}" in r.stderr and "--port" in r.stderr


def test_a_live_file_planted_as_a_link_is_never_written_through(project, tmp_path):
    """The side file a streaming reply is kept in (.moss/agent/live/ID.json) is the
    repository's to plant: a link there to a file outside is replaced by the reply's text,
    never written through, and removed (the link itself) when the reply ends; a `live` folder
    linked outside gets nothing, and the reply goes on without its live view. The board never
    reads through such a link either."""
    from moss import live

    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / "secret.txt"
    target.write_text("host secret\n")
    folder = project.root / ".moss" / "agent" / "live"
    folder.mkdir(parents=True)
    (folder / "s1.json").symlink_to(target)
    assert live.read(project.root, "s1") is None  # the board shows nothing read through the link
    reply = live.LiveReply(project.root, "s1")
    reply.feed("the model's words")
    assert target.read_text() == "host secret\n"
    assert not (folder / "s1.json").is_symlink()
    assert live.read(project.root, "s1")["text"] == "the model's words"
    reply.end()
    assert not os.path.lexists(folder / "s1.json") and target.read_text() == "host secret\n"

    (folder / "s2.json").symlink_to(target)  # planted while a reply streams: end() removes the link only
    reply = live.LiveReply(project.root, "s2")
    reply.feed("more words")
    (folder / "s2.json").unlink()
    (folder / "s2.json").symlink_to(target)
    reply.end()
    assert not os.path.lexists(folder / "s2.json") and target.read_text() == "host secret\n"

    for name in os.listdir(folder):
        os.unlink(folder / name)
    folder.rmdir()
    folder.symlink_to(outside, target_is_directory=True)
    reply = live.LiveReply(project.root, "s3")
    reply.feed("words")  # refused, silently: the session goes on
    reply.end()
    assert sorted(os.listdir(outside)) == ["secret.txt"]


def test_a_session_with_a_linked_live_folder_ends_as_usual(project, api):
    """A repository that plants `.moss/agent/live` as a link to a folder outside does not stop a
    session: its reply streams (nothing lands outside) and it answers as it would anyway."""
    outside = project.root.parent / "elsewhere"
    outside.mkdir()
    (project.root / ".moss" / "agent").mkdir(parents=True)
    (project.root / ".moss" / "agent" / "live").symlink_to(outside, target_is_directory=True)
    api.push("$(answer it is built with make)")
    r = project.moss("@agent", "--provider", "anthropic", "-n", "how is this built?", env=api.env(), timeout=120)
    assert r.returncode == 0, r.stderr
    assert "it is built with make" in r.stdout
    assert os.listdir(outside) == []
    assert api.requests[-1].body.get("stream") is True  # the reply was streamed, to no live file


def test_a_stopped_sessions_leftover_live_file_is_not_shown(project):
    """A live file a killed session left behind (it never ended its reply) is not shown as a
    reply streaming: the page says the session is not running and shows its logged reply."""
    saved_session(project, text="plain")
    (project.root / ".moss/agent/live").mkdir(parents=True)
    (project.root / f".moss/agent/live/{SID}.json").write_text(json.dumps({"reply": 1, "text": "half a repl"}))
    with board(project) as (url, port, token):
        streamed = stream_until(port, f"/sessions/{SID}/stream", token, "not running</span>")
        assert "reply plain" in streamed and "not running" in streamed
        assert "half a repl" not in streamed and "event: live" not in streamed


def write_batch(project, name: str, rows: list[dict], logs: dict[str, list[dict]]) -> None:
    """A batch's results as `moss batch` leaves them under .moss/batch/: NAME.jsonl and each
    task's session log in NAME.logs/."""
    d = project.root / ".moss" / "batch"
    (d / f"{name}.logs").mkdir(parents=True, exist_ok=True)
    with open(d / f"{name}.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    for log, records in logs.items():
        (d / f"{name}.logs" / f"{log}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def test_a_batch_is_listed_with_its_table_patches_and_logs(project, tmp_path):
    """A batch's results file under .moss/batch/ is listed on the evaluations page; its page
    is `moss batch status`'s table (each task's last line, in the tasks file's order: task,
    outcome, turns, tokens, cost, patch size) with each patch shown escaped under its size and a
    link to the task's session log. A results file planted as a link is not listed, and a name
    with a path in it is refused."""
    patch = ("diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n@@ -1 +1 @@\n-return a - b\n"
             "+return a + b  # <script>window.pwned=1</script>\n")
    stat = {"files": 1, "added": 1, "removed": 1, "binary": 0, "bytes": len(patch)}
    base = {"cell": "batch", "trial": 1, "kind": "agent"}
    rows = [
        {**base, "key": "count|batch|1", "id": "count", "task": "count", "place": 2, "outcome": "infrastructure",
         "reason": "infra_error"},
        {**base, "key": "fix-add|batch|1", "id": "fix-add", "task": "fix-add", "place": 1, "outcome": "done",
         "reason": "answered", "turns": 3, "tokens": 12345, "cost": 0.0123, "patch": patch, "patch_stat": stat,
         "log": "x"},
        {**base, "key": "count|batch|1", "id": "count", "task": "count", "place": 2, "outcome": "done",
         "reason": "answered", "turns": 1, "tokens": 800, "cost": 0.001, "patch": "",
         "patch_stat": {**stat, "files": 0, "added": 0, "removed": 0}, "log": "x"},
        {**base, "key": "never|batch|1", "id": "never", "task": "never", "place": 3, "outcome": "not started",
         "reason": "usage"},
    ]
    write_batch(project, "20261126-020000-bat", rows, {"fix-add--batch--1": [
        {"event": "response", "ts": time.time(), "text": "fixed it <script>window.pwned=2</script>"}]})
    outside = tmp_path / "elsewhere.jsonl"
    outside.write_text(json.dumps(rows[1]) + "\n")
    (project.root / ".moss/batch/linked.jsonl").symlink_to(outside)
    with board(project) as (url, port, token):
        cookie = {"Cookie": f"moss_board_{port}={token}"}
        status, _, listing = request(port, "GET", "/evals", headers=cookie)
        assert status == 200 and 'href="/batches/20261126-020000-bat"' in listing
        assert "linked" not in listing
        status, _, page = request(port, "GET", "/batches/20261126-020000-bat", headers=cookie)
        assert status == 200
        cells = [re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
                 for row in re.findall(r"<tr class=\"outcome-[^\"]*\">(.*?)</tr>", page, re.S)]
        assert [c[:5] for c in cells] == [["fix-add", "done", "3", "12,345", "$0.0123"],
                                          ["count", "done", "1", "800", "$0.0010"],
                                          ["never", "not started", "-", "-", "-"]]
        assert "<summary>1 file +1 -1</summary>" in cells[0][5]
        assert "+return a + b  # &lt;script&gt;window.pwned=1&lt;/script&gt;" in cells[0][5]
        assert "none" in cells[1][5] and "-" in cells[2][5]
        assert "<script>window" not in page
        assert 'href="/batches/20261126-020000-bat/logs/fix-add--batch--1"' in cells[0][6] and "href" not in cells[2][6]
        assert "3 tasks: 2 done, 1 not started" in page
        status, _, log = request(port, "GET", "/batches/20261126-020000-bat/logs/fix-add--batch--1", headers=cookie)
        assert status == 200 and "fixed it &lt;script&gt;window.pwned=2&lt;/script&gt;" in log
        assert request(port, "GET", "/batches/linked", headers=cookie)[0] == 400
        assert request(port, "GET", "/batches/nope", headers=cookie)[0] == 404
        assert request(port, "GET", "/batches/..%2F..%2Fetc", headers=cookie)[0] in (400, 404)
        status, _, text = request(port, "GET", "/batches/20261126-020000-bat/logs/..", headers=cookie)
        assert status == 400 and "bad task" in text


def test_the_child_agents_are_a_tree_linked_to_their_pages(project):
    """A session that delegated: two children, the first with a child of its own. Its page
    draws them as a nested list — each child's id linked to its own page, with its role and
    state, its grandchild inside it — and a child's hostile answer stays text."""
    from html.parser import HTMLParser

    saved_session(project, text="plain")
    agent = project.root / ".moss" / "agent"
    for cid, role, answer in ((f"{SID}-1", "explorer", "found it <script>window.pwned=1</script>"),
                              (f"{SID}-2", "auditor", "all good"), (f"{SID}-1-1", "explorer", "deeper")):
        (agent / f"session-{cid}.json").write_text(json.dumps(
            {"id": cid, "task": "look", "state": role, "machine": "v1", "role": role, "turn": 2, "done": True,
             "reason": "answered", "answer": answer}))

    class Tree(HTMLParser):
        def __init__(self):
            super().__init__()
            self.depth, self.inside, self.items, self.links = 0, False, [], {}

        def handle_starttag(self, name, attrs):
            a = dict(attrs)
            if name == "ul" and (self.inside or a.get("class") == "tree"):
                self.inside = True
                self.depth += 1
            elif name == "li" and self.inside:
                self.items.append((self.depth, a.get("data-id")))
            elif name == "a" and self.inside and self.items:
                self.links[self.items[-1][1]] = a.get("href")

        def handle_endtag(self, name):
            if name == "ul" and self.inside:
                self.depth -= 1
                self.inside = self.depth > 0

    with board(project) as (url, port, token):
        status, _, page = request(port, "GET", f"/sessions/{SID}", headers={"Cookie": f"moss_board_{port}={token}"})
    assert status == 200 and "<h2>Child agents</h2>" in page
    tree = Tree()
    tree.feed(page)
    assert tree.items == [(1, f"{SID}-1"), (2, f"{SID}-1-1"), (1, f"{SID}-2")]
    assert tree.links == {c: f"/sessions/{c}" for c in (f"{SID}-1", f"{SID}-1-1", f"{SID}-2")}
    assert '<span class="role"> auditor</span><span class="state answered">answered</span>' in page
    assert "found it &lt;script&gt;window.pwned=1&lt;/script&gt;" in page and "<script>window" not in page


def test_only_a_sessions_own_replies_reach_its_live_file(project, api):
    """A session makes a quiet call (what its inbox does to classify a message) and then its
    own reply, both streaming slowly: its live file only ever holds the reply's words, never the
    quiet call's, and is gone once the reply ended."""
    from fakeapi import slow

    project.script("twice", """
        moss.session.bind("quiet001")
        moss.llm.chat({prompt = "classify this message", quiet = true, label = "agent/inbox"})
        local r = moss.llm.chat({prompt = "now answer", label = "agent/agent"})
        print(r.text)
    """)
    api.push(slow("QUIET " * 10, chunk_delay=0.1), slow("LOUD " * 10, chunk_delay=0.1))
    live = project.root / ".moss/agent/live/quiet001.json"
    p = project.popen("@twice", "--provider", "anthropic", env=api.env())
    seen = set()
    while p.poll() is None:  # every version of the file there is while the process runs
        try:
            seen.add(json.loads(live.read_text())["text"].split()[0])
        except (OSError, ValueError, KeyError, IndexError):
            pass
        time.sleep(0.02)
    out = p.stdout.read()
    assert p.returncode == 0 and "LOUD LOUD" in out
    assert seen == {"LOUD"} and len(api.requests) == 2
    assert not live.exists()


def test_a_long_replys_live_file_keeps_its_last_words(project):
    """A reply longer than the live file's cap: the file holds its last 16,000 characters
    and says how many came before them, so the board shows where the reply is now."""
    from moss import live

    reply = live.LiveReply(project.root, "long01")
    reply.feed("x" * 30_000)
    for i in range(2_000):
        reply.feed(f" w{i}")
    reply.last = 0.0  # the next delta is written at once (writes are at most 4 a second)
    reply.feed(" end")
    data = live.read(project.root, "long01")
    assert len(data["text"]) == live.MAX_CHARS and data["text"].endswith("w1999 end")
    assert data["chars"] == 30_000 + sum(len(f" w{i}") for i in range(2_000)) + 4
    assert data["cut"] == data["chars"] - live.MAX_CHARS
    reply.end()
    assert live.read(project.root, "long01") is None


def test_a_projects_python_files_never_run_in_what_the_board_starts(project, tmp_path, monkeypatch):
    """The board lists sessions by running the agent script's `sessions` entry as a new moss
    process in the project. A cloned project with its own json.py, click.py, anthropic.py and
    rich.py at the top: that process imports moss's own modules, never those (each would leave
    a marker file), and the list comes back."""
    import asyncio

    from moss.board import sessions
    from test_eval import plant_modules

    marker = tmp_path / "pwned"
    plant_modules(project.root, marker)
    saved_session(project, text="plain")
    for k in ("HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME"):
        monkeypatch.setenv(k, project.env[k])
    rows = asyncio.run(sessions.list_rows(project.root))
    assert [r["id"] for r in rows] == [SID]
    assert not marker.exists()


def test_the_wild_loop_banner_shows_the_stage_the_loop_is_in_now(project):
    """A Wild Loop whose last prompt was an alert that has since been resolved (no run is
    left with one open), now waiting in its running stage: the banner names that stage and
    no open alert, not the alert it answered last ("Wild Loop: alert" beside "open alerts: 0")."""
    agent = project.root / ".moss" / "agent"
    (agent / "logs").mkdir(parents=True)
    (agent / "session-w1ld0001.json").write_text(json.dumps(
        {"id": "w1ld0001", "task": "train", "state": "running", "machine": "wild", "role": "explorer", "turn": 3}))
    now = time.time()
    with open(agent / "logs" / "w1ld0001.jsonl", "w") as f:
        for i, rec in enumerate([{"event": "session_start", "machine": "wild"},
                                 {"event": "wild_prompt", "kind": "explore", "turn": 1, "iteration": 1},
                                 {"event": "wild_prompt", "kind": "alert", "turn": 3, "iteration": 1, "alert": "a1"}]):
            f.write(json.dumps({**rec, "ts": now + i, "session": "w1ld0001"}) + "\n")
    with board(project) as (url, port, token):
        status, _, text = request(port, "GET", "/runs", headers={"Cookie": f"moss_board_{port}={token}"})
    assert status == 200
    assert "Wild Loop: <b>running</b>" in text and "iteration <b>1</b>" in text
    assert '<b id="open-alerts">0</b>' in text and "Wild Loop: <b>alert</b>" not in text


def _guard(clock=None):
    """The board's guard around an app that notes what reached it, as `moss ui` builds it."""
    from moss.board.security import Guard

    reached = []

    async def app(scope, receive, send):
        reached.append(scope["type"])

    kw = {"clock": clock} if clock else {}
    return Guard(app, "t" * 43, ["127.0.0.1:8000", "localhost:8000"], 8000, **kw), reached


def _asgi(guard, scope: dict) -> list[dict]:
    """What `guard` sends for one request of `scope` (a websocket asks to connect first)."""
    import asyncio

    sent = []

    async def receive():
        return {"type": "websocket.connect"} if scope["type"] == "websocket" else {"type": "http.request"}

    async def send(message):
        sent.append(message)

    asyncio.run(guard({"headers": [], "query_string": b"", "path": "/", **scope}, receive, send))
    return sent


def test_a_websocket_passes_the_checks_a_post_does_and_unknown_requests_reach_nothing():
    """No route takes a websocket today; one added later is already behind the guard: without
    the cookie, from another Origin or under a rebound Host name it is closed before it is
    accepted (the server answers 403). A kind of request the guard does not know reaches nothing."""
    guard, reached = _guard()
    good = [(b"host", b"127.0.0.1:8000"), (b"origin", b"http://127.0.0.1:8000"),
            (b"cookie", b"moss_board_8000=" + b"t" * 43)]
    for bad in ([h for h in good if h[0] != b"cookie"],
                [h if h[0] != b"origin" else (b"origin", b"http://evil.example") for h in good],
                [h if h[0] != b"host" else (b"host", b"evil.example:8000") for h in good],
                [h if h[0] != b"cookie" else (b"cookie", b"moss_board_8000=wrong") for h in good]):
        assert _asgi(guard, {"type": "websocket", "headers": bad}) == [{"type": "websocket.close", "code": 1008}]
    assert reached == []
    for kind in ("webtransport", "http.request", ""):
        assert _asgi(guard, {"type": kind, "headers": good}) == []
    assert reached == []
    _asgi(guard, {"type": "websocket", "headers": good})
    assert reached == ["websocket"]


def test_a_one_time_code_expires():
    """A code not exchanged within a minute is refused (the browser was not opened, or hung)."""
    from moss.board.security import CODE_TTL

    now = [1000.0]
    guard, _ = _guard(clock=lambda: now[0])
    code, late = guard.one_time_code(), guard.one_time_code()
    host = [(b"host", b"127.0.0.1:8000")]
    [start, _body] = _asgi(guard, {"type": "http", "method": "GET", "headers": host,
                                   "query_string": f"code={code}".encode()})
    assert start["status"] == 303
    now[0] += CODE_TTL + 1
    [start, body] = _asgi(guard, {"type": "http", "method": "GET", "headers": host,
                                  "query_string": f"code={late}".encode()})
    assert start["status"] == 403 and b"expired" in body["body"]


@pytest.mark.skipif(os.geteuid() != 0, reason="presenting the code as another user needs root to become one")
def test_a_one_time_code_from_another_users_connection_is_refused(project, tmp_path):
    """Another local user who reads the code from `ps` and races the browser to the board is
    refused (the connection's socket is theirs), and the code stays good for the browser."""
    import subprocess

    with OpenedBoard(project, tmp_path) as ui:
        port = ui.port
        [code] = re.findall(r"\?code=([A-Za-z0-9_-]+)$", ui.argv.strip())
        other = subprocess.run(
            ["/usr/bin/python3", "-I", "-c",
             "import http.client, sys\n"
             f"c = http.client.HTTPConnection('127.0.0.1', {port}, timeout=30)\n"
             f"c.request('GET', '/?code={code}', headers={{'Host': '127.0.0.1:{port}'}})\n"
             "r = c.getresponse(); print(r.status, r.read().decode())"],
            user=65534, group=65534, cwd="/", capture_output=True, text=True, timeout=60)
        assert other.stdout.startswith("403 ") and "user who started" in other.stdout, other
        status, headers, _ = request(port, "GET", f"/?code={code}")
        assert status == 303 and "set-cookie" in headers
