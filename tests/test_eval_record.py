"""`moss eval --record DIR` / `--replay DIR`, and the HTML report.

Recording keeps each attempt's LLM cassette; replaying runs the same eval offline from them,
so a Lua change can be checked for free: does the agent still send what it sent? Each story
runs the real CLI against the fake API server (tests/fakeapi.py), with the fixture suite and
scripted model of tests/test_eval.py.
"""

from __future__ import annotations

import json
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest
from test_eval import TASK_OF, eval_project, model, rows_of


def sent(api) -> int:
    """Requests the fake server received (the model's, not the window questions)."""
    return len([q for q in api.requests if q.body is not None])


def verdicts(out: Path) -> dict[str, bool | None]:
    return {row["task"]: row["passed"] for row in rows_of(out)}


@pytest.mark.needs_sandbox
def test_record_then_replay_gives_the_same_verdicts_without_asking_the_model(project, api):
    """An eval recorded with `--record DIR` leaves one cassette per attempt, named after it.
    The same eval with `--replay DIR` reaches the same verdict on every task, while the fake
    server receives not one request: every answer came from the cassettes. Nothing diverged,
    and stderr says so."""
    eval_project(project)
    api.push(*[model] * 200)
    tapes = project.root / "tapes"
    live = project.root / "live"
    r = project.moss("eval", "suite", "--machine", "v1", "-j", "2", "--record", str(tapes), "--out", str(live),
                     "--json", env=api.env(), timeout=600)
    assert r.returncode == 0, r.stderr
    assert verdicts(live) == {t: True for t in TASK_OF.values()}
    names = sorted(p.name for p in tapes.iterdir())
    assert names == sorted(f"{t}--machine=v1--1.jsonl" for t in TASK_OF.values())
    asked = sent(api)
    assert asked == sum(len(p.read_text().splitlines()) for p in tapes.iterdir())

    offline = project.root / "offline"
    r = project.moss("eval", "suite", "--machine", "v1", "-j", "2", "--replay", str(tapes), "--out", str(offline),
                     "--json", env=api.env(), timeout=600)
    assert r.returncode == 0, r.stderr
    assert sent(api) == asked  # not one request during the replay
    assert verdicts(offline) == verdicts(live)
    summary = json.loads(r.stdout)
    assert summary["diverged"] == [] and summary["not_recorded"] == 0
    assert "all 4 replayed attempts sent exactly their recorded requests" in r.stderr


@pytest.mark.needs_sandbox
def test_a_variant_that_changes_a_role_prompt_diverges_at_the_first_request_naming_the_system_prompt(
        project, api):
    """The project as it is is recorded. A variant folder then extends the built-in explorer
    role (the questions' role) with one more paragraph, `prompt_extra`, and is replayed against
    that recording: its cell has no cassette of its own, so each attempt replays the base cell's.
    Both questions diverge at request 1, the first they send, and the report names the system
    prompt with an excerpt of the new paragraph, in each row and on stderr; they count neither
    way, and the eval exits 1. The change tasks (another role) replay exactly and pass. No
    request reached the server while replaying."""
    eval_project(project)
    api.push(*[model] * 200)
    tapes = project.root / "tapes"
    r = project.moss("eval", "suite", "--machine", "v1", "-j", "2", "--record", str(tapes),
                     "--out", str(project.root / "live"), env=api.env(), timeout=600)
    assert r.returncode == 0, r.stderr
    asked = sent(api)
    careful = project.write("variants/careful/scripts/roles/explorer.lua", """
        return { extends = "explorer", prompt_extra = "Count twice before you answer." }
    """).parent.parent.parent
    out = project.root / "offline"
    r = project.moss("eval", "suite", "--machine", "v1", "-j", "2", "--variant", f"careful={careful}",
                     "--replay", str(tapes), "--out", str(out), "--json", env=api.env(), timeout=600)
    assert r.returncode == 1, r.stderr
    assert sent(api) == asked
    rows = {row["task"]: row for row in rows_of(out)}
    assert {t: row["passed"] for t, row in rows.items()} == {
        "count-functions": None, "version": None, "fix-add": True, "fix-mul": True}
    for task in ("count-functions", "version"):
        row = rows[task]
        assert row["reason"] == "diverged" and row["cell"] == "machine=v1 variant=careful"
        assert Path(row["replayed"]).name == f"{task}--machine=v1--1.jsonl"  # the base cell's recording
        d = row["diverged"]
        assert (d["request"], d["field"], d["what"]) == (1, "system", "the system prompt")
        assert "Count twice" in d["now"] and "Count twice" not in d["recorded"]
        assert (f"diverged: {task} (machine=v1 variant=careful, trial 1) at request 1: the system prompt "
                f"changed: recorded ") in r.stderr
    summary = json.loads(r.stdout)
    assert sorted(d["task"] for d in summary["diverged"]) == ["count-functions", "version"]
    [cell] = summary["cells"]
    assert (cell["passed"], cell["n"], cell["diverged"]) == (2, 2, 2)
    assert "replay: 2 of 4 replayed attempts diverged from their recordings" in r.stderr


