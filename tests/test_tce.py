"""`moss @agent --machine tce`: thinking / commanding / evaluating / paging, end to end.

The real CLI and the real OpenAI/Anthropic SDKs against the fake API server. The scripted
models read their state from the label moss sends with each request and decide from the
working memory they are shown, like a model would; nothing is known in advance.
"""

from __future__ import annotations

import json
import re

import pytest
from fakeapi import FakeAPI, last_user_text, system_text
from fakeapi import state_of as fakeapi_state_of


@pytest.fixture
def api():
    with FakeAPI() as server:
        yield server


def tce(project, api, *args, replies=None, provider="openai", timeout=60):
    if replies is not None:
        api.push(*replies)
    return project.moss("@agent", "--provider", provider, "--machine", "tce", "-n", *args, env=api.env(),
                        timeout=timeout)


def state_of(body) -> str:
    """thinking, commanding, evaluating or paging: the state moss labelled the request with."""
    return fakeapi_state_of(body)


def wm_block(text: str) -> str:
    m = re.search(r"<working_memory>.*?</working_memory>", text, re.S)
    return m.group(0) if m else ""


def entries(text: str) -> dict[str, str]:
    """The leaf <entry key="K">V</entry> items of a request's context."""
    return dict(re.findall(r'<entry key="([^"]*)">([^<\n]*)</entry>', text))


def command_log(text: str) -> str:
    """The newest command_log entry of a request's working memory ("Action: <type>, ...")."""
    logs = sorted((k, v) for k, v in entries(text).items() if k.startswith("command_log_"))
    return logs[-1][1] if logs else ""


def states(api) -> list[str]:
    return [state_of(r.body) for r in api.requests]


def users(api) -> list[str]:
    return [last_user_text(r.body) for r in api.requests]


def checkpoint(project, sid):
    return json.loads((project.root / ".moss/agent" / f"session-{sid}.json").read_text())


def store(project, name="tce"):
    return json.loads((project.root / ".moss/agent/store" / f"{name}.json").read_text())


def events(project, sid):
    log = (project.root / ".moss/agent/logs" / f"{sid}.jsonl").read_text()
    return [json.loads(line) for line in log.splitlines()]


ANSWER = "<action><type>answer</type><value>{}</value></action>"


class FactModel:
    """Saves a fact under some tags, finds it again by the same tags written differently,
    loads it and answers with it. Every decision comes from the working memory shown."""

    def __init__(self):
        self.calls: list[str] = []

    def __call__(self, body) -> str:
        state = state_of(body)
        self.calls.append(state)
        wm = entries(last_user_text(body))
        last = next((v for k, v in sorted(wm.items()) if k.startswith("command_log_")), "")
        if state == "thinking":
            return ("I have a plan.\n<think_log>Store the fact, find it again by its tags, then answer."
                    "</think_log>\n<next_state>commanding</next_state>")
        if state == "commanding":
            if not last:
                return ("<action><type>storage_save</type><tags>Project Facts, Answer</tags>"
                        "<value>the answer is 42</value></action>")
            if last.startswith("Action: storage_save"):
                return '```xml\n<action type="storage_search"><tags>answer , PROJECT FACTS, answer</tags></action>\n```'
            if last.startswith("Action: storage_search"):
                found = wm["answer,project_facts"]  # search_results: query -> matching keys
                return f"<action><type>storage_load</type><tags>{found}</tags></action>"
            raise AssertionError(last)
        if state == "evaluating":
            m = re.search(r">the answer is (\d+)</entry>", last_user_text(body))
            if m:
                return ANSWER.format(m.group(1))
            return "<evaluation_log>Progress, not done yet.</evaluation_log><next_state>commanding</next_state>"
        raise AssertionError(state)


