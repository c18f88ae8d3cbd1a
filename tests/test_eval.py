"""`moss eval`: a suite of tasks across a matrix of cells, each attempt in its own copy.

Each story runs the real CLI against the fake API server. The scripted model answers from the
task text (it knows the fixture's calculator) when the request names model "good", and does
nothing useful when it names "lazy": which model a cell uses comes from the project's config or
from a `--variant` folder laid over it, as a user evaluating a change would do it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import threading
import time
from pathlib import Path

import pytest
from conftest import FIXTURES, STORY_PROVIDER, sigkill_when
from fakeapi import state_of

SUITE = FIXTURES / "evalsuite"
PLAN = "1. Look at the code.\n2. Change it.\nReady to refactor."
REPLIES = {  # what a good model writes for each task of the fixture suite
    "How many functions": "$(answer 3)",
    "Which VERSION": "$(answer 1.4.2)",
    "add() returns": '$(edit calc.py --old "a - b" --new "a + b") $(answer add adds now)',
    "mul() returns": '$(edit calc.py --old "a + b" --new "a * b") $(answer mul multiplies now)',
}
TASK_OF = {"How many functions": "count-functions", "Which VERSION": "version", "add() returns": "fix-add",
           "mul() returns": "fix-mul"}


def task_of(body) -> str | None:
    text = json.dumps(body)
    return next((TASK_OF[m] for m in TASK_OF if m in text), None)


def model(body) -> str:
    """Good: the right answer or fix for the task in the request. Lazy: answers without looking."""
    if state_of(body) == "planner":
        return PLAN
    if body.get("model") == "lazy":
        return "$(answer I did not look)"
    text = json.dumps(body)
    return next((reply for marker, reply in REPLIES.items() if marker in text), "$(answer ?)")


def eval_project(project, *, model_name="good", provider=STORY_PROVIDER):
    """The project holds the suite (copied from the fixture) and picks the model in its config."""
    shutil.copytree(SUITE, project.root / "suite")
    project.write(".moss/config.toml", f'[llm]\nprovider = "{provider}"\nmodel = "{model_name}"\n')
    return project


def rows_of(out: Path) -> list[dict]:
    f = out / "attempts.jsonl"
    return [json.loads(line) for line in f.read_text().splitlines()] if f.exists() else []


def tree_digest(root: Path) -> dict[str, str]:
    """Every file of the user's tree but the eval's own results, with a hash of its bytes."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if p.is_file() and not rel.startswith((".moss/eval/", ".moss/agent/")):
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


class Overlap:
    """Wraps a model: the first `n` requests are answered only once all `n` are in flight at the
    same time (a barrier, no timing), so an eval that runs attempts one by one cannot pass."""

    def __init__(self, inner, n: int = 2):
        self.inner, self.n = inner, n
        self.barrier = threading.Barrier(n, timeout=90)
        self.calls = 0
        self.met = False
        self.lock = threading.Lock()

    def __call__(self, body):
        with self.lock:
            self.calls += 1
            first = self.calls <= self.n
        if first:
            self.barrier.wait()
            self.met = True
        return self.inner(body)


@pytest.mark.needs_sandbox
def test_a_good_model_passes_every_task_a_lazy_variant_none_side_by_side_and_the_tree_is_untouched(
        project, api, tmp_path):
    """Two cells, the project as it is (model good) and a variant folder that switches the model
    to a lazy one: the good cell passes both questions and both fixes (their test commands pass
    in the copies), the lazy cell passes none. `-j 2` ran two attempts at once (the first two
    requests met at a barrier). The user's files, the suite's repository included, are
    byte-for-byte what they were: every edit happened in a temp copy, removed afterwards but
    for the failed attempts' (`--keep-failed`). The agents speak through the anthropic SDK."""
    eval_project(project, provider="anthropic")
    lazy = project.write("variants/lazy/config.toml", '[llm]\nmodel = "lazy"\n').parent
    overlap = Overlap(model)
    api.push(*[overlap] * 200)
    before = tree_digest(project.root)
    temp = tmp_path / "temp"
    temp.mkdir()
    r = project.moss("eval", "suite", "--machine", "v1", "--variant", "base=", "--variant", f"lazy={lazy}",
                     "-j", "2", "--keep-failed", "--json", env={**api.env(), "TMPDIR": str(temp)}, timeout=600)
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    cells = {c["cell"]: c for c in summary["cells"]}
    assert set(cells) == {"machine=v1 variant=base", "machine=v1 variant=lazy"}
    good, bad = cells["machine=v1 variant=base"], cells["machine=v1 variant=lazy"]
    assert (good["passed"], good["n"]) == (4, 4), r.stderr
    assert (bad["passed"], bad["n"]) == (0, 4), r.stderr
    assert 0.5 < good["ci_low"] < 1.0 and good["ci_high"] == 1.0
    assert overlap.met
    rows = rows_of(Path(summary["out"]))
    assert len(rows) == 8
    fixes = [row for row in rows if row["task"] == "fix-add"]
    assert {row["variant"]: row["check"]["passed"] for row in fixes} == {"base": True, "lazy": False}
    assert all(Path(row["log"]).is_file() for row in rows)  # each session's log outlives its copy
    # --keep-failed: the lazy cell's copies stay for a look (untouched), the passing ones are gone
    kept = {row["task"]: Path(row["kept"]) for row in rows if row["kept"]}
    assert sorted(kept) == sorted(TASK_OF.values()) and all(row["variant"] == "lazy" for row in rows if row["kept"])
    assert set(temp.iterdir()) == {p.parent for p in kept.values()}
    assert "return a - b" in (kept["fix-add"] / "calc.py").read_text()
    assert tree_digest(project.root) == before
    assert "def add(a, b):\n    return a - b" in (project.root / "suite/repos/pycalc/calc.py").read_text()


