"""The stream-json events (docs/events.md) match their JSON Schema (docs/events.schema.json).

Every line the agent writes in real multi-turn sessions against the fake API server is
validated with `jsonschema` (installed with the mcp SDK): a V2 session with --include-partial,
a role pipeline (stage results), a session that cannot start, and a resumed one.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import jsonschema
import pytest
from agentmodel import Model
from conftest import FIXTURES, REPO

SCHEMA = json.loads((REPO / "docs" / "events.schema.json").read_text())
DOC = (REPO / "docs" / "events.md").read_text()
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


@pytest.fixture
def crate(project):
    shutil.copytree(FIXTURES / "rustcrate", project.root, dirs_exist_ok=True)
    subprocess.run(["git", "init", "-q"], cwd=project.root, check=True)
    return project


def events_of(r) -> list[dict]:
    out = []
    for line in r.stdout.splitlines():
        event = json.loads(line)  # every line of stdout is one JSON object
        errors = sorted(VALIDATOR.iter_errors(event), key=str)
        assert not errors, f"{line}\n{errors[0].message}"
        out.append(event)
    return out


def stream(project, api, *args, model=None, n=40):
    if model is not None:
        api.push(*([model] * n))
    return project.moss("@agent", "--provider", "anthropic", "-n", "--output-format", "stream-json", *args,
                        env=api.env(), timeout=90)


def test_every_event_of_a_multi_turn_session_matches_the_schema(crate, api):
    r = stream(crate, api, "--v2", "--include-partial", "How many variants does Provider have?",
               model=Model("provider"))
    assert r.returncode == 0, r.stderr
    events = events_of(r)
    types = [e["type"] for e in events]
    assert types[0] == "session_start" and types[-1] == "result"
    assert {"turn", "partial", "assistant", "command"} <= set(types)
    assert events[0]["schema"] == 1 and events[-1]["answer"] == "13"
    # The partial deltas of a turn, joined, are that turn's assistant text, and come before it.
    turns = [i for i, t in enumerate(types) if t == "turn"] + [len(events)]
    for a, b in zip(turns, turns[1:]):
        chunk = events[a:b]
        said = [e for e in chunk if e["type"] == "assistant"]
        assert len(said) == 1
        before = chunk[: chunk.index(said[0])]
        assert "".join(e["text"] for e in before if e["type"] == "partial") == said[0]["text"]
        assert {e.get("label") for e in before if e["type"] == "partial"} == {f"explorer/{events[a]['state']}"}
    # Without the flag there are no partial events, and nothing else changes.
    r2 = stream(crate, api, "--v2", "How many variants does Provider have?", model=Model("provider"))
    assert "partial" not in {e["type"] for e in events_of(r2)}


def test_pipeline_failure_and_resume_events_match_the_schema(crate, api):
    r = stream(crate, api, "--v2", "--role", "explorer,auditor", "How many variants does Provider have?",
               model=Model("provider"))
    events = events_of(r)
    types = [e["type"] for e in events]
    assert types.count("stage_result") == 2 and types[-1] == "result"
    assert [s["role"] for s in events[-1]["steps"]] == ["explorer", "auditor"]
    # A session that cannot start still ends with a result event.
    r = stream(crate, api, "--role", "nosuchrole", "anything")
    events = events_of(r)
    assert events[-1]["type"] == "result" and events[-1]["reason"] == "error" and events[-1]["error_kind"]
    # A turn-limited session, then resumed: session_start says so.
    api.replies.clear()
    r = stream(crate, api, "--v2", "--max-turns", "1", "How many variants does Provider have?",
               model=Model("provider"))
    first = events_of(r)
    assert first[-1]["reason"] == "max_turns"
    r = stream(crate, api, "--resume", first[0]["session_id"], "--max-turns", "8", model=Model("provider"))
    events = events_of(r)
    assert events[0]["resumed"] is True and events[-1]["answer"] == "13"


def test_the_doc_and_schema_cover_every_event_moss_emits():
    """Every `type = "..."` the output code emits is in the schema, documented with an
    example that itself validates; so is the host's partial event."""
    source = (REPO / "scripts" / "lib" / "machine" / "output.lua").read_text()
    emitted = set(re.findall(r'type = "(\w+)"', source)) | {"result", "stage_result"}
    emitted |= set(re.findall(r'"type": "(\w+)"', (REPO / "host" / "api" / "llm.py").read_text()))
    in_schema = {ref["$ref"].rsplit("/", 1)[1] for ref in SCHEMA["oneOf"]}
    assert emitted <= in_schema, emitted - in_schema
    examples = [json.loads(x) for x in re.findall(r"^(\{\"type\".*\})$", DOC, re.M)]
    for e in examples:
        assert not list(VALIDATOR.iter_errors(e)), e
    assert {e["type"] for e in examples} == in_schema
    for name in in_schema:
        assert f"### `{name}`" in DOC