def test_full_run_thinks_commands_evaluates_and_answers(project, api):
    model = FactModel()
    r = tce(project, api, "--output-format", "json", "Remember the answer, then tell me what it is.",
            replies=[model] * 12, provider="anthropic")
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["answer"] == "42" and result["reason"] == "answered" and result["machine"] == "tce"
    assert model.calls == ["thinking", "commanding", "evaluating", "commanding", "evaluating",
                           "commanding", "evaluating"]
    u = users(api)
    # every call sees working memory, starting with the task
    assert '<entry key="task">Remember the answer, then tell me what it is.</entry>' in u[0]
    assert "think_log_001" in u[1] and "Store the fact" in u[1]
    # storage_save normalised the tags; the search found it with other order, case and a duplicate
    assert command_log(u[2]).startswith("Action: storage_save") and "answer,project_facts" in command_log(u[2])
    assert entries(u[4])["answer,project_facts"] == "answer,project_facts"  # the search's one match
    assert command_log(u[4]).startswith("Action: storage_search") and "answer,project_facts" in command_log(u[4])
    assert '<entry key="answer,project_facts">the answer is 42</entry>' in u[6]  # storage_load copied it
    # command_log keeps max_entries = 1 by default: only the newest
    assert "command_log_001" in u[6] and "command_log_002" not in u[6]
    assert store(project) == {"answer,project_facts": "the answer is 42"}
    assert (project.root / ".moss/agent/.gitignore").exists()
    # each state asks with its own system prompt
    reqs = [q.body for q in api.requests]
    assert [state_of(b) for b in reqs[:3]] == ["thinking", "commanding", "evaluating"]
    assert len({system_text(b) for b in reqs[:3]}) == 3
    ev = events(project, result["session_id"])
    moves = [(e["from"], e["to"]) for e in ev if e["event"] == "transition"]
    assert moves[:3] == [("thinking", "commanding"), ("commanding", "evaluating"), ("evaluating", "commanding")]


def test_transitions_and_invalid_next_state(project, api):
    r = tce(project, api, "--output-format", "json", "Check the transitions.", replies=[
        "<next_state>dancing</next_state>",                      # invalid -> thinking, recorded
        "<next_state>evaluating</next_state>",
        "<evaluation_log>nothing yet</evaluation_log>",          # no next_state -> thinking
        "<think_log>act now</think_log><next_state>Commanding</next_state>",
        "<action><type>working_memory_add</type><tags>my note</tags><value>hello</value></action>",
        "<evaluation_log>noted</evaluation_log>\n" + ANSWER.format("transitions ok"),
    ])
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["answer"] == "transitions ok"
    assert states(api) == ["thinking", "thinking", "evaluating", "thinking", "commanding", "evaluating"]
    u = users(api)
    wm = entries(u[1])
    # the refusal names the state asked for and is logged as that command's result (the words
    # around it are scripts/lib/tce/step.lua's)
    refused = wm["state_transition_invalid"]
    assert "'dancing'" in refused
    assert wm["command_log_001"] == f"Action: state_transition, Tags: dancing, Result: {refused}"
    assert "state_transition_invalid" not in u[2]  # cleared by the next valid transition
    assert entries(u[3])["evaluation_log_001"] == "nothing yet"
    assert entries(u[5])["my_note"] == "hello"  # working-memory keys: spaces -> _


def test_unknown_action_type_is_logged_and_resets_to_thinking(project, api):
    r = tce(project, api, "What now?", replies=[
        "<next_state>commanding</next_state>",
        "<action><type>frobnicate</type><tags>x</tags><value>y</value></action>",
        lambda body: ANSWER.format("saw: " + entries(last_user_text(body))["command_log_001"]),
    ])
    assert r.returncode == 0, r.stderr
    assert states(api) == ["thinking", "commanding", "thinking"]
    assert r.stdout.startswith("saw: Action: frobnicate, Tags: x, Result: ")
    result = r.stdout.split("Result: ", 1)[1]
    assert "'frobnicate'" in result and "storage_save" in result  # names the type, and the known ones


def test_log_rotation_keeps_max_entries_fifo(project, api):
    project.write(".moss/config.toml", """
        [agent.tce]
        think_log = { enable = true, max_entries = 3, key_prefix = "thought_" }
        evaluation_log = { enable = false }
    """)
    n = {"i": 0}

    def model(body):
        n["i"] += 1
        if state_of(body) == "evaluating":
            return "<evaluation_log>not kept</evaluation_log>" + ANSWER.format(n["i"])
        if n["i"] <= 5:
            return f"<think_log>thought {n['i']}</think_log><next_state>thinking</next_state>"
        return "<next_state>evaluating</next_state>"

    r = tce(project, api, "--output-format", "json", "Think a lot.", replies=[model] * 8)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    wm = entries(users(api)[5])
    logs = {k: v for k, v in wm.items() if k.startswith("thought_")}
    assert logs == {"thought_001": "thought 3", "thought_002": "thought 4", "thought_003": "thought 5"}
    saved = checkpoint(project, result["session_id"])["tce"]["wm"]
    assert not any(k.startswith("evaluation_log") for k in saved)  # disabled
    assert "think_log_001" not in saved  # the configured prefix is used


