"""`moss ui` in a real headless browser (Debian's chromium through chromedriver, offline).

Each test opens the URL `moss ui` printed, as its user would, and does what a user does:
watches a running session's text appear, sends it a message and sees it acknowledged, stops
it; clicks a Wild Loop alert's choice and sees the run stop; reads the metric chart and the
evaluation pages. Screenshots of each page go to $MOSS_TEST_ARTIFACTS (default
tests/artifacts/, git-ignored). Waits are on conditions (WebDriverWait), never sleeps.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

import pytest
from boardserver import board
from browserkit import BROWSER_MARKS, CHROMIUM, chromium, shot, text_of, wait
from conftest import FIXTURES, STORY_PROVIDER
from fakeapi import FakeAPI, slow, state_of

pytestmark = BROWSER_MARKS


@pytest.fixture(scope="module")
def browser():
    """One headless chromium for the tests of this file."""
    yield from chromium()
HOSTILE = "<script>window.pwned = 1</script><img src=x onerror=\"window.pwned = 2\">"


def by_state(replies: dict):
    """A model answering by the state that asks (its X-Moss-Label): inbox classification and
    the agent's turns, in order."""
    turns = {"n": 0}

    def reply(body):
        state = state_of(body)
        if state in replies:
            return replies[state]
        turns["n"] += 1
        r = replies["turns"][min(turns["n"], len(replies["turns"])) - 1]
        return r(body) if callable(r) else r
    return reply


def running_session(project, timeout=30) -> str:
    deadline = time.monotonic() + timeout
    d = project.root / ".moss/agent/running"
    while time.monotonic() < deadline:
        found = list(d.glob("*.json")) if d.is_dir() else []
        if found:
            return found[0].stem
        time.sleep(0.05)
    raise AssertionError("no session started running")


def test_a_running_session_streams_takes_a_message_and_stops(project, browser):
    """The user opens the printed URL, finds the running session at the top of the list, and
    on its page sees the model's first reply appear while the session works (its `<script>`
    shown as text, never run); a message sent from the box is acknowledged by the session in
    the live view; stop ends it, and the page says it is no longer running."""
    from selenium.webdriver.common.by import By

    with FakeAPI() as api:
        api.push(*[by_state({"inbox": "RELATED", "turns": [
            slow("Looking around first. " + HOSTILE + " $(view .)", delay=1.0),
            slow("$(answer done)", delay=120)]})] * 6)
        p = project.popen("@agent", "--provider", "anthropic", "--v1", "-n", "how is this project built?",
                          env=api.env())
        try:
            sid = running_session(project)
            with board(project) as (url, port, token):
                browser.get(url)
                wait(browser, lambda d: sid in text_of(d, "#sessions"), what="the session in the list")
                assert browser.current_url.endswith("/sessions")  # the token left the address bar
                first = browser.find_element(By.CSS_SELECTOR, "#sessions tbody tr")
                assert sid in first.text and "running" in first.text
                assert "last active" in text_of(browser, "#sessions thead") and " ago" in first.text
                shot(browser, "sessions")
                first.find_element(By.LINK_TEXT, sid).click()
                wait(browser, lambda d: "Looking around first." in text_of(d, "#stream"), what="the streamed reply")
                stream = text_of(browser, "#stream")
                assert "<script>window.pwned = 1</script>" in stream  # shown as the model wrote it
                assert browser.execute_script("return window.pwned === undefined")  # and never run
                assert "running" in text_of(browser, "#state")
                box = browser.find_element(By.CSS_SELECTOR, "#say textarea")
                box.send_keys("the build script is make.sh")
                browser.find_element(By.ID, "send").click()
                wait(browser, lambda d: "sent to " + sid in text_of(d, "#say-result"), what="the message sent")
                assert browser.find_element(By.ID, "say-text").get_attribute("value") == ""  # the box is emptied
                wait(browser, lambda d: "the build script is make.sh" in text_of(d, "#stream .item.message"),
                     what="the session acknowledging the message")
                assert "message received" in text_of(browser, "#stream .item.message")
                shot(browser, "session", doc="ui-session")
                browser.find_element(By.CSS_SELECTOR, "button.stop").click()
                wait(browser, lambda d: "not running" in text_of(d, "#state"), what="the session stopping")
                assert p.wait(timeout=30) == 3  # stopped: resumable, as moss say --stop leaves it
                assert browser.execute_script("return window.pwned === undefined")
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()


