"""Child agents: moss.spawn and its handles, no lost update when children edit one file at
once, one budget for the tree, failures that stay the child's, access that never
escalates, the $(spawn)/$(await)/$(children) grammar, and resuming a tree after SIGKILL.

The model is the fake API server; which agent asks is told by the label (ROLE/STATE) and by
the task in the request, never by prompt wording."""

from __future__ import annotations

from moss.sessions import read_checkpoint

import itertools
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from fakeapi import last_user_text, role_of, slow, state_of
import forkserver

FUNCS = 8
ARGS = ("--provider", "anthropic", "--model", "claude-test")


def calc_py(n=FUNCS):
    return "\n\n".join(f"def f{i}():\n    return {i}" for i in range(1, n + 1)) + "\n"


def editor(delay=0.3):
    """A refactorer child for task 'set fN': edit fN, then answer."""
    def reply(body):
        user = last_user_text(body)
        n = re.search(r"set f(\d+)", user).group(1)
        if state_of(body) == "planner":
            return slow("Ready to refactor.", delay)
        if "Edited calc.py" in user or "changed on disk" in user:
            return slow(f"$(answer f{n} done)", delay)
        return slow(f"$(edit calc.py/f{n} replace def f{n}():\n    return {n}00)", delay)
    return reply


FAN = """
moss.session.bind("fanroot1")
moss.access.set("edit")
local hs = {}
for i = 1, %d do
  hs[i] = moss.spawn { task = "set f" .. i, role = "refactorer", machine = "v1", max_turns = 5,
                       auto_approve = "medium" }
end
for i, r in ipairs(moss.wait_all(hs)) do
  print(hs[i].id, r.reason, r.session_id)
end
"""


def run_fan(project, api, extra_env=None, n=FUNCS):
    project.write("calc.py", calc_py())
    project.script("fan", FAN % n)
    api.push(*[editor()] * (n * 6))
    t0 = time.monotonic()
    r = project.moss("@fan", *ARGS, env={**api.env(), "MOSS_TEST_EDIT_HOLD": "0.2", **(extra_env or {})},
                     timeout=120)
    return r, time.monotonic() - t0


def present(project):
    text = (project.root / "calc.py").read_text()
    return [i for i in range(1, FUNCS + 1) if f"return {i}00" in text]


def events(project, sid):
    path = project.root / f".moss/agent/logs/{sid}.jsonl"
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]


@pytest.mark.slow
def test_eight_children_edit_one_file_at_once_and_no_edit_is_lost(project, api):
    r, took = run_fan(project, api)
    assert r.returncode == 0, r.stderr
    assert present(project) == list(range(1, FUNCS + 1)), (project.root / "calc.py").read_text()
    lines = r.stdout.splitlines()
    assert [ln.split("\t")[:2] for ln in lines] == [[f"fanroot1-{i}", "answered"] for i in range(1, FUNCS + 1)]
    assert "waits for calc.py" in r.stderr  # a queued edit says so
    # each child's edit was applied to the file as it was then: the file is still valid Python
    compile((project.root / "calc.py").read_text(), "calc.py", "exec")
    # every log line names its agent and its parent
    for i in (1, FUNCS):
        for e in events(project, f"fanroot1-{i}"):
            assert e["session"] == f"fanroot1-{i}" and e["parent"] == "fanroot1"


@pytest.mark.slow
def test_without_locks_the_same_run_loses_edits(project, api):
    """The control: locking switched off by the test-only switch, the same run loses edits,
    so the test above can fail."""
    r, _ = run_fan(project, api, {"MOSS_TEST_LOCKS": "off"})
    assert r.returncode == 0, r.stderr
    assert len(present(project)) < FUNCS


def wanderer(delay=0.2, answer_when=None):
    """An explorer that keeps looking (a different view each turn) until its context shows
    `answer_when`, then answers."""
    calls = itertools.count()

    def reply(body):
        user = last_user_text(body)
        if answer_when and answer_when in user:
            return slow("$(answer finished after the message)", delay)
        return slow(f"$(view calc.py:1-{next(calls) % 22 + 2})", delay)
    return reply