def test_storage_persists_to_a_second_session(project, api):
    r1 = tce(project, api, "--output-format", "json", "Remember how to deploy.", replies=[
        "<next_state>commanding</next_state>",
        "<action><type>storage_save</type><tags>deploy, How To</tags><value>run make ship</value></action>",
        "<evaluation_log>saved</evaluation_log>" + ANSWER.format("remembered"),
    ])
    assert r1.returncode == 0, r1.stderr

    def second(body):
        state, text = state_of(body), last_user_text(body)
        wm = entries(text)
        if state == "thinking":
            return "<next_state>commanding</next_state>"
        if state == "commanding":
            if "search_results" not in text:
                return "<action><type>storage_search</type><tags>DEPLOY</tags></action>"
            return f"<action><type>storage_load</type><tags>{wm['deploy']}</tags></action>"
        if "deploy,how_to" in wm:
            return ANSWER.format(wm["deploy,how_to"])
        return "<next_state>commanding</next_state>"

    r2 = tce(project, api, "--output-format", "json", "How do we deploy?", replies=[second] * 8)
    assert r2.returncode == 0, r2.stderr
    one, two = json.loads(r1.stdout), json.loads(r2.stdout)
    assert two["answer"] == "run make ship"
    assert one["session_id"] != two["session_id"]
    assert checkpoint(project, two["session_id"])["tce"]["wm"]["search_results"] == {"deploy": "deploy,how_to"}