@pytest.mark.needs_sandbox
def test_the_budget_stops_the_eval_and_the_running_attempt_cleanly(project, api):
    """One budget for the whole eval: the first attempt to end spends more than `--max-tokens`,
    so the attempt still waiting for the model is stopped (SIGINT, it exits 130) and recorded as
    `budget`, and the two attempts never started are not run. Exit 1 says the eval stopped early.
    A resume with more budget runs the rest, the stopped attempt included."""
    eval_project(project)
    release = threading.Event()
    order = {"n": 0}
    lock = threading.Lock()

    def held(body):
        with lock:
            order["n"] += 1
            n = order["n"]
        if n == 2:  # the second attempt's request waits (until the test ends)
            release.wait(120)
        return model(body)

    overlap = Overlap(held)
    api.push(*[overlap] * 50)
    out = project.root / "results"
    try:
        r = project.moss("eval", "suite", "--machine", "v1", "-j", "2", "--max-tokens", "50", "--out", str(out),
                         env=api.env(), timeout=300)
    finally:
        release.set()
    assert r.returncode == 1, r.stderr
    assert "budget reached: 2 attempts not run" in r.stderr
    rows = rows_of(out)
    assert len(rows) == 2
    stopped = [row for row in rows if row.get("exit") == 130]
    assert len(stopped) == 1 and stopped[0]["reason"] == "budget" and stopped[0]["passed"] is None
    # with more budget, a resume runs what the budget stopped or never started; each counts once
    r = project.moss("eval", "suite", "--machine", "v1", "-j", "2", "--resume", str(out), "--json",
                     env=api.env(), timeout=300)
    assert r.returncode == 0, r.stderr
    [cell] = json.loads(r.stdout)["cells"]
    assert cell["attempts"] == 4 and cell["n"] + cell["not_counted"] == 4
    assert {row["task"] for row in rows_of(out) if row["reason"] != "budget"} == set(TASK_OF.values())


@pytest.mark.needs_sandbox
def test_resume_after_the_eval_was_killed_skips_finished_attempts_and_runs_the_rest_once(project, api):
    """The eval is SIGKILLed once its first attempt is recorded. `--resume DIR` runs the
    others and not the finished one again (the model is never asked about it), and every
    attempt ends with exactly one line."""
    eval_project(project)
    asked: dict[str, int] = {}

    def counting(body):
        t = task_of(body)
        asked[t or "?"] = asked.get(t or "?", 0) + 1
        return model(body)

    api.push(*[counting] * 200)
    out = project.root / "results"
    p = project.popen("eval", "suite", "--machine", "v1", "-j", "1", "--out", str(out), env=api.env())
    sigkill_when(p, lambda: len(rows_of(out)) >= 1, timeout=300)
    finished = {row["task"] for row in rows_of(out)}
    assert finished
    asked.clear()
    r = project.moss("eval", "suite", "--machine", "v1", "-j", "1", "--resume", str(out), "--json",
                     env=api.env(), timeout=600)
    assert r.returncode == 0, r.stderr
    assert f"{len(finished)} of 4 attempts finished before" in r.stderr
    assert not finished & set(asked), asked
    rows = rows_of(out)
    assert sorted(row["task"] for row in rows) == sorted(TASK_OF.values())
    assert all(row["passed"] is True for row in rows)


