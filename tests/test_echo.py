"""A model that copies moss's own prompt back is not answering (scripts/lib/machine/echo.lua).

Small models echo their system prompt: its examples read as commands and `$(answer ...)`
as an answer. These sessions run the real CLI against the fake API server; the scripted
models copy whatever system prompt moss sent them, so nothing here depends on its wording.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
from conftest import FIXTURES, lua_value
from fakeapi import last_user_text, system_text


@pytest.fixture
def crate(project):
    shutil.copytree(FIXTURES / "rustcrate", project.root, dirs_exist_ok=True)
    subprocess.run(["git", "init", "-q"], cwd=project.root, check=True)
    return project


def run(project, api, replies, *args):
    api.push(*replies)
    return project.moss("@agent", "--provider", "anthropic", "-n", "--output-format", "json", *args,
                        "What does this project do?", env=api.env())


def events(project, sid):
    path = project.root / ".moss" / "agent" / "logs" / f"{sid}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def placeholder_answer(body) -> str:
    """The first `$(answer ...)`-like command in the system prompt that has `...` in it."""
    m = re.search(r"\$\(answer\s*\.\.\.[^)]*\)|\$\(answer [^)]*\.\.\.\)", system_text(body))
    assert m, "the prompt shows no placeholder answer to copy"
    return m.group(0)


def test_a_reply_that_echoes_the_system_prompt_ends_as_a_loop_and_runs_nothing(crate, api):
    r = run(crate, api, [system_text] * 10, "--v1")
    assert r.returncode == 1, r.stderr[-2000:]
    result = json.loads(r.stdout)
    assert result["reason"] == "loop" and result["success"] is False and result["answer"] is None
    log = events(crate, result["session_id"])
    assert [e["event"] for e in log if e["event"] in ("command", "done")] == []  # no example ran
    assert [e["count"] for e in log if e["event"] == "echo"] == [1, 2, 3]
    assert result["turns"] == 3


def test_the_echoed_prompt_of_a_v2_session_is_no_answer_either(crate, api):
    r = run(crate, api, [system_text] * 10, "--v2")
    result = json.loads(r.stdout)
    assert r.returncode == 1 and result["reason"] == "loop" and result["success"] is False
    assert not [e for e in events(crate, result["session_id"]) if e["event"] == "command"]


def test_a_placeholder_answer_copied_from_the_prompt_is_not_accepted(crate, api):
    """`$(answer...)` (spaced or not) is the prompt's placeholder: the session goes on, the
    model is told, and its real answer next turn is the one that stands."""
    def copy_spaceless(body):
        return "I will answer now. " + placeholder_answer(body).replace("answer ", "answer", 1)

    r = run(crate, api, [copy_spaceless, "$(answer A small Rust command-line tool.)"], "--v1")
    assert r.returncode == 0, r.stderr[-2000:]
    result = json.loads(r.stdout)
    assert result["answer"] == "A small Rust command-line tool." and result["turns"] == 2
    assert [e["turn"] for e in events(crate, result["session_id"]) if e["event"] == "echo"] == [1]
    told = f"**{lua_value('lib.machine.messages', 'HEADING')}:**"
    assert told in last_user_text(api.requests[1].body)  # the model was told


def test_only_placeholder_answers_end_as_a_loop(crate, api):
    r = run(crate, api, [placeholder_answer] * 10, "--v1")
    result = json.loads(r.stdout)
    assert r.returncode == 1 and result["reason"] == "loop" and result["success"] is False


def test_a_real_command_that_the_prompt_also_shows_as_an_example_runs(crate, api):
    """The prompt's example `$(view src/main.rs)` names a real file here: written by the
    model on its own, it is a command like any other."""
    example = {}

    def view_the_example(body):
        m = re.search(r"\$\(view src/main\.rs\)", system_text(body))
        assert m, "the prompt shows no `$(view src/main.rs)` example"
        example["cmd"] = m.group(0)
        return "Let me look at the entry point. " + m.group(0)

    def answer(body):
        assert "fn main" in last_user_text(body)
        return "$(answer It is a CLI whose entry point is src/main.rs.)"

    r = run(crate, api, [view_the_example, answer], "--v1")
    assert r.returncode == 0, r.stderr[-2000:]
    result = json.loads(r.stdout)
    assert result["reason"] == "answered" and result["success"] is True
    ran = [e for e in events(crate, result["session_id"]) if e["event"] == "command"]
    assert [(e["cmd"], e["ok"]) for e in ran] == [("view src/main.rs", True)]


def test_a_copied_placeholder_beside_real_commands_is_dropped_and_the_rest_runs(crate, api):
    def mixed(body):
        return "$(view Cargo.toml) " + placeholder_answer(body)

    def answer(body):
        return "$(answer A Rust crate.)"

    r = run(crate, api, [mixed, answer], "--v1")
    result = json.loads(r.stdout)
    assert r.returncode == 0 and result["answer"] == "A Rust crate." and result["turns"] == 2
    log = events(crate, result["session_id"])
    assert [e["cmd"] for e in log if e["event"] == "command"] == ["view Cargo.toml"]
    assert [len(e["cmds"]) for e in log if e["event"] == "command_echoed"] == [1]
