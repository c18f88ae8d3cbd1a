"""Outcomes tell the truth: `answered`, exit 0 and `"success": true` only when the work is in the
tree and validation (when configured) passes on the tree as it is.

Each story runs the real CLI against the fake API server, with a scripted model that writes
what a (sometimes poor) model writes; the validators are real commands run in the sandbox.
"""

from __future__ import annotations

import json

import pytest
from fakeapi import error, state_of

# not `pub`: renaming a public item is a high-risk edit (lib/agent/risk.lua), refused at the stories'
# --auto-approve medium before it could fail validation
MAIN_RS = "const DEFAULT_DEPTH: usize = 3;\n\nfn main() {\n    println!(\"{}\", DEFAULT_DEPTH);\n}\n"
BROKEN_CALC = 'def add(a, b):\n    return a - b\n'
CALC_TEST = 'from calc import add\nassert add(2, 3) == 5, f"add(2, 3) = {add(2, 3)}"\nprint("ok")\n'
FIX = '$(edit calc.py --old "a - b" --new "a + b")'
PLAN = "1. Look at the code.\n2. Change it.\nReady to refactor."


def scripted(*replies):
    """The refactorer's model: its planner writes a plan, then each turn takes the next reply
    (the last one repeats)."""
    queue = list(replies)

    def model(body):
        if state_of(body) == "planner":
            return PLAN
        return queue.pop(0) if len(queue) > 1 else queue[0]
    return model


def result_of(r) -> dict:
    assert r.stdout.strip(), r.stderr
    return json.loads(r.stdout)


def events(project, sid) -> list[dict]:
    log = project.root / f".moss/agent/logs/{sid}.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()]


def calc_project(project, *, broken=True, config=""):
    """A tiny Python project whose test fails while `add` subtracts."""
    project.write("calc.py", BROKEN_CALC if broken else BROKEN_CALC.replace("a - b", "a + b"))
    project.write("test_calc.py", CALC_TEST)
    project.write(".moss/config.toml", """
        [agent]
        validate_commands = [ { name = "test", run = "python3 test_calc.py" } ]
        max_retries = 1
    """ + config)
    return project


def refactor(project, api, *args, task="make test_calc.py pass", replies=()):
    if replies:
        api.replies.clear()
        api.push(*[scripted(*replies)] * (len(replies) + 8))
    return project.moss("@agent", "--provider", "anthropic", "--v1", "-n", "--refactor", "--auto-approve", "medium",
                        "--output-format", "json", *args, task, env=api.env(), timeout=120)


# ---- the repros: work rolled back, or never done, is not an answer ------------------------------

@pytest.mark.needs_sandbox
def test_an_answer_after_the_rollback_of_its_work_ends_blocked_with_the_file_unchanged(project, api):
    """The rename repro: validation greps for the constant the model renames. The edit fails
    validation, is retried, rolled back; the model keeps answering "renamed". Before, that
    ended `answered`, exit 0, with the file unchanged. Now the answer after the rollback is
    step 3 of the chain: blocked, exit 3, and the JSON says which step failed and why."""
    project.write("src/main.rs", MAIN_RS)
    project.write(".moss/config.toml", """
        [agent]
        validate_commands = [ { name = "depth", run = "grep -q 'DEFAULT_DEPTH: usize = [0-9]' src/main.rs" } ]
        max_retries = 1
    """)
    r = refactor(project, api, task="rename the default depth constant",
                 replies=['$(edit src/main.rs --old "DEFAULT_DEPTH: usize" --new "MAX_DEPTH: usize")',
                          "$(answer renamed)"])
    assert r.returncode == 3, r.stderr
    out = result_of(r)
    assert out["reason"] == "blocked" and out["success"] is False
    v = out["validation"]
    assert v["passed"] is False and v["step"] == "depth" and v["rolled_back"] is True
    assert "grep -q" in v["command"] and v["exit"] == 1
    assert (project.root / "src/main.rs").read_text() == MAIN_RS
    names = [e["event"] for e in events(project, out["session_id"])]
    assert "rollback_done" in names and "escalate" in names and "done" not in names


