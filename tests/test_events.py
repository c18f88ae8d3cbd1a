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


@pytest.mark.slow
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


@pytest.mark.slow
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
    # Every record these sessions logged is a declared event with declared fields.
    seen: set[str] = set()
    for log in (crate.root / ".moss" / "agent" / "logs").glob("*.jsonl"):
        seen |= check_log_records([json.loads(line) for line in log.read_text().splitlines()])
    assert {"session_start", "session_resume", "max_turns", "done", "session_end"} <= seen


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


# ---- the one declaration (host/api/events.lua) ------------------------------------------

from moss.api import declare  # noqa: E402

DECLARED = declare.parse_events((REPO / "host" / "api" / "events.lua").read_text(encoding="utf-8"))
LOGGED = {name for (group, name) in DECLARED if group == "log"}
BASE = {"event", "ts", "session", "parent"}  # what moss.session.log and ctx.log add to every record

# Where code names the event it logs: `ctx.log("name", ...)` (Python and Lua), the LLM
# client's `_emit("name", ...)`, a module's `log(S, "name", ...)` and `moss.session.log(id, "name", ...)`.
_LOG_CALLS = [re.compile(r'\.(?:_?log)\(\s*"([a-z_]+)"'), re.compile(r'\b_?emit\(\s*"([a-z_]+)"'),
              re.compile(r'(?<![.\w])_?log\(\s*"([a-z_]+)"'), re.compile(r'\blog\(\s*[\w.]+\s*,\s*"([a-z_]+)"'),
              re.compile(r'moss\.session\.log\(\s*[^,()]+(?:\([^()]*\))?\s*,\s*"([a-z_]+)"')]


def logged_in_code() -> dict[str, str]:
    """Every event name the code under host/ and scripts/ logs, with one place that does."""
    found: dict[str, str] = {}
    files = [*(REPO / "host").rglob("*.py"),
             *(p for p in (REPO / "scripts").rglob("*.lua") if "types" not in p.parts)]
    for path in sorted(files):
        text = path.read_text(encoding="utf-8")
        for pattern in _LOG_CALLS:
            for m in pattern.finditer(text):
                found.setdefault(m[1], f"{path.relative_to(REPO)}:{text.count(chr(10), 0, m.start()) + 1}")
    return found


def check_log_records(records: list[dict]) -> set[str]:
    """Each record's event is declared, carries only declared fields, each of its declared
    type, and every field declared as always there; the events seen."""
    for rec in records:
        ev = DECLARED.get(("log", rec["event"]))
        assert ev is not None, f"undeclared log event in a real session: {rec}"
        extra = set(rec) - BASE - {f.name for f in ev.fields}
        assert not extra, f"{rec['event']} has fields host/api/events.lua does not declare: {sorted(extra)}"
        errors = list(jsonschema.Draft202012Validator(declare.log_schema(DECLARED, rec["event"])).iter_errors(rec))
        assert not errors, f"{rec['event']}: {errors[0].message} (host/api/events.lua)\n{rec}"
    return {r["event"] for r in records}


def test_every_event_the_code_logs_is_declared_and_every_declared_one_is_logged():
    """A new `ctx.log("name", ...)` or `log(S, "name", ...)` anywhere in host/ or scripts/
    needs its block in host/api/events.lua (and so a row in docs/events.md); a block whose
    event no code logs any more is stale."""
    found = logged_in_code()
    assert {"child_start", "child_end", "llm_request", "turn_start", "spawn", "wild_sweep", "session_end"} <= set(found)
    undeclared = {name: where for name, where in found.items() if name not in LOGGED}
    assert not undeclared, f"declare these in host/api/events.lua, then run python -m moss.api: {undeclared}"
    assert LOGGED - set(found) == set(), f"declared but never logged: {sorted(LOGGED - set(found))}"


def test_every_child_event_a_child_reports_is_declared():
    """A child's runner reports its events through moss.agents.progress; the host renames
    each `child_TYPE` on the parent's stream, so each has its schema."""
    source = (REPO / "scripts" / "lib" / "machine" / "output.lua").read_text()
    reported = set(re.findall(r'moss\.agents\.progress \{ type = "(\w+)"', source)) | {"result"}
    assert {"session_start", "turn", "assistant", "command"} <= reported
    in_schema = {ref["$ref"].rsplit("/", 1)[1] for ref in SCHEMA["oneOf"]}
    assert {f"child_{t}" for t in reported} <= in_schema
    jsonschema.Draft202012Validator.check_schema(SCHEMA)  # the generated schema is itself valid


def test_a_session_with_a_child_streams_and_logs_only_declared_events(project, api):
    """A parent that spawns a child and awaits it: every stdout line, the child's
    `child_*` lines included, fits the schema, and every record of both session logs is a
    declared event with declared fields."""
    from test_spawn import ARGS, calc_py, parent_model

    project.write("calc.py", calc_py(3))
    api.push(*[parent_model()] * 20)
    r = project.moss("@agent", "--spawn", "-n", "--output-format", "stream-json", "how many functions?",
                     *ARGS, env=api.env())
    assert r.returncode == 0, r.stderr
    events = events_of(r)
    types = {e["type"] for e in events}
    assert {"child_session_start", "child_turn", "child_assistant", "child_command", "child_result"} <= types
    logs = sorted((project.root / ".moss" / "agent" / "logs").glob("*.jsonl"))
    assert len(logs) == 2  # the parent's and its child's
    seen: set[str] = set()
    for log in logs:
        seen |= check_log_records([json.loads(line) for line in log.read_text().splitlines()])
    assert {"session_start", "turn_start", "spawn", "child_start", "child_end", "session_end", "llm_request"} <= seen
