"""`moss memory list|search|forget|organize`: long-term memory for people.

The real CLI on a temporary project's .moss/memory/; organize against the fake API server
(its request is labelled memory/organize, so the scripted model never reads the prompt).
"""

from __future__ import annotations

import pytest
from fakeapi import label_of, last_user_text

FACTS = """\
# Facts
- the tests need Docker (2025-01-02)
- tests need docker running first (2025-02-03)
- the CLI lives in host/cli.py (2025-01-05)
"""
PREFS = """\
# Preferences
- prefer small commits (2025-01-01)
"""


def memories(project):
    project.write(".moss/memory/facts.md", FACTS)
    project.write(".moss/memory/preferences.md", PREFS)
    return project.root / ".moss" / "memory"


def test_list_shows_kind_text_and_where(project):
    memories(project)
    r = project.moss("memory", "list")
    assert r.returncode == 0, r.stderr
    rows = [line.split("\t") for line in r.stdout.splitlines()]
    assert rows[0] == ["kind", "text", "where"]
    assert ["facts", "the CLI lives in host/cli.py (2025-01-05)", ".moss/memory/facts.md:4"] in rows
    assert ["preferences", "prefer small commits (2025-01-01)", ".moss/memory/preferences.md:2"] in rows
    assert len(rows) == 5


def test_list_of_no_memory_says_so(project):
    r = project.moss("memory", "list")
    assert r.returncode == 0 and r.stdout == ""
    assert "no memories" in r.stderr


def test_search_ranks_by_shared_words_and_exits_1_on_nothing(project):
    memories(project)
    r = project.moss("memory", "search", "docker", "tests", "running")
    assert r.returncode == 0, r.stderr
    rows = [line.split("\t") for line in r.stdout.splitlines()][1:]
    assert [row[1] for row in rows] == ["tests need docker running first (2025-02-03)",
                                        "the tests need Docker (2025-01-02)"]
    assert rows[0][2] == ".moss/memory/facts.md:3"
    r = project.moss("memory", "search", "docker", "--limit", "1")
    assert len(r.stdout.splitlines()) == 2
    r = project.moss("memory", "search", "kubernetes")
    assert r.returncode == 1 and r.stdout == "" and "no memory" in r.stderr


def test_forget_one_removes_it_and_says_so(project):
    mem = memories(project)
    r = project.moss("memory", "forget", "small", "commits")
    assert r.returncode == 0, r.stderr
    assert "forgot 1 memory: prefer small commits" in r.stderr
    assert "small commits" not in (mem / "preferences.md").read_text()
    assert (mem / "facts.md").read_text() == FACTS


def test_forget_several_asks_and_needs_you_without_a_terminal(project):
    mem = memories(project)
    r = project.moss("memory", "forget", "docker")  # stdin is not a terminal
    assert r.returncode == 3, r.stderr
    assert "2 memories contain" in r.stderr and "--yes" in r.stderr
    assert (mem / "facts.md").read_text() == FACTS  # nothing removed
    r = project.moss("memory", "forget", "docker", input="n\n", env={"MOSS_ASSUME_TTY": "1"})
    assert r.returncode == 1 and (mem / "facts.md").read_text() == FACTS
    r = project.moss("memory", "forget", "docker", input="y\n", env={"MOSS_ASSUME_TTY": "1"})
    assert r.returncode == 0 and "forgot 2 memories" in r.stderr
    assert "ocker" not in (mem / "facts.md").read_text() and "host/cli.py" in (mem / "facts.md").read_text()


def test_forget_with_yes_and_forget_nothing(project):
    mem = memories(project)
    r = project.moss("memory", "forget", "--yes", "DOCKER")
    assert r.returncode == 0 and "forgot 2 memories" in r.stderr
    r = project.moss("memory", "forget", "kubernetes")
    assert r.returncode == 1 and "no memory contains" in r.stderr
    assert "host/cli.py" in (mem / "facts.md").read_text()


