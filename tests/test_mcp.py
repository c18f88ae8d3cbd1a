"""MCP both ways, with the official SDK and real subprocesses.

moss as a server: a real `mcp` Client talks to `moss mcp serve` over stdio and over
streamable HTTP on 127.0.0.1; the agents it runs talk to tests/fakeapi.py (its env is passed
to the server process). moss as a client: tests/mcpserver.py, started over stdio from a Lua
script and through $(mcp ...) in an agent session.
"""

from __future__ import annotations

from moss.sessions import read_checkpoint

import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from agentmodel import Model
from conftest import FIXTURES, STORY_PROVIDER
from fakeapi import last_user_text, slow, system_text
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

SERVER = str(Path(__file__).resolve().parent / "mcpserver.py")


# -- helpers -----------------------------------------------------------------------------

def server_env(project, api=None, provider: str | None = STORY_PROVIDER, **extra) -> dict:
    """The server's environment: the project's, pointed at `api` for `provider` (the sessions
    the server starts are new interpreters that import that provider's SDK; see STORY_PROVIDER)."""
    env = dict(project.env)
    if api is not None:
        env.update(api.env(provider))
    env.update(extra)
    return env


def stdio_params(project, api=None, **extra) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", "moss", "mcp", "serve"],
                                 env=server_env(project, api, **extra), cwd=str(project.root))


def stdio(project, api=None, **extra):
    """A Client for `moss mcp serve` over stdio; the server's stderr goes to a file."""
    errlog = open(project.root.parent / "server-stderr.log", "a")
    return Client(stdio_client(stdio_params(project, api, **extra), errlog=errlog))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class HttpServer:
    def __init__(self, project, api=None):
        self.port = free_port()
        self.log = open(project.root.parent / "http-server.log", "w")
        self.proc = subprocess.Popen([sys.executable, "-m", "moss", "mcp", "serve", "--http", str(self.port)],
                                     cwd=project.root, env=server_env(project, api), stdin=subprocess.DEVNULL,
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                break
            except OSError:
                assert self.proc.poll() is None, open(self.log.name).read()
                time.sleep(0.1)
        self.url = f"http://127.0.0.1:{self.port}/mcp"

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


@pytest.fixture
def crate(project):
    import shutil

    shutil.copytree(FIXTURES / "rustcrate", project.root, dirs_exist_ok=True)
    subprocess.run(["git", "init", "-q"], cwd=project.root, check=True)
    return project


def text(result) -> str:
    return "\n".join(getattr(b, "text", "") for b in result.content)


async def run_agent_with_progress(client, task, **args):
    progress = []

    async def on_progress(p, total, message):
        progress.append((p, total, message))

    started = time.monotonic()
    result = await client.call_tool("run_agent", {"task": task, **args}, progress_callback=on_progress)
    return result, progress, time.monotonic() - started


def check_agent_result(result, progress):
    assert not result.is_error, text(result)
    out = result.structured_content
    assert out["answer"] == "13" and out["success"] is True and out["reason"] == "answered"
    assert out["turns"] == 4 and out["exit_code"] == 0
    sid = out["session_id"]
    # One progress notification per turn, counting up to the turn limit, naming the session.
    assert [p for p, _, _ in progress] == [1, 2, 3, 4]
    assert all(total == 16 and f"session {sid}" in msg for _, total, msg in progress)
    return sid


# -- moss as an MCP server -------------------------------------------------------------------

TOOLS = {"run_agent", "resume_session", "send_message", "list_sessions", "show_session", "view", "text_search"}


def test_stdio_client_lists_tools_and_runs_an_agent_with_progress(crate, api):
    api.push(*([Model("provider")] * 10))
    times = {}

    async def main():
        t0 = time.monotonic()
        async with stdio(crate, api) as client:
            times["connect"] = time.monotonic() - t0
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(tools) == TOOLS
            assert "task" in tools["run_agent"].input_schema["properties"]
            result, progress, times["run_agent"] = await run_agent_with_progress(
                client, "How many variants does Provider have?", machine="v2")
            sid = check_agent_result(result, progress)
            listed = (await client.call_tool("list_sessions", {})).structured_content["sessions"]
            assert [s["id"] for s in listed] == [sid] and listed[0]["reason"] == "answered"
            assert listed[0]["success"] is True and listed[0]["answer"]  # the answer, not only that there was one
            shown = (await client.call_tool("show_session", {"session_id": sid})).structured_content
            assert shown["session"]["turn"] == 4 and "session_end" in shown["timeline"]
            t1 = time.monotonic()
            view = await client.call_tool("view", {"target": "llm.rs/Provider"})
            times["view"] = time.monotonic() - t1
            assert not view.is_error and "enum Provider" in text(view)
            found = await client.call_tool("text_search", {"pattern": "enum Provider", "only": ["*.rs"]})
            assert "src/workflow/llm.rs" in text(found)

    anyio.run(main)
    print(f"\nstdio: connect {times['connect']:.2f}s, run_agent (4 turns) {times['run_agent']:.2f}s, "
          f"view {times['view'] * 1000:.0f}ms")


def test_streamable_http_on_loopback_runs_an_agent_and_refuses_foreign_hosts(crate, api):
    api.push(*([Model("provider")] * 10))
    server = HttpServer(crate, api)
    times = {}
    try:
        async def main():
            t0 = time.monotonic()
            async with Client(server.url) as client:
                times["connect"] = time.monotonic() - t0
                assert {t.name for t in (await client.list_tools()).tools} == TOOLS
                result, progress, times["run_agent"] = await run_agent_with_progress(
                    client, "How many variants does Provider have?", machine="v2")
                check_agent_result(result, progress)

        anyio.run(main)
        # Bound to loopback only: the port is not open on another address of this machine.
        assert _only_loopback(server.port)
        # A page elsewhere that rebinds its DNS name to 127.0.0.1 sends its own Host: refused.
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        conn.request("POST", "/mcp", body, {"Host": "evil.example:80", "Content-Type": "application/json",
                                            "Accept": "application/json, text/event-stream"})
        assert conn.getresponse().status == 421
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        conn.request("POST", "/mcp", body, {"Host": f"127.0.0.1:{server.port}", "Origin": "http://evil.example",
                                            "Content-Type": "application/json",
                                            "Accept": "application/json, text/event-stream"})
        assert conn.getresponse().status in (400, 403)
    finally:
        server.close()
    print(f"\nhttp: connect {times['connect']:.2f}s, run_agent (4 turns) {times['run_agent']:.2f}s")


def _only_loopback(port: int) -> bool:
    """Nothing answers on this port at a non-loopback address of this host."""
    addrs = set()
    try:
        addrs = {ai[4][0] for ai in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)}
    except OSError:
        pass
    for ip in addrs - {"127.0.0.1", "127.0.1.1"}:
        try:
            socket.create_connection((ip, port), timeout=0.5).close()
            return False
        except OSError:
            pass
    return True


