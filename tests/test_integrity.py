"""What a session leaves behind is what it validated: shell commands are approved and validated
like edits, an answer waits for a passing tree, a killed turn is not applied twice on resume,
and the session log keeps no credentials."""

from __future__ import annotations

import json

import pytest
from conftest import sigkill_when
from fakeapi import FakeAPI, held
from test_sessions import CALC, TEST, checkpoint, events, git, tree

# A project role at edit access that goes straight to work (no planner): the tests script its
# replies by turn, not by what its prompt says.
FIXER = """
    local r = require("roles.refactorer")
    return { name = "fixer", description = "test role", access = "edit", commands = r.commands,
             prompts = r.prompts, plan = false }
"""


@pytest.fixture
def repo(project):
    project.write("app/__init__.py", "")
    project.write("app/calc.py", CALC)
    project.write("test_calc.py", TEST)
    project.write("notes.txt", "v1\n")
    project.write(".moss/scripts/roles/fixer.lua", FIXER)
    git(project.root, "init", "-q")
    return project


def run_fixer(project, api, *args, replies, timeout=90):
    api.push(*replies)
    return project.moss("@agent", "--provider", "anthropic", "--v1", "-n", "--role", "fixer",
                        "--output-format", "json", *args, "fix add", env=api.env(), timeout=timeout)


def command_events(project, sid):
    return [e for e in events(project, sid) if e["event"] == "command"]


# ---- shell commands are approved like edits -------------------------------------------------

@pytest.mark.needs_sandbox
def test_shell_delete_is_refused_at_the_default_auto_approve(repo, api):
    r = run_fixer(repo, api, replies=["$(run rm notes.txt)", "$(answer removed)"])
    assert (repo.root / "notes.txt").exists()  # nothing ran
    cmd = command_events(repo, json.loads(r.stdout)["session_id"])[0]
    assert cmd["refused"] is True and "risk high" in cmd["output"] and "--auto-approve" in cmd["output"]


@pytest.mark.slow
@pytest.mark.needs_sandbox
def test_shell_delete_runs_when_the_user_approves_that_risk(repo, api):
    r = run_fixer(repo, api, "--auto-approve", "high", "--validate", "true",
                  replies=["$(run rm notes.txt)", "$(answer removed)"])
    assert r.returncode == 0, r.stderr
    assert not (repo.root / "notes.txt").exists()


@pytest.mark.needs_sandbox
def test_interactive_user_declines_a_shell_move(repo, api):
    api.push("$(run mv notes.txt moved.txt)", "$(answer done)")
    r = repo.moss("@agent", "--provider", "anthropic", "--v1", "--role", "fixer", "fix add",
                  env={**api.env(), "MOSS_ASSUME_TTY": "1"}, input="n\n")
    assert "risk high" in r.stderr
    assert (repo.root / "notes.txt").exists() and not (repo.root / "moved.txt").exists()


@pytest.mark.needs_sandbox
def test_read_only_commands_are_not_asked_about(repo, api):
    r = run_fixer(repo, api, "--validate", "true", replies=["$(run ls app && cat notes.txt)", "$(answer v1)"])
    assert r.returncode == 0, r.stderr
    cmd = command_events(repo, json.loads(r.stdout)["session_id"])[0]
    assert cmd["ok"] is True and "calc.py" in cmd["output"]


# ---- the answer gate ------------------------------------------------------------------------

@pytest.mark.needs_sandbox
@pytest.mark.parametrize("validate_on", ["edit", "turn"])
@pytest.mark.parametrize("change", [
    '$(run cp app/calc.py app/calc_copy.py)',                     # a shell command's change
    '$(edit app/calc.py --old "a - b" --new "a * b")',            # an edit
])
def test_an_answer_is_never_accepted_on_a_tree_that_fails_validation(repo, api, validate_on, change):
    """The model answers after the first failed validation; before, that ended `answered`, exit 0,
    with the failing change (and files its shell commands made) left in the tree."""
    repo.write(".moss/config.toml", f'[agent]\nvalidate_on = "{validate_on}"\nmax_retries = 1\n')
    before = tree(repo.root)
    r = run_fixer(repo, api, "--auto-approve", "medium", "--validate", "false",
                  replies=[change] + ["$(answer done)"] * 6)
    result = json.loads(r.stdout)
    names = [e["event"] for e in events(repo, result["session_id"])]
    assert "answer_rejected" in names
    assert "validation" in names[: names.index("answer_rejected")]  # the change itself was validated
    # Whatever the ending, the failing change is not left behind as an answered result.
    if result["reason"] == "answered":
        assert tree(repo.root) == before and "rollback_done" in names
    else:
        assert r.returncode == 3 and result["reason"] == "blocked"


@pytest.mark.needs_sandbox
def test_an_answer_on_a_validated_tree_is_accepted_at_once(repo, api):
    r = run_fixer(repo, api, "--auto-approve", "medium", "--validate", "python3 test_calc.py", "--no-baseline",
                  replies=['$(edit app/calc.py --old "a - b" --new "a + b")', "$(answer fixed)"])
    assert r.returncode == 0, r.stderr
    names = [e["event"] for e in events(repo, json.loads(r.stdout)["session_id"])]
    assert names.count("validation") == 1 and "answer_rejected" not in names