def test_spawn_pause_resume_cancel(project, api):
    project.write("calc.py", calc_py())
    project.script("ctl", """
        moss.session.bind("ctlroot1")
        moss.access.set("read-shell")
        local h = moss.spawn { task = "look around", role = "explorer", machine = "v1", max_turns = 30 }
        assert(h:status() == "running")
        moss.agents.wait(h.id, 0.5)
        h:pause()
        local t = os.time()
        while h:status() ~= "paused" and os.time() - t < 20 do moss.agents.wait(h.id, 0.1) end
        print("status", h:status())
        local turn = h:info().turn
        moss.agents.wait(h.id, 1.5)  -- paused: no turn runs
        print("still", h:status(), h:info().turn == turn)
        h:resume("please conclude now")
        local r = h:wait(20)
        print("result", h:status(), r.reason, r.answer, r.session_id)

        local c = moss.spawn { task = "look around again", role = "explorer", machine = "v1", max_turns = 30 }
        moss.agents.wait(c.id, 0.5)
        print("cancel", c:cancel())
        local rc = c:wait(20)
        print("cancelled", c:status(), rc.reason, rc.success)
        print("timeout", moss.spawn { task = "look", role = "explorer", machine = "v1" }:wait(0.1))
    """)
    api.push(*[wanderer(answer_when="please conclude now")] * 200)
    r = project.moss("@ctl", *ARGS, env=api.env(), timeout=90)
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert out[0] == "status\tpaused"
    assert out[1] == "still\tpaused\ttrue"
    assert out[2] == "result\tdone\tanswered\tfinished after the message\tctlroot1-1"
    assert out[3] == "cancel\ttrue"
    assert out[4] == "cancelled\tcancelled\tcancelled\tfalse"
    assert out[5] == "timeout\tnil"
    saved = json.loads((project.root / ".moss/agent/session-ctlroot1-2.json").read_text())
    assert saved["reason"] == "cancelled" and saved["done"]
    kinds = [e["event"] for e in events(project, "ctlroot1-1")]
    assert "paused" in kinds and "resumed" in kinds


def test_budget_bounds_the_whole_tree(project, api):
    project.write("calc.py", calc_py())
    project.script("tree", """
        moss.session.bind("budget01")
        moss.access.set("read-shell")
        local hs = {}
        for i = 1, 3 do hs[i] = moss.spawn { task = "look " .. i, role = "explorer", machine = "v1", max_turns = 40 } end
        for i, r in ipairs(moss.wait_all(hs)) do print(hs[i].id, r.reason) end
        local u = moss.llm.usage()
        print("tokens", u.input_tokens + u.output_tokens + u.cache_read_tokens + u.cache_write_tokens, u.calls)
        print("budget", moss.llm.budget() ~= nil)
    """)
    api.push(*[wanderer(0.05)] * 300)
    r = project.moss("@tree", *ARGS, "--max-tokens", "6000", env=api.env(), timeout=90)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert [ln.split("\t")[1] for ln in lines[:3]] == ["budget"] * 3, r.stdout  # every child stopped cleanly
    tokens, calls = map(int, lines[3].split("\t")[1:])
    assert 6000 <= tokens < 6000 + 3 * 1500  # at most the calls in flight when it was spent
    assert calls == len(api.requests) < 3 * 40
    assert lines[4] == "budget\ttrue"


def test_a_childs_failure_is_the_childs_not_the_parents(project, api):
    project.script("bad", """
        moss.session.bind("failing1")
        moss.access.set("read-shell")
        local h = moss.spawn { task = "anything", role = "no-such-role" }
        local r = h:wait()
        print(h:status(), r.success, r.reason, r.session_id)
        print((r.error:gsub("%s+", " ")))
        print("parent goes on")
    """)
    r = project.moss("@bad", *ARGS, env=api.env())
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert out[0] == "failed\tfalse\terror\tfailing1-1"
    assert out[1].startswith("child failing1-1 failed: ") and "no role 'no-such-role'" in out[1]
    assert out[2] == "parent goes on"
    end = [e for e in events(project, "failing1") if e["event"] == "child_end"][0]
    assert end["child"] == "failing1-1" and end["status"] == "failed"