def test_an_attempt_without_a_recording_is_not_run_and_says_why(project, api):
    """Replaying from a folder that holds a cassette for none of the attempts (recorded with
    another matrix): no attempt is run, not even its copy made; each row says `not_recorded`
    and which cassette was missing, none counts, stderr says how many were not run, and the
    eval exits 1. The model is never asked."""
    eval_project(project)
    tapes = project.root / "tapes"
    tapes.mkdir()
    (tapes / "count-functions--machine=v2--1.jsonl").write_text("")
    api.push(*[model] * 5)
    out = project.root / "offline"
    r = project.moss("eval", "suite", "--machine", "v1", "--replay", str(tapes), "--out", str(out), "--json",
                     env=api.env(), timeout=120)
    assert r.returncode == 1, r.stderr
    rows = rows_of(out)
    assert len(rows) == 4 and all(row["reason"] == "not_recorded" and row["passed"] is None for row in rows)
    [first] = [row for row in rows if row["task"] == "count-functions"]
    assert "count-functions--machine=v1--1.jsonl does not exist" in first["detail"]
    assert f"not run: 4 attempts have no recording in {tapes}" in r.stderr
    [cell] = json.loads(r.stdout)["cells"]
    assert (cell["n"], cell["not_recorded"]) == (0, 4)
    assert sent(api) == 0


def test_replay_and_record_folders_are_checked_before_anything_runs(project, api):
    """A replay folder that does not exist, or the same folder to record into and replay from
    (recording would erase the cassettes being replayed), is one clear line, exit 2."""
    eval_project(project)
    r = project.moss("eval", "suite", "--replay", "nowhere", timeout=60)
    assert r.returncode == 2 and "--replay" in r.stderr and "nowhere: no such folder" in r.stderr, r.stderr
    (project.root / "tapes").mkdir()
    r = project.moss("eval", "suite", "--replay", "tapes", "--record", "tapes", timeout=60)
    assert r.returncode == 2 and "--record and --replay name the same folder" in r.stderr, r.stderr


QUESTIONS = """
[suite]
name = "questions"
[[task]]
id = "count-functions"
repo = "repos/pycalc"
prompt = "How many functions does calc.py define? Answer with the number."
[task.check]
answer = "3"
[[task]]
id = "version"
repo = "repos/pycalc"
prompt = "Which VERSION does calc.py declare?"
[task.check]
answer = "1.4.2"
"""


class Page(HTMLParser):
    """What a browser would make of the report: its elements, their attributes, its text."""

    def __init__(self, text: str):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)

    def named(self, tag: str) -> list[dict]:
        return [a for t, a in self.tags if t == tag]


def test_the_html_report_of_a_run_shows_each_cell_and_charts_its_pass_rate_against_cost(project, api):
    """`moss eval SUITE --html FILE`: two cells, the project's good model and a lazy variant, on
    two questions. The report is one file: the table with each cell's pass rate and its 95%
    interval, an inline SVG chart with one labelled point and interval bar per cell, and each
    task's passes per cell. It fetches nothing (no script, no outside URL; its
    Content-Security-Policy forbids both)."""
    eval_project(project)
    shutil.copytree(project.root / "suite" / "repos", project.root / "questions" / "repos")
    project.write("questions/suite.toml", QUESTIONS)
    lazy = project.write("variants/lazy/config.toml", '[llm]\nmodel = "lazy"\n').parent
    api.push(*[model] * 50)
    page_file = project.root / "report.html"
    r = project.moss("eval", "questions", "--machine", "v1", "--variant", "base=", "--variant", f"lazy={lazy}",
                     "--html", str(page_file), "--out", str(project.root / "out"), env=api.env(), timeout=300)
    assert r.returncode == 0, r.stderr
    assert f"report: {page_file}" in r.stderr
    text = page_file.read_text()
    page = Page(text)
    words = " ".join(page.text)
    assert "machine=v1 variant=base" in words and "machine=v1 variant=lazy" in words
    assert "2/2" in words and "100%" in words and "0/2" in words and "0%" in words
    assert "34-100%" in words  # 2/2: the Wilson interval
    [svg] = page.named("svg")
    assert len(page.named("circle")) == 2  # one point per cell
    assert len(page.named("line")) > 6     # axes, grid, interval bars
    assert "count-functions" in words and "version" in words  # the per-task table
    assert not page.named("script") and "http://" not in text.replace('xmlns="http://www.w3.org/2000/svg"', "")
    [csp] = [a for a in page.named("meta") if a.get("http-equiv") == "Content-Security-Policy"]
    assert "default-src 'none'" in csp["content"]


