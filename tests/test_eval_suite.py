"""moss eval's suites: the built-in suite is proven by its own oracle, and a bad suite is named.

The checks here run plainly with subprocess, in a fresh copy of the task's repo, with the
format's cwd (the copy) and timeout (host/eval/suite.CHECK_TIMEOUT); running them sandboxed is
the eval command's job.
"""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from conftest import FIXTURES

from moss.errors import MossError
from moss.eval.exercises import is_exercise_dir, load_exercises
from moss.eval.suite import (
    CHECK_TIMEOUT,
    Check,
    apply_solution,
    builtin_suite_dir,
    check_answer,
    copy_repo,
    judge_answer,
    load_suite,
)

BUILTIN = load_suite(builtin_suite_dir())
CHANGES = [t for t in BUILTIN.tasks if t.kind == "change"]
QUESTIONS = [t for t in BUILTIN.tasks if t.kind == "question"]


def run_checks(task, copy: Path, home: Path) -> list[int]:
    """Each check command's exit status, run as the format says: by sh, in the copy, 60 s each,
    on a machine with nothing but python3 and POSIX sh (a bare PATH and an empty HOME)."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LC_ALL": "C"}
    return [subprocess.run(["sh", "-c", cmd], cwd=copy, env=env, capture_output=True,
                           timeout=CHECK_TIMEOUT).returncode for cmd in task.check.run]


# ------------------------------------------------------------------------- the built-in suite

def test_builtin_suite_has_enough_questions_and_changes_in_two_languages():
    """The built-in suite loads from the package, with at least 12 questions and 10 change tasks
    over a Python library and a POSIX sh tool, every one with a reference to prove it by."""
    assert BUILTIN.name == "builtin" and BUILTIN.description
    assert len(QUESTIONS) >= 12 and len(CHANGES) >= 10
    for kind in (QUESTIONS, CHANGES):
        assert {"python", "shell"} <= {tag for t in kind for tag in t.tags}
    assert all(t.check.fail_before and t.solution for t in CHANGES)
    assert all(t.solution_answer for t in QUESTIONS)
    repos = {t.repo for t in BUILTIN.tasks}
    assert {r.name for r in repos} == {"pyledger", "shtodo"}
    for repo in repos:  # small: a few files, each under 200 lines
        files = [p for p in repo.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
        assert 3 <= len(files) <= 25
        assert all(len(p.read_text().splitlines()) < 200 for p in files), repo


@pytest.mark.parametrize("task", CHANGES, ids=[t.id for t in CHANGES])
def test_change_task_fails_untouched_and_passes_with_its_reference_solution(task, tmp_path):
    """For every change task, in a fresh copy of its repo: the checks fail on the untouched
    copy (the task is not already solved), and pass once the reference solution is applied
    (the task can be solved). The copy holds the repo only, never the suite or its solutions."""
    copy = copy_repo(task, tmp_path / "copy")
    assert not (copy / "suite.toml").exists()
    assert not any("[[task.solution]]" in p.read_text() for p in copy.rglob("*") if p.is_file())
    before = run_checks(task, copy, tmp_path)
    assert any(rc != 0 for rc in before), f"{task.id}: already passes before any change"
    apply_solution(task, copy)
    after = run_checks(task, copy, tmp_path)
    assert after == [0] * len(task.check.run), f"{task.id}: the reference solution fails: {after}"


@pytest.mark.parametrize("task", QUESTIONS, ids=[t.id for t in QUESTIONS])
def test_question_accepts_its_answer_and_refuses_a_wrong_one(task):
    """Every question's reference answer passes its check, and a plausible wrong answer does not."""
    check = task.check
    assert check_answer(check, task.solution_answer)
    if check.number is not None:
        wrong = [str(check.number + 1), "I could not find it"]
    else:
        wrong = ["I could not find it", "none", "0"]
    assert not any(check_answer(check, w) for w in wrong)