def test_access_never_escalates(project, api):
    project.write("calc.py", calc_py())
    project.script("esc", """
        moss.session.bind("access01")
        moss.access.set("read-shell")
        local ok, err = pcall(moss.spawn, { task = "x", role = "explorer", access = "edit" })
        print("ask", ok, moss.error_kind(err))
        -- a role that needs more than the parent has: the child cannot take it
        local r = moss.spawn { task = "set f1", role = "refactorer", machine = "v1" }:wait()
        print("role", r.reason, r.error_kind, (r.error or ""):match("above this agent's limit") ~= nil)
        -- asking for less clamps the role: a read-only child cannot run commands
        local c = moss.spawn { task = "run ls", role = "explorer", machine = "v1", access = "read-only", max_turns = 2 }
        print("less", c:wait().reason)
    """)

    def model(body):
        user = last_user_text(body)
        if "run ls" in user:
            return "$(answer ran)" if "not allowed at access level" in user else "$(run ls)"
        return "$(answer no)"

    api.push(*[model] * 20)
    r = project.moss("@esc", *ARGS, env=api.env())
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert out[0] == "ask\tfalse\tdenied"
    assert out[1] == "role\terror\tdenied\ttrue"
    assert (project.root / "calc.py").read_text() == calc_py()  # nothing was edited
    assert out[2] == "less\tanswered", r.stdout
    outputs = [e for e in events(project, "access01-2") if e["event"] == "command"]
    assert outputs and outputs[0]["ok"] is False and "read-only" in outputs[0]["output"]


def task_of(body) -> str:
    m = re.search(r"\*\*Task:\*\* (.*)", last_user_text(body))
    return m.group(1).strip() if m else ""


def parent_model(child_task="count the functions in calc.py", parent_answer="the child found"):
    """The parent spawns one explorer child, awaits it, and answers with what it said; the
    child views calc.py and answers with the number of functions it saw."""
    def reply(body):
        user = last_user_text(body)
        if task_of(body) == child_task:
            funcs = set(re.findall(r"\bf(\d+)\(", user))  # the view's functions, full form or compact
            if funcs:
                return slow(f"$(answer {len(funcs)} functions)", 0.1)
            return slow("$(view calc.py)", 0.1)
        m = re.search(r"answer:\s*(\d+) functions", user)
        if m:
            return f"$(answer {parent_answer} {m.group(1)})"
        if "started child agent" in user:
            return "$(await)"
        return f'$(spawn explorer "{child_task}")'
    return reply


def test_spawn_and_await_commands_bring_the_childs_answer_as_context(project, api):
    project.write("calc.py", calc_py(3))
    api.push(*[parent_model()] * 20)
    r = project.moss("@agent", "--spawn", "-n", "--output-format", "stream-json", "how many functions?",
                     *ARGS, env=api.env())
    assert r.returncode == 0, r.stderr
    lines = [json.loads(ln) for ln in r.stdout.splitlines()]
    result = lines[-1]
    assert result["type"] == "result" and result["answer"] == "the child found 3"
    root = result["session_id"]
    child_events = [e for e in lines if e["type"].startswith("child_")]
    assert {e["session_id"] for e in child_events} == {f"{root}-1"}
    assert all(e["parent"] == root for e in child_events)
    assert any(e["type"] == "child_result" and e["answer"] == "3 functions" for e in child_events)
    # the parent saw the child's answer as a command output, not as its own answer
    awaited = [e for e in events(project, root) if e["event"] == "command" and e["cmd"].startswith("await")]
    assert "3 functions" in awaited[0]["output"] and f"child {root}-1 (explorer)" in awaited[0]["output"]
    # moss sessions show draws the tree with the child's turns and answer
    shown = project.moss("sessions", "show", root)
    assert shown.returncode == 0, shown.stderr
    assert f"{root}-1" in shown.stdout and "3 functions" in shown.stdout


def test_spawn_is_off_unless_asked_and_roles_limit_children(project, api):
    project.write("calc.py", calc_py(3))
    api.push('$(spawn explorer "x") $(answer no)', '$(spawn refactorer "edit it")', "$(answer ok)")
    r = project.moss("@agent", "-n", "q", *ARGS, env=api.env())
    assert r.returncode == 0
    assert "spawn" not in api.requests[0].body["system"]  # the prompt does not offer it
    sid = json.loads((project.root / ".moss/agent").glob("session-*.json").__next__().read_text())["session_id"]
    r = project.moss("@agent", "-n", "--spawn", "q2", *ARGS, env=api.env())
    assert r.returncode == 0, r.stderr
    assert "$(spawn ROLE" in str(api.requests[1].body["system"])
    cmds = [e for f in (project.root / ".moss/agent/logs").glob("*.jsonl") if f.stem != sid
            for e in events(project, f.stem) if e["event"] == "command"]
    assert "Not started: role refactorer needs access edit and this agent has read-shell" in cmds[0]["output"]
    assert not list((project.root / ".moss/agent").glob("session-*-1.json"))  # no child ran