ORGANIZED = """=== facts.md
# Facts

## Testing
- the tests need Docker running first (2025-02-03)

## Layout
- the CLI lives in host/cli.py (2025-01-05)
"""


def organize(project, api, *args, reply=ORGANIZED, **kw):
    api.push(reply)
    return project.moss("memory", "organize", "--provider", "anthropic", *args, env={**api.env(), **kw.pop("env", {})},
                        **kw)


def test_organize_without_a_terminal_shows_the_diff_and_needs_you(project, api):
    mem = memories(project)
    r = organize(project, api)
    assert r.returncode == 3, r.stderr
    # a unified diff, on stdout: the two Docker memories become one, under a heading
    assert "--- a/.moss/memory/facts.md" in r.stdout and "+++ b/.moss/memory/facts.md" in r.stdout
    assert "-- the tests need Docker (2025-01-02)" in r.stdout
    assert "+## Testing" in r.stdout
    assert "preferences.md" not in r.stdout  # a file the reply leaves out is not touched
    assert "moss memory organize --yes" in r.stderr
    assert (mem / "facts.md").read_text() == FACTS and (mem / "preferences.md").read_text() == PREFS
    [req] = [q.body for q in api.requests if q.body]
    assert label_of(req) == "memory/organize"
    assert "prefer small commits" in last_user_text(req) and "host/cli.py" in last_user_text(req)


def test_organize_writes_after_yes(project, api):
    mem = memories(project)
    r = organize(project, api, input="n\n", env={"MOSS_ASSUME_TTY": "1"})
    assert r.returncode == 1 and (mem / "facts.md").read_text() == FACTS
    r = organize(project, api, input="y\n", env={"MOSS_ASSUME_TTY": "1"})
    assert r.returncode == 0, r.stderr
    assert (mem / "facts.md").read_text() == ORGANIZED.split("\n", 1)[1]
    assert (mem / "preferences.md").read_text() == PREFS  # left out of the reply: kept as it was
    assert "wrote .moss/memory/facts.md" in r.stderr
    r = project.moss("memory", "list")
    assert len(r.stdout.splitlines()) == 4  # 4 memories → 3 (and the header)


@pytest.mark.slow
def test_organize_yes_writes_without_asking_and_a_bad_reply_writes_nothing(project, api):
    mem = memories(project)
    r = organize(project, api, "--yes", reply="Sure! Here is the organised memory:\n- a\n")
    assert r.returncode == 1 and "nothing written" in r.stderr
    r = organize(project, api, "--yes", reply="=== facts.md\n# Facts\n- the CLI lives in host/cli.py (2025-01-05)\n")
    assert r.returncode == 1 and "drops 2 memories" in r.stderr and "the tests need Docker" in r.stderr
    r = organize(project, api, "--yes", reply="=== ../evil.md\n- x\n")
    assert r.returncode == 1 and "nothing written" in r.stderr
    assert (mem / "facts.md").read_text() == FACTS and not (project.root / ".moss" / "evil.md").exists()
    r = organize(project, api, "--yes")
    assert r.returncode == 0, r.stderr
    assert "## Testing" in (mem / "facts.md").read_text()


def test_organize_with_nothing_to_do_spends_nothing(project, api):
    r = project.moss("memory", "organize", "--provider", "anthropic", env=api.env())
    assert r.returncode == 0 and "no memories" in r.stderr
    assert not [q for q in api.requests if q.body]


def test_help_and_usage_errors(project):
    r = project.moss("memory", "--help")
    assert r.returncode == 0
    assert all(word in r.stdout for word in ("list", "search", "forget", "organize"))
    r = project.moss("memory", "organize", "--help")
    assert "--yes" in r.stdout and "exits 3" in r.stdout
    r = project.moss("memory", "organize", "--bogus")
    assert r.returncode == 2 and "--bogus" in r.stderr
    r = project.moss("memory", "search")
    assert r.returncode == 2