@pytest.mark.needs_sandbox
def test_a_user_who_answers_the_escalation_can_accept_the_tree(repo, api):
    repo.write(".moss/config.toml", "[agent]\nmax_retries = 1\n")
    r = run_fixer(repo, api, "--auto-approve", "medium", "--validate", "false", replies=[
        '$(edit app/calc.py --old "a - b" --new "a * b")',      # fails: retry
        '$(edit app/calc.py --old "a * b" --new "a - b - 0")',  # fails again: rollback
        '$(edit app/calc.py --old "a - b" --new "b - a")',      # fails after the rollback: ask
    ])
    result = json.loads(r.stdout)
    assert r.returncode == 3 and result["reason"] == "blocked", r.stderr
    with FakeAPI() as api2:
        api2.push("$(answer accepted by the user)")
        r2 = repo.moss("@agent", "--provider", "anthropic", "--resume", result["session_id"], "-n",
                       "keep it as it is", env=api2.env())
    assert r2.returncode == 0 and r2.stdout.strip() == "accepted by the user", r2.stderr
    assert "validation_waived" in [e["event"] for e in events(repo, result["session_id"])]


# ---- a turn killed half-way is not applied twice ---------------------------------------------

@pytest.mark.needs_sandbox
def test_sigkill_after_an_edit_landed_does_not_apply_it_twice_on_resume(repo, api):
    repo.write(".moss/config.toml", '[agent]\nvalidate_on = "never"\n')
    api.push("$(edit notes.txt append line-1) $(run sleep 30)")
    p = repo.popen("@agent", "--provider", "anthropic", "--v1", "-n", "--role", "fixer", "add a line",
                   env=api.env())
    # the edit landed, the turn did not end
    sigkill_when(p, lambda: "line-1" in (repo.root / "notes.txt").read_text(), settle=0.3)
    sid = next((repo.root / ".moss/agent").glob("session-*.json")).stem[len("session-"):]
    assert checkpoint(repo, sid)["turn"] == 0
    with FakeAPI() as api2:  # the model re-issues the turn it never saw finish
        api2.push("$(edit notes.txt append line-1)", "$(answer added)")
        r = repo.moss("@agent", "--provider", "anthropic", "--resume", sid, "-n", env=api2.env())
    assert r.returncode == 0, r.stderr
    assert (repo.root / "notes.txt").read_text().count("line-1") == 1
    rolled = [e for e in events(repo, sid) if e["event"] == "turn_rolled_back"]
    assert rolled and rolled[0]["turn"] == 1 and "notes.txt" in rolled[0]["paths"]


# ---- the log keeps no credentials -------------------------------------------------------------

def test_session_log_redacts_credentials(repo, api):
    repo.write("deploy.env", "DEPLOY_TOKEN=plain-value-1234\nkey = sk-ant-api03-abcdefghijklmnopqrstuvwx\n")
    api.push("$(view deploy.env)", "$(answer seen)")
    r = repo.moss("@agent", "--provider", "anthropic", "--v1", "-n", "--output-format", "json", "read it",
                  env={**api.env(), "MY_DEPLOY_TOKEN": "plain-value-1234"})
    assert r.returncode == 0, r.stderr
    log = (repo.root / f".moss/agent/logs/{json.loads(r.stdout)['session_id']}.jsonl").read_text()
    assert "deploy.env" in log and "[REDACTED]" in log
    assert "plain-value-1234" not in log and "sk-ant-api03-abcdefghijklmnopqrstuvwx" not in log


# ---- sessions own their changes -------------------------------------------------------------

@pytest.mark.needs_sandbox
def test_one_sessions_rollback_keeps_another_sessions_finished_work(repo, api):
    """A edits app/calc.py and keeps failing validation; meanwhile B edits notes.txt and answers.
    A's rollback restores calc.py and leaves B's notes.txt alone."""
    repo.write(".moss/config.toml", "[agent]\nmax_retries = 1\n")
    second = held('$(edit app/calc.py --old "a * b" --new "a - b - 0")')
    api.push('$(edit app/calc.py --old "a - b" --new "a * b")', second)
    a = repo.popen("@agent", "--provider", "anthropic", "--v1", "-n", "--role", "fixer", "--auto-approve", "medium",
                   "--validate", "false", "--output-format", "json", "fix add", env=api.env())
    try:
        assert second.wait_reached(30), "A never asked for its second reply"
        assert "a * b" in (repo.root / "app/calc.py").read_text()  # A's first edit is in the tree
        with FakeAPI() as api_b:  # B, in the same project, while A waits for its model
            api_b.push("$(edit notes.txt append by B)", "$(answer done)")
            b = repo.moss("@agent", "--provider", "anthropic", "--v1", "-n", "--role", "fixer",
                          "--validate", "true", "note it", env=api_b.env())
        assert second.held  # B came and went while A's reply was still held
        second.release()
        assert b.returncode == 0, b.stderr
        out, err = a.communicate(timeout=60)
    finally:
        if a.poll() is None:
            a.kill()
    names = [e["event"] for e in events(repo, json.loads(out)["session_id"])]
    assert "rollback_done" in names, err
    assert (repo.root / "app/calc.py").read_text() == CALC  # A's own change is undone
    assert "by B" in (repo.root / "notes.txt").read_text()  # B's finished work is not
