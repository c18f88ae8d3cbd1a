"""Checkpoints and resume, crash safety, logs, validation, snapshots, retry -> rollback -> ask."""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
from agentmodel import Model
from fakeapi import FakeAPI, last_user_text, state_of


CALC = 'def add(a, b):\n    """Add two numbers."""\n    return a - b\n'
TEST = 'from app.calc import add\nassert add(2, 3) == 5, f"add(2, 3) = {add(2, 3)}"\nprint("ok")\n'
PLAN = "1. Fix add.\nReady to refactor."


def git(root, *args):
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout


@pytest.fixture
def app(project):
    """A git repository with history, a staged change and a stash entry, plus validation config."""
    project.write("app/__init__.py", "")
    project.write("app/calc.py", CALC)
    project.write("test_calc.py", TEST)
    project.write("notes.txt", "v1\n")
    root = project.root
    git(root, "init", "-q")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "add", "app", "test_calc.py", "notes.txt")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    (root / "notes.txt").write_text("stashed change\n")
    git(root, "-c", "user.name=t", "-c", "user.email=t@t", "stash", "-q")
    (root / "notes.txt").write_text("staged\n")
    git(root, "add", "notes.txt")
    project.write(".moss/config.toml", """
        [agent]
        validate_commands = [ { name = "test", run = "python3 test_calc.py" } ]
        validate_on = "edit"
        max_retries = 1
    """)
    return project


def tree(root: Path) -> dict:
    """Every file outside .git/.moss: path -> sha256 of its bytes."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if p.is_file() and not rel.startswith((".git/", ".moss/")) and "__pycache__" not in rel:
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def git_state(root):
    """The user's git as moss must leave it. The index is hashed before `git status` runs,
    because status itself may refresh the index's stat cache."""
    index = hashlib.sha256((root / ".git/index").read_bytes()).hexdigest()
    return (index, git(root, "status", "--porcelain"), git(root, "stash", "list"), git(root, "branch", "-a"),
            git(root, "rev-parse", "HEAD"))


def events(project, sid):
    return [json.loads(line) for line in (project.root / f".moss/agent/logs/{sid}.jsonl").read_text().splitlines()]


def checkpoint(project, sid):
    """A session's saved state: its base file with the journal of later saves applied."""
    from moss.sessions import read_checkpoint

    return read_checkpoint(project.root / f".moss/agent/session-{sid}.json")


# ---- checkpoints, crash safety and resume -----------------------------------------------

def test_sigkill_then_resume_reaches_the_same_answer(crate, api):
    task = "How many variants does Provider have?"
    model = Model("provider")
    # Turn 3's reply is slow: the session is killed while waiting for it.
    api.push(model, model, lambda body: {"text": model(body), "delay": 30}, model, model)
    p = crate.popen("@agent", "--provider", "anthropic", "--v2", "-n", task, env=api.env())
    try:
        deadline = time.monotonic() + 30
        ckpt = None
        while time.monotonic() < deadline:
            files = list((crate.root / ".moss/agent").glob("session-*.json"))
            if files:
                ckpt = checkpoint(crate, files[0].stem[len("session-"):])
                if ckpt["turn"] == 2 and len(api.requests) == 3:
                    break
            time.sleep(0.05)
        assert ckpt and ckpt["turn"] == 2, ckpt
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=10)
    finally:
        if p.poll() is None:
            p.kill()
    sid = ckpt["session_id"]
    saved = checkpoint(crate, sid)  # valid JSON, nothing half-written
    assert saved["state"] == "explorer" and saved["turn"] == 2 and saved["done"] is False
    assert len(saved["mem"]["items"]) == 1  # the evaluator's keep survived
    assert not list((crate.root / ".moss/agent").glob(".session-*.tmp"))

    with FakeAPI() as api2:
        api2.push(*[Model("provider")] * 5)
        r = crate.moss("@agent", "--provider", "anthropic", "--resume", "-n", "--output-format", "json",
                       env=api2.env())
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["answer"] == "13" and result["session_id"] == sid and result["turns"] == 4
    names = [e["event"] for e in events(crate, sid)]
    assert names.count("session_start") == 1 and names.count("session_resume") == 1
    assert names.count("session_end") == 1 and names[-1] == "session_end"
    turns = [e["turn"] for e in events(crate, sid) if e["event"] == "turn_start"]
    assert turns[:2] == [1, 2] and turns[-2:] == [3, 4]

    # An uninterrupted run of the same task reaches the same answer.
    with FakeAPI() as api3:
        api3.push(*[Model("provider")] * 5)
        r2 = crate.moss("@agent", "--provider", "anthropic", "--v2", "-n", task, env=api3.env())
    assert r2.stdout.strip() == result["answer"]


