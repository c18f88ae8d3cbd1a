"""Following a session on the board as it works, reading how it ended, and finding an eval.

In a real headless chromium (tests/browserkit.py) against the real `moss ui`: a session of 30
turns is followed as it runs (the newest event stays in view with no scrolling; a reader who
scrolled up keeps their place and is told how many events arrived below); once it ends its
page says why, with the exit status, turns, cost and the exact command that goes on, and
offers no controls; an id the project has no session for is a plain 404. The Evaluations page
lists each eval and batch as a row, newest first, sortable, each linked to a comparison with
the run before it of the same suite.
"""

from __future__ import annotations

import json
import re
import time

import pytest
from boardserver import board, request
from browserkit import BROWSER_MARKS, chromium, shot, text_of, wait
from fakeapi import FakeAPI, held, state_of

pytestmark = BROWSER_MARKS


@pytest.fixture(scope="module")
def browser():
    """One headless chromium for the tests of this file."""
    yield from chromium()
TURNS = 30
HOLD_AT = 13  # the turn whose reply waits for the test: the reader scrolls up meanwhile

NEWEST_IN_VIEW = """
var box = document.getElementById("stream"), last = box && box.lastElementChild;
if (!last) return false;
var r = last.getBoundingClientRect(), b = box.getBoundingClientRect();
return window.scrollY === 0 && r.bottom <= b.bottom + 1 && r.top >= b.top - 1 && b.bottom <= window.innerHeight;
"""


def notes_model(gate):
    """Turn N reads note N (a new file each turn, so the session makes progress and only its
    turn limit ends it); the reply of turn HOLD_AT is `gate`, held until the test releases it."""
    turns = {"n": 0}

    def reply(body):
        if state_of(body) == "inbox":
            return "RELATED"
        turns["n"] += 1
        n = turns["n"]
        text = f"Reading note {n}. $(view n{n}.txt)"
        return gate if n == HOLD_AT else text
    return reply


def test_a_session_of_30_turns_is_followed_live_then_shows_how_it_ended(project, browser):
    """The user opens a running session's page and watches it work: at every turn the newest
    event is in the live view without any scrolling. They scroll the view up to read an earlier
    turn: it stays there while the session goes on, and a button says how many events arrived
    below; a click takes them to the newest. The session ends at its turn limit: the page now
    says why (the reason, exit status 1, 30 turns, the cost) and the exact command that goes
    on, and offers no message box, pause, resume or stop. An id the project has no session
    for answers 404 with a plain page: no Lua position, no traceback."""
    from selenium.webdriver.common.by import By

    for i in range(1, TURNS + 1):
        project.write(f"n{i}.txt", f"note {i}: " + "a line of the note\n" * 3)
    gate = held(f"Reading note {HOLD_AT}. $(view n{HOLD_AT}.txt)", timeout=120)
    with FakeAPI() as api:
        api.push(*[notes_model(gate)] * (TURNS + 10))
        p = project.popen("@agent", "--provider", "openai", "--v1", "-n", "--max-turns", str(TURNS),
                          "read the notes", env=api.env())
        try:
            assert gate.wait_reached(60), "the session never reached turn %d" % HOLD_AT
            sid = next((project.root / ".moss/agent/running").glob("*.json")).stem
            with board(project) as (url, port, token):
                browser.get(url.replace("/?", f"/sessions/{sid}?"))
                wait(browser, lambda d: f"Reading note {HOLD_AT - 1}." in text_of(d, "#stream"),
                     what="the turns so far")
                wait(browser, lambda d: d.execute_script(NEWEST_IN_VIEW), what="the newest event in view")
                overflow = browser.execute_script(
                    "var b = document.getElementById('stream'); return b.scrollHeight > b.clientHeight")
                assert overflow  # the view is taller than its pane: following it is what keeps the newest shown
                assert "running" in text_of(browser, "#state") and browser.find_elements(By.ID, "send")

                # the reader scrolls up to an earlier turn; the session goes on
                browser.execute_script("var b = document.getElementById('stream'); b.scrollTop = 0;"
                                       "b.dispatchEvent(new Event('scroll'));")
                gate.release()
                wait(browser, lambda d: re.fullmatch(r"\d+ new ↓", text_of(d, "#new-below")),
                     what="the count of events below")
                assert browser.execute_script("return document.getElementById('stream').scrollTop") == 0
                assert not browser.execute_script(NEWEST_IN_VIEW)  # their place is kept
                shot(browser, "session-new-below")
                browser.find_element(By.ID, "new-below").click()
                wait(browser, lambda d: d.execute_script(NEWEST_IN_VIEW), what="the newest event after the click")
                assert not browser.find_element(By.ID, "new-below").is_displayed()

                assert p.wait(timeout=60) == 1  # the turn limit: ended without an answer
                wait(browser, lambda d: d.find_elements(By.ID, "outcome"), what="how the session ended")
                wait(browser, lambda d: f"Reading note {TURNS}." in text_of(d, "#stream"), what="the last turn")
                wait(browser, lambda d: d.execute_script(NEWEST_IN_VIEW), what="the last event in view")
                outcome = text_of(browser, "#outcome")
                assert "stopped at the turn limit without an answer" in outcome
                assert text_of(browser, "#outcome-reason") == "max_turns"
                assert text_of(browser, "#outcome-exit") == "1"
                assert text_of(browser, "#outcome-turns") == str(TURNS)
                assert re.fullmatch(r"\$\d+\.\d{4}|unknown", text_of(browser, "#outcome-cost"))
                assert text_of(browser, "#resume") == f"moss @agent --resume {sid}"
                assert "not running" in text_of(browser, "#state")
                assert not browser.find_elements(By.CSS_SELECTOR, "#say, #send, button.control, textarea")
                shot(browser, "session-ended", doc="ui-session-ended")

                # an id this project has no session for: a plain 404, over HTTP and in the browser
                cookie = {"Cookie": f"moss_board_{port}={token}"}
                for path in ("/sessions/nosuch12", "/sessions/nosuch12/stream"):
                    status, _, text = request(port, "GET", path, headers=cookie)
                    assert status == 404 and "nosuch12" in text, (path, status, text)
                    assert ".lua" not in text and "traceback" not in text and "moss.session" not in text
                browser.get(f"http://127.0.0.1:{port}/sessions/nosuch12")
                assert "There is no session 'nosuch12' in this project." in text_of(browser, "main")
        finally:
            gate.release()
            if p.poll() is None:
                p.kill()
                p.wait()