def test_question_answers_are_true_of_the_shipped_repos():
    """The expected answers are facts of the repos as shipped, recomputed here, so an edit to a
    repo that changes an answer fails this test instead of silently failing every model."""
    expected = {t.id: t.check for t in QUESTIONS}
    py = next(t.repo for t in BUILTIN.tasks if t.repo.name == "pyledger")
    sh = next(t.repo for t in BUILTIN.tasks if t.repo.name == "shtodo")
    tests = sum(len(re.findall(r"^\s+def test_", p.read_text(), re.M)) for p in (py / "tests").glob("*.py"))
    assert expected["py-count-tests"].number == tests
    money = (py / "ledger" / "money.py").read_text()
    assert expected["py-count-money-functions"].number == len(re.findall(r"^def ", money, re.M))
    with open(py / "data" / "sample.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert expected["py-sample-balance"].number == pytest.approx(sum(float(r["amount"]) for r in rows))
    months = {r["day"][:7] for r in rows}
    assert [m for m in (f"2024-{i:02d}" for i in range(1, 13)) if m not in months] == ["2024-08"]
    common = (sh / "lib" / "common.sh").read_text()
    assert expected["sh-count-functions"].number == len(re.findall(r"^[a-z_]+\(\) \{", common, re.M))
    conf = (sh / "todo.conf").read_text()
    assert f"MAX_LEN={expected['sh-default-max-len'].number}\n" in conf
    assert f"USAGE_STATUS={expected['sh-usage-status'].number}\n" in conf
    assert '"currency": "CHF"' in (py / "ledger" / "config.py").read_text()
    assert '__version__ = "0.7.3"' in (py / "ledger" / "__init__.py").read_text()


def test_builtin_questions_accept_answers_as_models_write_them():
    """A right answer in the usual shapes passes (backticks, a call's parentheses, a module path,
    a sentence around a number); a near miss does not."""
    by_id = {t.id: t.check for t in QUESTIONS}
    right = {"py-caller-total-by-category": ["`summary`", "summary()", "ledger.report.summary"],
             "py-caller-parse-amount": ["Ledger.add", "add()"], "py-version": ["0.7.3.", "`0.7.3`"],
             "py-default-currency": ["CHF (Swiss francs)"], "py-count-tests": ["26 test methods."],
             "sh-default-file": ["~/.todo/list.txt"], "py-sample-empty-month": ["August 2024"]}
    wrong = {"py-caller-total-by-category": ["summary_line"], "py-caller-parse-amount": ["address"],
             "py-version": ["0.7.30", "10.7.3"], "py-count-tests": ["24"], "py-sample-balance": ["32680"]}
    for tid, answers in right.items():
        assert all(check_answer(by_id[tid], a) for a in answers), tid
    for tid, answers in wrong.items():
        assert not any(check_answer(by_id[tid], a) for a in answers), tid


# ------------------------------------------------------------------------- check_answer

def test_check_answer_compares_as_the_format_says():
    """An exact answer ignores case, surrounding space and a final period; a number is the first
    number in the text (thousands separators allowed, not the 3 of 'py3'), within a tolerance;
    a regex is searched on RE2; a change's check has no answer to compare."""
    assert check_answer(Check(answer="Half-Even"), "  half-even.\n")
    assert not check_answer(Check(answer="half-even"), "half-even rounding")
    assert check_answer(Check(number=2500), "2,500")
    assert check_answer(Check(number=2500), "It holds 2500 entries (see config.py line 6).")
    assert not check_answer(Check(number=3), "py3 has 4")
    assert check_answer(Check(number=-3.05), "-3.05 CHF")
    assert check_answer(Check(number=32679.75, tolerance=0.005), "32679.75")
    assert not check_answer(Check(number=32679.75, tolerance=0.005), "32679.8")
    assert not check_answer(Check(number=1), "one")
    assert check_answer(Check(regex=r"\bCHF\b"), "It is CHF.")
    assert not check_answer(Check(regex=r"\bCHF\b"), "CHFX")
    assert judge_answer(Check(number=26), "It has 27.") == (False, "expected 26, got 27")
    assert judge_answer(Check(answer="x"), None) == (False, "no answer")
    with pytest.raises(MossError) as e:
        check_answer(Check(run=("true",)), "anything")
    assert e.value.kind == "usage"


# ------------------------------------------------------------------------- bad suites

GOOD_TASK = '''
[[task]]
id = "q1"
repo = "repo"
prompt = "How many?"
[task.check]
number = 3
'''


def write_suite(tmp_path: Path, text: str) -> Path:
    (tmp_path / "repo").mkdir(exist_ok=True)
    (tmp_path / "repo" / "a.py").write_text("x = 1\n")
    (tmp_path / "suite.toml").write_text(text)
    return tmp_path


def suite_error(tmp_path: Path, text: str) -> MossError:
    folder = write_suite(tmp_path, text)
    with pytest.raises(MossError) as e:
        load_suite(folder)
    assert e.value.kind == "config", e.value
    assert "suite.toml" in str(e.value)
    return e.value


def test_a_minimal_suite_loads(tmp_path):
    """A suite with one question and nothing optional loads, named after its folder."""
    suite = load_suite(write_suite(tmp_path, GOOD_TASK))
    assert suite.name == tmp_path.name and [t.id for t in suite.tasks] == ["q1"]
    assert suite.tasks[0].solution_answer == "3" and suite.tasks[0].repo == (tmp_path / "repo").resolve()


def test_a_task_without_a_prompt_is_named(tmp_path):
    """A task with no prompt fails with the file, the task and the field."""
    e = suite_error(tmp_path, GOOD_TASK.replace('prompt = "How many?"\n', ""))
    assert "task 'q1': prompt: missing" in str(e) and e.data["field"] == "prompt"


def test_an_unknown_check_field_is_named(tmp_path):
    """A misspelt check field is an error naming it and the fields there are."""
    e = suite_error(tmp_path, GOOD_TASK.replace("number = 3", 'anwser = "3"'))
    assert "task 'q1': check: unknown field 'anwser'" in str(e) and "answer, regex, number" in str(e)
    assert e.data["field"] == "check.anwser"


def test_solution_answer_written_under_the_check_gets_a_hint(tmp_path):
    """TOML puts a key written after [task.check] into the check; the error says where it goes."""
    e = suite_error(tmp_path, GOOD_TASK.replace("number = 3", 'regex = "3"\nsolution_answer = "3"'))
    assert "write it before [task.check]" in str(e)


def test_a_duplicate_id_is_named(tmp_path):
    """Two tasks with one id: the second is named, with the number of the first."""
    e = suite_error(tmp_path, GOOD_TASK + GOOD_TASK)
    assert "task 'q1': id: the same id as task #1" in str(e)


def test_a_question_whose_reference_fails_its_own_check_is_refused(tmp_path):
    """A regex question's solution_answer must match its regex: a broken oracle is a suite error."""
    e = suite_error(tmp_path, GOOD_TASK.replace("[task.check]\nnumber = 3",
                                                'solution_answer = "four"\n[task.check]\nregex = "^3$"'))
    assert "solution_answer: 'four' does not pass" in str(e)


def test_a_regex_re2_refuses_is_a_suite_error(tmp_path):
    """A backreference (which RE2 cannot run in linear time) fails at load, not mid-eval."""
    e = suite_error(tmp_path, GOOD_TASK.replace("number = 3", r'regex = "(a)\\1"'))
    assert "task 'q1': check.regex:" in str(e) and "backreferences" in str(e)


def test_a_task_both_question_and_change_is_refused(tmp_path):
    """A check with run and number is neither a question nor a change."""
    e = suite_error(tmp_path, GOOD_TASK.replace("number = 3", 'number = 3\nrun = ["true"]'))
    assert "task 'q1': check.number:" in str(e) and "either run" in str(e)


def test_a_toml_syntax_error_has_line_and_column(tmp_path):
    """A syntax error names file:line:column, as moss's config errors do."""
    e = suite_error(tmp_path, '[suite]\nname = "x"\ndescription = oops\n')
    assert re.search(r"suite\.toml:3:15: ", str(e)), str(e)


@pytest.mark.parametrize("repo", ["..", "../elsewhere", "/etc"])
def test_a_repo_outside_the_suite_folder_is_refused(tmp_path, repo):
    """A repo must be inside the suite's folder: `..` or /etc would have moss copy what the
    suite does not ship."""
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "s").mkdir()
    e = suite_error(tmp_path / "s", GOOD_TASK.replace('repo = "repo"', f'repo = "{repo}"'))
    assert "leads outside the suite's folder" in str(e) and e.data["field"] == "repo"


