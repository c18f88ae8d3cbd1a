"""`moss eval` on exercises in the public polyglot benchmark's layout, in its six languages.

tests/fixtures/polyglot holds one tiny exercise per language (written for these tests: C++
with its own small Catch-compatible header, Go, Java with JUnit 5 and AssertJ, JavaScript with
jest and babel, Python, Rust), each with tests the benchmark ships switched off. Through the real
`moss eval`, with each language's real toolchain in the sandbox: a scripted model that writes
each example passes 6/6 on its first try, one that does nothing passes none in two tries, and
each of its retries was given its own failing test output (every test switched on); a model that
fixes its solution once it sees the test output passes on try 2, and the table shows pass@1 and
pass@2; broken exercises, a missing toolchain, a hanging and a flooding test run are each a
clear line and a row that says why.

Compiling in six languages is the expensive part, so the six run in one eval of two cells.
Under CI (which installs every toolchain and prepares JavaScript's packages: .ci/run) a missing
toolchain fails the tests; elsewhere they are skipped, naming what is missing.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import textwrap
from pathlib import Path

import pytest
from conftest import EVAL_CACHE, FIXTURES, STORY_PROVIDER
from fakeapi import state_of

from moss.eval import languages
from moss.eval.exercises import load_exercises

POLYGLOT = FIXTURES / "polyglot"
TASKS = load_exercises(POLYGLOT).tasks
PLAN = "1. Look at the code.\n2. Change it.\nReady to refactor."
# what each language's failing run of the untouched stub prints when every test is switched on
# (the fixtures' own test names and counts, as each test runner reports them)
STUB_FAILS = {
    "clamp": r"FAILED: a value above the range becomes its high end[\s\S]*1 passed, 2 failed",
    "gcd": r"--- FAIL: TestGcd",
    "palindrome": r"3 tests failed",
    "fizz-buzz": r"Tests:\s+4 failed, 4 total",
    "run-length": r"FAIL: test_mixed_runs",
    "triangle-kind": r"0 passed; 4 failed",
}


def missing() -> list[str]:
    env = {**os.environ, languages.CACHE_ENV: EVAL_CACHE}
    out = [f"{name}: {why}" for name in languages.LANGUAGES
           if (why := languages.unavailable(name, POLYGLOT / next(t.repo.name for t in TASKS
                                                                 if t.check.language == name), env))]
    return out


def needs_toolchains():
    """Skip (outside CI) when a language's toolchain is not here; under CI, run and fail."""
    gaps = missing()
    if gaps and not os.environ.get("CI"):
        pytest.skip("not every exercise language can run here: " + "; ".join(gaps))


def quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def task_in(body, tasks=TASKS):
    text = json.dumps(body, ensure_ascii=False)
    found = [t for t in tasks if json.dumps(t.exercise["instructions"], ensure_ascii=False)[1:-1] in text]
    return max(found, key=lambda t: len(t.prompt)) if found else None


def write_example(task) -> str:
    return " ".join(f"$(edit {r.path} replace {quoted(r.new)})" for r in task.solution) + " $(answer done)"


def oracle(body) -> str:
    """Writes each exercise's example over its stub; `nothing` answers without touching a file."""
    if state_of(body) == "planner":
        return PLAN
    task = task_in(body)
    if body.get("model") == "nothing" or task is None:
        return "$(answer done)"
    return write_example(task)


def rows_of(stdout: str) -> list[dict]:
    return [json.loads(line) for line in open(json.loads(stdout)["out"] + "/attempts.jsonl")]