def test_hostile_task_ids_and_cell_names_are_escaped_in_the_report(project):
    """A results file whose task ids and cell names carry markup (a hostile suite, or model
    names): `moss eval report RESULTS --html FILE` shows them as text. The page holds no
    script element and no event handler attribute, and the names read back exactly."""
    hostile_task = '<script>alert("task")</script>'
    hostile_cell = 'model=<img src=x onerror=alert(1)> & "quoted"'
    results = project.root / "attempts.jsonl"
    results.write_text("".join(json.dumps({
        "key": f"{t}|{c}|1", "task": t, "cell": c, "trial": 1, "passed": p, "reason": "answered",
        "turns": 2, "tokens": 500, "cost": cost, "wall": 3.0}) + "\n"
        for t, c, p, cost in [(hostile_task, hostile_cell, True, 0.002), ("fine", hostile_cell, False, 0.004),
                              (hostile_task, "base", True, 0.001), ("fine", "base", True, 0.001)]))
    page_file = project.root / "r.html"
    r = project.moss("eval", "report", str(results), "--html", str(page_file), timeout=60)
    assert r.returncode == 0, r.stderr
    text = page_file.read_text()
    page = Page(text)
    assert not page.named("script") and not page.named("img")
    assert not [name for _, attrs in page.tags for name in attrs if name.startswith("on")]
    assert "&lt;script&gt;" in text and "&lt;img src=x onerror=alert(1)&gt;" in text
    assert hostile_task in page.text and hostile_cell in page.text  # read back as the very text
    assert len(page.named("circle")) == 2


def test_the_report_file_must_be_html_and_its_folder_must_exist(project):
    """`--html` writes only a file named .html, into a folder that exists: anything else is one
    clear line, exit 2, and nothing is written."""
    results = project.root / "attempts.jsonl"
    results.write_text(json.dumps({"key": "t|base|1", "task": "t", "cell": "base", "trial": 1, "passed": True,
                                   "reason": "answered"}) + "\n")
    r = project.moss("eval", "report", str(results), "--html", "notes.txt", timeout=60)
    assert r.returncode == 2 and "must end in .html" in r.stderr, r.stderr
    assert not (project.root / "notes.txt").exists()
    r = project.moss("eval", "report", str(results), "--html", "nowhere/r.html", timeout=60)
    assert r.returncode == 2 and "no folder" in r.stderr, r.stderr


def test_an_agent_that_sent_fewer_or_more_requests_than_recorded_diverged_too(tmp_path):
    """Every request an agent sent may have had its recorded answer and the attempt still not be
    the recording: it stopped early (a lower turn limit), or asked the same once more and got a
    repeated answer. The count of requests says so, naming the first request that differs; a
    request the replay could not answer, found in any of the attempt's session logs, comes
    first."""
    from moss.eval import cassettes

    tape = tmp_path / "t.jsonl"
    tape.write_text("".join(json.dumps({"request": {"system": "s"}, "response": {"text": str(i)}}) + "\n"
                            for i in range(3)))
    copy = tmp_path / "copy"
    assert cassettes.divergence(copy, tape, 3) is None
    fewer = cassettes.divergence(copy, tape, 2)
    assert fewer is not None and fewer["request"] == 3
    assert cassettes.describe(fewer) == "request 3: the agent ended after 2 requests; the recording has 3 " \
                                        "(request 3 was never sent)"
    more = cassettes.divergence(copy, tape, 4)
    assert more is not None and more["request"] == 4 and "repeats" in more["detail"]
    logs = copy / ".moss" / "agent" / "logs"
    logs.mkdir(parents=True)
    miss = {"request": 2, "entry": 2, "field": "system", "what": "the system prompt", "recorded": "'s'",
            "now": "'t'", "detail": "system differs: recorded 's' vs now 't'"}
    (logs / "child.jsonl").write_text(json.dumps({"event": "llm_error", "divergence": miss}) + "\n")
    (logs / "root.jsonl").write_text(json.dumps({"event": "llm_error", "divergence": {**miss, "request": 3}}) + "\n")
    assert cassettes.divergence(copy, tape, 1) == miss
    assert cassettes.describe(miss) == "request 2: the system prompt changed: recorded 's' vs now 't'"