def eval_run(project, run: str, started: str, suite: str, cells: dict[str, list[bool]], cost: float) -> None:
    """An eval run as `moss eval` leaves it under .moss/eval/RUN: run.json and attempts.jsonl,
    cells in the order given (task tN passed or not per cell), each attempt costing `cost`."""
    d = project.root / ".moss" / "eval" / run
    (d / "logs").mkdir(parents=True)
    total = sum(len(v) for v in cells.values())
    (d / "run.json").write_text(json.dumps({"started": started, "suite": suite, "attempts": total}))
    with open(d / "attempts.jsonl", "w") as f:
        for ci, (cell, passes) in enumerate(cells.items(), 1):
            for i, ok in enumerate(passes, 1):
                f.write(json.dumps({"key": f"t{i}|{cell}|1", "task": f"t{i}", "cell": cell, "trial": 1,
                                    "cell_index": ci, "passed": ok, "reason": "answered", "cost": cost}) + "\n")


def batch_run(project, name: str, started: str, tasks_file: str, outcomes: list[str], cost: float) -> None:
    """A batch as `moss batch` leaves it under .moss/batch/: NAME.jsonl, NAME.logs/run.json."""
    d = project.root / ".moss" / "batch"
    (d / f"{name}.logs").mkdir(parents=True)
    (d / f"{name}.logs" / "run.json").write_text(json.dumps({"started": started, "suite": tasks_file,
                                                              "attempts": len(outcomes)}))
    with open(d / f"{name}.jsonl", "w") as f:
        for i, o in enumerate(outcomes, 1):
            f.write(json.dumps({"key": f"task-{i}", "id": f"task-{i}", "task": f"task-{i}", "cell": "default",
                                "trial": 1, "place": i, "outcome": o,
                                "passed": {"done": True, "failed": False}.get(o),  # infrastructure: neither
                                "reason": {"done": "answered", "failed": "max_turns"}.get(o, "infra_error"),
                                "cost": cost}) + "\n")