def test_a_repo_that_is_a_link_out_is_refused(tmp_path):
    """The repo folder itself a symlink to /etc: refused before anything is copied."""
    write_suite(tmp_path, GOOD_TASK.replace('repo = "repo"', 'repo = "etc"'))
    (tmp_path / "etc").symlink_to("/etc")
    with pytest.raises(MossError) as e:
        load_suite(tmp_path)
    assert "leads outside the suite's folder" in str(e.value)


def test_a_link_inside_the_repo_leading_out_is_refused(tmp_path):
    """A symlink inside the repo to /etc (or to the suite file beside it) is refused at load:
    the copy an agent works in holds nothing from outside the repo. A link that stays inside
    the repo is kept as a link."""
    folder = write_suite(tmp_path, GOOD_TASK)
    (folder / "repo" / "inner.py").symlink_to("a.py")
    suite = load_suite(folder)
    copy = copy_repo(suite.tasks[0], tmp_path / "copy")
    assert os.readlink(copy / "inner.py") == "a.py"
    for target in ("/etc", "../../suite.toml"):
        link = folder / "repo" / "sub" / "x"
        link.parent.mkdir(exist_ok=True)
        link.unlink(missing_ok=True)
        link.symlink_to(target)
        with pytest.raises(MossError) as e:
            load_suite(folder)
        assert "repo/sub/x is a link leading outside the repo" in str(e.value), str(e.value)