STREAMED = ("Reading the build first. " + " ".join(f"word{i}" for i in range(1, 11))
            + " <script>window.pwned = 3</script> carriage\rreturn \x1b[31mred\x1b[0m "
            + " ".join(f"word{i}" for i in range(11, 36)) + " and the very last words. $(answer ok)")


def test_a_reply_is_seen_growing_as_it_streams_then_whole(project, browser):
    """A reply that streams slowly, a word at a time: on the session's page the user sees it
    part-way (its first words there, its last ones not yet), growing, with its `<script>`,
    carriage return and ANSI escape shown as text (␍, ␛), never run; once the model is done
    the whole reply is in the live view as the log keeps it, and the growing copy is gone."""
    from selenium.webdriver.common.by import By

    with FakeAPI() as api:
        api.push(*[by_state({"inbox": "RELATED", "turns": [slow(STREAMED, delay=0.2, chunk_delay=0.12),
                                                           slow("$(answer done)", delay=120)]})] * 6)
        p = project.popen("@agent", "--provider", "anthropic", "--v1", "-n", "how is this project built?",
                          env=api.env())
        try:
            sid = running_session(project)
            with board(project) as (url, port, token):
                browser.get(url.replace("/?", f"/sessions/{sid}?"))
                wait(browser, lambda d: "word3" in text_of(d, "#live"), what="the reply's first words")
                part = text_of(browser, "#live")
                assert "Reading the build first." in part and "the very last words" not in part
                assert "streaming" in part and not text_of(browser, "#stream .item.text")  # not logged yet
                shot(browser, "streaming", doc="ui-streaming")
                wait(browser, lambda d: "red␛[0m" in text_of(d, "#live"), what="the hostile part, streamed")
                assert "word10 <script>window.pwned = 3</script> carriage␍return ␛[31mred␛[0m" in text_of(browser, "#live")
                assert browser.execute_script("return window.pwned === undefined")
                wait(browser, lambda d: "the very last words" in text_of(d, "#stream .item.text"),
                     what="the whole reply, logged")
                whole = text_of(browser, "#stream .item.text")
                assert "word10 <script>window.pwned = 3</script> carriage␍return ␛[31mred␛[0m word11" in whole
                wait(browser, lambda d: not text_of(d, "#live"), what="the growing copy to go")
                assert browser.execute_script("return window.pwned === undefined")
                assert not browser.find_elements(By.CSS_SELECTOR, "#stream script, #live script")
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()


TRAIN = r'''
import sys, time
args = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
lr = float(args.get("lr", "0.01"))
if lr >= 1:
    print("step 0 loss nan", flush=True)
    time.sleep(float(args.get("hold", "60")))
    sys.exit(2)
for step in range(4):
    time.sleep(0.05)
    print(f"step {step} loss {2.0 - step * lr * 10:.4f} acc={0.5 + step * 0.1:.2f}", flush=True)
'''


def wild_model(calls: list):
    """The Wild Loop's model: one sweep of three learning rates; it leaves the NaN alert to the
    user ("keep an eye on it"), notes run events, and completes once everything ended."""
    import re

    sweep = {"name": "lr sweep", "base_command": "python3 train.py",
             "parameters": {"lr": [0.001, 0.01, 1], "hold": 120}}
    sent = {"sweep": False}

    def reply(body):
        from fakeapi import last_user_text

        user = last_user_text(body)
        stage = re.search(r"^## Wild Loop — ([A-Z ]+)", user, re.M).group(1).strip()
        calls.append(stage)
        if stage == "EXPLORING" and not sent["sweep"]:
            sent["sweep"] = True
            return "<sweep>\n" + json.dumps(sweep) + "\n</sweep>"
        if stage == "ANALYZING":
            return "lr=0.01 trains fastest; lr=1 diverged.\n<promise>COMPLETE</promise>"
        return "I will keep an eye on it."
    return reply


