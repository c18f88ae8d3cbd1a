"""What the host reads of a session is declared once (host/api/events.lua's
moss.events.session_row and moss.events.session_timeline): the built-in agent's `sessions`
entry gives exactly that, and the host reads nothing else of a session (docs/agent.md, "What
the host reads of a session")."""

from __future__ import annotations

import ast
import json

import jsonschema
import pytest
from conftest import REPO, lua_value

from moss import sessions
from moss.api import declare

EVENTS = declare.parse_events((REPO / "host" / "api" / "events.lua").read_text(encoding="utf-8"))
SCHEMA = json.loads((REPO / "docs" / "events.schema.json").read_text(encoding="utf-8"))


def declared(name: str) -> set[str]:
    return {f.name for f in EVENTS[("events", name)].fields}


def check(value, name: str) -> None:
    """`value` is a `moss.events.NAME` by the generated schema, with no field it does not declare."""
    errors = list(jsonschema.Draft202012Validator({"$ref": f"#/$defs/{name}", "$defs": SCHEMA["$defs"]})
                  .iter_errors(value))
    assert not errors, f"{name}: {errors[0].message}\n{value}"
    assert set(value) <= declared(name), f"{name} has undeclared fields {sorted(set(value) - declared(name))}"


@pytest.fixture
def saved(project):
    """A project with saved sessions as an agent leaves them, written by hand: an answered one
    holding fields the row does not declare, its answered child, an interrupted one and a
    corrupt one."""
    agent = project.root / ".moss" / "agent"
    (agent / "logs").mkdir(parents=True)

    def checkpoint(sid: str, **fields) -> None:
        (agent / f"session-{sid}.json").write_text(json.dumps({"session_id": sid, "saved_at": 1.0, **fields}))

    checkpoint("k3v9qz2m", task="count the variants", state="done", machine="v2", role="explorer", turn=3,
               done=True, reason="answered", answer="3 variants", secret_note="LEAK-1", mem={"notes": ["LEAK-2"]})
    checkpoint("k3v9qz2m-1", task="look", state="done", machine="v2", role="explorer", turn=1, done=True,
               reason="answered", answer="found them", parent="k3v9qz2m")
    checkpoint("p7w2rr4n", task="half done", state="work", machine="v2", role="coder", turn=2, done=False)
    (agent / "session-b2b2b2b2.json").write_text("{not json")
    (agent / "logs" / "k3v9qz2m.jsonl").write_text(
        json.dumps({"event": "session_start", "ts": 10.0, "session_id": "k3v9qz2m", "root": ".", "machine": "v2",
                    "session": "k3v9qz2m", "parent": None}) + "\n"
        + json.dumps({"event": "session_end", "ts": 12.5, "reason": "answered", "turns": 3,
                      "session": "k3v9qz2m", "parent": None}) + "\n")
    return project


def test_the_agents_listing_gives_the_declared_row_and_no_other_field(saved):
    """`sessions json`: one declared row per checkpoint, the corrupt one named in `error`; a
    field the checkpoint holds but the row does not declare never reaches the host."""
    r = saved.moss("@agent", "--entry", "sessions", "json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout.strip().splitlines()[-1])["sessions"]
    for row in rows:
        check(row, "session_row")
    by_id = {row["id"]: row for row in rows}
    assert set(by_id) == {"k3v9qz2m", "k3v9qz2m-1", "p7w2rr4n", "b2b2b2b2"}
    assert by_id["k3v9qz2m"] == {**by_id["k3v9qz2m"], "task": "count the variants", "reason": "answered",
                                 "turn": 3, "running": False, "done": True}
    assert by_id["k3v9qz2m"]["answer"] == "3 variants"  # what an MCP client reads of one that ended
    assert by_id["p7w2rr4n"]["reason"] == "interrupted"
    assert by_id["b2b2b2b2"]["reason"] == "corrupt" and "session-b2b2b2b2.json" in by_id["b2b2b2b2"]["error"]
    assert "LEAK" not in r.stdout


def test_the_agents_timeline_is_the_declared_one(saved):
    """`sessions timeline ID` (`moss ui`'s session page): the declared timeline, its child
    with its answer, its outcome."""
    r = saved.moss("@agent", "--entry", "sessions", "timeline", "k3v9qz2m")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout.strip().splitlines()[-1])
    check(data, "session_timeline")
    for row in data["rows"]:
        check(row, "timeline_row")
    check(data["outcome"], "session_outcome")
    [child] = data["children"]
    check(child, "session_child")
    assert child["id"] == "k3v9qz2m-1" and child["answer"] == "found them"
    assert data["outcome"]["reason"] == "answered" and [row["event"] for row in data["rows"]] == \
        ["session_start", "session_end"]


