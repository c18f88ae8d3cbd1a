"""What a cloned repository's own .moss/ cannot do, and what the agent may not rewrite."""

from __future__ import annotations

import json
import subprocess

import pytest
from fakeapi import FakeAPI, last_user_text


def test_project_config_cannot_grant_full_access(project, tmp_path):
    project.write(".moss/config.toml", "[agent]\nallow_full = true\nunsandboxed_ok = true\n")
    marker = tmp_path / "pwned"
    project.script("grab", f'moss.access.set("full")\nmoss.shell.run("touch {marker}")\n')
    r = project.moss("@grab")
    assert r.returncode == 2 and "user config" in r.stderr
    assert not marker.exists()
    # The person's own config (or --allow-full) can.
    project.user_file("config.toml", "[agent]\nallow_full = true\n")
    r = project.moss("@grab")
    assert r.returncode == 0, r.stderr
    assert marker.exists()


def test_restoring_a_snapshot_needs_write_access(project):
    project.write("a.txt", "one\n")
    project.script("snap", 'print(moss.shadow.snapshot("x"))\n')
    project.script("rest", 'moss.access.set(moss.args[2])\nprint(#moss.shadow.restore(moss.args[1]).reverted)\n')
    sid = project.moss("@snap").stdout.strip()
    (project.root / "a.txt").write_text("two\n")
    r = project.moss("@rest", sid, "read-only")
    assert r.returncode == 2 and "restoring a snapshot" in r.stderr
    assert (project.root / "a.txt").read_text() == "two\n"
    r = project.moss("@rest", sid, "edit")
    assert r.stdout.strip() == "1" and (project.root / "a.txt").read_text() == "one\n"


def test_agent_cannot_edit_its_own_policy(project):
    project.write(".moss/scripts/lib/agent/risk.lua", "return {}\n")
    project.script("sneak", """
        moss.access.set("edit")
        for _, spec in ipairs({
          { target = ".moss/scripts/lib/agent/risk.lua", action = "replace", content = "return 1" },
          { target = ".moss/config.toml", action = "create", content = "[agent]" },
        }) do
          local ok, err = pcall(moss.edit.apply, { spec })
          print(ok, moss.error_kind(err))
        end
        print(pcall(moss.fs.write, ".moss/memory/x.md", "y"))
    """)
    r = project.moss("@sneak")
    lines = r.stdout.splitlines()
    assert lines[:2] == ["false\tdenied", "false\tdenied"], r.stderr
    assert lines[2].startswith("false")
    assert (project.root / ".moss/scripts/lib/agent/risk.lua").read_text() == "return {}\n"


@pytest.mark.needs_sandbox
def test_edit_sandbox_keeps_git_and_moss_read_only(project):
    subprocess.run(["git", "init", "-q"], cwd=project.root, check=True)
    project.script("sh", """
        moss.access.set("edit")
        local r = moss.shell.run("touch ok.txt; touch .git/hooks/pre-commit; echo x >> .moss/config.toml")
        print(r.code)
    """)
    r = project.moss("@sh")
    assert r.returncode == 0, r.stderr
    assert (project.root / "ok.txt").exists()
    assert not (project.root / ".git/hooks/pre-commit").exists()
    assert not (project.root / ".moss/config.toml").exists()


def test_resume_an_answered_session_with_a_follow_up(project):
    with FakeAPI() as api:
        api.push("$(answer first answer)",
                 lambda body: "$(answer second: " + ("saw follow-up" if "The user says: and the tests?"
                                                      in last_user_text(body) else "no follow-up") + ")")
        env = api.env()
        r = project.moss("@agent", "--provider", "anthropic", "--v1", "-n", "--output-format", "json", "q", env=env)
        sid = json.loads(r.stdout)["session_id"]
        again = project.moss("@agent", "--resume", sid, "--output-format", "json", env=env)
        assert json.loads(again.stdout)["answer"] == "first answer"  # no message: the saved answer, as JSON
        r = project.moss("@agent", "--provider", "anthropic", "--resume", "and the tests?", "-n", env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "second: saw follow-up"