def test_a_wild_loop_alert_is_resolved_by_a_click_and_the_run_stops(project, browser):
    """A Wild Loop sweeps three learning rates; lr=1 logs a NaN loss and hangs, and the model
    leaves the alert open. On the runs page the banner names the loop's stage, the loss chart
    draws one line per run (three; accuracy two, the NaN run logs none), and the alert offers its choices as
    buttons: clicking "stop" hands the resolution to the loop's process, the run stops, and
    the loop goes on to its analysis and completes."""
    from selenium.webdriver.common.by import By

    project.write("train.py", TRAIN)
    calls: list = []
    with FakeAPI() as api:
        api.push(*[wild_model(calls)] * 30)
        p = project.popen("@agent", "--provider", "openai", "--machine", "wild", "-n", "--allow-full",
                          "find a learning rate that trains", env=api.env())
        try:
            with board(project) as (url, port, token):
                browser.get(url)
                browser.get(f"http://127.0.0.1:{port}/runs")
                wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#alerts .alert button.choice"),
                     timeout=60, what="the NaN alert")
                assert "loss is nan" in text_of(browser, "#alerts .alert")
                # the loop's own stage, "running" while its runs go ("runs: 3 running" shows before the
                # loop's session is listed, with no stage yet)
                wait(browser, lambda d: text_of(d, "#banner .stage") == "Wild Loop: running", what="the banner's stage")
                banner = text_of(browser, "#banner")
                assert "open alerts: 1" in banner and "iteration 1" in banner

                def charts_drawn(d):  # the NaN run logs a loss only
                    boxes = {b.get_attribute("data-metric"): b.get_attribute("data-series")
                             for b in d.find_elements(By.CSS_SELECTOR, "#charts .metric")}
                    return boxes == {"acc": "2", "loss": "3"} and \
                        len(d.find_elements(By.CSS_SELECTOR, "#charts .metric canvas")) == 2
                wait(browser, charts_drawn, what="the loss chart with three runs, acc with two")
                loss = browser.find_element(By.CSS_SELECTOR, '#charts .metric[data-metric="loss"]')
                legend = loss.find_elements(By.CSS_SELECTOR, ".u-legend .u-series")
                assert len(legend) == 4  # the step axis and one line per run
                assert "lr=1, hold=120" in loss.text
                shot(browser, "runs", doc="ui-runs")
                stop = next(b for b in browser.find_elements(By.CSS_SELECTOR, "#alerts button.choice")
                            if b.text == "stop")
                stop.click()
                wait(browser, lambda d: "alert" in text_of(d, "#alerts-result"), what="the click's answer")
                assert "handed to the moss process" in text_of(browser, "#alerts-result")
                wait(browser, lambda d: "no open alerts" in text_of(d, "#alerts"), what="the alert resolved")
                # the banner follows: no alert stage with no alert open
                wait(browser, lambda d: "open alerts: 0" in text_of(d, "#banner"), what="the banner's count")
                assert "alert" not in text_of(browser, "#banner .stage")

                def nan_run(d):
                    rows = [r.text for r in d.find_elements(By.CSS_SELECTOR, "#runs tbody tr")]
                    return next((r for r in rows if "lr=1," in r), "")
                wait(browser, lambda d: " stopped" in nan_run(d), what="the NaN run stopped")
                assert p.wait(timeout=60) == 0, p.stderr.read()
                wait(browser, lambda d: "ended: answered" in text_of(d, "#banner"), what="the loop's end")
                shot(browser, "runs-after")
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
    recs = [json.loads(f.read_text()) for f in (project.root / ".moss/agent/runs").glob("*.json")]
    nan = next(r for r in recs if r["meta"]["params"].startswith("lr=1,"))
    assert nan["status"] == "stopped" and [a["choice"] for a in nan["alerts"]] == ["stop"]
    assert calls[-1] == "ANALYZING"


