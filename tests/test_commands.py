"""Every $(...) command is a Lua file a project can replace or add to, with no Python touched."""

from __future__ import annotations

import json

from conftest import REPO
from fakeapi import last_user_text


def session_log(project, r):
    sid = json.loads(r.stdout)["session_id"]
    return [json.loads(x) for x in (project.root / f".moss/agent/logs/{sid}.jsonl").read_text().splitlines()]


def test_a_project_copy_of_note_changes_what_the_agent_stores(crate, api):
    builtin = (REPO / "scripts/commands/note.lua").read_text()
    assert "memory.note(ctx.S.mem, parser.unquote(args)" in builtin  # the line this test edits
    crate.write(".moss/scripts/commands/note.lua",
                builtin.replace("memory.note(ctx.S.mem, parser.unquote(args)",
                                'memory.note(ctx.S.mem, "[project] " .. parser.unquote(args):upper()'))
    api.push("$(note provider lives in llm.rs) $(view src/main.rs)",
             lambda body: "$(answer " + ("saw it" if "[project] PROVIDER LIVES IN LLM.RS" in last_user_text(body)
                                         else "old note") + ")")
    r = crate.moss("@agent", "--provider", "anthropic", "--v1", "-n", "--output-format", "json", "where?",
                   env=api.env())
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["answer"] == "saw it"
    notes = [e for e in session_log(crate, r) if e["event"] == "note"]
    assert notes[0]["content"] == "[project] PROVIDER LIVES IN LLM.RS"
    listing = crate.moss("@agent", "--commands").stdout
    row = next(line for line in listing.splitlines() if line.startswith("note\t"))
    assert "project (overrides built-in)" in row


def test_a_new_command_file_runs_where_a_project_machine_allows_it(crate, api):
    crate.write(".moss/scripts/commands/count-lines.lua", """
        -- $(count-lines PATH): how many lines a file has, as a tool result
        return {
          name = "count-lines",
          help = "count-lines PATH — the number of lines in a file",
          access = "read-only",
          tool = true,
          run = function(ctx, path)
            local n = select(2, moss.fs.read(path):gsub("\\n", ""))
            return path .. " has " .. n .. " lines", true
          end,
        }
    """)
    crate.write(".moss/scripts/machines/counting.lua", """
        local v1 = require("machines.v1")
        local m = { name = "counting", start = "agent", max_turns = 4, states = {} }
        for k, v in pairs(v1.states) do m.states[k] = v end
        m.states.agent = {}
        for k, v in pairs(v1.states.agent) do m.states.agent[k] = v end
        m.states.agent.commands = { "count-lines", "answer" }
        return m
    """)
    api.push("$(count-lines src/main.rs) $(view src/main.rs)",
             lambda body: "$(answer " + last_user_text(body).split("has ")[1].split(" lines")[0] + ")"
             if "src/main.rs has " in last_user_text(body) else "$(answer no count)")
    r = crate.moss("@agent", "--provider", "anthropic", "--machine", "counting", "-n", "--output-format", "json",
                   "how long is main.rs?", env=api.env())
    assert r.returncode == 0, r.stderr
    lines = (crate.root / "src/main.rs").read_text().count("\n")
    assert json.loads(r.stdout)["answer"] == str(lines)
    events = session_log(crate, r)
    # the state allows count-lines but not view: view is reported back, not run
    assert any(e["event"] == "command_refused" and "view src/main.rs" in e["cmd"] for e in events)
    assert "count-lines" in api.requests[0].body["system"][0]["text"]  # listed for the model


def test_a_broken_command_file_names_itself(crate, api):
    crate.write(".moss/scripts/commands/oops.lua", "return { name = 'oops' }\n")
    api.push("$(answer x)")
    r = crate.moss("@agent", "--provider", "anthropic", "--v1", "-n", "q", env=api.env())
    assert r.returncode != 0
    assert ".moss/scripts/commands/oops.lua" in r.stderr and "run" in r.stderr
