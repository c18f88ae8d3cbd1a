"""`moss @agent` end to end: the real CLI, the real SDKs, the fake API server, a fixture repo."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from agentmodel import H, Model, section
from conftest import FIXTURES, builtin_lua, lua_value
from fakeapi import last_user_text, state_of, system_text


@pytest.fixture
def crate(project):
    """The fixture Rust crate as a git repository, with an ignored build artefact."""
    shutil.copytree(FIXTURES / "rustcrate", project.root, dirs_exist_ok=True)
    subprocess.run(["git", "init", "-q"], cwd=project.root, check=True)
    (project.root / "target" / "debug").mkdir(parents=True)
    (project.root / "target" / "debug" / "llm.rs").write_text("pub enum Provider { Fake }\n")
    return project


def agent(project, api, *args, provider="anthropic", model=None, n_replies=40, timeout=60):
    if model is not None:
        api.push(*([model] * n_replies))
    env = api.env()
    return project.moss("@agent", "--provider", provider, *args, env=env, timeout=timeout)


def bodies(api):
    return [r.body for r in api.requests]


def test_v2_counts_provider_variants_with_explorer_evaluator_split(crate, api):
    model = Model("provider")
    r = agent(crate, api, "--v2", "-n", "--output-format", "json", "How many variants does Provider have?",
              model=model)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["answer"] == "13"
    assert result["success"] is True and result["reason"] == "answered"
    assert result["turns"] == 4
    assert model.calls == ["explorer", "evaluator", "explorer", "evaluator"]
    reqs = bodies(api)
    explorer1, evaluator1, explorer2, evaluator2 = (last_user_text(b) for b in reqs)
    # The evaluator sees numbered new results, and what it kept is in working memory next time.
    assert H["new_results"] not in explorer1 and H["memory"] not in explorer1
    assert "[1] `text-search" in section(evaluator1, H["new_results"])
    assert "text-search" in section(evaluator2, H["memory"])
    assert "pub enum Provider {" in section(evaluator2, H["new_results"])
    # The explorer then sees what the evaluator saw (the results of its own commands
    # included) and the evaluator's remarks...
    assert "enum Provider" in section(explorer2, H["new_results"])
    assert "we need to see the enum itself" in explorer2
    # ...byte for byte: one system prompt for both states, and the explorer's message starts
    # with the evaluator's blocks up to a cache breakpoint, so a provider's prompt cache bills
    # the results in full once and serves them to the explorer as a cache read.
    assert system_text(reqs[0]) == system_text(reqs[1]) == system_text(reqs[2])
    seen, then = reqs[1]["messages"][0]["content"], reqs[2]["messages"][0]["content"]
    shared = len(seen) - 1  # everything but the evaluator's own closing instruction
    assert [b["text"] for b in then[:shared]] == [b["text"] for b in seen[:shared]]
    assert "cache_control" in seen[shared - 1] and "cache_control" in then[shared - 1]
    assert "$(view" in system_text(reqs[0]) and "$(answer" in system_text(reqs[0])
    # Nothing ignored by git reached the model.
    assert "target/debug" not in "".join(last_user_text(b) for b in reqs)


def test_v2_first_struct_over_openai(crate, api):
    r = agent(crate, api, "--v2", "What is the first struct in main.rs?", provider="openai", model=Model("struct"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "Cli"
    assert all(req.path == "/v1/chat/completions" for req in api.requests)


def test_v1_freeform_answers(crate, api):
    model = Model("provider")
    r = agent(crate, api, "--v1", "How many variants does Provider have?", model=model)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "13"
    assert set(model.calls) == {"agent"}
    assert len(model.calls) == 3  # search, view, answer


def test_default_machine_from_config(crate, api):
    crate.write(".moss/config.toml", '[agent]\nmachine = "v2"\n')
    model = Model("provider")
    r = agent(crate, api, "How many variants does Provider have?", model=model)
    assert r.returncode == 0, r.stderr
    assert model.calls[:2] == ["explorer", "evaluator"]


def test_plan_calls_planner_first_and_explorer_sees_plan(crate, api):
    model = Model("provider")
    r = agent(crate, api, "--v2", "--plan", "How many variants does Provider have?", model=model)
    assert r.returncode == 0, r.stderr
    assert model.calls[0] == "planner"
    assert model.calls[1] == "explorer"
    planner_req, explorer_req = bodies(api)[:2]
    assert state_of(planner_req) == "planner"
    assert "Find the definition with a text search" in section(last_user_text(explorer_req), H["plan"])


def test_explorer_answer_is_refused_with_a_note(crate, api):
    replies = [
        "$(answer 12) $(text-search \"enum Provider\")",  # explorer tries to conclude early
        "$(keep 1) need the definition",
        "$(view src/workflow/llm.rs/Provider)",
        lambda body: "$(answer 13)" if "enum Provider {" in last_user_text(body) else "missing",
    ]
    api.push(*replies)
    r = agent(crate, api, "--v2", "-n", "How many variants does Provider have?")
    assert r.stdout.strip() == "13", r.stderr
    # the log says which command was refused, where; the model is told about that command
    [log] = (crate.root / ".moss/agent/logs").glob("*.jsonl")
    refused = [e for e in map(json.loads, log.read_text().splitlines()) if e["event"] == "command_refused"]
    assert [(e["cmd"], e["state"]) for e in refused] == [("$(answer 12)", "explorer")]
    assert "$(answer)" in last_user_text(bodies(api)[2])


def test_evaluator_that_keeps_writing_commands_is_contained(crate, api):
    n = {"explore": 0}

    def model(body):
        if state_of(body) == "evaluator":
            return "$(run touch hacked) $(view src/main.rs) I should look further."
        n["explore"] += 1
        return f"$(view src/main.rs:{n['explore']}-{n['explore'] + 2})"

    r = agent(crate, api, "--v2", "-n", "--max-turns", "6", "--output-format", "json", "What is main?",
              model=model)
    assert r.returncode == 1
    result = json.loads(r.stdout)
    assert result["reason"] == "max_turns" and result["turns"] == 6
    assert not (crate.root / "hacked").exists()
    evaluator2 = last_user_text(bodies(api)[3])
    assert "Not executed: `run touch hacked`" in evaluator2
    log = (crate.root / ".moss/agent/logs" / f"{result['session_id']}.jsonl").read_text()
    events = [json.loads(line) for line in log.splitlines()]
    ran = [e["cmd"] for e in events if e["event"] == "command"]
    assert all("hacked" not in c for c in ran)
    assert sum(e["event"] == "command_refused" for e in events) == 6  # 2 per evaluator turn


def test_never_answering_ends_at_max_turns_with_exit_1(crate, api):
    calls = {"n": 0}

    def model(body):
        calls["n"] += 1
        return f"$(view src/main.rs:{calls['n']}-{calls['n']})"

    r = agent(crate, api, "--v1", "--max-turns", "5", "-n", "What is this?", model=model)
    assert r.returncode == 1
    assert calls["n"] == 5
    assert "turn limit" in r.stderr
    assert "Resume with: moss @agent --resume" in r.stderr
    assert r.stdout == ""


def test_repeated_command_warns_then_ends_with_loop(crate, api):
    r = agent(crate, api, "--v1", "-n", "--output-format", "json", "What is this?",
              model=lambda body: "$(view src/main.rs)")
    assert r.returncode == 1
    result = json.loads(r.stdout)
    assert result["reason"] == "loop"
    assert result["turns"] == 4
    third = last_user_text(bodies(api)[3])
    assert "this is the 3rd time you asked for `view src/main.rs`" in third


def test_no_new_evidence_forces_one_answer_then_cycle_limit(crate, api):
    def model(body):
        if state_of(body) == "evaluator":
            return "Not enough yet."
        return "I have no idea what to look at."

    r = agent(crate, api, "--v2", "-n", "--output-format", "json", "What is this?", model=model)
    assert r.returncode == 1
    result = json.loads(r.stdout)
    assert result["reason"] == "cycle_limit"
    forced = last_user_text(bodies(api)[-1])
    assert lua_value("lib.machine.runner", "FORCE_ANSWER") in forced
    assert result["turns"] == 11  # 5 explorer + 5 evaluator + 1 forced


def test_forced_answer_is_accepted(crate, api):
    force = lua_value("lib.machine.runner", "FORCE_ANSWER")

    def model(body):
        text = last_user_text(body)
        if force in text:
            return "$(answer probably a CLI)"
        if state_of(body) == "evaluator":
            return "Not enough yet."
        return "hmm"

    r = agent(crate, api, "--v2", "-n", "--output-format", "json", "What is this?", model=model)
    result = json.loads(r.stdout)
    assert r.returncode == 0 and result["answer"] == "probably a CLI" and result["forced"] is True


def test_unknown_command_comes_back_naming_known_ones(crate, api):
    api.push("$(frobnicate src) $(view Cargo.toml)",
             lambda body: "$(answer ok)" if "unknown command `frobnicate`" in last_user_text(body) else "no")
    r = agent(crate, api, "--v1", "-n", "What is this?")
    assert r.stdout.strip() == "ok", r.stderr
    second = last_user_text(bodies(api)[1])
    with builtin_lua() as (rt, _root):  # every built-in command, as moss lists them
        known = rt.to_py(rt.execute('return require("lib.machine.commands").known()'))
    assert "text-search" in known and "view" in known and ", ".join(known) in second


def test_stream_json_transcript(crate, api):
    r = agent(crate, api, "--v2", "-n", "--output-format", "stream-json", "How many variants does Provider have?",
              model=Model("provider"))
    assert r.returncode == 0, r.stderr
    events = [json.loads(line) for line in r.stdout.splitlines()]
    types = [e["type"] for e in events]
    assert types[0] == "session_start" and types[-1] == "result"
    assert types.count("turn") == 4 and types.count("assistant") == 4
    assert events[-1]["answer"] == "13" and events[-1]["session_id"] == events[0]["session_id"]
    cmds = [e for e in events if e["type"] == "command"]
    assert cmds[0]["cmd"] == 'text-search "enum Provider"' and "llm.rs" in cmds[0]["output"]


def test_context_stays_bounded_by_what_is_kept(crate, api):
    calls = {"n": 0}

    def model(body):
        calls["n"] += 1
        k = calls["n"]
        return f"$(view src/main.rs:{k * 5}-{k * 5 + 4}) $(view src/config.rs:1-{k})"

    agent(crate, api, "--v1", "-n", "--max-turns", "12", "What is this?", model=model)
    sizes = [len(last_user_text(b)) for b in bodies(api)]
    assert len(sizes) == 12
    # Nothing was kept, so turn 12 carries about what turn 2 did, not eleven turns of output.
    assert max(sizes[1:]) < 2.5 * sizes[1]


def test_no_task_and_bad_flags_exit_2(crate, api):
    r = crate.moss("@agent")
    assert r.returncode == 2 and "no task given" in r.stderr
    r = crate.moss("@agent", "--frob", "x")
    assert r.returncode == 2 and "unknown option --frob" in r.stderr
    r = crate.moss("@agent", "--machine", "nope", "x", env=api.env())
    assert r.returncode == 2 and "no machine 'nope'" in r.stderr


def test_no_llm_configured_exits_2_with_the_three_ways(crate):
    r = crate.moss("@agent", "-n", "hello")
    assert r.returncode == 2
    assert "ANTHROPIC_API_KEY" in r.stderr and "--provider" in r.stderr and "config.toml" in r.stderr


def test_task_file_and_project_machine(crate, api):
    crate.write("tasks.md", "How many variants does Provider have?\n")
    crate.write(".moss/scripts/machines/solo.lua", """
        local v1 = require("machines.v1")
        local m = { name = "solo", start = "agent", max_turns = 3, states = { agent = v1.states.agent } }
        return m
    """)
    r = agent(crate, api, "--machine", "solo", "--task-file", "tasks.md", model=Model("provider"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "13"
    assert "How many variants" in last_user_text(bodies(api)[0])


def test_help_lists_flags(crate):
    r = crate.moss("@agent", "--help")
    assert r.returncode == 0
    for flag in ("--v2", "--plan", "--max-turns", "--task-file", "--output-format", "--machine", "--provider"):
        assert flag in r.stdout


def test_user_machine_with_function_next_and_all_outputs(crate, api):
    """A recovery state reached through a Lua `next` function, and the all_outputs context mode."""
    crate.write(".moss/scripts/machines/careful.lua", """
        local v2 = require("machines.v2")
        local m = { name = "careful", start = "explorer", max_turns = 8, states = {} }
        m.states.explorer = v2.states.explorer
        m.states.explorer.next = function(S, verdict)
          for _, o in ipairs(verdict.outputs or {}) do
            if not o.ok then return "recovery" end
          end
          return "judge"
        end
        m.states.recovery = { prompt = "You are RECOVERY. A command failed; suggest a fix.",
                              context = "last_outputs", commands = { "tools" }, next = "judge" }
        m.states.judge = { prompt = "You are the JUDGE.", context = "all_outputs",
                           commands = { "answer" }, concludes = true, next = "explorer" }
        return m
    """)
    replies = ["$(view src/nosuch.rs)", "$(view Cargo.toml)",
               lambda body: "$(answer it is moss)" if "Turn 1 (explorer)" in last_user_text(body)
               and "Turn 2 (recovery)" in last_user_text(body) else "$(answer ?)"]
    api.push(*replies)
    r = agent(crate, api, "--machine", "careful", "-n", "What is this crate?")
    assert r.stdout.strip() == "it is moss", r.stderr
    assert [state_of(b) for b in bodies(api)] == ["explorer", "recovery", "judge"]
    assert system_text(bodies(api)[1]).startswith("You are RECOVERY.")  # the machine's own prompt


def test_view_and_text_search_commands_for_people(crate):
    r = crate.moss("view", "llm.rs")
    assert r.returncode == 0 and r.stdout.startswith("# src/workflow/llm.rs")
    assert "pub enum Provider L6-21" in r.stdout
    r = crate.moss("view", "src/main.rs:13-14")
    assert "13 | " in r.stdout
    r = crate.moss("view", "mod.rs.nope")
    assert r.returncode == 2 and "no such file" in r.stderr
    r = crate.moss("text-search", "enum Provider", "--only", "*.rs")
    assert r.returncode == 0 and "src/workflow/llm.rs:" in r.stdout and "1 match in 1 file" in r.stdout
    r = crate.moss("text-search", "(unclosed")
    assert r.returncode == 2 and "unclosed group" in r.stderr


def test_parallel_runs_read_only_primitives_in_order(crate):
    crate.script("par", """
        local r = moss.parallel({ {"code.view", "Cargo.toml"}, {"code.search", "("}, {"code.view", "llm.rs/Provider"} })
        print(r[1].ok, r[2].ok, r[2].kind, r[3].ok, r[3].value:match("^# src/workflow/llm.rs/Provider") ~= nil)
        local ok, err = pcall(moss.parallel, { {"fs.write", "x", "y"} })
        print(ok, moss.error_kind(err))
    """)
    r = crate.moss("@par")
    assert r.stdout.splitlines() == ["true\tfalse\tusage\ttrue\ttrue", "false\tusage"], r.stderr


def test_same_command_with_new_output_is_not_a_loop(crate, api):
    """Re-running tests after each edit is progress, not a loop: only unchanged output counts."""
    crate.write(".moss/scripts/roles/poller.lua", """
        local base = require("roles.explorer")
        return { name = "poller", description = "x", access = "full", commands = { "run" }, prompts = base.prompts }
    """)
    # its shell writes count as edits; this test is about loops, not the crate's `cargo check`
    crate.write(".moss/config.toml", "[agent]\nvalidate_on = \"never\"\n")
    n = {"i": 0}

    def model(body):
        n["i"] += 1
        return "$(answer done)" if n["i"] > 5 else "$(run echo tick >> ticks.txt && wc -l < ticks.txt)"

    # appending to a file is rated medium, so it runs without asking at --auto-approve medium
    r = agent(crate, api, "--v1", "-n", "--allow-full", "--role", "poller", "--auto-approve", "medium", "count",
              model=model)
    assert r.returncode == 0, r.stderr
    assert (crate.root / "ticks.txt").read_text().count("tick") == 5


@pytest.mark.slow
def test_memorize_persists_and_is_recalled_next_session(crate, api):
    api.push("$(note looked) $(memorize Provider enum lives in src/workflow/llm.rs) $(answer noted)")
    r = agent(crate, api, "--v1", "-n", "Where is the Provider enum?")
    assert r.returncode == 0, r.stderr
    facts = (crate.root / ".moss/memory/facts.md").read_text()
    assert "- Provider enum lives in src/workflow/llm.rs (" in facts
    api.push(lambda body: "$(answer from memory)" if "(remembered, .moss/memory/facts.md) Provider enum lives"
             in last_user_text(body) else "$(answer no memory)")
    r = agent(crate, api, "--v1", "-n", "How many variants does the Provider enum have?")
    assert r.stdout.strip() == "from memory"
    crate.script("forgetit", 'print(moss.memory.forget("Provider enum"), #moss.memory.all())\n')
    assert crate.moss("@forgetit").stdout.strip() == "1\t0"


def test_a_drop_leaves_the_cached_prompt_prefix_as_it_was(crate, api):
    """$(drop ID) takes a kept result out of working memory without rewriting the prompt
    after it: the next request starts with every block the previous one sent as memory,
    byte for byte (the dropped result still in its place, then a line naming it as
    removed), so the provider reads them from its cache; the memory no longer holds it."""
    import re

    said: list[str] = []

    def model(body):
        user = last_user_text(body)
        n = len(said)
        if n == 0:
            reply = "$(view src/workflow/llm.rs)"
        elif n == 1:
            reply = "$(keep 1) $(note the enum is in llm.rs) $(view src/main.rs)"
        elif n == 2:
            reply = "$(keep 1) $(note main.rs parses the CLI) $(view src/config.rs)"
        elif n == 3:
            kept = re.search(r"\[(\w{4})\] `view src/workflow/llm.rs`", user)
            reply = f"$(drop {kept.group(1)}) $(note llm.rs is no longer needed) $(view src/workflow/mod.rs)"
        else:
            reply = "$(answer 13)"
        said.append(reply)
        return reply

    r = agent(crate, api, "--v1", "-n", "--output-format", "json", "How many variants does Provider have?",
              model=model)
    assert r.returncode == 0, r.stderr
    dropped = re.search(r"\$\(drop (\w{4})\)", said[3]).group(1)
    before, after = bodies(api)[3]["messages"][0]["content"], bodies(api)[4]["messages"][0]["content"]
    marked = max(i for i, b in enumerate(before) if "cache_control" in b)  # the end of its memory
    assert [b["text"] for b in after[:marked + 1]] == [b["text"] for b in before[:marked + 1]]
    memory = "".join(b["text"] for b in after[:-1])
    assert f"[{dropped}] `view src/workflow/llm.rs`" in memory
    assert f"removed [{dropped}]" in memory
    session = json.loads(sorted((crate.root / ".moss" / "agent").glob("session-*.json"))[-1].read_text())
    assert dropped not in [it["id"] for it in session["mem"]["items"]]
    assert len(session["mem"]["items"]) == 4  # three notes and the result kept from main.rs

def test_stable_context_prefix_is_billed_as_cache_reads(crate, api):
    """Working memory only grows at its end and is sent as cacheable blocks: later turns read it from cache."""
    model = Model("provider")
    r = agent(crate, api, "--v1", "-n", "--output-format", "json", "How many variants does Provider have?",
              model=model)
    assert r.returncode == 0, r.stderr
    turn3 = bodies(api)[2]["messages"][0]["content"]
    assert isinstance(turn3, list) and any("cache_control" in b for b in turn3)
    marked = [b["text"] for b in turn3 if "cache_control" in b]
    assert H["task"] in turn3[0]["text"] and H["new_results"] not in "".join(marked)
    usage = json.loads(r.stdout)["usage"]
    assert usage["cache_read_tokens"] > 0