@pytest.mark.needs_sandbox
def test_validation_that_always_fails_ends_blocked_in_v2_too(project, api):
    """`run = "false"`, the V2 machine, the refactorer: the explorer edits, the evaluator answers.
    Retries, a rollback, the explorer edits again, and then the session ends blocked (step 3
    asks; it does not roll back a second time), never answered."""
    calc_project(project, broken=False)
    project.write(".moss/config.toml", """
        [agent]
        validate_commands = [ { name = "never", run = "false" } ]
        max_retries = 1
    """)

    def model(body):
        if state_of(body) == "planner":
            return PLAN
        if state_of(body) == "evaluator":
            return "$(answer done: add is tidy now)"
        return '$(edit calc.py --old "return a + b" --new "return b + a")'

    api.push(*[model] * 12)
    r = project.moss("@agent", "--provider", "anthropic", "--v2", "-n", "--refactor", "--auto-approve", "medium",
                     "--output-format", "json", "tidy add", env=api.env(), timeout=120)
    assert r.returncode == 3, r.stderr
    out = result_of(r)
    assert out["reason"] == "blocked" and out["success"] is False
    assert out["validation"]["step"] == "never" and out["validation"]["passed"] is False
    names = [e["event"] for e in events(project, out["session_id"])]
    assert names.count("rollback_done") == 1 and "escalate" in names and "done" not in names


# ---- honest work is not blocked ----------------------------------------------------------------

@pytest.mark.needs_sandbox
@pytest.mark.parametrize("baseline", [True, False], ids=["with-baseline", "no-baseline"])
def test_a_fix_that_makes_validation_pass_ends_answered(project, api, baseline):
    """The project's test fails before the session (the task is to make it pass); the model
    fixes `add` and answers: answered, exit 0, success, and the JSON shows validation passed.
    With the baseline, the session said at the start that validation fails as it is."""
    calc_project(project)
    r = refactor(project, api, *([] if baseline else ["--no-baseline"]), replies=[FIX, "$(answer add adds now)"])
    assert r.returncode == 0, r.stderr
    out = result_of(r)
    assert out["reason"] == "answered" and out["success"] is True and out["answer"] == "add adds now"
    assert out["validation"]["passed"] is True
    assert ("validation fails on the project as it is" in r.stderr) is baseline
    whys = [e["why"] for e in events(project, out["session_id"]) if e["event"] == "validation"]
    assert whys == (["baseline", "edit"] if baseline else ["edit"])


@pytest.mark.slow
@pytest.mark.needs_sandbox
def test_an_answer_on_an_untouched_passing_tree_stands_at_once(project, api):
    """Validation passes before the session; the model only reads and answers: answered, and
    validation ran once (at the start), not again for the answer."""
    calc_project(project, broken=False)
    r = refactor(project, api, task="what does add do?", replies=["$(view calc.py)", "$(answer add returns a + b)"])
    assert r.returncode == 0, r.stderr
    assert "validation passes on the project as it is" in r.stderr
    out = result_of(r)
    assert out["reason"] == "answered" and out["success"] is True
    assert [e["why"] for e in events(project, out["session_id"]) if e["event"] == "validation"] == ["baseline"]


@pytest.mark.needs_sandbox
def test_an_answer_on_an_untouched_failing_tree_is_sent_back_once_then_unvalidated(project, api):
    """The model changes nothing and answers while the project's test fails: the answer goes
    back once with the failure; answering again as it is ends `unvalidated`, exit 1, not a
    success. In text mode the answer is still printed on stdout: it may be the right answer to
    a question, it just is not validated work."""
    calc_project(project)
    r = refactor(project, api, task="why does the test fail?",
                 replies=["$(answer add subtracts; that is why the test fails)", "$(answer add subtracts)"])
    assert r.returncode == 1, r.stderr
    out = result_of(r)
    assert out["reason"] == "unvalidated" and out["success"] is False
    assert out["answer"] == "add subtracts" and out["validation"]["step"] == "test"
    assert out["turns"] == 3  # the plan, the answer sent back, the answer again

    api.push(*[scripted("$(answer add subtracts)")] * 3)
    t = project.moss("@agent", "--provider", "anthropic", "--v1", "-n", "--refactor", "why does the test fail?",
                     env=api.env(), timeout=120)
    assert t.returncode == 1 and t.stdout.strip() == "add subtracts"
    assert "answered, but validation fails on the project as it is" in t.stderr