@pytest.mark.slow
def test_cancelling_run_agent_interrupts_the_agent_and_the_session_resumes(crate, api):
    model = Model("provider")
    api.push(model, slow("never seen", delay=30))  # turn 2 hangs in the model call
    seen = {}

    async def main():
        async with stdio(crate, api) as client:
            progress = []

            async def on_progress(p, total, message):
                progress.append((p, message))
                if p == 2:
                    seen["sid"] = message.split()[1].rstrip(":")
                    tg.cancel_scope.cancel()  # what an IDE's stop button does

            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: client.call_tool("run_agent", {"task": "How many variants does Provider have?",
                                                                    "machine": "v2"},
                                                       progress_callback=on_progress))
            seen["cancelled_at"] = time.monotonic()
            # The server stays up and answers after the cancellation.
            assert set(t.name for t in (await client.list_tools()).tools) == TOOLS
            # The agent got SIGINT, saved and stopped: its log ends `interrupted`.
            log = crate.root / ".moss" / "agent" / "logs" / f"{seen['sid']}.jsonl"
            for _ in range(150):
                events = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
                if events and events[-1].get("event") == "session_end":
                    break
                await anyio.sleep(0.1)
            assert events[-1] == {**events[-1], "event": "session_end", "reason": "interrupted"}
            seen["stopped_after"] = time.monotonic() - seen["cancelled_at"]
            # Its listing tells the truth once the agent has exited: interrupted, not running.
            for _ in range(150):
                listed = (await client.call_tool("list_sessions", {})).structured_content["sessions"]
                row = next(r for r in listed if r["id"] == seen["sid"])
                if not row["running"]:
                    break
                await anyio.sleep(0.1)
            assert row["reason"] == "interrupted" and row["running"] is False
            # ... and a message for it is refused, naming its state, rather than lost.
            sent = await client.call_tool("send_message", {"session_id": seen["sid"], "text": "hello?"})
            assert sent.is_error and "interrupted" in text(sent)

    anyio.run(main)
    sid = seen["sid"]
    checkpoint = read_checkpoint((crate.root / ".moss" / "agent" / f"session-{sid}.json"))  # base + journal
    assert checkpoint["turn"] == 1 and not checkpoint.get("done")
    assert checkpoint["reason"] == "interrupted" and checkpoint["success"] is False
    assert not list((crate.root / ".moss" / "agent" / "running").glob("*.json"))  # no stale marker
    listed = crate.moss("sessions", "list")
    assert listed.returncode == 0 and [ln.split("\t")[4] for ln in listed.stdout.splitlines()[1:]] == ["interrupted"]
    # `--resume` goes on from the checkpoint and answers.
    api.replies.clear()
    api.push(*([model] * 10))
    r = crate.moss("@agent", "--resume", sid, "-n", "--output-format", "json", env=api.env())
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["answer"] == "13" and out["session_id"] == sid
    print(f"\nthe agent stopped {seen['stopped_after']:.2f}s after the cancel")