def test_a_project_suite_with_commands_is_refused_while_the_project_is_untrusted(project, api):
    """A cloned repository's suite is its content: its check commands would run on this machine.
    Until the project is trusted, `moss eval` refuses it before any attempt (exit 2, naming
    `moss trust`), and no model is asked anything."""
    eval_project(project)
    project.script("hello", "print('hi')")  # something that needs trust
    project.trusted = False
    api.push(*[model] * 20)
    r = project.moss("eval", "suite", "--machine", "v1", "--out", str(project.root / "results"),
                     env=api.env(), timeout=120)
    assert r.returncode == 2, r.stderr
    assert "moss trust" in r.stderr and "check commands" in r.stderr
    assert not [q for q in api.requests if q.body is not None]
    assert not (project.root / "results" / "attempts.jsonl").exists()


@pytest.mark.needs_sandbox
def test_a_task_whose_check_already_passes_is_a_suite_error_not_a_pass(project, api):
    """`fail_before = true`: the check runs on the untouched copy first; a task that is already
    solved is reported as a suite error (exit 1), the agent never starts, and it counts neither
    way."""
    shutil.copytree(SUITE / "repos", project.root / "suite" / "repos")
    project.write("suite/suite.toml", """
        [[task]]
        id = "solved"
        repo = "repos/pycalc"
        prompt = "neg() is wrong; fix it."
        [task.check]
        run = ["python3 -c 'from calc import neg; assert neg(2) == -2'"]
        fail_before = true
    """)
    api.push(*[model] * 5)
    out = project.root / "results"
    r = project.moss("eval", "suite", "--out", str(out), env=api.env(), timeout=120)
    assert r.returncode == 1, r.stderr
    assert "suite error: task solved" in r.stderr
    [row] = rows_of(out)
    assert row["reason"] == "suite_error" and row["passed"] is None
    assert not [q for q in api.requests if q.body is not None]


@pytest.mark.parametrize("words, message", [
    (["suite", "--variant", "nope"], "--variant takes NAME=PATH"),
    (["suite", "--trials", "0"], "--trials must be a whole number"),
    (["nosuchsuite"], "no suite 'nosuchsuite'"),
    (["suite", "--executor", "fleet"], "--executor must be one of local, ray, got 'fleet'"),
    (["compare", "nope.jsonl", "nope.jsonl"], "no eval results at nope.jsonl"),
    (["suite", "--resume", "nowhere"], "--resume: no eval in"),
    (["suite", "--retries", "1.5"], "--retries must be a whole number >= 0"),
])
def test_bad_input_is_one_clear_line(project, words, message):
    """A mistake on the command line is named, exit 2, before anything runs."""
    eval_project(project)
    r = project.moss("eval", *words, timeout=60)
    assert r.returncode == 2 and message in r.stderr, r.stderr


def test_a_variant_holding_a_link_to_a_secret_is_refused_before_any_attempt(project, api, tmp_path):
    """`moss eval --variant` with a folder whose `scripts/notes.md` links to the user's SSH key
    (which the attempt's agent could `cat` in its `.moss/`): refused in one line naming the
    link, exit 2, before any attempt or model call, and the key's text is in no file moss wrote."""
    eval_project(project)
    key = tmp_path / "dot-ssh" / "id_ed25519"
    key.parent.mkdir()
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n")
    variant = project.write("variants/keyed/config.toml", '[llm]\nmodel = "lazy"\n').parent
    (variant / "scripts").mkdir()
    os.symlink(key, variant / "scripts" / "notes.md")
    out = project.root / "results"
    r = project.moss("eval", "suite", "--variant", f"keyed={variant}", "--out", str(out), env=api.env(), timeout=120)
    assert r.returncode == 2, r.stderr
    assert "scripts/notes.md is a link to" in r.stderr and "outside the variant folder" in r.stderr, r.stderr
    assert rows_of(out) == [] and not api.requests
    assert not [p for p in out.rglob("*") if p.is_file() and "OPENSSH" in p.read_text(errors="replace")]


def _results(path: Path, passes: dict[str, bool | None], cell: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"key": f"{t}|{cell}|1", "task": t, "cell": cell, "trial": 1, "passed": p,
                                        "reason": "answered" if p else "max_turns"}) + "\n"
                            for t, p in passes.items()))
    return path