def test_the_built_in_agents_row_fields_are_the_declared_ones():
    """timeline.lua's M.ROW, the fields its listing copies into each row, is the declaration."""
    assert set(lua_value("lib.agent.timeline", "ROW")) == declared("session_row")


def test_the_host_reads_a_session_only_through_its_declared_fields():
    """What a script gives (a project's may give anything) is read as declared: fields of
    another type and fields not declared are gone, at every level; a row without a usable id
    is no row."""
    listing = {"sessions": [
        {"id": "k3v9qz2m", "running": False, "mtime": 5, "task": "t", "turn": 2.0, "reason": 7,
         "secret": "LEAK", "state": None},
        {"id": "../etc", "running": True}, {"running": True}, "k3v9qz2m"]}
    assert sessions.read_rows(listing) == [{"id": "k3v9qz2m", "running": False, "mtime": 5, "task": "t", "turn": 2}]
    timeline = sessions.read_timeline({
        "id": "k3v9qz2m", "secret": "LEAK", "last_failure": ["a", 3],
        "rows": [{"time": "1", "event": "e", "detail": "d", "style": None, "raw": "LEAK"}],
        "outcome": {"reason": "answered", "text": "answered", "exit": 0, "turns": 3, "resume": None, "cost": 1},
        "children": [{"id": "k3v9qz2m-1", "role": None, "state": "answered", "turns": 1, "answer": "a",
                      "isolation": {"text": "isolated", "state": "merged", "secret": "LEAK"},
                      "children": [{"id": "k3v9qz2m-1-1", "state": "running", "secret": "LEAK"}, {"id": 4}]},
                     {"id": "../runs", "state": "answered"}, {"id": 5}]})
    [child] = timeline["children"]  # a child whose id is no session id is left out at the top too
    grandchildren = child.pop("children")  # each level is read as the board walks down to it
    assert "LEAK" not in json.dumps(timeline) and timeline["last_failure"] == ["a"]
    assert timeline["outcome"] == {"reason": "answered", "text": "answered", "exit": 0, "turns": 3, "resume": None}
    assert child["isolation"] == {"text": "isolated", "state": "merged"}
    assert sessions.read_children(grandchildren) == [{"id": "k3v9qz2m-1-1", "state": "running"}]
    assert sessions.read_result({"reason": "answered", "success": "yes", "mem": {}}) == {"reason": "answered"}


# Where a raw checkpoint (every field a script saved) may be read: the store, the Lua face that
# hands it to scripts, and moss.agents.children, which hands a listing to the script too.
RAW_READERS = {"read_checkpoint", "list_checkpoints", "load_checkpoint"}
RAW_ALLOWED = {"host/api/session.py", "host/api/agents.py"}


def test_no_host_module_reads_a_raw_checkpoint_but_the_store_and_the_lua_face():
    """The rest of host/ reads a session through host/sessions/row.py (its declared row), never
    a checkpoint's fields themselves."""
    found = []
    for path in sorted((REPO / "host").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel.startswith("host/sessions/") or rel in RAW_ALLOWED:
            continue
        for node in ast.walk(ast.parse(path.read_bytes(), rel)):
            name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else \
                next((a.name for a in node.names if a.name in RAW_READERS), None) \
                if isinstance(node, ast.ImportFrom) else None
            if name in RAW_READERS:
                found.append(f"{rel}:{node.lineno} {name}")
    assert not found, f"read a session through moss.sessions' row readers instead: {found}"