def test_resume_and_send_message_through_mcp(crate, api):
    model = Model("provider")
    api.push(model)

    async def main():
        async with stdio(crate, api) as client:
            r = await client.call_tool("run_agent", {"task": "How many variants does Provider have?",
                                                     "machine": "v2", "max_turns": 1})
            out = r.structured_content
            assert out["reason"] == "max_turns" and out["success"] is False
            sid = out["session_id"]
            # The session has ended: a message for it is refused, naming how it ended (it
            # would never be read); resume_session takes one.
            sent = await client.call_tool("send_message", {"session_id": sid, "text": "look in src/llm.rs"})
            assert sent.is_error and "max_turns" in text(sent) and "--resume" in text(sent)
            assert not (crate.root / ".moss/agent/inbox" / f"{sid}.jsonl").exists()
            # Without an id, the latest running session; there is none: a clear error, not a crash.
            none = await client.call_tool("send_message", {"text": "hello"})
            assert none.is_error and "no moss session is running" in text(none)
            api.push(*([model] * 10))
            again = await client.call_tool("resume_session", {"session_id": sid, "max_turns": 8})
            assert not again.is_error, text(again)
            assert again.structured_content["answer"] == "13" and again.structured_content["session_id"] == sid

    anyio.run(main)


def test_errors_come_back_as_error_results_and_paths_stay_inside_the_project(crate, api, tmp_path):
    (tmp_path / "secret.txt").write_text("TOP SECRET\n")
    os.symlink(tmp_path / "secret.txt", crate.root / "link.txt")

    async def main():
        async with stdio(crate, api) as client:
            async def err(tool, args, needle):
                r = await client.call_tool(tool, args)
                assert r.is_error, (tool, args, text(r))
                assert needle in text(r), text(r)
                assert "TOP SECRET\n" not in text(r).replace("for TOP SECRET", "")

            await err("view", {"target": str(tmp_path / "secret.txt")}, "outside the project root")
            await err("view", {"target": "../secret.txt"}, "outside the project root")
            await err("view", {"target": "link.txt"}, "symlink leading outside")
            await err("view", {"target": "~/.ssh/id_rsa"}, "outside the project root")
            await err("text_search", {"pattern": "TOP SECRET", "only": ["../**"]}, "stay inside")
            await err("text_search", {"pattern": "TOP SECRET", "only": [str(tmp_path) + "/*"]}, "stay inside")
            await err("text_search", {"pattern": "("}, "regex")
            await err("run_agent", {"task": "  "}, "needs a task")
            # 200 KB does not fit on a command line: the error says so and names the limit
            await err("run_agent", {"task": "Summarise this log:\n" + "x" * 200_000}, "bytes; at most 100,000")
            await err("resume_session", {"message": "y" * 200_000}, "bytes; at most 100,000")
            await err("show_session", {"session_id": "../../etc"}, "bad session id")
            await err("show_session", {"session_id": "nosuch"}, "nosuch")
            await err("resume_session", {"session_id": "nosuch"}, "nosuch")
            # A search of the whole project does not follow the link out either.
            r = await client.call_tool("text_search", {"pattern": "TOP SECRET"})
            assert text(r).strip() == "No matches for TOP SECRET"
            # Still serving.
            assert len((await client.list_tools()).tools) == len(TOOLS)

    anyio.run(main)