def test_compare_names_the_flipped_tasks_and_gives_one_verdict(project):
    """Eight tasks: A passed one, B passed all eight. compare names the seven B fixed, runs the
    exact McNemar test on the paired tasks (p = 2/128) and says B is better; the same files the
    other way round say worse, and `--fail-if worse` turns that into exit 1 for CI. An
    attempt that does not count (null) is left out of the pairs. One file of two cells compares
    its first cell (A) with its second (B)."""
    tasks = [f"t{i}" for i in range(1, 9)]
    a = _results(project.root / "a.jsonl", {t: t == "t1" for t in tasks} | {"t9": None}, "base")
    b = _results(project.root / "b.jsonl", {t: True for t in tasks} | {"t9": True}, "terse")
    r = project.moss("eval", "compare", str(a), str(b), timeout=60)
    assert r.returncode == 0, r.stderr
    assert [ln for ln in r.stdout.splitlines() if ln.startswith("fixed in B")] == [
        f"fixed in B:  {t} trial 1" for t in tasks[1:]]
    assert "B is better than A (exact McNemar on 8 paired attempts: 7 fixed, 0 broken, p = 0.0156)" in r.stdout
    r = project.moss("eval", "compare", str(b), str(a), "--fail-if", "worse", "--json", timeout=60)
    assert r.returncode == 1
    out = json.loads(r.stdout)
    assert out["verdict"] == "worse" and out["broke"] == [f"{t} trial 1" for t in tasks[1:]]
    same = project.moss("eval", "compare", str(a), str(a), "--fail-if", "worse", timeout=60)
    assert same.returncode == 0 and "no detectable difference between A and B" in same.stdout
    # one eval of two cells (base and a variant), as `moss eval SUITE --variant base= --variant x=DIR` writes
    both = project.root / "both.jsonl"
    both.write_text(a.read_text() + b.read_text())
    r = project.moss("eval", "compare", str(both), timeout=60)
    assert r.returncode == 0 and r.stdout.startswith("A = base, B = terse\n") and "B is better than A" in r.stdout


def test_compare_of_runs_with_nothing_in_common_is_an_error_naming_each_sides_tasks(project):
    """Two runs of different suites share no task and trial: compare says so and which tasks
    each side has, exit 2, instead of "no detectable difference ... on 0 paired attempts"."""
    a = _results(project.root / "a.jsonl", {"t1": True, "t2": False, "t3": True}, "base")
    b = _results(project.root / "b.jsonl", {"x1": True, "x2": True}, "base")
    r = project.moss("eval", "compare", str(a), str(b), timeout=60)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.splitlines() == [
        f"nothing to compare: A ({a}) and B ({b}) share no task and trial among their counted attempts. "
        "A has 3 tasks: t1, t2, t3; B has 2 tasks: x1, x2. Compare two runs of the same suite."]


def test_compare_says_when_too_few_pairs_disagree_for_any_verdict_and_the_trials_needed(project):
    """Ten tasks, two of which B broke: no split of two disagreeing pairs can reach p < 0.05
    (that takes six, all one way), so compare says so, and at this rate (2 in 10) how many
    trials of these tasks would bring six: --trials 3 (30 pairs). JSON says the same."""
    tasks = [f"t{i}" for i in range(10)]
    a = _results(project.root / "a.jsonl", {t: True for t in tasks}, "base")
    b = _results(project.root / "b.jsonl", {t: t not in ("t1", "t2") for t in tasks}, "base")
    r = project.moss("eval", "compare", str(a), str(b), timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == (
        "too few pairs disagree for any verdict: 2 of 10 disagree, and at alpha 0.05 a verdict takes at least 6 "
        "disagreeing pairs (with 2, p is at least 0.5 however they split); at this rate that takes about 30 "
        "pairs: --trials 3 on these 10 tasks")
    out = json.loads(project.moss("eval", "compare", str(a), str(b), "--json", timeout=60).stdout)
    assert (out["too_few"], out["disagree_needed"], out["trials_needed"]) == (True, 6, 3)
    enough = _results(project.root / "c.jsonl", {t: t == "t0" for t in tasks}, "base")  # nine broken
    out = json.loads(project.moss("eval", "compare", str(a), str(enough), "--json", timeout=60).stdout)
    assert out["verdict"] == "worse" and out["too_few"] is False and out["note"] is None


def test_the_table_lists_cells_in_the_order_given(project):
    """An eval's cells are listed in the order the matrix gave them (each row's cell_index),
    whatever order their attempts ended in: the first given is the table's first row and
    compare's A."""
    rows = [{"key": f"t{i}|{cell}|1", "task": f"t{i}", "cell": cell, "trial": 1, "cell_index": ci,
             "passed": True, "reason": "answered"} for i in (1, 2) for cell, ci in (("zeta", 2), ("alpha", 1))]
    f = project.root / "run" / "attempts.jsonl"
    f.parent.mkdir()
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))  # zeta's attempts ended first
    r = project.moss("eval", "report", str(f), timeout=60)
    assert r.returncode == 0, r.stderr
    listed = [line.split("\t")[0] for line in r.stdout.splitlines()[1:] if line.strip()]
    assert listed[:2] == ["alpha", "zeta"]
    assert project.moss("eval", "compare", str(f), timeout=60).stdout.startswith("A = alpha, B = zeta\n")