def test_a_solution_that_does_not_apply_names_the_task(tmp_path):
    """A reference replacement whose old text is not in the file (or is there twice) is a suite
    error naming the task and the file, and a path out of the repo is refused at load."""
    change = GOOD_TASK.replace("number = 3", 'run = ["true"]') + (
        '[[task.solution]]\npath = "a.py"\nold = "x = 2"\nnew = "x = 3"\n')
    suite = load_suite(write_suite(tmp_path, change))
    copy = copy_repo(suite.tasks[0], tmp_path / "copy")
    with pytest.raises(MossError) as e:
        apply_solution(suite.tasks[0], copy)
    assert e.value.kind == "config" and "task 'q1': solution #1 (a.py): the old text is not found" in str(e.value)
    e2 = suite_error(tmp_path, change.replace('path = "a.py"', 'path = "../suite.toml"'))
    assert "solution #1.path" in str(e2)


def test_a_solution_never_writes_through_a_link(tmp_path):
    """apply_solution touches files beneath the copy only: a link planted in the copy (by an
    agent's setup, say) is refused, and the file it points at is unchanged."""
    change = GOOD_TASK.replace("number = 3", 'run = ["true"]') + (
        '[[task.solution]]\npath = "a.py"\nold = "x = 1"\nnew = "x = 3"\n')
    suite = load_suite(write_suite(tmp_path, change))
    copy = copy_repo(suite.tasks[0], tmp_path / "copy")
    victim = tmp_path / "victim.py"
    victim.write_text("x = 1\n")
    (copy / "a.py").unlink()
    (copy / "a.py").symlink_to(victim)
    with pytest.raises(MossError) as e:
        apply_solution(suite.tasks[0], copy)
    assert e.value.kind == "denied"
    assert victim.read_text() == "x = 1\n"