def write_eval(project, run: str, rows: list[dict]) -> None:
    d = project.root / ".moss" / "eval" / run
    (d / "logs").mkdir(parents=True)
    with open(d / "attempts.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def test_eval_pages_table_chart_and_a_comparison_linked_to_sessions(project, browser):
    """An eval of two cells: its page shows the per-cell table with intervals and the
    pass-rate-vs-cost chart; comparing its cells names the task B broke, linked to each
    cell's session log, which opens as the attempt's timeline."""
    from selenium.webdriver.common.by import By

    rows = []
    for ci, cell in enumerate(("base", "terse"), 1):
        for task in ("t1", "t2", "t3"):
            passed = not (cell == "terse" and task == "t2")
            key = f"{task}|{cell}|1"
            rows.append({"key": key, "task": task, "cell": cell, "trial": 1, "kind": "question", "cell_index": ci,
                         "passed": passed, "reason": "answered", "turns": 2, "tokens": 900, "cost": 0.01 * ci,
                         "wall": 3.0, "session_id": f"s{ci}{task}"})
    write_eval(project, "20261126-010000-abc", rows)
    log = project.root / ".moss/eval/20261126-010000-abc/logs/t2--terse--1.jsonl"
    log.write_text(json.dumps({"event": "response", "ts": time.time(), "text": "the terse reply " + HOSTILE}) + "\n")
    with board(project) as (url, port, token):
        browser.get(url)
        browser.find_element(By.LINK_TEXT, "evaluations").click()
        browser.find_element(By.CSS_SELECTOR, "tr[data-run='20261126-010000-abc'] td a").click()
        table = text_of(browser, "table.cells")
        assert "base 3/3 100%" in table and "terse 2/3 67%" in table
        assert browser.find_elements(By.CSS_SELECTOR, ".chart svg circle, .chart svg rect")
        shot(browser, "eval")
        browser.find_element(By.CSS_SELECTOR, "form[action='/evals/compare'] button").click()
        wait(browser, lambda d: "Broken in B" in d.page_source, what="the comparison")
        assert "A = base" in browser.find_element(By.TAG_NAME, "main").text
        shot(browser, "compare")
        browser.find_element(By.LINK_TEXT, "B's session").click()
        wait(browser, lambda d: "the terse reply" in text_of(d, "#stream"), what="the attempt's log")
        assert "<script>window.pwned = 1</script>" in text_of(browser, "#stream")
        assert browser.execute_script("return window.pwned === undefined")
        shot(browser, "attempt")


BATCH_REPLIES = {  # the model of a two-task batch on the fixture calculator, by the task's prompt
    "add() returns": '$(edit calc.py --old "a - b" --new "a + b  # <script>window.pwned = 4</script>") $(answer fixed)',
    "How many functions": "$(answer 3)",
}


def batch_model(body) -> str:
    if state_of(body) == "planner":
        return "1. Look.\n2. Change.\nReady to refactor."
    text = json.dumps(body)
    return next((reply for marker, reply in BATCH_REPLIES.items() if marker in text), "$(answer ?)")


@pytest.mark.needs_sandbox
def test_a_batch_table_shows_each_tasks_patch_and_links_its_session(project, browser):
    """A real `moss batch` of two tasks on the fixture calculator, its results where it keeps
    them by default (.moss/batch/): on the evaluations page the user opens the batch, reads the
    table `moss batch status` prints (the fix done with a one-line patch, the question done with
    none), opens the fix's patch — the diff in monospace, its `<script>` as text — and follows
    the task's link to its session log."""
    from selenium.webdriver.common.by import By

    shutil.copytree(FIXTURES / "evalsuite" / "repos", project.root / "work" / "repos")
    project.write(".moss/config.toml", f'[llm]\nprovider = "{STORY_PROVIDER}"\nmodel = "good"\n')
    tasks = [{"id": "fix-add", "repo": "repos/pycalc", "prompt": "add() returns the wrong result; fix it.",
              "machine": "v1"},
             {"id": "count", "repo": "repos/pycalc", "prompt": "How many functions does calc.py define?",
              "machine": "v1"}]
    project.write("work/tasks.jsonl", "".join(json.dumps(t) + "\n" for t in tasks))
    with FakeAPI() as api:
        api.push(*[batch_model] * 60)
        r = project.moss("batch", "work/tasks.jsonl", "-j", "2", env=api.env(), timeout=600)
    assert r.returncode == 0, r.stderr
    with board(project) as (url, port, token):
        browser.get(url)
        browser.find_element(By.LINK_TEXT, "evaluations").click()
        browser.find_element(By.CSS_SELECTOR, "table.batches tbody tr td a").click()
        rows = [row.text for row in browser.find_elements(By.CSS_SELECTOR, "table.batch tbody tr")]
        assert rows[0].startswith("fix-add done") and "1 file +1 -1" in rows[0]
        assert rows[1].startswith("count done") and "none" in rows[1]
        patch = browser.find_element(By.CSS_SELECTOR, "table.batch tbody tr details.patch")
        assert not browser.find_element(By.CSS_SELECTOR, "details.patch pre").is_displayed()
        patch.find_element(By.TAG_NAME, "summary").click()
        pre = browser.find_element(By.CSS_SELECTOR, "details.patch pre")
        assert '+    return a + b  # <script>window.pwned = 4</script>' in pre.text
        assert "monospace" in pre.value_of_css_property("font-family")
        assert browser.execute_script("return window.pwned === undefined")
        shot(browser, "batch", doc="ui-batch")
        browser.find_element(By.CSS_SELECTOR, "table.batch tbody tr a[href*='/logs/fix-add']").click()
        wait(browser, lambda d: "fixed" in text_of(d, "#stream"), what="the task's session log")
        assert "calc.py" in text_of(browser, "#stream")


def test_the_child_tree_nests_and_each_child_opens_its_page(project, browser):
    """A session with two children, the first with its own: the session page draws the tree
    as nested items (the grandchild inside its parent, each with role and state), and a click
    on a child's id opens that child's page."""
    from selenium.webdriver.common.by import By

    agent = project.root / ".moss" / "agent"
    (agent / "logs").mkdir(parents=True)
    for sid, role in (("p7", "explorer"), ("p7-1", "explorer"), ("p7-2", "auditor"), ("p7-1-1", "explorer")):
        (agent / f"session-{sid}.json").write_text(json.dumps(
            {"id": sid, "task": "look around", "state": role, "machine": "v1", "role": role, "turn": 1,
             "done": True, "reason": "answered", "answer": f"{sid} found it"}))
        (agent / "logs" / f"{sid}.jsonl").write_text(json.dumps(
            {"event": "response", "ts": time.time(), "text": f"the reply of {sid}"}) + "\n")
    with board(project) as (url, port, token):
        browser.get(url.replace("/?", "/sessions/p7?"))
        # the tree is drawn by the server; waited for all the same, so that a page that came
        # back without it fails naming what it showed instead
        wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "ul.tree > li"), what="the child tree")
        top = browser.find_elements(By.CSS_SELECTOR, "ul.tree > li")
        assert [li.get_attribute("data-id") for li in top] == ["p7-1", "p7-2"]
        inner = top[0].find_elements(By.CSS_SELECTOR, "ul > li")
        assert [li.get_attribute("data-id") for li in inner] == ["p7-1-1"]
        assert "p7-2 auditor" in top[1].text and "answered" in top[1].text
        shot(browser, "tree")
        inner[0].find_element(By.LINK_TEXT, "p7-1-1").click()
        wait(browser, lambda d: "the reply of p7-1-1" in text_of(d, "#stream"), what="the grandchild's page")
        assert "Session p7-1-1" in text_of(browser, "h1")


