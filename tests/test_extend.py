"""Changing the agent without forking it: a command file that says where it may be used, a
role or machine that `extends` a built-in one, and a refusal that tells the person where to
allow a command. The docs' own snippets (docs/agent.md) are run verbatim."""

from __future__ import annotations

import json
import re

from fakeapi import system_text

from conftest import REPO

DOCS = (REPO / "docs" / "agent.md").read_text(encoding="utf-8")


def docs_snippet(first_line: str) -> str:
    """The ```lua block of docs/agent.md that starts with `first_line`, verbatim."""
    for block in re.findall(r"```lua\n(.*?)```", DOCS, re.S):
        if block.startswith(first_line):
            return block
    raise AssertionError(f"docs/agent.md has no lua block starting with {first_line!r}")


TODO_CMD = docs_snippet("-- .moss/scripts/commands/todo.lua")
EXPLORER_EXT = docs_snippet("-- .moss/scripts/roles/explorer.lua")
V1_EXT = docs_snippet("-- .moss/scripts/machines/v1.lua")


def run_v1(project, replies, *args):
    """A V1 session answering with `replies` (the script provider); (result, checkpoint, stderr)."""
    project.write("replies.json", json.dumps(replies))
    r = project.moss("@agent", "--provider", "script", "--script", "replies.json", "--v1", "-n",
                     "--output-format", "json", *args, "what is x?")
    result = json.loads(r.stdout) if r.stdout.strip().startswith("{") else None
    assert result is not None, r.stderr
    saved = json.loads((project.root / ".moss/agent" / f"session-{result['session_id']}.json").read_text())
    return result, saved, r.stderr


def kept(saved) -> list[str]:
    return [str(item.get("content") or item.get("text")) for item in saved["mem"]["items"]]


def test_the_docs_todo_command_runs_as_written(project):
    """The custom command from docs/agent.md, copied verbatim into .moss/scripts/commands/,
    runs in a V1 session: its note is in the session's working memory, nothing is refused."""
    project.write("a.py", "x = 1\n")
    project.write(".moss/scripts/commands/todo.lua", TODO_CMD)
    result, saved, err = run_v1(project, ["$(todo write the tests) $(view a.py)", "$(answer x is 1)"])
    assert result["reason"] == "answered" and result["answer"] == "x is 1"
    assert "TODO: write the tests" in kept(saved)
    assert "$(todo)" not in err  # nothing was refused


def test_a_command_the_state_does_not_allow_is_named_on_stderr_and_to_the_model(project, api):
    """A command file without `states` is refused in V1's agent state — not silently: stderr
    names the command, the state and the file to change; the model hears which state it is in
    and every command that state may use."""
    project.write("a.py", "x = 1\n")
    project.write(".moss/scripts/commands/todo.lua", TODO_CMD.replace('states = { "agent", "explorer" },', ""))
    api.push("$(todo write the tests)", "$(todo again) $(answer x is 1)")
    r = project.moss("@agent", "--provider", "anthropic", "--v1", "-n", "what is x?", env=api.env())
    assert r.returncode == 0, r.stderr
    told = [line for line in r.stderr.splitlines() if "$(todo)" in line]
    assert len(told) == 1, r.stderr  # once per session, state and command
    assert '"agent"' in told[0] and ".moss/scripts/commands/todo.lua" in told[0]
    second = api.requests[1].body
    user = json.dumps(second["messages"][-1])
    assert "agent" in user and all(name in user for name in ("view", "text-search", "note", "answer"))
    log = next((project.root / ".moss/agent/logs").glob("*.jsonl")).read_text()
    assert '"command_refused"' in log
    saved = next((project.root / ".moss/agent").glob("session-*.json")).read_text()
    assert "TODO:" not in saved


def test_a_built_in_command_a_state_refuses_is_said_once_without_advice_to_allow_it(project, api):
    """V2's evaluator writing $(view) (small models do) is not run; stderr says so once for the
    session — state and what it allows — without telling the person to allow it."""
    project.write("a.py", "x = 1\n")
    api.push("$(view a.py)", "$(view a.py) $(view a.py)", "$(view a.py)", "$(answer x is 1)")
    r = project.moss("@agent", "--provider", "anthropic", "--v2", "-n", "--max-turns", "4", "what is x?",
                     env=api.env())
    told = [line for line in r.stderr.splitlines() if "$(view)" in line]
    assert len(told) == 1, r.stderr
    assert '"evaluator"' in told[0] and "Allow it" not in told[0]