def test_the_evaluations_page_has_a_row_per_run_newest_first_sortable_and_linked(project, browser):
    """Three evals of two suites and two batches of one tasks file: the user sees one row per
    eval, newest first, each with when it ran, its suite, its cells with each one's pass rate,
    its attempts and cost; the newest of a suite links to a comparison with the one before it,
    which opens and says the difference is too small for a verdict; a click on "cost" sorts by
    it. Batches likewise: outcomes and cost, newest first, compared with the previous batch."""
    from selenium.webdriver.common.by import By

    day = 86400
    now = time.time()

    def iso(t):
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))

    suite = str(project.root / "suites" / "calc" / "suite.toml")
    eval_run(project, "20261120-090000-aaaa", iso(now - 3 * day), suite,
             {"base": [True, True, True], "terse": [True, False, True]}, 0.01)
    eval_run(project, "20261121-090000-bbbb", iso(now - 2 * day), str(project.root / "other.toml"),
             {"base": [True, False]}, 0.02)
    eval_run(project, "20261122-090000-cccc", iso(now - day), suite,
             {"base": [True, False, True], "terse": [False, False, True]}, 0.005)
    tasks = str(project.root / "work" / "tasks.jsonl")
    batch_run(project, "20261121-100000-dddd", iso(now - 2 * day), tasks, ["done", "done", "failed"], 0.01)
    batch_run(project, "20261122-100000-eeee", iso(now - day), tasks, ["done", "failed", "infrastructure"], 0.02)
    with board(project) as (url, port, token):
        browser.get(url.replace("/?", "/evals?"))
        rows = browser.find_elements(By.CSS_SELECTOR, "#evals tbody tr")
        assert [r.get_attribute("data-run") for r in rows] == [
            "20261122-090000-cccc", "20261121-090000-bbbb", "20261120-090000-aaaa"]  # newest first
        newest = rows[0].text
        assert "calc" in newest and "base 67% (2/3)" in newest and "terse 33% (1/3)" in newest
        assert "$0.0300" in newest  # six attempts at $0.005
        assert "other" in rows[1].text and "base 50% (1/2)" in rows[1].text and "first of its suite" in rows[1].text
        links = rows[0].find_elements(By.CSS_SELECTOR, "a.compare")
        assert [a.text for a in links] == ["base", "terse"]  # per cell both runs have
        batches = browser.find_elements(By.CSS_SELECTOR, "#batches tbody tr")
        assert [r.get_attribute("data-batch") for r in batches] == ["20261122-100000-eeee", "20261121-100000-dddd"]
        assert "1 done, 1 failed, 1 infrastructure" in batches[0].text and "$0.0600" in batches[0].text
        assert "tasks" in batches[0].text
        shot(browser, "evals", doc="ui-evals")

        browser.find_element(By.XPATH, "//table[@id='evals']//th[text()='cost']").click()
        by_cost = [r.get_attribute("data-run") for r in browser.find_elements(By.CSS_SELECTOR, "#evals tbody tr")]
        assert by_cost == ["20261120-090000-aaaa", "20261121-090000-bbbb", "20261122-090000-cccc"]  # $0.06, .04, .03

        links[1].click()  # terse, the earlier run against the newest
        wait(browser, lambda d: "Broken in B" in d.page_source, what="the comparison")
        main = text_of(browser, "main")
        assert "A = terse (20261120-090000-aaaa), B = terse (20261122-090000-cccc)" in main
        assert "too few pairs disagree for any verdict: 1 of 3 disagree" in text_of(browser, "p.power")

        browser.get(f"http://127.0.0.1:{port}/evals")
        browser.find_element(By.CSS_SELECTOR, "#batches tbody tr a.compare").click()
        wait(browser, lambda d: "Broken in B" in d.page_source, what="the batches' comparison")
        broke = browser.find_elements(By.XPATH, "//h2[text()='Broken in B']/following-sibling::ul[1]/li")
        assert [li.text.split(" A's")[0] for li in broke] == ["task-2 trial 1"]
        hrefs = [a.get_attribute("href") for a in broke[0].find_elements(By.TAG_NAME, "a")]
        assert hrefs[1].endswith("/batches/20261122-100000-eeee/logs/task-2")