def test_the_browser_moss_opens_gets_in_with_a_code_nobody_can_replay(project, browser, tmp_path):
    """`moss ui` opens the user's browser (Debian's chromium, headless, as $BROWSER) with a
    one-time code on its command line, never the token: chromium shows the board; the command
    line it was started with, which every local user reads in `ps`, holds no token; the code
    read from it gets a second browser nothing; and a link whose path begins with a backslash
    (`/\\evil.example/`, which a browser reads as `//evil.example/`) keeps the browser on the board."""
    from test_board import SID, saved_session

    saved_session(project)
    argv, dom = tmp_path / "argv.txt", tmp_path / "dom.html"
    launcher = tmp_path / "browser.sh"
    launcher.write_text(f"""#!/bin/sh
printf '%s\\n' "$*" > {argv}
{CHROMIUM} --headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run \\
  --user-data-dir={tmp_path / "profile"} --dump-dom "$1" > {dom}.part 2> {tmp_path / "chromium.log"} && mv {dom}.part {dom}
""")
    launcher.chmod(0o755)
    env = {"BROWSER": str(launcher), "DISPLAY": ":0", "CI": ""}  # (a CI running this test sets CI)
    with board(project, env=env, open_flag="") as (url, port, token):
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not dom.exists():
            time.sleep(0.1)
        assert dom.exists(), (tmp_path / "chromium.log").read_text()[-2000:]
        page = dom.read_text()
        assert "<h1>Sessions</h1>" in page and SID in page  # chromium got in, with the code alone
        line = argv.read_text()
        assert token not in line
        [code] = re.findall(r"\\?code=([A-Za-z0-9_-]+)", line)
        browser.get(f"http://127.0.0.1:{port}/sessions?code={code}")
        wait(browser, lambda d: "used already" in text_of(d, "body"), what="the replayed code's refusal")
        assert "Sessions" not in browser.title
        for path in ("/%5Cevil.example/", "/\\evil.example/", "/%09/evil.example/"):
            browser.get(f"http://127.0.0.1:{port}{path}?token={token}")
            assert browser.current_url.startswith(f"http://127.0.0.1:{port}/"), (path, browser.current_url)
        shot(browser, "offsite-link-stays")


def test_chromium_is_what_ci_installs():
    """.ci/run installs the browser these tests drive, so CI never skips them."""
    ci = (Path(__file__).parent.parent / ".ci" / "run").read_text()
    assert "chromium chromium-driver" in ci and shutil.which("chromium") is not None