def test_stdout_of_the_stdio_server_is_only_json_rpc(crate, api):
    """An agent's answer, progress and a script's print never reach the JSON-RPC stream."""
    from mcp_types.version import LATEST_HANDSHAKE_VERSION

    api.push("$(answer plain text answer) and chatter")
    proc = subprocess.Popen([sys.executable, "-m", "moss", "mcp", "serve"], cwd=crate.root,
                            env=server_env(crate, api), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)

    def send(msg):
        proc.stdin.write(json.dumps(msg) + "\n")
        proc.stdin.flush()

    send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
          "params": {"protocolVersion": LATEST_HANDSHAKE_VERSION, "capabilities": {},
                     "clientInfo": {"name": "raw", "version": "0"}}})
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
          "params": {"name": "run_agent", "arguments": {"task": "say something", "machine": "v1"}}})
    lines = []
    deadline = time.time() + 60
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if json.loads(line).get("id") == 2:
            break
    proc.stdin.close()
    proc.wait(10)
    messages = [json.loads(x) for x in lines]  # every line is JSON ...
    assert all(m.get("jsonrpc") == "2.0" for m in messages)  # ... and JSON-RPC
    final = messages[-1]["result"]
    assert final["structuredContent"]["answer"] == "plain text answer"


def test_agents_run_by_the_server_obey_trust(crate, api):
    """An untrusted project's own agent.lua does not run because an MCP client asked."""
    crate.script("agent", 'print("PROJECT AGENT RAN") return 0\n')
    crate.trusted = False
    api.push("$(answer built-in agent)")

    async def main():
        async with stdio(crate, api) as client:
            r = await client.call_tool("run_agent", {"task": "who are you?", "machine": "v1"})
            assert not r.is_error, text(r)
            assert r.structured_content["answer"] == "built-in agent"

    anyio.run(main)
    assert "PROJECT AGENT RAN" not in json.dumps([x.body for x in api.requests])


# -- moss as an MCP client ---------------------------------------------------------------------

def user_server(project, name="t", access="read-only", **extra):
    lines = [f"[mcp.servers.{name}]", f"command = {json.dumps([sys.executable, SERVER])}"]
    if access:
        lines.append(f'access = "{access}"')
    for k, v in extra.items():
        lines.append(f"{k} = {json.dumps(v) if not isinstance(v, dict) else _inline(v)}")
    project.user_file("config.toml", "\n".join(lines) + "\n")


def _inline(d: dict) -> str:
    return "{ " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in d.items()) + " }"


def test_lua_script_calls_a_stdio_server(project):
    user_server(project, env={"MCP_TEST_VALUE": "from-config"})
    project.script("m", """
        local t0 = os.clock()
        for _, s in ipairs(moss.mcp.servers()) do print("server", s.name, s.transport, s.access) end
        local names = {}
        for _, t in ipairs(moss.mcp.tools("t")) do names[#names + 1] = t.name .. " " .. t.params end
        table.sort(names)
        print("tools", table.concat(names, "; "))
        print("add", moss.mcp.call("t", "add", {a = 2, b = 40}).text)
        print("value", moss.mcp.call("t", "env", {name = "MCP_TEST_VALUE"}).text)
        print("key", moss.mcp.call("t", "env", {name = "ANTHROPIC_API_KEY"}).text)
        print("token", moss.mcp.call("t", "env", {name = "GH_TOKEN"}).text)
        print("cwd", moss.mcp.call("t", "cwd").text)
        print("root", moss.mcp.call("t", "env", {name = "MOSS_PROJECT_ROOT"}).text)
        local f = moss.mcp.call("t", "fail", {message = "no such page"})
        print("fail", f.is_error, f.text)
        local ok, e = pcall(moss.mcp.call, "t", "nosuch", {})
        print("unknown", moss.error_kind(e), e.message)
        ok, e = pcall(moss.mcp.call, "nope", "x", {})
        print("noserver", moss.error_kind(e))
    """)
    t0 = time.monotonic()
    r = project.moss("@m", env={"ANTHROPIC_API_KEY": "sk-ant-fake", "GH_TOKEN": "ghp_fake"})
    took = time.monotonic() - t0
    assert r.returncode == 0, r.stderr
    out = dict(line.split("\t", 1) if "\t" in line else (line, "") for line in r.stdout.splitlines())
    assert out["server"] == "t\tstdio\tread-only"
    assert 'add {"a": integer, "b": integer}' in out["tools"] and "echo {\"text\": string}" in out["tools"]
    assert out["add"] == "42"
    assert out["value"] == "from-config"  # the server's own env
    assert out["key"] == "<unset>" and out["token"] == "<unset>"  # moss's secrets do not pass
    # it runs in moss's folder of the user's data folder, never the project, and is told the project
    assert out["cwd"] == str(project.home / ".local/share/moss/mcp")
    assert out["root"] == str(project.root.resolve())
    assert out["fail"] == "true\tError executing tool fail: no such page"
    assert out["unknown"].startswith("not_found\t") and "its tools: " in out["unknown"]
    assert out["noserver"] == "not_found"
    # The server's stderr went to its log, not to the user's terminal.
    assert "moss-test MCP server starting" not in r.stderr
    assert "moss-test MCP server starting" in (project.root / ".moss/agent/mcp/t.log").read_text()
    print(f"\nLua script: start server, list tools, 9 calls, stop: {took:.2f}s (whole moss run)")