def test_a_repositorys_own_moss_folder_never_reaches_an_attempt(project, api, tmp_path):
    """An untrusted project, and a task repository that brings its own `.moss/` (a config that
    picks another model, an agent.lua that would take over): the attempt's copy holds neither.
    The agent runs moss's built-in scripts with the user's own config (model good), says so on
    stderr, and passes; no request ever names the model those folders chose."""
    suite = tmp_path / "outside"
    shutil.copytree(SUITE / "repos", suite / "repos")
    (suite / "repos/pycalc/.moss/scripts").mkdir(parents=True)
    (suite / "repos/pycalc/.moss/config.toml").write_text('[llm]\nmodel = "lazy"\n')
    (suite / "repos/pycalc/.moss/scripts/agent.lua").write_text('error("the repository took over")\n')
    (suite / "suite.toml").write_text('[[task]]\nid = "count"\nrepo = "repos/pycalc"\n'
                                      'prompt = "How many functions does calc.py define?"\n'
                                      '[task.check]\nanswer = "3"\n')
    project.write(".moss/config.toml", '[llm]\nmodel = "lazy"\n')
    project.script("hello", "print('hi')")
    project.trusted = False
    project.user_file("config.toml", '[llm]\nprovider = "anthropic"\nmodel = "good"\n')
    api.push(*[model] * 20)
    r = project.moss("eval", str(suite), "--machine", "v1", "--json", env=api.env(), timeout=300)
    assert r.returncode == 0, r.stderr
    assert "this project is not trusted" in r.stderr
    [cell] = json.loads(r.stdout)["cells"]
    assert (cell["passed"], cell["n"]) == (1, 1)
    models = {q.body.get("model") for q in api.requests if q.body}
    assert models == {"good"}


@pytest.mark.needs_sandbox
def test_ctrl_c_stops_the_running_attempts_exits_130_and_leaves_only_finished_lines(project, api, tmp_path):
    """Ctrl-C (SIGINT to `moss eval`) once the first attempt is recorded: the attempt running
    then is stopped and its copy removed, nothing is written for it (a resume runs it again),
    and the eval exits 130."""
    eval_project(project)
    api.push(*[model] * 200)
    out = project.root / "results"
    temp = tmp_path / "temp"
    temp.mkdir()
    p = project.popen("eval", "suite", "--machine", "v1", "-j", "1", "--out", str(out),
                      env={**api.env(), "TMPDIR": str(temp)})
    try:
        start = time.monotonic()
        while not rows_of(out) and time.monotonic() - start < 300 and p.poll() is None:
            time.sleep(0.05)  # polling for the first line, as sigkill_when does
        assert rows_of(out), p.stderr.read() if p.poll() is not None else "no attempt ended"
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, err
    rows = rows_of(out)
    assert len(rows) < 4 and all(row["reason"] == "answered" for row in rows)
    assert list(temp.iterdir()) == []


def test_an_agent_that_cannot_start_counts_neither_way(project, api):
    """A cell whose agent cannot start (here a role that does not exist) says nothing about the
    agent: its attempts are recorded with exit 2 and `passed: null`, and the table shows them as
    not counted instead of a 0% pass rate."""
    eval_project(project)
    api.push(*[model] * 20)
    out = project.root / "results"
    r = project.moss("eval", "suite", "--role", "nosuchrole", "-j", "2", "--out", str(out), "--json",
                     env=api.env(), timeout=300)
    assert r.returncode == 0, r.stderr
    [cell] = json.loads(r.stdout)["cells"]
    assert (cell["n"], cell["not_counted"], cell.get("rate")) == (0, 4, None)
    rows = rows_of(out)
    assert all(row["exit"] == 2 and row["passed"] is None for row in rows)
    assert "nosuchrole" in rows[0]["verdict"]


