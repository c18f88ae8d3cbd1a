"""The built-in suite is proven by an oracle: run through the real `moss eval`, a scripted model
that applies each task's reference solution scores 100%, and one that does nothing scores 0% on
the change tasks — so every check can both pass and fail through the whole pipeline (a copy per
attempt, the agent, the sandboxed check, the Lua verdict), not only when run by hand."""

from __future__ import annotations

import json

import pytest
from conftest import STORY_PROVIDER
from fakeapi import state_of

from moss.eval.suite import builtin_suite_dir, load_suite

SUITE = load_suite(builtin_suite_dir())
PLAN = "1. Look at the code.\n2. Change it.\nReady to refactor."


def quoted(text: str) -> str:
    """`text` as one double-quoted argument of a $(...) command (backslash escapes)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def oracle_reply(task) -> str:
    """What the oracle writes for `task`: its reference solution as moss edits, or its answer."""
    if task.check.run:
        edits = " ".join(f"$(edit {r.path} --old {quoted(r.old)} --new {quoted(r.new)})" for r in task.solution)
        return edits + " $(answer applied the reference solution)"
    return f"$(answer {task.solution_answer or task.check.answer})"


def task_in(body):
    """The suite task whose prompt this request carries (the longest match: no prompt is a part
    of another's by accident)."""
    text = json.dumps(body, ensure_ascii=False)
    found = [t for t in SUITE.tasks if json.dumps(t.prompt, ensure_ascii=False)[1:-1] in text]
    return max(found, key=lambda t: len(t.prompt)) if found else None


def model(body) -> str:
    if state_of(body) == "planner":
        return PLAN
    if body.get("model") == "nothing":
        return "$(answer done)"
    task = task_in(body)
    return oracle_reply(task) if task else "$(answer ?)"


@pytest.mark.slow
@pytest.mark.needs_sandbox
def test_the_oracle_scores_every_task_and_doing_nothing_scores_no_change(project, api):
    """`moss eval --suite builtin` with two cells: the oracle passes all of the suite's tasks;
    the do-nothing variant passes none of its change tasks (each check fails on the untouched
    copy, through the same pipeline the oracle passed)."""
    project.write(".moss/config.toml", f'[llm]\nprovider = "{STORY_PROVIDER}"\nmodel = "oracle"\n')
    nothing = project.write("variants/nothing/config.toml", '[llm]\nmodel = "nothing"\n').parent
    api.push(*[model] * 2000)
    r = project.moss("eval", "--suite", "builtin", "--machine", "v1", "--variant", "oracle=",
                     "--variant", f"nothing={nothing}", "-j", "4", "--json", env=api.env(), timeout=1500)
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads(r.stdout)
    rows = [json.loads(line) for line in open(summary["out"] + "/attempts.jsonl")]
    changes = {t.id for t in SUITE.tasks if t.check.run}
    assert len(changes) >= 8 and len(SUITE.tasks) - len(changes) >= 10
    oracle = {row["task"]: row for row in rows if "variant=oracle" in row["cell"]}
    lazy = {row["task"]: row for row in rows if "variant=nothing" in row["cell"]}
    assert set(oracle) == set(lazy) == {t.id for t in SUITE.tasks}
    failed = {t: (row["reason"], row.get("check")) for t, row in oracle.items() if not row["passed"]}
    assert not failed, failed
    assert not [t for t in changes if lazy[t]["passed"]]
    # the table a person reads, and the verdict: doing nothing is worse, each flipped task named
    table = project.moss("eval", "report", summary["out"])
    assert table.returncode == 0, table.stderr
    for cell in ("variant=oracle", "variant=nothing"):
        assert cell in table.stdout
    assert f"{len(SUITE.tasks)}/{len(SUITE.tasks)}" in table.stdout.replace(" ", "") or "100%" in table.stdout
    verdict = project.moss("eval", "compare", summary["out"], "--fail-if", "worse")
    assert verdict.returncode == 1, verdict.stdout + verdict.stderr
    assert "B is worse than A" in verdict.stdout
    assert all(f"broken in B: {t} trial 1" in verdict.stdout for t in changes)


def test_without_j_a_providers_max_parallel_caps_the_attempts_at_once(project, api):
    """Without -j, an eval of four questions on a machine of two or more CPUs would run two or
    more at once; the provider's `max_parallel = 1` (its rate limit) makes it one at a time, and
    the summary says so (`jobs`, and `peak`: the most that ran at once). A bad value is one
    clear configuration error."""
    import shutil

    from conftest import FIXTURES

    shutil.copytree(FIXTURES / "evalsuite", project.root / "suite")
    project.write(".moss/config.toml", '[llm]\nprovider = "anthropic"\nmodel = "m"\n'
                                       '[llm.providers.anthropic]\nmax_parallel = 1\n')
    api.push(*["$(answer 3)"] * 40)
    r = project.moss("eval", "suite", "--machine", "v1", "--json", env=api.env(), timeout=600)
    summary = json.loads(r.stdout)
    assert summary["jobs"] == 1 and summary["peak"] == 1, r.stderr
    project.write(".moss/config.toml", '[llm]\nprovider = "anthropic"\nmax_parallel = 0\n')
    r = project.moss("eval", "suite", "--machine", "v1", "--json", env=api.env(), timeout=120)
    assert r.returncode == 2 and "max_parallel must be a whole number" in r.stderr and "Traceback" not in r.stderr