@pytest.mark.needs_sandbox
def test_an_answer_in_the_same_reply_as_a_breaking_edit_is_judged_after_the_edit(project, api):
    """`$(edit …) $(answer done)` in one reply, on a tree that passed: the answer is judged on
    the tree the edit left (which fails), not on the tree before it; the model then repairs
    its edit and its next answer stands."""
    calc_project(project, broken=False)
    r = refactor(project, api, task="try multiplying",
                 replies=['$(edit calc.py --old "a + b" --new "a * b") $(answer multiplied, done)',
                          '$(edit calc.py --old "a * b" --new "a + b")', "$(answer put back)"])
    out = result_of(r)
    assert r.returncode == 0 and out["answer"] == "put back", r.stderr
    names = [e["event"] for e in events(project, out["session_id"])]
    assert names.count("answer_rejected") == 1 and out["turns"] == 4


# ---- a failure is shown, with its reason -------------------------------------------------------

@pytest.mark.needs_sandbox
def test_a_failed_validation_shows_its_step_and_last_lines_on_stderr_and_in_sessions_show(project, api):
    """A failing edit: stderr names the step, its command and exit status, then the last lines
    of its output in a gutter; `moss sessions show` shows the same after the timeline."""
    calc_project(project, broken=False)
    r = refactor(project, api, task="experiment with add",
                 replies=['$(edit calc.py --old "a + b" --new "a - b")', '$(edit calc.py --old "a - b" --new "a + b")',
                          "$(answer fine again)"])
    assert r.returncode == 0, r.stderr
    assert "validation failed at step test (`python3 test_calc.py`, exit 1)" in r.stderr
    assert "  │ AssertionError: add(2, 3) = -1" in r.stderr
    sid = result_of(r)["session_id"]
    shown = project.moss("sessions", "show", sid)
    assert shown.returncode == 0
    # the last failure was repaired: sessions show lists it in the timeline, not as the last word
    assert "FAILED at test" in shown.stdout and "last validation failed" not in shown.stdout

    r2 = refactor(project, api, task="break add",
                  replies=['$(edit calc.py --old "a + b" --new "a - b")', "$(answer broke it)"])
    sid2 = result_of(r2)["session_id"]
    shown2 = project.moss("sessions", "show", sid2)
    assert "last validation failed at step test (`python3 test_calc.py`, exit 1):" in shown2.stdout
    assert "│ AssertionError: add(2, 3) = -1" in shown2.stdout


# ---- the baseline: where the session starts ----------------------------------------------------

@pytest.mark.needs_sandbox
def test_a_configured_step_that_cannot_run_here_is_reported_before_any_model_call(project, api):
    """`validate_commands` names a program this machine does not have: the session stops at
    once with a config error naming the step and the fix, before it spends a token; with
    --no-baseline the session goes on and finds out at its answer."""
    calc_project(project, broken=False)
    project.write(".moss/config.toml", """
        [agent]
        validate_commands = [ { name = "lint", run = "no-such-linter --strict" } ]
    """)
    api.push(*[scripted("$(answer fine)")] * 3)
    r = refactor(project, api, task="tidy")
    assert r.returncode == 2
    assert "validation step lint (`no-such-linter --strict`) cannot run here (exit 127)" in r.stderr
    assert "--no-baseline" in r.stderr and len(api.requests) == 0

    r2 = refactor(project, api, "--no-baseline", task="tidy")
    assert len(api.requests) == 3 and result_of(r2)["reason"] == "unvalidated"


@pytest.mark.needs_sandbox
def test_validate_baseline_false_in_config_skips_the_baseline(project, api):
    calc_project(project, config="validate_baseline = false\n")
    r = refactor(project, api, replies=[FIX, "$(answer fixed)"])
    assert r.returncode == 0, r.stderr
    whys = [e["why"] for e in events(project, result_of(r)["session_id"]) if e["event"] == "validation"]
    assert whys == ["edit"]


