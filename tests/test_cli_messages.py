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


def test_an_unknown_session_is_one_sentence_naming_it(project):
    """`moss sessions show nosuchid`: the person reads which session is not there and where
    to look, exit 2; not the agent script's file:line nor the primitive that found nothing."""
    r = project.moss("sessions", "show", "nosuchid")
    assert r.returncode == 2
    assert r.stderr.splitlines() == ["error: no session 'nosuchid' in this project "
                                     "(moss sessions list shows its sessions)"]


def test_an_error_raised_on_purpose_is_its_sentence_and_verbose_says_where(project):
    """An error a script raises on purpose (moss.error with a kind) reaches the person as its
    sentence alone, with the kind's exit status; --verbose adds where it was raised and the
    traceback. A primitive's error the script left uncaught, and a plain Lua error (a bug),
    name the script's file:line; the bug comes with its traceback."""
    project.script("widget", """\
        if moss.args[1] == "bug" then local t = nil; return t.x end
        if moss.args[1] == "read" then local text = moss.fs.read("no-such-file.txt"); return text end
        moss.error("not_found", "no widget named '" .. moss.args[1] .. "'")
        """)
    r = project.moss("@widget", "gear")
    assert r.returncode == 2
    assert r.stderr.splitlines() == ["error: no widget named 'gear'"]
    r = project.moss("@widget", "read")
    assert r.returncode == 2
    [line] = r.stderr.splitlines()
    assert line.startswith("error: .moss/scripts/widget.lua:2: moss.fs.read: ") and "no-such-file.txt" in line
    r = project.moss("@widget", "gear", "--verbose")
    assert r.returncode == 2
    assert r.stderr.splitlines()[0] == "error: .moss/scripts/widget.lua:3: no widget named 'gear'"
    assert "stack traceback:" in r.stderr
    r = project.moss("@widget", "bug")
    assert r.returncode == 1
    assert ".moss/scripts/widget.lua:1: attempt to index a nil value" in r.stderr and "stack traceback:" in r.stderr


def test_sessions_list_is_newest_first(project):
    """`moss sessions list | head` shows the latest sessions, as `git log` does commits."""
    import json
    import os
    import time

    agent = project.root / ".moss" / "agent"
    agent.mkdir(parents=True, exist_ok=True)
    now = time.time()
    for age, sid in ((3600, "old00001"), (60, "new00001"), (600, "mid00001")):
        p = agent / f"session-{sid}.json"
        p.write_text(json.dumps({"id": sid, "task": f"task of {sid}", "state": "agent", "machine": "v1",
                                 "role": "explorer", "turn": 1, "done": True, "reason": "answered"}))
        os.utime(p, (now - age, now - age))
    r = project.moss("sessions", "list")
    assert r.returncode == 0, r.stderr
    ids = [line.split("\t")[0] for line in r.stdout.splitlines()[1:]]
    assert ids == ["new00001", "mid00001", "old00001"]


def test_a_project_role_is_named_with_its_origin_and_listed_before_trust(project):
    """A project whose roles/explorer.lua overrides the built-in one: before trust, `--roles`
    lists it as waiting ("project (not trusted)"), beside the built-in explorer that runs
    meanwhile, and a role only the project has likewise; trusted, a session says at its start
    that its role is the project's."""
    import json

    project.write(".moss/scripts/roles/explorer.lua",
                  'return { extends = "explorer", description = "the project\'s own explorer" }\n')
    project.write(".moss/scripts/roles/fixer.lua", 'return { extends = "refactorer" }\n')
    project.trusted = False
    rows = [line.split("\t") for line in project.moss("@agent", "--roles").stdout.splitlines()]
    explorer = [r for r in rows if r[0] == "explorer"]
    assert [r[2] for r in explorer] == ["built-in", "project (not trusted) (would override built-in)"]
    assert explorer[1][3] == "not read until you trust this project (moss trust)"
    assert ["fixer", "?", "project (not trusted)"] == next(r for r in rows if r[0] == "fixer")[:3]

    project.trusted = True
    assert next(r for r in (line.split("\t") for line in project.moss("@agent", "--roles").stdout.splitlines())
                if r[0] == "explorer")[2] == "project (overrides built-in)"
    script = project.root / "answers.json"
    script.write_text(json.dumps(["$(answer nothing to see)"]))
    r = project.moss("@agent", "-n", "--provider", "script", "--script", str(script), "what is here?")
    assert r.returncode == 0, r.stderr
    assert "role: explorer (project; default)" in r.stderr