def test_list_sessions_logs_and_timeline(crate, api):
    api.push(*[Model("provider")] * 5)
    r = crate.moss("@agent", "--provider", "anthropic", "--v2", "-n", "--output-format", "json",
                   "How many variants does Provider have?", env=api.env())
    sid = json.loads(r.stdout)["session_id"]
    table = crate.moss("@agent", "--list-sessions").stdout.splitlines()
    assert table[0].split("\t") == ["id", "age", "turns", "state", "reason", "task"]
    row = table[1].split("\t")
    assert row[0] == sid and row[2] == "4" and row[4] == "answered" and row[5].startswith("How many")
    logs = crate.moss("@agent", "--list-logs").stdout
    assert sid in logs.splitlines()[1]
    shown = crate.moss("sessions", "show", sid)
    assert shown.returncode == 0
    assert "turn 3 · explorer" in shown.stdout and "answered after 4 turns" in shown.stdout
    assert "view src/workflow/llm.rs/Provider" in shown.stdout
    assert crate.moss("sessions", "show", "nosuch").returncode == 2


def test_checkpoint_command_saves_and_ends(crate, api):
    api.push("$(checkpoint looked at main.rs | which provider is the default?)")
    r = crate.moss("@agent", "--provider", "anthropic", "--v1", "-n", "--output-format", "json", "explore",
                   env=api.env())
    assert r.returncode == 3  # open questions and nobody to answer them
    result = json.loads(r.stdout)
    assert result["reason"] == "blocked"
    saved = checkpoint(crate, result["session_id"])
    assert saved["progress"] == "looked at main.rs"
    assert saved["questions"] == "which provider is the default?"


def test_ask_interactive_and_non_interactive(crate, api):
    api.push("$(ask Which module matters most?)", lambda body: "$(answer " + (
        "user said " + last_user_text(body).split("User: ")[1].split("\n")[0] if "User: " in last_user_text(body)
        else "nobody answered") + ")")
    r = crate.moss("@agent", "--provider", "anthropic", "--v1", "explore", env={**api.env(), "MOSS_ASSUME_TTY": "1"},
                   input="the llm one\n")
    assert r.stdout.strip() == "user said the llm one", r.stderr
    api.push("$(ask Which module matters most?)",
             lambda body: "$(answer nobody answered)" if "Cannot ask" in last_user_text(body) else "$(answer ?)")
    r = crate.moss("@agent", "--provider", "anthropic", "--v1", "-n", "explore", env=api.env())
    assert r.stdout.strip() == "nobody answered"


# ---- validation, snapshots, escalation --------------------------------------------------

def failing_edits_model(state, stop_after_rollback=False):
    """A refactorer that makes a mess (a file via run, bad edits) and keeps failing validation."""
    edits = ['$(run touch junk.txt) $(edit app/calc.py --old "a - b" --new "a * b")',
             '$(edit app/calc.py --old "a * b" --new "a - b - 0")',
             '$(edit app/calc.py --old "a - b" --new "b - a")',
             '$(edit app/calc.py --old "b - a" --new "a - b + 0")']

    def model(body):
        user = last_user_text(body)
        if state_of(body) == "planner":
            return PLAN
        state["seen"].append(user)
        if stop_after_rollback and "[rollback]" in user:
            return "$(answer gave up after the rollback)"
        if len(state["seen"]) <= len(edits):
            return edits[len(state["seen"]) - 1]
        return "$(answer could not fix it)"
    return model


