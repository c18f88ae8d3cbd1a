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
    "Add a NOTES file": "$(edit NOTES.md create '# Notes: add adds') $(answer noted)",
    "Never finish": "$(view calc.py)",
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


TASKS = [  # six agent tasks on the fixture calculator: four changes, a question, one that never ends
    {"id": "fix-add", "repo": "repos/pycalc", "prompt": "add() returns the wrong result; fix it."},
    {"id": "fix-mul", "repo": "repos/pycalc", "prompt": "mul() returns the wrong result; fix it."},
    {"id": "count", "repo": "repos/pycalc", "prompt": "How many functions does calc.py define?"},
    {"id": "version", "repo": "repos/pycalc", "prompt": "Which VERSION does calc.py declare?", "role": "explorer"},
    {"id": "notes", "repo": "repos/pycalc", "prompt": "Add a NOTES file saying add is fixed."},
    {"id": "stuck", "repo": "repos/pycalc", "prompt": "Never finish: keep looking.", "max_turns": 2},
]
OUTCOMES = {"fix-add": "done", "fix-mul": "done", "count": "done", "version": "done", "notes": "done",
            "stuck": "failed"}


def batch_project(project, tasks=TASKS):
    """The project picks the good model; the batch folder holds the calculator and the task files."""
    shutil.copytree(SUITE / "repos", project.root / "work" / "repos")
    project.write(".moss/config.toml", '[llm]\nprovider = "anthropic"\nmodel = "good"\n')
    lines = [json.dumps({**t, "machine": "v1"}) for t in tasks]
    project.write("work/tasks.jsonl", "\n".join(lines) + "\n")
    toml = []
    for t in tasks:
        toml.append("[[task]]")
        toml += [f"{k} = {json.dumps(v)}" for k, v in {**t, "machine": "v1"}.items()]
        toml.append("")
    project.write("work/tasks.toml", "\n".join(toml))
    return project


def outcomes(rows: list[dict]) -> dict[str, str]:
    return {row["id"]: row["outcome"] for row in rows}


@needs_bwrap
def test_a_batch_in_jsonl_and_in_toml_ends_the_same_and_each_change_carries_its_patch(project, api, tmp_path):
    """Six tasks, once from a JSONL file and once from the same tasks in TOML: both runs give
    every task the same outcome (five done, the one that never finishes failed at its turn
    limit) and the same patches. Each change task's patch, applied with `git apply` to a fresh
    copy of the repository, gives the file exactly as the agent edited it (a new file
    included); the question changed nothing. The repositories themselves are untouched.
    `moss batch status` shows the table, and `--patch ID` prints one task's patch."""
    batch_project(project)
    api.push(*[model] * 400)
    repo = project.root / "work" / "repos" / "pycalc"
    given = (repo / "calc.py").read_text()
    runs = {}
    for kind in ("jsonl", "toml"):
        out = project.root / f"{kind}-results.jsonl"
        r = project.moss("batch", f"work/tasks.{kind}", "-j", "2", "-o", str(out), env=api.env(), timeout=600)
        assert r.returncode == 1, r.stderr  # one task failed
        assert "6 tasks: 5 done, 1 failed" in r.stderr
        runs[kind] = {row["id"]: row for row in rows_in(out)}
        assert outcomes(list(runs[kind].values())) == OUTCOMES
    assert {k: row["patch"] for k, row in runs["jsonl"].items()} == {k: row["patch"] for k, row in runs["toml"].items()}
    rows = runs["jsonl"]
    assert all(row["repo"] == str(repo) for row in rows.values())
    assert rows["count"]["patch"] == "" and rows["version"]["patch"] == "" and rows["stuck"]["patch"] == ""
    assert rows["stuck"]["reason"] == "max_turns" and rows["stuck"]["tries"] == 1
    fixed = git_apply(rows["fix-add"]["patch"], repo, tmp_path / "add")
    assert (fixed / "calc.py").read_text() == given.replace("a - b", "a + b", 1)
    fixed = git_apply(rows["fix-mul"]["patch"], repo, tmp_path / "mul")
    assert (fixed / "calc.py").read_text() == given.replace("a + b", "a * b", 1)
    noted = git_apply(rows["notes"]["patch"], repo, tmp_path / "notes")
    assert (noted / "NOTES.md").read_text().startswith("# Notes: add adds")
    assert (noted / "calc.py").read_text() == given
    assert (repo / "calc.py").read_text() == given and not (repo / "NOTES.md").exists()
    # the status table: one line per task, in the file's order, with its outcome and patch size
    r = project.moss("batch", "status", str(project.root / "jsonl-results.jsonl"), timeout=60)
    assert r.returncode == 0, r.stderr
    table = [line.split("\t") for line in r.stdout.splitlines()]
    assert table[0] == ["task", "outcome", "turns", "tokens", "cost", "patch"]
    assert [(t[0], t[1]) for t in table[1:]] == list(OUTCOMES.items())
    sizes = {t[0]: t[5] for t in table[1:]}
    assert sizes["fix-add"] == "1 file +1 -1" and sizes["count"] == "none" and sizes["notes"].startswith("1 file +1 -0")
    r = project.moss("batch", "status", str(project.root / "jsonl-results.jsonl"), "--patch", "fix-add", timeout=60)
    assert r.returncode == 0 and r.stdout == rows["fix-add"]["patch"], r.stderr