@pytest.mark.slow
@pytest.mark.needs_sandbox
def test_six_languages_the_oracle_passes_all_on_try_one_and_doing_nothing_none_in_two_tries(project, api):
    """One eval, two cells, --tries 2: the oracle passes every exercise on its first try; the
    model that does nothing fails each twice, and its second try was given the last lines of its
    own failing test run, in which every test ran (the switched-off ones too). The agents' copies
    hold the stub and tests but never .meta/ or the example, and no build output (each check
    builds in its own scratch folder). The table (terminal and HTML) shows pass@1 and pass@2."""
    needs_toolchains()
    assert sorted(t.check.language for t in TASKS) == sorted(languages.LANGUAGES)
    shutil.copytree(POLYGLOT, project.root / "ex")
    project.write(".moss/config.toml", f'[llm]\nprovider = "{STORY_PROVIDER}"\nmodel = "oracle"\n')
    nothing = project.write("variants/nothing/config.toml", '[llm]\nmodel = "nothing"\n').parent
    api.push(*[oracle] * 200)
    r = project.moss("eval", "ex", "--variant", "oracle=", "--variant", f"nothing={nothing}", "--tries", "2",
                     "-j", "2", "--keep", "--json", "--html", "report.html",
                     env={**api.env(), "MOSS_EVAL_CACHE": EVAL_CACHE}, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = rows_of(r.stdout)
    oracle_rows = {row["task"]: row for row in rows if row["cell"] == "variant=oracle"}
    lazy = {row["task"]: row for row in rows if row["cell"] == "variant=nothing"}
    assert set(oracle_rows) == set(lazy) == {t.id for t in TASKS}
    failed = {t: (row["reason"], row.get("check")) for t, row in oracle_rows.items() if not row["passed"]}
    assert not failed, failed
    assert all(row["passed_on"] == 1 and len(row["checks"]) == 1 for row in oracle_rows.values())
    for task, row in lazy.items():
        assert row["passed"] is False and [c["passed"] for c in row["checks"]] == [False, False], (task, row)
        assert re.search(STUB_FAILS[task], row["check"]["output"]), (task, row["check"]["output"][-2000:])
    # each retry went to the same session with its own test run's output
    retried = [q.body for q in api.requests if q.body.get("model") == "nothing" and state_of(q.body) != "planner"]
    for task, pattern in STUB_FAILS.items():
        assert any(re.search(pattern, json.dumps(b, ensure_ascii=False).replace("\\n", "\n")) for b in retried), task
    for row in rows:
        kept = Path(row["kept"])
        assert not (kept / ".meta").exists(), row["task"]
        built = [p.name for p in kept.rglob("*") if p.name in ("target", "build", "node_modules", "__pycache__")]
        assert not built, (row["task"], built)
    summary = {c["cell"]: c for c in json.loads(r.stdout)["cells"]}
    assert [(p["k"], p["passed"]) for p in summary["variant=oracle"]["pass_at"]] == [(1, 6), (2, 6)]
    assert [(p["k"], p["passed"]) for p in summary["variant=nothing"]["pass_at"]] == [(1, 0), (2, 0)]
    table = project.moss("eval", "report", json.loads(r.stdout)["out"])
    assert table.returncode == 0, table.stderr
    header = next(line for line in table.stdout.splitlines() if "pass@1" in line)
    assert header.index("pass@1") < header.index("pass@2")
    oracle_line = next(line for line in table.stdout.splitlines() if "variant=oracle" in line)
    assert oracle_line.count("100% (6/6)") == 2, table.stdout
    page = (project.root / "report.html").read_text()
    assert "pass@1" in page and "pass@2" in page and "0% (0/6)" in page


@pytest.mark.needs_sandbox
def test_a_model_that_fixes_its_code_after_seeing_the_failing_tests_passes_on_try_two(project, api):
    """--tries 2: the model first writes a wrong solution; the check fails, and the same session
    is resumed with the failing tests' output, from which the model writes the right one. The
    row passed on try 2, its two checks say so, and the table shows pass@1 0% and pass@2 100%."""
    task = next(t for t in TASKS if t.id == "run-length")
    shutil.copytree(task.repo, project.root / "ex" / "run-length")
    wrong = "def encode(text):\n    return text\n"

    def fixer(body) -> str:
        if state_of(body) == "planner":
            return PLAN
        if "FAIL: test_a_run_is_counted" in json.dumps(body):  # the output of its first try's tests
            return write_example(task)
        return f"$(edit run_length.py replace {quoted(wrong)}) $(answer done)"

    project.write(".moss/config.toml", f'[llm]\nprovider = "{STORY_PROVIDER}"\nmodel = "fixer"\n')
    api.push(*[fixer] * 20)
    r = project.moss("eval", "ex", "--tries", "2", "--json", env=api.env(), timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    [row] = rows_of(r.stdout)
    assert row["passed"] is True and row["passed_on"] == 2 and row["max_tries"] == 2, row
    assert [c["passed"] for c in row["checks"]] == [False, True]
    assert "test_a_run_is_counted" in row["checks"][0]["detail"] or "FAILED" in row["checks"][0]["detail"]
    second = [q.body for q in api.requests if "FAIL: test_a_run_is_counted" in json.dumps(q.body)]
    # the same session: its request still carries the task as first given
    assert second and "Run-length encoding shortens text made of long runs" in json.dumps(second[0])
    [cell] = json.loads(r.stdout)["cells"]
    assert [(p["k"], p["passed"]) for p in cell["pass_at"]] == [(1, 0), (2, 1)]
    table = project.moss("eval", "report", json.loads(r.stdout)["out"]).stdout
    line = next(x for x in table.splitlines() if x.startswith("default"))
    assert line.index("0% (0/1)") < line.index("100% (1/1)"), table


def python_exercise(root: Path, name: str, test_body: str, stub: str = "def solve():\n    return None\n") -> None:
    """A Python exercise written on the spot: `solve()` in solve.py, its test in solve_test.py."""
    ex = root / name
    (ex / ".meta").mkdir(parents=True)
    (ex / ".docs").mkdir()
    (ex / ".docs" / "instructions.md").write_text(f"# {name}\n\nWrite solve().\n")
    (ex / "solve.py").write_text(stub)
    (ex / ".meta" / "example.py").write_text(stub)
    (ex / "solve_test.py").write_text("import unittest\n\nfrom solve import solve\n\n\n"
                                      "class SolveTest(unittest.TestCase):\n    def test_solve(self):\n"
                                      + textwrap.indent(textwrap.dedent(test_body), " " * 8) + "\n")
    (ex / ".meta" / "config.json").write_text(json.dumps({"files": {
        "solution": ["solve.py"], "test": ["solve_test.py"], "example": [".meta/example.py"]}}))


@pytest.mark.needs_sandbox
def test_broken_exercises_a_missing_toolchain_a_hanging_and_a_flooding_test_each_say_why(project, api, tmp_path):
    """One eval (a model that does nothing, --tries 2, --check-timeout 3) over: an exercise whose
    config names a file that is not there (a suite error), a Rust one with no cargo on PATH and
    a JavaScript one whose packages were never prepared (not run, with what would make them
    run), a test that hangs (stopped after 3 s, each try) and one that prints 20 MB (its output
    kept and sent back only as its capped tail). Each is a clear line on stderr or in its row,
    none a crash, and the eval exits 1 (not every attempt could run)."""
    ex = project.root / "ex"
    python_exercise(ex, "hang", "import time\ntime.sleep(600)\nself.assertEqual(solve(), 1)")
    python_exercise(ex, "flood", 'print("x" * 99 + "\\n", end="", flush=True) ; import sys\n'
                                 'sys.stdout.write(("flood line " + "y" * 88 + "\\n") * 200000)\n'
                                 'self.assertEqual(solve(), "the end of the flood")')
    python_exercise(ex, "missing", "self.assertEqual(solve(), 1)")
    config = ex / "missing" / ".meta" / "config.json"
    config.write_text(config.read_text().replace('"solve.py"', '"solution.py"'))
    shutil.copytree(POLYGLOT / "triangle-kind", ex / "triangle-kind")
    shutil.copytree(POLYGLOT / "fizz-buzz", ex / "fizz-buzz")
    path = os.pathsep.join(p for p in project.env["PATH"].split(os.pathsep) if not (Path(p) / "cargo").exists())
    project.write(".moss/config.toml", f'[llm]\nprovider = "{STORY_PROVIDER}"\nmodel = "nothing"\n')
    api.push(*["$(answer done)"] * 40)
    empty = tmp_path / "no-cache"
    r = project.moss("eval", "ex", "--tries", "2", "--check-timeout", "3", "-j", "2", "--json",
                     env={**api.env(), "PATH": path, "MOSS_EVAL_CACHE": str(empty)}, timeout=300)
    assert r.returncode == 1, r.stderr[-3000:]
    assert "Traceback" not in r.stderr
    rows = {row["task"]: row for row in rows_of(r.stdout)}
    assert set(rows) == {"hang", "flood", "missing", "triangle-kind", "fizz-buzz"}
    assert "suite error: task missing: " in r.stderr and "files.solution: solution.py does not exist" in r.stderr
    assert rows["missing"]["reason"] == "suite_error" and rows["missing"]["passed"] is None
    assert "not run: task triangle-kind: cargo not found on PATH (Rust: rustup" in r.stderr
    assert "not run: task fizz-buzz: jest and babel are not installed for moss eval: run `moss eval --prepare DIR`" \
        in r.stderr
    assert rows["triangle-kind"]["reason"] == rows["fizz-buzz"]["reason"] == "not_run"
    assert rows["triangle-kind"]["passed"] is None and "turns" not in rows["triangle-kind"]  # no agent ran
    hang = rows["hang"]
    assert hang["passed"] is False and len(hang["checks"]) == 2, hang
    assert all("timed out after 3 s" in c["detail"] for c in hang["checks"])
    assert "timed out after 3 s" in r.stderr  # the attempt's line says why it failed
    flood = rows["flood"]
    assert flood["passed"] is False and len(flood["check"]["output"]) <= 4000
    assert "AssertionError" in flood["check"]["output"] or "FAILED" in flood["check"]["output"]
    retried = [json.dumps(q.body) for q in api.requests if "flood line" in json.dumps(q.body)]
    assert retried and all(len(b) < 20_000 for b in retried), [len(b) for b in retried]


@pytest.mark.needs_sandbox
def test_a_file_the_agent_adds_cannot_stand_in_for_the_test_runner(tmp_path):
    """The check builds and tests the exercise's own files and its solution files alone: an
    agent that leaves the stub as it is but adds a `unittest/` package that reports success
    (or a `conftest.py`) fails, as the stub does."""
    from moss.eval import attempt

    [task] = [t for t in TASKS if t.check.language == "python"]
    copy = tmp_path / "copy"
    shutil.copytree(task.repo, copy, ignore=shutil.ignore_patterns(".meta"))
    assert attempt.check(task, copy, None)["passed"] is False  # the stub
    (copy / "unittest").mkdir()
    (copy / "unittest" / "__init__.py").write_text("")
    (copy / "unittest" / "__main__.py").write_text("print('OK')\n")
    (copy / "conftest.py").write_text("import sys\nsys.exit(0)\n")
    got = attempt.check(task, copy, None)
    assert got["passed"] is False and "FAILED" in got["output"], got


def test_a_later_try_never_runs_without_a_budget(project, api):
    """--tries 2 under a --max-tokens the first try spends (its last call takes it over): the
    second try is not started on nothing (a --max-cost of 0 would have meant no limit to the
    agent; tokens, one more call). The attempt ends `budget`, not counted, and its session
    never hears the failing output."""
    task = next(t for t in TASKS if t.id == "run-length")
    shutil.copytree(task.repo, project.root / "ex" / "run-length")

    def wrong(body) -> str:
        if state_of(body) == "planner":
            return PLAN
        return "$(edit run_length.py replace " + quoted("def encode(text):\n    return text\n") + ") $(answer done)"

    project.write(".moss/config.toml", f'[llm]\nprovider = "{STORY_PROVIDER}"\nmodel = "wrong"\n')
    api.push(*[wrong] * 20)
    r = project.moss("eval", "ex", "--tries", "2", "--max-tokens", "400", "--json", env=api.env(), timeout=300)
    [row] = rows_of(r.stdout)
    assert row["reason"] == "budget" and row["passed"] is None, row  # not counted
    assert row["detail"] == "the budget was spent before try 2 of 2" and len(row["checks"]) == 1, row
    assert not [q for q in api.requests if "FAIL" in json.dumps(q.body)]