def test_the_docs_extended_role_adds_a_command_and_a_paragraph(project, api):
    """The docs' role that extends the built-in explorer it overrides: the built-in's prompt is
    still there, the role's extra paragraph is under it, and $(todo) is among its tools — with
    a command file that does not declare any state."""
    project.write("a.py", "x = 1\n")
    project.write(".moss/scripts/commands/todo.lua", TODO_CMD.replace('states = { "agent", "explorer" },', ""))
    project.write(".moss/scripts/roles/explorer.lua", EXPLORER_EXT)
    api.push("$(todo write the tests)", "$(answer x is 1)")
    r = project.moss("@agent", "--provider", "anthropic", "--v1", "-n", "--output-format", "json", "what is x?",
                     env=api.env())
    assert r.returncode == 0, r.stderr
    system = system_text(api.requests[0].body)
    builtin = (REPO / "scripts/roles/explorer.lua").read_text()
    first_line = re.search(r"agent = \[\[\n(.*?)\n", builtin).group(1)
    assert first_line in system  # the built-in explorer's V1 prompt, not forked
    assert "Before you answer, list what is still to do with $(todo TEXT)." in system
    assert "todo TEXT" in system  # its help line: the command is offered
    sid = json.loads(r.stdout)["session_id"]
    assert "TODO: write the tests" in (project.root / f".moss/agent/session-{sid}.json").read_text()
    roles = project.moss("@agent", "--roles")
    row = next(line for line in roles.stdout.splitlines() if line.startswith("explorer"))
    assert "read-shell" in row and "project" in row and "answers questions" in row  # the base's fields


def test_the_docs_extended_machine_changes_one_state(project):
    """The docs' V1 that extends the built-in V1: $(todo) is allowed in its one state and the
    turn limit is its own."""
    project.write("a.py", "x = 1\n")
    project.write(".moss/scripts/commands/todo.lua", TODO_CMD.replace('states = { "agent", "explorer" },', ""))
    project.write(".moss/scripts/machines/v1.lua", V1_EXT)
    project.write("replies.json", json.dumps(["$(todo one)"] * 12))
    r = project.moss("@agent", "--provider", "script", "--script", "replies.json", "--v1", "-n",
                     "--output-format", "json", "what is x?")
    result = json.loads(r.stdout)
    assert result["reason"] == "max_turns" and result["turns"] == 10, r.stderr
    assert "$(todo)" not in r.stderr  # nothing was refused


def test_a_role_of_another_name_extends_a_built_in(project):
    """roles/reviewer.lua extends the auditor: it has the auditor's access and description
    and its own name."""
    project.write(".moss/scripts/roles/reviewer.lua", 'return { extends = "auditor", add_commands = { "note" } }\n')
    r = project.moss("@agent", "--roles")
    row = next(line for line in r.stdout.splitlines() if line.startswith("reviewer"))
    auditor = next(line for line in r.stdout.splitlines() if line.startswith("auditor"))
    assert row.split("\t")[1] == auditor.split("\t")[1] == "read-shell"
    assert row.split("\t")[3] == auditor.split("\t")[3]


def test_a_broken_extends_is_a_usage_error_naming_the_file(project):
    """A base that does not exist, and a cycle, each end with exit 2 and one message naming
    the role file — not a Lua traceback."""
    project.write(".moss/scripts/roles/ghost.lua", 'return { extends = "nobody" }\n')
    r = project.moss("@agent", "--provider", "script", "--script", "x.json", "--role", "ghost", "-n", "q")
    assert r.returncode == 2
    assert "roles/ghost.lua" in r.stderr and "nobody" in r.stderr and "Traceback" not in r.stderr
    project.write(".moss/scripts/roles/ping.lua", 'return { extends = "pong" }\n')
    project.write(".moss/scripts/roles/pong.lua", 'return { extends = "ping" }\n')
    r = project.moss("@agent", "--provider", "script", "--script", "x.json", "--role", "ping", "-n", "q")
    assert r.returncode == 2 and "extends" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_extends_in_lua(tmp_path):
    """The merge rule itself: fields replace, named tables merge, add_ appends without repeats
    or adds a paragraph, and neither input changes."""
    from conftest import builtin_lua

    with builtin_lua() as (rt, _root):
        got = rt.to_py(rt.execute("""
            local extend = require("lib.machine.extend")
            local base = { name = "b", commands = { "view", "run" }, prompts = { v1 = { agent = "A" }, v2 = { x = "X" } },
                           note = "first" }
            local over = { extends = "b", add_commands = { "run", "todo" }, prompts = { v1 = { agent = "B" } },
                           add_note = "second", access = "edit" }
            local out = extend.merge(base, over, "roles/t.lua")
            return { out = out, base_cmds = #base.commands, extends = out.extends == nil }
        """))
    out = got["out"]
    assert out["commands"] == ["view", "run", "todo"]
    assert out["prompts"] == {"v1": {"agent": "B"}, "v2": {"x": "X"}}
    assert out["note"] == "first\n\nsecond" and out["access"] == "edit"
    assert got["base_cmds"] == 2 and got["extends"]