@pytest.mark.needs_sandbox
def test_validation_retry_then_rollback_restores_tree_and_leaves_user_git_alone(app, api):
    git_state(app.root)  # let git settle its own index refresh first
    before_tree, before_git = tree(app.root), git_state(app.root)
    state = {"seen": []}
    api.push(*[failing_edits_model(state, stop_after_rollback=True)] * 4)
    r = app.moss("@agent", "--provider", "anthropic", "--v1", "-n", "--refactor", "--auto-approve", "medium",
                 "--output-format", "json", "make test_calc.py pass", env=api.env())
    # the answer after the rollback claims work that was undone: step 3, blocked, not answered
    assert r.returncode == 3, r.stderr
    assert json.loads(r.stdout)["reason"] == "blocked"
    seen = state["seen"]
    assert "Validation FAILED at step test" in seen[1] and "[retry 1/1]" in seen[1]
    assert "add(2, 3) = 6" in seen[1]  # the head of the failing output reaches the model
    assert "[rollback]" in seen[2]
    # Byte-identical to before the session, including the file `run` created; user's git untouched.
    assert tree(app.root) == before_tree
    assert not (app.root / "junk.txt").exists()
    assert git_state(app.root) == before_git
    sid = json.loads(r.stdout)["session_id"]
    names = [e["event"] for e in events(app, sid)]
    # once on the untouched tree (the baseline), then after each of the two failing edits
    assert "rollback" in names and "rollback_done" in names and names.count("validation") == 3


@pytest.mark.needs_sandbox
def test_non_interactive_escalation_exits_3_and_resumes(app, api):
    state = {"seen": []}
    api.push(*[failing_edits_model(state)] * 5)
    r = app.moss("@agent", "--provider", "anthropic", "--v1", "-n", "--refactor", "--auto-approve", "medium",
                 "--output-format", "json", "make test_calc.py pass", env=api.env())
    assert r.returncode == 3, r.stderr
    result = json.loads(r.stdout)
    assert result["reason"] == "blocked"
    assert "1. Skip this step" in result["questions"] and "still fails" in result["questions"]
    saved = checkpoint(app, result["session_id"])
    assert saved["reason"] == "blocked" and saved["blocked"]["step"] == "test"
    # The person answers by resuming with a message; the session goes on from where it stopped.
    with FakeAPI() as api2:
        api2.push(lambda body: "$(answer skipped as asked)" if "The user says: skip it" in last_user_text(body)
                  else "$(answer ?)")
        r2 = app.moss("@agent", "--provider", "anthropic", "--resume", result["session_id"], "-n", "skip it",
                      env=api2.env())
    assert r2.returncode == 0, r2.stderr
    assert r2.stdout.strip() == "skipped as asked"


def test_validate_on_done_sends_the_answer_back(app, api):
    app.write(".moss/config.toml", """
        [agent]
        validate_commands = [ { name = "test", run = "python3 test_calc.py" } ]
        validate_on = "done"
    """)
    app.write(".moss/scripts/roles/fixer.lua", """
        local r = require("roles.refactorer")
        return { name = "fixer", access = "full", commands = r.commands, prompts = r.prompts, plan = false }
    """)
    replies = ["$(answer all done)",
               lambda body: ('$(edit app/calc.py --old "a - b" --new "a + b") $(answer fixed)'
                             if "not accepted yet" in last_user_text(body) else "$(answer ?)")]
    api.push(*replies)
    r = app.moss("@agent", "--provider", "anthropic", "--v1", "-n", "--role", "fixer", "--allow-full",
                 "--auto-approve", "high", "fix add", env=api.env())
    # The second answer came with the fix; validation at "done" passes only after the edit ran.
    assert "Validation FAILED" in last_user_text(api.requests[1].body)
    assert "full access" in r.stderr  # announced
    assert "return a + b" in (app.root / "app/calc.py").read_text()


def test_validation_config_with_custom_field_read_by_project_script(app):
    app.write(".moss/config.toml", """
        [agent]
        validate = ["lint", "test"]
        validate_commands = [ { name = "test", run = "python3 test_calc.py", timeout = 60 },
                              { name = "lint", run = "python3 -m pyflakes ." } ]
        validate_on = "edit"
        my_custom_option = "whatever"
    """)
    app.script("showcfg", """
        local v = require("lib.agent.validate")
        local steps, source = v.steps(moss.config.agent)
        print(moss.config.agent.my_custom_option, #steps, steps[1].name, steps[2].run, steps[2].timeout, source)
    """)
    r = app.moss("@showcfg")
    assert r.stdout.strip() == "whatever\t2\tlint\tpython3 test_calc.py\t60\tconfig", r.stderr