def test_a_suite_cannot_copy_a_folder_from_outside_its_own(project, api, tmp_path):
    """A question-only suite needs no trust (it runs no commands), so a cloned repository could
    bring one whose `repo` points elsewhere (`../..`, a link to your home) to have the agent
    read, and send to the model, files that are not the project's. A task's repository must lie
    in the suite's folder, links followed: otherwise nothing runs (exit 2, named)."""
    secret = tmp_path / "private"
    secret.mkdir()
    (secret / "key.txt").write_text("do not send\n")
    project.write("suite/suite.toml", """
        [[task]]
        id = "peek"
        repo = "../../private"
        prompt = "What is in key.txt?"
        [task.check]
        answer = "do not send"
    """)
    (project.root / "suite" / "linked").symlink_to(secret)
    api.push(*[model] * 5)
    r = project.moss("eval", "suite", env=api.env(), timeout=60)
    assert r.returncode == 2 and "outside the suite's folder" in r.stderr, r.stderr
    (project.root / "suite/suite.toml").write_text((project.root / "suite/suite.toml").read_text()
                                                   .replace("../../private", "linked"))
    r = project.moss("eval", "suite", env=api.env(), timeout=60)
    assert r.returncode == 2 and "outside the suite's folder" in r.stderr, r.stderr
    assert not [q for q in api.requests if q.body is not None]


def test_results_are_never_written_through_a_link_planted_under_moss(project, api, tmp_path):
    """A cloned repository that plants `.moss/eval` as a link to somewhere else does not get
    moss's results written there: the default results folder is reached from the project's
    root without following links, and the eval stops, naming it, before any attempt."""
    eval_project(project)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (project.root / ".moss" / "eval").symlink_to(elsewhere)
    api.push(*[model] * 5)
    r = project.moss("eval", "suite", "--machine", "v1", env=api.env(), timeout=60)
    assert r.returncode == 2 and ".moss/eval" in r.stderr, r.stderr
    assert list(elsewhere.iterdir()) == []
    assert not [q for q in api.requests if q.body is not None]


# A module a hostile repository puts at its top: `python -m moss` run there without -P would
# import it in place of the real one, outside any sandbox.
PLANTED = "import pathlib\npathlib.Path({marker!r}).write_text('the repository ran code in moss')\n"


def plant_modules(repo: Path, marker: Path) -> None:
    for name in ("json.py", "click.py", "anthropic.py", "rich.py"):
        (repo / name).write_text(PLANTED.format(marker=str(marker)))


def test_a_repositorys_python_files_never_run_in_the_attempts_moss(project, api, tmp_path):
    """A task repository with its own json.py, click.py, anthropic.py and rich.py at the top: the
    attempt's moss runs in the repository's copy, but imports moss's own modules, never those
    (each would leave a marker file); the attempt answers and passes."""
    suite = tmp_path / "outside"
    shutil.copytree(SUITE / "repos", suite / "repos")
    marker = tmp_path / "pwned"
    plant_modules(suite / "repos/pycalc", marker)
    (suite / "suite.toml").write_text('[[task]]\nid = "count"\nrepo = "repos/pycalc"\n'
                                      'prompt = "How many functions does calc.py define?"\n'
                                      '[task.check]\nanswer = "3"\n')
    project.write(".moss/config.toml", '[llm]\nprovider = "anthropic"\nmodel = "good"\n')
    api.push(*[model] * 20)
    r = project.moss("eval", str(suite), "--machine", "v1", "--json", env=api.env(), timeout=300)
    assert r.returncode == 0, r.stderr
    [cell] = json.loads(r.stdout)["cells"]
    assert (cell["passed"], cell["n"]) == (1, 1)
    assert not marker.exists()


def _parent(pid: int) -> int:
    return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])


def _cmdline(pid: int) -> list[bytes]:
    data = open(f"/proc/{pid}/cmdline", "rb").read()
    if not data:  # it has ended (a zombie's command line is empty): as if it were gone
        raise ProcessLookupError(pid)
    return data.rstrip(b"\0").split(b"\0")


def eval_watching_agents(project, api, temp: Path, watch, *, replies: int = 100):
    """`moss eval suite --machine v1 -j 2` with its copies under `temp`; while the model
    answers, `watch(pid)` is called for each agent working there (one that ends meanwhile is
    passed over). Returns the eval's CompletedProcess."""
    from test_batch import agents_under

    def looking(body):
        for pid in agents_under(temp):
            try:
                watch(pid)
            except OSError:
                pass
        return model(body)

    api.push(*[looking] * replies)
    return project.moss("eval", "suite", "--machine", "v1", "--json", "-j", "2",
                        env={**api.env(), "TMPDIR": str(temp)}, timeout=300)