def test_servers_stop_when_moss_exits(project):
    user_server(project)
    project.script("m", 'print(moss.mcp.call("t", "env", {name = "MOSS_PROJECT_ROOT"}).text)')
    pids_before = _server_pids()
    r = project.moss("@m")
    assert r.returncode == 0 and r.stdout.strip() == str(project.root.resolve()), r.stderr
    deadline = time.monotonic() + 10  # a server killed at moss's exit may take a moment to be reaped
    while _server_pids() - pids_before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _server_pids() - pids_before == set()


def _server_pids() -> set[int]:
    out = set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if SERVER.encode() in (d / "cmdline").read_bytes():
                    out.add(int(d.name))
            except OSError:
                pass
    return out


def test_the_users_own_server_never_imports_the_repositorys_modules(project, api, tmp_path):
    """A repository with no `.moss/` at all, only an `anyio.py` and a `json.py` at its root (each
    leaves a mark when imported), and the user's own server `python -m usermcp` (a module in the
    user's folder, on its PYTHONPATH), which `moss @agent` starts to offer its tools. Started in
    the project, `python -m` would import the repository's modules before the SDK's. It starts in
    moss's folder of the user's data folder instead: no mark, and it still works and knows the
    project's root (MOSS_PROJECT_ROOT)."""
    from test_eval import PLANTED

    marker = tmp_path / "pwned"
    for name in ("anyio.py", "json.py"):
        (project.root / name).write_text(PLANTED.format(marker=str(marker)))
    shutil.rmtree(project.root / ".moss")
    mods = project.home / "mcpmods"
    mods.mkdir()
    (mods / "usermcp.py").write_text(f"import runpy\nrunpy.run_path({SERVER!r}, run_name='__main__')\n")
    project.user_file("config.toml", f"""
        [mcp.servers.u]
        command = {json.dumps([sys.executable, "-m", "usermcp"])}
        env = {{ PYTHONPATH = {json.dumps(str(mods))} }}
        access = "read-only"
    """)
    root = str(project.root.resolve())
    api.push('$(mcp u env {"name": "MOSS_PROJECT_ROOT"})',
             lambda body: "$(answer " + ("told the root" if root in last_user_text(body) else "no root") + ")")
    r = project.moss("@agent", "--v1", "-n", "--output-format", "json", "what is here", env=api.env())
    assert not marker.exists(), marker.read_text()
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["answer"] == "told the root"