def test_validator_detected_and_announced(app, api):
    (app.root / ".moss/config.toml").write_text("")
    app.write("pyproject.toml", "[project]\nname = 'x'\n")
    api.push(PLAN, "$(answer nothing to do)")
    r = app.moss("@agent", "--provider", "anthropic", "--v1", "-n", "--refactor", "look", env=api.env())
    assert r.returncode == 0, r.stderr
    assert "validation (detected from pyproject.toml): compile (`python3 -m compileall -q .`)" in r.stderr
    api.push(PLAN, "$(answer nothing to do)")
    r = app.moss("@agent", "--provider", "anthropic", "--v1", "-n", "--refactor", "--validate", "make check", "look",
                 env=api.env())
    assert "validation (--validate): validate (`make check`), on edit" in r.stderr


# ------------------------------------------------------------------ the true state of a session

def _session_file(project, sid, **fields):
    d = project.root / ".moss" / "agent"
    d.mkdir(parents=True, exist_ok=True)
    state = {"id": sid, "task": "what is this?", "machine": "v1", "role": "explorer", "state": "agent",
             "turn": 2, "max_turns": 15, "mem": {"items": []}, "messages": {}, "done": False, **fields}
    (d / f"session-{sid}.json").write_text(json.dumps(state))


def _marker(project, sid, pid, pid_start):
    d = project.root / ".moss" / "agent" / "running"
    d.mkdir(parents=True, exist_ok=True)
    (d / f"{sid}.json").write_text(json.dumps({"pid": pid, "pid_start": pid_start, "started": time.time(),
                                               "task": "what is this?"}))
    return d / f"{sid}.json"


def _reasons(project):
    r = project.moss("sessions", "list")
    return r, {ln.split("\t")[0]: ln.split("\t")[4] for ln in r.stdout.splitlines()[1:]}


def test_running_markers_of_dead_or_reused_pids_are_cleaned_when_sessions_are_listed(project):
    """A session is "running" only while the very process that marked it lives: a marker
    whose pid is gone, or whose pid now belongs to a later process (another start time), is
    stale; the listing calls its session interrupted and removes the marker."""
    from moss.tools.procs import start_time

    gone = subprocess.Popen(["true"])
    gone.wait()
    live = subprocess.Popen(["sleep", "60"])
    try:
        for sid in ("dead", "reused"):
            _session_file(project, sid)
        _session_file(project, "live", reason="interrupted")  # resumed: running again
        dead = _marker(project, "dead", gone.pid, None)
        reused = _marker(project, "reused", live.pid, "1")  # the pid lives, but it started later
        alive = _marker(project, "live", live.pid, start_time(live.pid))
        r, reasons = _reasons(project)
        assert r.returncode == 0, r.stderr
        assert reasons == {"dead": "interrupted", "reused": "interrupted", "live": "running"}
        assert not dead.exists() and not reused.exists() and alive.exists()
    finally:
        live.kill()
        live.wait()
    r, reasons = _reasons(project)
    assert reasons["live"] == "interrupted" and not alive.exists()


def test_a_checkpoint_with_wrong_types_lists_as_corrupt_not_running(project):
    _session_file(project, "good")
    _session_file(project, "bad", reason=["answered"], turn="2")
    r, reasons = _reasons(project)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert reasons["bad"] == "corrupt" and reasons["good"] == "interrupted"
    assert "session-bad.json is not a usable checkpoint" in r.stderr and "reason is array, not a string" in r.stderr


def test_say_to_a_session_that_has_ended_exits_2_and_names_its_state(crate, api):
    api.push(*[Model("provider")] * 5)
    r = crate.moss("@agent", "--provider", "anthropic", "--v2", "-n", "--output-format", "json",
                   "How many variants does Provider have?", env=api.env())
    sid = json.loads(r.stdout)["session_id"]
    said = crate.moss("say", "-s", sid, "also count the structs")
    assert said.returncode == 2 and "answered" in said.stderr and f"--resume {sid}" in said.stderr
    assert not (crate.root / ".moss" / "agent" / "inbox" / f"{sid}.jsonl").exists()  # nothing waits unread
    assert crate.moss("say", sid, "--stop").returncode == 2
    unknown = crate.moss("say", "-s", "nosuch", "hello")
    assert unknown.returncode == 2 and "no session nosuch" in unknown.stderr