@pytest.mark.slow
def test_resume_of_a_tree_after_sigkill(project, api):
    project.write("calc.py", calc_py(3))
    task = "count the functions in calc.py"

    def slow_child(body):
        if task_of(body) == task:  # the child: looks at one line at a time, slowly
            return slow(f"$(view calc.py:1-{len(api.requests) % 7 + 2})", 1.0)
        return parent_model(task)(body)

    api.push(*[slow_child] * 30)
    p = project.popen("@agent", "--spawn", "-n", "how many functions?", *ARGS, env=api.env())
    deadline = time.monotonic() + 60
    child = None
    while time.monotonic() < deadline:
        found = [f for f in (project.root / ".moss/agent").glob("session-*-1.json")]
        if found:
            data = read_checkpoint(found[0])  # base + journal
            if data.get("turn", 0) >= 2:
                child = data
                break
        time.sleep(0.2)
    assert child is not None
    os.kill(p.pid, signal.SIGKILL)
    p.communicate()
    root = child["session_id"].rsplit("-", 1)[0]
    parent = read_checkpoint((project.root / f".moss/agent/session-{root}.json"))  # base + journal
    assert [c["id"] for c in parent["children"]] == [f"{root}-1"]  # the parent's checkpoint records it
    turn_at_kill = child["turn"]

    api.replies.clear()
    api.push(*[parent_model(task)] * 30)
    r = project.moss("@agent", "--resume", root, "-n", *ARGS, env=api.env(), timeout=90)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("the child found "), r.stderr
    ev = events(project, f"{root}-1")
    resumed = [e for e in ev if e["event"] == "session_resume"]
    assert resumed and resumed[0]["turn"] >= turn_at_kill  # it went on from its own checkpoint


@pytest.mark.slow
def test_ctrl_c_stops_the_whole_tree_and_leaves_it_resumable(project, api):
    project.write("calc.py", calc_py(3))
    task = "count the functions in calc.py"

    def slow_child(body):
        if task_of(body) == task:
            return slow(f"$(view calc.py:1-{len(api.requests) % 7 + 2})", 1.0)
        return parent_model(task)(body)

    api.push(*[slow_child] * 30)
    p = project.popen("@agent", "--spawn", "-n", "how many functions?", *ARGS, env=api.env())
    deadline, child = time.monotonic() + 60, None
    while time.monotonic() < deadline and child is None:
        found = list((project.root / ".moss/agent").glob("session-*-1.json"))
        if found and read_checkpoint(found[0]).get("turn", 0) >= 1:
            child = read_checkpoint(found[0])  # base + journal
        time.sleep(0.2)
    assert child is not None
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 130, err  # the whole tree stopped, as Ctrl-C does
    assert time.monotonic() - t0 < 10
    root = child["session_id"].rsplit("-", 1)[0]
    parent = read_checkpoint((project.root / f".moss/agent/session-{root}.json"))  # base + journal
    assert [c["id"] for c in parent["children"]] == [f"{root}-1"]
    assert not [t for t in threading_names_alive(p.pid)]  # nothing of the tree is left running
    api.replies.clear()
    api.push(*[parent_model(task)] * 30)
    r = project.moss("@agent", "--resume", root, "-n", *ARGS, env=api.env(), timeout=90)
    assert r.returncode == 0 and r.stdout.startswith("the child found "), r.stderr


def threading_names_alive(pid):
    """Processes still running with `pid` as their parent (a killed tree leaves none)."""
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return [x for x in out.split() if x.strip()]


@pytest.mark.parametrize("name", ["spawn", "wait_any", "wait_all", "lock"])
def test_lua_side_helpers_are_documented_and_typed(name):
    """moss.spawn, moss.wait_any, moss.wait_all and moss.lock are Lua (host/bootstrap.lua), so
    test_api_docs.py does not see them: the same promise, checked here."""
    from conftest import REPO

    assert f"moss.{name}(" in (REPO / "docs/lua-api.md").read_text() or \
        f"moss.{name}{{" in (REPO / "docs/lua-api.md").read_text()
    assert f"function moss.{name}(" in (REPO / "scripts/types/moss.lua").read_text()