@pytest.mark.slow
def test_tools_need_full_unless_the_users_config_says_read_only(project):
    script = """
        local ok, e = pcall(moss.mcp.tools, "t")
        print("tools", ok and "ok" or moss.error_kind(e))
        ok, e = pcall(moss.mcp.call, "t", "add", {a = 1, b = 1})
        print("call", ok and e.text or moss.error_kind(e))
    """
    project.script("m", script)
    # No access declared: full is needed, a script runs at read-only.
    user_server(project, access=None)
    r = project.moss("@m")
    assert r.stdout.split() == ["tools", "denied", "call", "denied"], r.stderr
    # The project's own config cannot declare its server read-only, even trusted.
    project.user_file("config.toml", "")
    project.write(".moss/config.toml", f"""
        [mcp.servers.t]
        command = {json.dumps([sys.executable, SERVER])}
        access = "read-only"
    """)
    r = project.moss("@m")
    assert r.stdout.split() == ["tools", "denied", "call", "denied"], r.stderr
    # The user's read-only for a server whose command the project replaced does not count.
    project.user_file("config.toml", """
        [mcp.servers.t]
        command = ["/bin/false"]
        access = "read-only"
    """)
    r = project.moss("@m")
    assert r.stdout.split() == ["tools", "denied", "call", "denied"], r.stderr
    # The user's own declaration for the user's own server: allowed.
    (project.root / ".moss/config.toml").unlink()
    user_server(project)
    r = project.moss("@m")
    assert r.stdout.split() == ["tools", "ok", "call", "2"], r.stderr
    # With --allow-full, a script that raises itself to full may use an undeclared server.
    user_server(project, access=None)
    project.script("m", 'moss.access.set("full")\n' + script)
    r = project.moss("@m", "--allow-full")
    assert r.stdout.split() == ["tools", "ok", "call", "2"], r.stderr


def test_untrusted_projects_server_never_starts(project, tmp_path):
    marker = tmp_path / "started"
    project.write(".moss/config.toml", f"""
        [mcp.servers.p]
        command = ["sh", "-c", "touch {marker}"]
        [mcp.servers.u]
        url = "http://127.0.0.1:9/mcp"
    """)
    project.trusted = False
    project.user_file("scripts/m.lua", """
        for _, s in ipairs(moss.mcp.servers()) do print(s.name, s.transport, s.error) end
        local ok, e = pcall(moss.mcp.tools, "p")
        print("p", moss.error_kind(e))
    """)
    r = project.moss("@m")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("p\tunusable\t") and "not trusted" in lines[0]
    assert lines[1].startswith("u\tunusable\t") and "not trusted" in lines[1]
    assert not marker.exists()
    # Both the command and the url are shown as needing trust.
    shown = project.moss("trust", input="n\n")
    assert "mcp.servers.p.command" in shown.stdout + shown.stderr
    assert "mcp.servers.u.url" in shown.stdout + shown.stderr


@pytest.mark.slow
def test_hostile_server_is_capped_sanitised_and_timed_out(project):
    user_server(project, env={"MCP_TEST_HOSTILE": "1"}, timeout=2)
    project.script("m", """
        for _, t in ipairs(moss.mcp.tools("t")) do
          if t.name == "sneaky" or t.name == "bigschema" then print(t.name, t.params, t.description) end
          if t.name:find("evil") then print("EVIL OFFERED") end
        end
        local r = moss.mcp.call("t", "huge", {chars = 1000000})
        print("huge", #r.text, r.chars, r.text:sub(1, 4), r.text:sub(-4))
        local t0 = os.time()
        local slow = moss.mcp.call("t", "slow", {seconds = 30})
        print("slow", slow.is_error, slow.timed_out, os.time() - t0 <= 5)
        print("after", moss.mcp.call("t", "add", {a = 1, b = 2}).text)
    """)
    r = project.moss("@m", timeout=60)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "EVIL OFFERED" not in out and "\x1b" not in out and "\u202e" not in out
    assert "sneaky\t{\"path\": string}\tReads files.\\u001b[2J" in out
    assert "bigschema\t(schema too large:" in out
    huge = next(x for x in out.splitlines() if x.startswith("huge")).split("\t")
    assert int(huge[1]) <= 20000 and huge[2] == "1000000" and huge[3] == "HEAD" and huge[4] == "TAIL"
    assert "slow\ttrue\ttrue\ttrue" in out
    assert "after\t3" in out  # the same server goes on serving after a timed-out call


@pytest.mark.slow
def test_a_hostile_result_reaches_the_model_and_the_terminal_without_escapes_or_bidi(crate, api):
    user_server(crate, env={"MCP_TEST_HOSTILE": "1"})
    seen = []

    def model(body):
        seen.append(last_user_text(body))
        return "$(answer seen)" if len(seen) > 1 else "$(mcp t ansi {})"

    api.push(*([model] * 4))
    r = crate.moss("@agent", "--v1", "-n", "--output-format", "stream-json", "what does ansi say?", env=api.env())
    assert r.returncode == 0, r.stderr
    [cmd] = [json.loads(x) for x in r.stdout.splitlines() if json.loads(x)["type"] == "command"]
    for shown in (cmd["output"], seen[1], r.stderr):
        assert not any(c in shown for c in "\x1b\x07\x9b\u202e\u202c"), repr(shown)
    # what the server sent is still there to read, as visible escapes
    assert "result \\x1b]0;pwned\\x07\\x1b[2J\\x9b31m \\u202eexe.txt\\u202c done" in cmd["output"]


