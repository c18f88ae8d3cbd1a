"""`moss batch`: a list of agent tasks, each in its own copy of its repository, and the patch
each one made, collected into one results file.

Each story runs the real CLI against the fake API server, with real git and bwrap. The scripted
model knows the fixture calculator: asked to fix add() it edits calc.py, asked a question it
answers; a task whose prompt says "refuse" gets an answer that never ends (the agent's own
failure, at its turn limit).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from conftest import FIXTURES, needs_bwrap
from fakeapi import state_of

SUITE = FIXTURES / "evalsuite"
PLAN = "1. Look at the code.\n2. Change it.\nReady to refactor."
REPLIES = {
    "How many functions": "$(answer 3)",
    "Which VERSION": "$(answer 1.4.2)",
    "add() returns": '$(edit calc.py --old "a - b" --new "a + b") $(answer add adds now)',
    "mul() returns": '$(edit calc.py --old "a + b" --new "a * b") $(answer mul multiplies now)',
    "Add a NOTES file": '$(edit NOTES.md --old "" --new "# Notes\\nadd is fixed\\n") $(answer noted)',
    "refuse": "$(view calc.py)",
}


def model(body) -> str:
    if state_of(body) == "planner":
        return PLAN
    text = json.dumps(body)
    return next((reply for marker, reply in REPLIES.items() if marker in text), "$(answer ?)")


def rows_in(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def git_apply(patch: str, repo: Path, into: Path) -> Path:
    """A fresh copy of `repo` at `into` with `patch` applied by `git apply` (exit 0 asserted)."""
    shutil.copytree(repo, into)
    r = subprocess.run(["git", "apply", "--whitespace=nowarn", "-"], input=patch, text=True, cwd=into,
                       capture_output=True)
    assert r.returncode == 0, r.stderr
    return into


@needs_bwrap
def test_every_eval_attempt_carries_the_patch_its_agent_made(project, api, tmp_path):
    """`moss eval` of the fixture suite: each attempt's row holds its patch, a unified diff of
    the copy against the repository as given. The fix tasks' patches, applied with `git apply`
    to a fresh copy of the repository, give calc.py exactly as the agent left it; the questions
    changed nothing (an empty patch); moss's own `.moss/` in the copy is never part of one."""
    shutil.copytree(SUITE, project.root / "suite")
    project.write(".moss/config.toml", '[llm]\nprovider = "anthropic"\nmodel = "good"\n')
    api.push(*[model] * 200)
    out = project.root / "results"
    r = project.moss("eval", "suite", "--machine", "v1", "-j", "2", "--out", str(out), env=api.env(), timeout=600)
    assert r.returncode == 0, r.stderr
    rows = {row["task"]: row for row in rows_in(out / "attempts.jsonl")}
    assert rows["count-functions"]["patch"] == "" and rows["version"]["patch"] == ""
    repo = SUITE / "repos" / "pycalc"
    given = (repo / "calc.py").read_text()
    for task, old, new in (("fix-add", "a - b", "a + b"), ("fix-mul", "a + b", "a * b")):
        row = rows[task]
        assert row["passed"] is True
        assert row["patch_stat"] == {"files": 1, "added": 1, "removed": 1, "binary": 0,
                                     "bytes": len(row["patch"].encode())} and not row["patch_cut"]
        assert ".moss" not in row["patch"]
        fixed = git_apply(row["patch"], repo, tmp_path / task) / "calc.py"
        assert fixed.read_text() == given.replace(old, new, 1)