def test_paging_archives_old_logs_and_shrinks_the_context(project, api):
    project.write(".moss/config.toml", """
        [agent.tce]
        think_log = { max_entries = 4 }
        [agent.tce.paging_limit]
        enable = true
        max_tokens = 150
    """)
    seen = {"paged": False}

    def model(body):
        state, text = state_of(body), last_user_text(body)
        wm = entries(text)
        if state == "paging":
            assert "<entries_to_page>" in text and "<working_memory>" not in text
            paged = [v for k, v in wm.items() if k.startswith("think_log_")]
            seen["paged"] = True
            return f"<summary>Looked at {len(paged)} areas; nothing found yet.</summary>"
        if state == "thinking":
            if seen["paged"]:
                if "search_results" in text:
                    return ANSWER.format("archived: " + wm["archive,thinking"])
                return "<next_state>commanding</next_state>"
            n = sum(k.startswith("think_log_") for k in wm) + 1
            return f"<think_log>thought {n}: " + "looked at one more area of the code " * 5 + "</think_log>" \
                "<next_state>evaluating</next_state>"
        if state == "commanding":
            return "<action><type>storage_search</type><tags>Thinking, ARCHIVE</tags></action>"
        return "<evaluation_log>go on</evaluation_log><next_state>thinking</next_state>"

    r = tce(project, api, "--output-format", "json", "Explore until memory is full.", replies=[model] * 20)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    st = states(api)
    i = st.index("paging")
    assert st[i - 1] == "evaluating" and st[i + 1] == "thinking"
    assert st[:i] == ["thinking", "evaluating"] * (i // 2)
    u = users(api)
    before, after = wm_block(u[i - 1]), wm_block(u[i + 1])
    assert len(after) < len(before) - 150, (before, after)
    # the summary replaced the paged entries; the newest entry stays, renumbered from 001
    wm = entries(after)
    assert wm["paging_summary"].startswith("Looked at ")
    assert wm["think_log_001"].startswith(f"thought {i // 2}:")
    assert "think_log_002" not in wm and "thought 1:" not in after
    # the paged entries are in storage, findable by tags
    archive = {k: v for k, v in store(project).items() if k.startswith("archive,")}
    assert len(archive) == 1
    (key, text), = archive.items()
    assert set(key.split(",")) == {"archive", "thinking", f"page_{result['session_id']}_001"}
    assert text.startswith("think_log_001: thought 1:")
    assert result["answer"] == f"archived: {key}"
    paging = [e for e in events(project, result["session_id"]) if e["event"] == "paging"]
    assert len(paging) == 1 and paging[0]["after"] < paging[0]["before"]


def test_checkpoint_and_resume_continue_in_the_right_state(project, api):
    r1 = tce(project, api, "--max-turns", "3", "--output-format", "json", "What colour is the sky?", replies=[
        "<think_log>note the colour</think_log><next_state>commanding</next_state>",
        "<action><type>working_memory_add</type><tags>sky colour</tags><value>blue</value></action>",
        "<evaluation_log>stored the colour</evaluation_log><next_state>commanding</next_state>",
    ])
    assert r1.returncode == 1, r1.stderr
    first = json.loads(r1.stdout)
    assert first["reason"] == "max_turns"
    saved = checkpoint(project, first["session_id"])
    assert saved["state"] == "commanding" and saved["tce"]["wm"]["sky_colour"] == "blue"

    api.push(lambda body: ANSWER.format(entries(last_user_text(body))["sky_colour"]))
    r2 = project.moss("@agent", "--provider", "openai", "-n", "--resume", first["session_id"], env=api.env())
    assert r2.returncode == 0, r2.stderr
    assert r2.stdout.strip() == "blue"
    resumed = api.requests[3].body
    assert state_of(resumed) == "commanding"
    wm = entries(last_user_text(resumed))
    assert wm["evaluation_log_001"] == "stored the colour" and wm["think_log_001"] == "note the colour"
    assert checkpoint(project, first["session_id"])["reason"] == "answered"


def test_grammar_tags_and_store_primitive(project):
    """The parser, tag normalisation and moss.store, straight from Lua."""
    project.script("probe", """
        local parse = require("lib.tce.parse")
        local tags = require("lib.tce.tags")
        local out = {}
        local r = parse.parse([[noise <Think_Log> hm </Think_Log> <NEXT_STATE> Evaluating </NEXT_STATE>
          <action type='storage_save'><tags> B b ,a,  c d ,a </tags><value> v </value></action>]])
        out.parsed = { r.next_state, r.think_log, r.action.type, r.action.tags, r.action.value }
        out.element_wins = parse.parse("<action type='x'><type>y</type></action>").action.type
        out.no_action = parse.parse("<actions>no</actions>").action == nil
        out.too_long = parse.parse("<action><type>storage_save</type><value>" .. ("x"):rep(2049)
          .. "</value></action>").action.error
        out.norm = { tags.normalize(" Zeta, alpha beta,ALPHA BETA,, b ") }
        local many = {}
        for i = 1, 65 do many[i] = "t" .. i end
        out.many = select(2, tags.normalize(table.concat(many, ",")))
        out.empty = select(2, tags.normalize(" , "))
        out.match = { tags.matches("a,bc,d", { "a", "d" }), tags.matches("a,bc,d", { "b" }) }
        moss.store.save("probe", { k = "v", n = 2 })
        out.loaded = moss.store.load("probe")
        out.missing = moss.store.load("nothing_here")
        local ok, err = pcall(moss.store.save, "../escape", {})
        out.bad = { ok, moss.error_kind(err) }
        print(moss.json.encode(out))
    """)
    r = project.moss("@probe")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["parsed"] == ["evaluating", "hm", "storage_save", "B b ,a,  c d ,a", "v"]
    assert out["element_wins"] == "y" and out["no_action"] is True
    assert out["too_long"].startswith("<value> too long")
    assert out["norm"] == ["alpha_beta,b,zeta", ["alpha_beta", "b", "zeta"]]
    assert out["many"] == "too many tags (65; at most 64)"
    assert out["empty"] == "no tags given"
    assert out["match"] == [True, False]
    assert out["loaded"] == {"k": "v", "n": 2} and out["missing"] == []
    assert out["bad"] == [False, "usage"]
    assert json.loads((project.root / ".moss/agent/store/probe.json").read_text()) == {"k": "v", "n": 2}
    assert (project.root / ".moss/agent/.gitignore").exists()