def test_agent_session_uses_an_mcp_tool(crate, api):
    user_server(crate)
    seen = {}

    def model(body):
        user = last_user_text(body)
        seen.setdefault("system", system_text(body))
        if "42" in user:
            return "$(answer 42)"
        return '$(mcp t add {"a": 2, "b": 40})'

    api.push(*([model] * 6))
    r = crate.moss("@agent", "--v1", "-n", "--output-format", "stream-json", "what is 2 + 40?", env=api.env())
    assert r.returncode == 0, r.stderr
    events = [json.loads(x) for x in r.stdout.splitlines()]
    cmds = [e for e in events if e["type"] == "command"]
    assert cmds[0]["cmd"] == 'mcp t add {"a": 2, "b": 40}' and cmds[0]["ok"] is True and cmds[0]["output"] == "42"
    assert events[-1]["answer"] == "42"
    # The model was shown the server's tools like moss's own commands.
    assert '$(mcp t add {"a": integer, "b": integer}) — Add two whole numbers.' in seen["system"]


def test_mcp_is_not_offered_when_no_server_is_within_the_roles_access(crate, api):
    user_server(crate, access=None)  # needs full; the explorer has read-shell
    systems = []

    def model(body):
        systems.append(system_text(body))
        if "needs access full" in last_user_text(body):
            return "$(answer refused)"
        return '$(mcp t add {"a": 2, "b": 40})'

    api.push(*([model] * 6))
    r = crate.moss("@agent", "--v1", "-n", "--output-format", "json", "what is 2 + 40?", env=api.env())
    assert "$(mcp" not in systems[0]
    assert json.loads(r.stdout)["answer"] != "42"
    assert not (crate.root / ".moss/agent/mcp/t.log").exists()  # the server never started


@pytest.mark.slow
def test_moss_is_a_client_of_its_own_http_server(crate, api):
    server = HttpServer(crate, api)
    try:
        crate.user_file("config.toml", f"""
            [mcp.servers.self]
            url = "{server.url}"
            access = "read-only"
        """)
        crate.user_file("scripts/m.lua", """
            print(moss.mcp.servers()[1].transport)
            print(moss.mcp.call("self", "view", {target = "llm.rs/Provider"}).text:match("enum Provider") or "none")
        """)
        r = crate.moss("@m")
        assert r.returncode == 0, r.stderr
        assert r.stdout.split("\n")[:2] == ["http", "enum Provider"]
    finally:
        server.close()


def test_a_projects_python_files_never_run_in_the_sessions_the_server_starts(crate, api, tmp_path):
    """The project (a cloned repository) has its own json.py, click.py, anthropic.py and rich.py
    at the top. `moss mcp serve` (started as the `moss` command starts, without the working
    directory on sys.path) runs each tool's session as a new moss process in the project, and
    that process imports moss's own modules, never those: the agent answers, the sessions are
    listed, and no planted file ever ran (each would leave a marker)."""
    from test_eval import plant_modules

    marker = tmp_path / "pwned"
    plant_modules(crate.root, marker)
    crate.trust()
    api.push(*([Model("provider")] * 10))
    # anthropic: its session must import the SDK the planted anthropic.py is named after
    params = StdioServerParameters(command=sys.executable, args=["-P", "-m", "moss", "mcp", "serve"],
                                   env=server_env(crate, api, provider="anthropic"), cwd=str(crate.root))

    async def main():
        errlog = open(crate.root.parent / "server-stderr.log", "a")
        async with Client(stdio_client(params, errlog=errlog)) as client:
            result = await client.call_tool("run_agent", {"task": "How many variants does Provider have?",
                                                          "machine": "v2"})
            assert not result.is_error, text(result)
            listed = (await client.call_tool("list_sessions", {})).structured_content["sessions"]
            assert [s["reason"] for s in listed] == ["answered"]

    anyio.run(main)
    assert not marker.exists()