def test_a_single_attempt_is_started_as_a_new_interpreter_without_a_zygote(project, api, tmp_path):
    """A zygote imports both SDKs and more once; a new interpreter imports only the SDK its
    agent uses. For one attempt that is less work (LocalAttempts.FORK_FROM), so the agent's
    parent is the eval itself and no zygote is started."""
    eval_project(project)
    suite = (SUITE / "suite.toml").read_text()
    (project.root / "suite" / "suite.toml").write_text(suite[:suite.index('[[task]]\nid = "version"')])
    temp = tmp_path / "temp"
    temp.mkdir()
    parents: list[list[bytes]] = []
    r = eval_watching_agents(project, api, temp, lambda pid: parents.append(_cmdline(_parent(pid))), replies=40)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["cells"][0]["n"] == 1
    assert parents, "no agent was seen working"
    assert all(b"eval" in cmd and not any(b"zygote" in part for part in cmd) for cmd in parents), parents


def test_attempts_are_forked_from_one_zygote_that_ends_with_the_eval(project, api, tmp_path):
    """Each attempt's agent is forked from one process that imported moss and the SDKs once
    (host/zygote.py), not started as a new interpreter: while the model answers, the agent's
    parent is a monitor whose parent is `moss.zygote`, the same one for every attempt; `ps`
    shows the agent as the `moss @agent` command it stands for. The zygote holds no socket with a
    name (no other process can ask it to start anything), and when the eval ends it is gone."""
    eval_project(project)
    temp = tmp_path / "temp"
    temp.mkdir()
    seen: list[tuple[int, list[bytes], list[bytes]]] = []
    fds: set[str] = set()

    def watch(pid: int) -> None:
        zygote = _parent(_parent(pid))
        seen.append((zygote, _cmdline(zygote), _cmdline(pid)))
        fds.update(os.readlink(f"/proc/{zygote}/fd/{n}") for n in os.listdir(f"/proc/{zygote}/fd"))

    r = eval_watching_agents(project, api, temp, watch)
    assert r.returncode == 0, r.stderr
    assert seen, "no agent was seen working"
    zygotes = {z for z, _, _ in seen}
    assert len(zygotes) == 1
    [zygote] = zygotes
    assert all(b"moss.zygote" in zcmd for _, zcmd, _ in seen)
    assert all(cmd[1:5] == [b"-P", b"-m", b"moss", b"@agent"] for _, _, cmd in seen)
    try:  # gone, or ended and not yet reaped, or its pid already another process's
        assert b"moss.zygote" not in _cmdline(zygote)
    except OSError:
        pass
    # nothing else can reach it: its only sockets are unnamed (a socket pair with the eval)
    sockets = {f[len("socket:["):-1] for f in fds if f.startswith("socket:")}
    assert sockets
    named = {line.split()[6] for line in open("/proc/net/unix").read().splitlines()[1:] if len(line.split()) > 7}
    assert not sockets & named


PROBE = """
import json, os, sys


def _note(when):
    with open(os.environ["PROBE_OUT"], "a") as f:
        f.write(json.dumps([when, {sdk: sdk in sys.modules for sdk in ("anthropic", "openai")}]) + "\\n")


def first():
    _note("first")


def second():
    _note("second")
"""


def test_a_zygote_imports_the_sdk_its_agents_use_and_another_only_once_an_agent_needs_it(tmp_path):
    """An eval whose agents all use anthropic gets a zygote without the openai SDK (~0.6 s of
    CPU less per run); the first attempt whose provider is openai has the zygote import it
    before that fork, once. What the zygote holds is noted by a probe it runs as it prepares;
    a name it cannot import leaves the process to meet that itself, still forked."""
    import subprocess

    from moss import zygote
    from moss.tools import procs

    (tmp_path / "probe.py").write_text(PROBE)
    out = tmp_path / "notes"
    env = dict(os.environ, PYTHONPATH=str(tmp_path), PROBE_OUT=str(out))
    z = zygote.Zygote(env, (*zygote.preload_for(("anthropic",)), "probe:first"))
    try:
        for apis, probe in ((("anthropic",), "probe:first"), (("openai",), "probe:second"),
                            (("anthropic", "openai"), "probe:second"), ((), "no_such_module:at_all")):
            p = z.popen(procs.moss_command("--version"), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                        preload=(*zygote.preload_for(apis), probe))
            assert isinstance(p, zygote.ZygotePopen)
            version, err = p.communicate(timeout=60)
            assert p.returncode == 0 and version.strip(), err
    finally:
        z.close()
    notes = [json.loads(line) for line in out.read_text().splitlines()]
    assert notes == [["first", {"anthropic": True, "openai": False}],
                     ["second", {"anthropic": True, "openai": True}]]


