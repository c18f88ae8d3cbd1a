"""Small things the command line says, checked against what the README promises."""

from __future__ import annotations

import re

from conftest import REPO


def test_agent_help_lists_every_exit_status_the_readme_names(project):
    """`moss @agent --help` names each exit status of the README's list, 130 and 141 too."""
    readme = (REPO / "README.md").read_text()
    paragraph = readme[readme.index("Exit status: **0**"):]
    paragraph = paragraph[:paragraph.index("outcome table")]
    statuses = re.findall(r"\*\*(\d+)\*\*", paragraph)
    assert {"0", "1", "2", "3", "130", "141"} <= set(statuses)
    r = project.moss("@agent", "--help")
    assert r.returncode == 0, r.stderr
    listed = r.stdout[r.stdout.index("Exit status:"):]
    listed = listed[:listed.index("outcome table")]
    for status in statuses:
        assert re.search(rf"(^|[\s,:]){status} ", listed), (status, listed)


def test_the_trust_question_shows_its_choices(project):
    """The inline question of a first run in a cloned project, and `moss trust`'s, end in
    `[y/N]`: Enter (or anything but y) is no."""
    project.trusted = False
    project.script("deploy", "print('deployed')\n")
    tty = {"MOSS_ASSUME_TTY": "1"}
    r = project.moss("@deploy", env=tty, input="\n")
    assert re.search(r"Trust .*\? \[y/N\]", r.stderr), r.stderr
    assert r.returncode == 2 and "deployed" not in r.stdout
    r = project.moss("trust", env=tty, input="\n")
    assert re.search(r"Trust .*\? \[y/N\]", r.stdout + r.stderr), r.stdout + r.stderr
    assert r.returncode == 1


def test_mcp_serve_on_a_taken_port_says_so_in_one_line(project):
    """Another server holds the port: one line naming it and what to do, exit 2 (the
    user's to change), not uvicorn's errno and exit 3 ("needs you")."""
    import socket

    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        r = project.moss("mcp", "serve", "--http", str(port), input="")
    assert r.returncode == 2
    assert r.stderr.splitlines() == [f"error: port {port} on 127.0.0.1 is in use: choose another with --http PORT"]
    assert "Errno" not in r.stderr


def test_the_role_line_names_the_flag_that_chose_it(project):
    """`--audit` is reported as `--audit`, not as a `--role` the user never typed."""
    import json

    script = project.root / "answers.json"
    script.write_text(json.dumps(["$(answer nothing found)"]))
    r = project.moss("@agent", "-n", "--audit", "--provider", "script", "--script", str(script), "check this")
    assert r.returncode == 0, r.stderr
    assert "role: auditor (--audit)" in r.stderr
    r = project.moss("@agent", "-n", "--role", "auditor", "--provider", "script", "--script", str(script), "again")
    assert "role: auditor (--role)" in r.stderr


def test_a_task_file_outside_the_project_is_one_clear_line(project, tmp_path):
    """`--task-file` names the flag and the reason, not a line of moss's own agent.lua."""
    outside = tmp_path / "task.md"
    outside.write_text("what does this do?\n")
    r = project.moss("@agent", "-n", "--provider", "script", "--script", str(outside), "--task-file", str(outside))
    assert r.returncode == 2
    [line] = r.stderr.splitlines()
    assert line.startswith(f"error: --task-file: path '{outside}' is outside the project"), line
    assert ".lua" not in line
    r = project.moss("@agent", "-n", "--task-file", "missing.md")
    assert r.returncode == 2 and r.stderr.splitlines() == ["error: --task-file: path 'missing.md' does not exist"]


def test_a_bad_regex_shows_the_users_pattern_and_the_reason(project):
    """`moss text-search "foo("`: one line with the pattern as typed and why it is not a
    regex, not ripgrep's wrapped `(?:foo()` with a caret under it."""
    project.write("src/a.py", "foo(1)\n")
    r = project.moss("text-search", "foo(")
    assert r.returncode == 2
    [line] = r.stderr.splitlines()
    assert line.startswith("error: bad search pattern 'foo(': unclosed group"), line
    assert "(?:" not in line
    r = project.moss("text-search", "foo\\(")  # as the line says: escaped, it is text
    assert r.returncode == 0 and "foo(1)" in r.stdout