def test_a_commit_is_checked_out_without_running_the_repos_hooks_or_filters(tmp_path):
    """`commit` checks that commit out in the copy; the repository's own post-checkout hook and
    smudge filter (programs a hostile suite names) are not run by the host."""
    folder = write_suite(tmp_path, GOOD_TASK.replace('repo = "repo"', 'repo = "repo"\ncommit = "COMMIT"'))
    repo = folder / "repo"
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(git[:3] + ["init", "-q"], check=True)
    (repo / ".gitattributes").write_text("*.py filter=evil\n")
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-qm", "one"], check=True)
    first = subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    (repo / "a.py").write_text("x = 2\n")
    subprocess.run(git + ["commit", "-qam", "two"], check=True)
    marker = tmp_path / "ran"
    subprocess.run(git + ["config", "filter.evil.smudge", f"touch {marker}; cat"], check=True)
    subprocess.run(git + ["config", "core.fsmonitor", f"touch {marker}; true"], check=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    subprocess.run(git + ["config", "core.worktree", str(elsewhere)], check=True)
    hook = repo / ".git" / "hooks" / "post-checkout"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    (folder / "suite.toml").write_text((folder / "suite.toml").read_text().replace("COMMIT", first))
    copy = copy_repo(load_suite(folder).tasks[0], tmp_path / "copy")
    assert (copy / "a.py").read_text() == "x = 1\n"
    assert not marker.exists() and list(elsewhere.iterdir()) == []


def test_a_commit_in_a_repo_whose_git_lives_elsewhere_is_refused(tmp_path):
    """A `.git` file (or alternates) naming a repository outside the suite is refused at load:
    checking out there would touch that repository."""
    folder = write_suite(tmp_path, GOOD_TASK.replace('repo = "repo"', 'repo = "repo"\ncommit = "abc123"'))
    (folder / "repo" / ".git").write_text("gitdir: /root/.git\n")
    with pytest.raises(MossError) as e:
        load_suite(folder)
    assert "must be a folder" in str(e.value) and e.value.data["field"] == "commit"


def test_a_commit_on_a_folder_that_is_no_git_repository_is_refused(tmp_path):
    e = suite_error(tmp_path, GOOD_TASK.replace('repo = "repo"', 'repo = "repo"\ncommit = "abc123"'))
    assert "task 'q1': commit:" in str(e) and "not a git repository" in str(e)


# ------------------------------------------------------------------------- exercises

EXERCISES = FIXTURES / "exercises"
POLYGLOT = FIXTURES / "polyglot"


@pytest.mark.needs_sandbox
def test_exercises_load_as_change_tasks(tmp_path):
    """The exercise layout becomes one change task per exercise: its instructions (introduction,
    instructions, append) and file names for the policy's prompt, its language's test command as
    the check (sandboxed, as the eval runs it: it fails on the stub and passes with the example),
    the files to put back as given before each check (the tests, not the solution), the example
    as the reference; the copy leaves out .meta/ (the example and its config)."""
    from moss.eval import attempt

    assert is_exercise_dir(EXERCISES) and not is_exercise_dir(EXERCISES / "leap")
    suite = load_exercises(EXERCISES)
    assert [t.id for t in suite.tasks] == ["hello-world", "leap"]
    leap = suite.tasks[1]
    assert "leap year" in leap.prompt and "Name the function `leap_year`" in leap.prompt
    assert leap.exercise["solution"] == ["leap.py"] and leap.exercise["test"] == ["leap_test.py"]
    assert leap.check.language == "python" and not leap.check.fail_before and "unittest" in leap.check.run[0]
    assert leap.check.restore == ("leap_test.py",) and "leap.py" not in leap.check.restore
    for task in suite.tasks:
        copy = copy_repo(task, tmp_path / task.id)
        assert not (copy / ".meta").exists() and (copy / ".docs" / "instructions.md").is_file()
        assert not attempt.run_check(task.check, copy)["passed"], task.id
        apply_solution(task, copy)
        assert attempt.run_check(task.check, copy)["passed"], task.id


def test_an_exercise_that_cannot_be_read_is_a_task_with_its_problem_and_the_rest_load(tmp_path):
    """Malformed JSON in .meta/config.json is named at its line and column, a config naming a
    file that is not there names it, and a language moss has no check for says which it has:
    each such exercise is a task whose `problem` says so (the eval reports it as a suite error),
    and the folder's other exercises load as usual."""
    import shutil

    shutil.copytree(EXERCISES / "leap", tmp_path / "leap")
    ex = tmp_path / "broken"
    (ex / ".meta").mkdir(parents=True)
    (ex / ".meta" / "config.json").write_text('{\n  "files": {\n    "solution": [oops]\n}\n')
    missing = tmp_path / "missing"
    (missing / ".meta").mkdir(parents=True)
    (missing / ".meta" / "config.json").write_text('{"files": {"solution": ["a.py"], "test": ["a_test.py"]}}')
    (missing / "a_test.py").write_text("")
    kotlin = tmp_path / "kotlin"
    (kotlin / ".meta").mkdir(parents=True)
    (kotlin / ".meta" / "config.json").write_text('{"files": {"solution": ["A.kt"], "test": ["ATest.kt"]}}')
    (kotlin / "A.kt").write_text("")
    (kotlin / "ATest.kt").write_text("")
    tasks = {t.id: t for t in load_exercises(tmp_path).tasks}
    assert set(tasks) == {"broken", "kotlin", "leap", "missing"} and tasks["leap"].problem is None
    assert re.search(r"broken/\.meta/config\.json:3:18: ", tasks["broken"].problem), tasks["broken"].problem
    assert "files.solution: a.py does not exist" in tasks["missing"].problem
    assert "no check for .kt tests (moss knows .py (Python), .rs (Rust), .go (Go)" in tasks["kotlin"].problem


@pytest.mark.needs_sandbox
def test_an_agent_cannot_pass_an_exercise_by_changing_its_tests(tmp_path):
    """Before an exercise's check, its given files other than the solution are put back as the
    exercise has them: a test rewritten to pass, or replaced by a link to a file outside the
    copy, is put back (the link replaced, never written through), and the stub fails again."""
    from moss.eval import attempt

    task = next(t for t in load_exercises(POLYGLOT).tasks if t.id == "run-length")
    copy = copy_repo(task, tmp_path / "copy")
    (copy / "run_length_test.py").write_text("import unittest\n\n\nclass T(unittest.TestCase):\n"
                                             "    def test_nothing(self):\n        pass\n")
    assert attempt.run_check(task.check, copy)["passed"]  # the rewritten test passes on the stub...
    result = attempt.check(task, copy, None)
    assert not result["passed"] and "test_mixed_runs" in result["output"]  # ...but is put back first
    outside = tmp_path / "outside.py"
    outside.write_text("precious\n")
    (copy / "run_length_test.py").unlink()
    (copy / "run_length_test.py").symlink_to(outside)
    assert not attempt.check(task, copy, None)["passed"]
    assert outside.read_text() == "precious\n" and not (copy / "run_length_test.py").is_symlink()


def test_a_javascript_exercise_names_versions_never_where_npm_fetches_from(tmp_path):
    """--prepare installs the exercises' test packages at the versions their package.json names,
    but only plain version ranges: a URL, a path or a git repository in their place is not
    fetched (the default version is), whatever a cloned benchmark says."""
    from moss.eval.languages import JS_PACKAGES, js_packages

    (tmp_path / "package.json").write_text(json.dumps({"devDependencies": {
        "jest": "^29.6.0", "babel-jest": "https://example.invalid/evil.tgz", "@babel/core": "file:../../x",
        "core-js": "git+ssh://git@example.invalid/x.git"}}))
    got = js_packages(tmp_path)
    assert got["jest"] == "^29.6.0"
    for name in ("babel-jest", "@babel/core", "core-js", "@exercism/babel-preset-javascript"):
        assert got[name] == JS_PACKAGES[name]


CHANGE_TASK = '''
[[task]]
id = "c1"
repo = "repo"
prompt = "Fix it."
tries = TRIES
[task.check]
run = ["true"]
'''


def test_a_change_task_may_give_its_agent_more_tries_and_the_policy_takes_them(tmp_path):
    """`tries = 2` in a change task's table is its number of tries, which the policy's attempts
    carry unless --tries overrides it; 0, a fraction or tries on a question are named errors."""
    from conftest import builtin_lua

    assert load_suite(write_suite(tmp_path, CHANGE_TASK.replace("TRIES", "2"))).tasks[0].tries == 2
    assert "tries: must be a whole number from 1 to 10, not 0" in str(suite_error(tmp_path, CHANGE_TASK.replace(
        "TRIES", "0")))
    assert "tries: must be a whole number" in str(suite_error(tmp_path, CHANGE_TASK.replace("TRIES", "1.5")))
    e = suite_error(tmp_path, GOOD_TASK.replace('prompt = "How many?"', 'prompt = "How many?"\ntries = 2'))
    assert "tries: is for a change" in str(e)
    with builtin_lua() as (rt, _root):
        got = rt.to_py(rt.execute('''local p = require("eval").policy
            local suite = {tasks = {{id = "a", kind = "change", tries = 2}, {id = "q", kind = "question", tries = 1}}}
            local own, given = p.attempts(suite, {{name = "default"}}, 1), p.attempts(suite, {{name = "default"}}, 1, 3)
            return {own[1].tries, own[2].tries, given[1].tries, given[2].tries}'''))
    assert got == [2, 1, 3, 1]


def test_what_the_checks_set_up_reads_of_a_copy_follows_no_link_and_waits_on_no_fifo(tmp_path):
    """The files of an attempt's copy the eval reads before a check (tests, Cargo.toml,
    package.json, ...) may be what the agent left: a link to /dev/zero or a fifo is not read
    (the eval neither runs out of memory nor hangs), a plain file is."""
    import os

    from moss.eval.languages import js_packages, missing_crates, uses_pytest

    os.symlink("/dev/zero", tmp_path / "a_test.py")
    os.mkfifo(tmp_path / "b_test.py")
    os.symlink("/dev/zero", tmp_path / "Cargo.toml")
    os.mkfifo(tmp_path / "package.json")
    assert uses_pytest(tmp_path) is False
    assert missing_crates(tmp_path) == [] and js_packages(tmp_path) == js_packages(tmp_path / "none")
    (tmp_path / "c_test.py").write_text("import pytest\n")
    assert uses_pytest(tmp_path) is True


def test_an_attempt_of_more_than_one_try_needs_the_policys_retry_message():
    """What a session hears after a failed check is the eval policy's words (scripts/eval.lua
    M.retry), never a default of the host's: a policy that gives an attempt two tries and no
    retry message is told so, naming the attempt."""
    import pytest

    from moss.errors import MossError
    from moss.eval.session import _retry

    with pytest.raises(MossError, match=r"attempt 'a\|x\|1' has 2 tries but no retry"):
        _retry({"key": "a|x|1"}, 2)
    assert _retry({"key": "a|x|1"}, 1) is None
    assert _retry({"retry": {"message": "Fix it:\n{output}", "lines": 5}}, 2) == {"message": "Fix it:\n{output}",
                                                                                   "lines": 5}