def test_a_parents_rollback_covers_what_its_child_changed(project, api):
    """Children work for their parent: their writes count as the tree root's, so the parent's
    rollback brings back what a child changed."""
    project.write("calc.py", calc_py())
    project.script("undo", """
        moss.session.bind("undoroot1")
        moss.access.set("edit")
        local before = moss.shadow.snapshot("before the child")
        -- the parent's own write: its rollback is now scoped to what its session (tree) changed
        local w = moss.shadow.begin_write("parent's note")
        moss.fs.write("note.txt", "parent")
        moss.shadow.end_write(w)
        local r = moss.spawn { task = "set f1", role = "refactorer", machine = "v1", max_turns = 5,
                               auto_approve = "medium" }:wait()
        print("child", r.reason)
        local res = moss.shadow.restore(before)
        print("restored", table.concat(res.reverted, ","), table.concat(res.removed, ","), #res.conflicts)
    """)
    api.push(*[editor(delay=0)] * 6)
    r = project.moss("@undo", *ARGS, env=api.env(), timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["child\tanswered", "restored\tcalc.py\tnote.txt\t0"]
    assert (project.root / "calc.py").read_text() == calc_py() and not (project.root / "note.txt").exists()


def test_a_terminal_shows_a_live_panel_of_the_running_agents(project, api):
    import pty
    import select

    project.write("calc.py", calc_py(2))
    project.script("fan", FAN % 2)
    api.push(*[editor(delay=1.0)] * 12)
    master, slave = pty.openpty()
    p = forkserver.popen([sys.executable, "-m", "moss", "@fan", "--trust", *ARGS], cwd=project.root,
                         env={**project.env, **api.env(), "TERM": "xterm"}, stdout=subprocess.PIPE,
                         stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    seen, deadline = b"", time.monotonic() + 60
    try:
        while time.monotonic() < deadline and p.poll() is None:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    seen += os.read(master, 65536)
                except OSError:
                    break
        p.wait(timeout=30)
    finally:
        os.close(master)
        if p.poll() is None:
            p.kill()
    text = seen.decode("utf-8", "replace")
    assert p.returncode == 0, text[-2000:]
    # the panel: a table titled "agents" with each child's id and role while they run
    assert "agents" in text and "fanroot1-1" in text and "fanroot1-2" in text and "refactorer" in text
    assert "waiting on" in text


def test_refactorer_scout_maps_the_code_first_and_its_answer_is_a_note(project, api):
    """[agent] scout = true: an explorer child maps the code; the refactorer starts with its map."""
    project.write("calc.py", calc_py(2))
    project.write(".moss/config.toml", "[agent]\nscout = true\nvalidate_on = \"never\"\n")

    def reply(body):
        if role_of(body) == "explorer":  # the scout child
            return "$(answer f1 is at calc.py:1, f2 at calc.py:5)"
        if state_of(body) == "planner":
            return "1. Change f1.\nReady to refactor."
        return "$(answer done)" if "Map of the code" in last_user_text(body) else "$(answer no map)"

    api.push(*[reply] * 10)
    r = project.moss("@agent", "--refactor", "--v1", "-n", "--output-format", "json", "make f1 return 10",
                     *ARGS, env=api.env())
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["answer"] == "done"
    scout = [e for e in events(project, out["session_id"]) if e["event"] == "scout"]
    assert scout and scout[0]["child"] == out["session_id"] + "-1" and "calc.py:5" in scout[0]["answer"]


def test_auditor_fans_out_one_read_only_child_per_directory(project, api):
    """[agent] fan_out = 2: one auditor child per top-level directory; their findings are notes.
    (That children never get more access than asked is test_access_never_escalates.)"""
    for d in ("alpha", "beta", "gamma"):
        project.write(f"{d}/mod.py", f"# {d}\nimport os\nos.system(input())\n")
    project.write(".moss/config.toml", "[agent]\nfan_out = 2\n")

    def reply(body):
        user = last_user_text(body)
        m = re.search(r"Audit only the directory (\w+)/", user)
        if m:  # a child
            return f"$(answer HIGH {m.group(1)}/mod.py:3 os.system on input)"
        if state_of(body) == "planner":
            return "1. Merge the findings.\nReady to audit."
        found = sorted(set(re.findall(r"HIGH (\w+)/mod.py:3", user)))
        return "$(answer " + ",".join(found) + ")"

    api.push(*[reply] * 20)
    r = project.moss("@agent", "--audit", "--v1", "-n", "--output-format", "json", "check for command injection",
                     *ARGS, env=api.env())
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["answer"] == "alpha,beta,gamma"  # each child's findings reached the parent
    fan = [e for e in events(project, out["session_id"]) if e["event"] == "fan_out"]
    assert sorted(e["dir"] for e in fan) == ["alpha", "beta", "gamma"]
    for e in fan:
        child = json.loads((project.root / f".moss/agent/session-{e['child']}.json").read_text())
        assert child["role"] == "auditor" and child["reason"] == "answered"