@pytest.mark.needs_sandbox
def test_a_detected_validator_that_cannot_run_here_is_turned_off_with_a_reason(project, api):
    """No validation configured, a package.json whose test script needs a program that is not
    here: the detected step cannot run, so validation is off for the session (said on stderr,
    with the config key that fixes it) instead of rolling back correct work later."""
    project.write("package.json", json.dumps({"name": "x", "scripts": {"test": "no-such-test-runner"}}))
    project.write("index.js", "module.exports = 1;\n")
    r = refactor(project, api, task="export 2", replies=['$(edit index.js --old "1" --new "2")', "$(answer set to 2)"])
    assert r.returncode == 0, r.stderr
    assert "cannot run here" in r.stderr and "validation is off for this session" in r.stderr
    assert "validate_commands" in r.stderr
    out = result_of(r)
    assert out["reason"] == "answered" and (project.root / "index.js").read_text() == "module.exports = 2;\n"
    assert "validation_off" in [e["event"] for e in events(project, out["session_id"])]


def test_a_read_only_session_runs_no_baseline_and_its_answer_stands(project, api):
    """The explorer cannot change the tree: validation is not its business, even when the
    project's validation fails."""
    calc_project(project)
    api.push("$(answer it adds numbers, wrongly)")
    r = project.moss("@agent", "--provider", "anthropic", "--v1", "-n", "--output-format", "json",
                     "what is calc.py?", env=api.env())
    assert r.returncode == 0, r.stderr
    out = result_of(r)
    assert out["reason"] == "answered"
    assert not [e for e in events(project, out["session_id"]) if e["event"] == "validation"]


# ---- the outcome table: each reason, its exit status, its success --------------------------------

def _max_turns(project, api):
    api.push("$(view calc.py)")
    return ("--max-turns", "1")


def _loop(project, api):
    api.push(*["$(view calc.py)"] * 6)
    return ()


def _checkpoint(project, api):
    api.push("$(checkpoint saving for later)")
    return ()


def _blocked(project, api):
    api.push("$(checkpoint looked at calc.py | should add keep its name?)")
    return ()


def _error(project, api):
    api.push(error(400, "bad request"))
    return ()


def _answered(project, api):
    api.push("$(answer it adds)")
    return ()


OUTCOMES = {  # reason -> (how to get there, exit status, success)
    "answered": (_answered, 0, True),
    "max_turns": (_max_turns, 1, False),
    "loop": (_loop, 1, False),
    "checkpoint": (_checkpoint, 1, False),
    "blocked": (_blocked, 3, False),
    "error": (_error, 1, False),
}


@pytest.mark.parametrize("reason", OUTCOMES)
def test_outcome_table(project, api, reason):
    """docs/agent.md's outcome table, row by row: the reason in the JSON and the checkpoint, the
    exit status, and `success` true only for `answered`. The session ends once, whatever ended
    it: one JSON object, one `session_end` in its log (what `moss sessions show` lists) with
    that reason, and a `done` only for an answer."""
    calc_project(project, broken=False)
    setup, code, success = OUTCOMES[reason]
    args = setup(project, api)
    r = project.moss("@agent", "--provider", "anthropic", "--v1", "-n", "--output-format", "json", *args,
                     "what is calc.py?", env=api.env())
    assert r.returncode == code, r.stderr
    out = result_of(r)
    assert out["reason"] == reason and out["success"] is success
    from moss.sessions import read_checkpoint

    saved = read_checkpoint(project.root / f".moss/agent/session-{out['session_id']}.json")
    assert saved["reason"] == reason
    assert saved["done"] is True and saved["success"] is success
    log = events(project, out["session_id"])
    assert [e["reason"] for e in log if e["event"] == "session_end"] == [reason]
    assert log[-1]["event"] == "session_end"
    assert len([e for e in log if e["event"] == "done"]) == (1 if reason == "answered" else 0)


@pytest.mark.needs_sandbox
def test_a_detected_validator_is_the_repositorys_code_and_runs_sandboxed_at_the_start_too(project, api, tmp_path):
    """A cloned repository's package.json `test` script is detected as the validator and, with
    the baseline, runs before the first model call. It is the repository's code: it runs in the
    session's sandbox, so what it writes outside the project never reaches the host (here /tmp
    is the sandbox's own)."""
    outside = tmp_path / "outside-marker"
    project.write("package.json", json.dumps({"name": "x", "scripts": {"test": f"touch {outside}"}}))
    project.write("index.js", "module.exports = 1;\n")
    r = refactor(project, api, task="look", replies=["$(answer looked)"])
    whys = [e["why"] for e in events(project, result_of(r)["session_id"]) if e["event"] == "validation"]
    assert whys[0] == "baseline"  # it ran, before any model call
    assert not outside.exists()