def test_the_sdk_an_attempts_agent_will_use_is_resolved_as_the_agent_resolves_it(tmp_path):
    """`sdk_apis` (what an eval's zygote preloads): the agent's own flags, then the config its
    copy holds, then the environment; "replay" needs no SDK; where nothing says, both."""
    from moss.eval.executors import sdk_apis
    from moss.tools import procs

    copy = tmp_path / "copy"
    (copy / ".moss").mkdir(parents=True)
    (copy / ".moss" / "config.toml").write_text('[llm]\nprovider = "anthropic"\nmodel = "good"\n')
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg"), "ANTHROPIC_API_KEY": "k",
           "OPENAI_API_KEY": "k"}

    def agent(*words):
        return procs.moss_command("@agent", "--output-format", "stream-json", "-n", "--trust", *words, "--", "task")

    assert sdk_apis(agent(), copy, env) == ("anthropic",)
    assert sdk_apis(agent("--provider", "openai", "--model", "m"), copy, env) == ("openai",)
    assert sdk_apis(agent("--provider", "replay", "--replay", str(tmp_path / "c.jsonl")), copy, env) == ("replay",)
    (copy / ".moss" / "config.toml").write_text("[llm\n")
    assert sdk_apis(agent(), copy, env) == ("anthropic", "openai")
    assert sdk_apis(agent(), tmp_path / "empty", {"HOME": str(tmp_path)}) == ("anthropic", "openai")


def test_the_sdk_guess_reads_a_copys_config_through_no_planted_link_or_fifo(tmp_path):
    """A task's setup commands run in the copy before its agent starts, so they can plant the
    copy's .moss/config.toml. The eval reads it to choose its zygote's SDK without following a
    link (here to a config naming openai) and without waiting on a fifo: it goes by the
    environment instead, and returns at once. Whatever is guessed, only moss's own SDK names can
    reach the zygote."""
    from moss import zygote
    from moss.eval.executors import sdk_apis
    from moss.tools import procs

    elsewhere = tmp_path / "elsewhere.toml"
    elsewhere.write_text('[llm]\nprovider = "openai"\nmodel = "m"\n')
    copy = tmp_path / "copy"
    (copy / ".moss").mkdir(parents=True)
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg"), "ANTHROPIC_API_KEY": "k",
           "OPENAI_API_KEY": "k"}
    argv = procs.moss_command("@agent", "-n", "--trust", "--", "task")
    os.symlink(elsewhere, copy / ".moss" / "config.toml")
    assert sdk_apis(argv, copy, env) == ("anthropic",)  # the environment's choice, not the link's
    (copy / ".moss" / "config.toml").unlink()
    os.mkfifo(copy / ".moss" / "config.toml")
    assert sdk_apis(argv, copy, env) == ("anthropic",)  # and no wait for a writer that never comes
    assert zygote.preload_for(("os", "anthropic")) == zygote.preload_for(("anthropic",))


PANEL = """
from moss.eval.progress import Progress
p = Progress(6, title="eval suite (3 tasks x 2 cells x 1 trials)", live=True, cells=["base", "terse"])
p.started("t1|base|1"); p.started("t1|terse|1")
p.stopped("t1|base|1")  # its run ended; the policy has not judged it yet
p.started("t2|base|1")  # the worker took the next one: two run, not three
p.ended({"key": "t1|base|1", "cell": "base", "passed": True, "tokens": 1500, "cost": 0.0125})
p.close()
"""


def test_the_eval_panel_is_one_full_width_status_line_over_its_cells_in_order(tmp_path):
    """The live panel on a 120-column terminal: a status line as wide as the terminal (not a
    title wrapped to the width of the cells' table), which counts as running only the attempts
    an executor runs now (one whose run ended and waits for its verdict runs no more), then the
    cells in the matrix's order, a cell with nothing counted yet included."""
    from screen import python_on_a_terminal

    t = python_on_a_terminal(tmp_path, "panel.py", PANEL)
    lines = [ln for ln in t.everything() if ln.strip()]
    assert lines[-4] == "eval suite (3 tasks x 2 cells x 1 trials) · 1/6 attempts done · 2 running · " \
                        "spent 1.5k tokens, $0.0125"
    assert lines[-3].split() == ["cell", "passed", "rate", "so", "far"]
    assert [ln.split()[0] for ln in lines[-2:]] == ["base", "terse"]
    assert lines[-2].split()[1:] == ["1/1", "100%"] and lines[-1].split()[1:] == ["0/0", "-"]
