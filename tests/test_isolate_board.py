"""`moss ui` draws an isolated child's change and what became of it (host/board/sessions.py's
`isolation`, templates/child_isolation.html), in a real headless browser. The session is
written as a finished run leaves it (checkpoints, the parent's log, the kept patch), so no
agent runs here; tests/test_isolate.py runs real ones."""

from __future__ import annotations

import json
import time

import pytest
from boardserver import board
from browserkit import BROWSER_MARKS, chromium, shot, wait
from test_board_browser import HOSTILE

pytestmark = BROWSER_MARKS


@pytest.fixture(scope="module")
def browser():
    """One headless chromium for the tests of this file."""
    yield from chromium()


def test_the_child_tree_shows_each_isolated_childs_change_and_merge_state(project, browser):
    from selenium.webdriver.common.by import By

    agent = project.root / ".moss" / "agent"
    (agent / "logs").mkdir(parents=True)
    (agent / "patches").mkdir()
    for sid in ("q9", "q9-1", "q9-2"):
        (agent / f"session-{sid}.json").write_text(json.dumps(
            {"id": sid, "task": "refactor", "state": "agent", "machine": "v1", "role": "refactorer", "turn": 2,
             "done": True, "reason": "answered", "answer": f"{sid} done"}))
    now = time.time()
    log = [{"event": "child_isolated", "child": "q9-1", "strategy": "copy", "files": 3, "seconds": 0.1, "home": "x"},
           {"event": "child_end", "child": "q9-1", "status": "done", "isolated": True, "changed": ["a.py"],
            "patch_stat": {"files": 1, "added": 1, "removed": 1, "binary": 0, "bytes": 90}},
           {"event": "child_merge", "child": "q9-1", "applied": ["a.py"], "conflicts": [], "snapshot": "0" * 40},
           {"event": "child_isolated", "child": "q9-2", "strategy": "copy", "files": 3, "seconds": 0.1, "home": "y"},
           {"event": "child_end", "child": "q9-2", "status": "done", "isolated": True, "changed": ["b.py"],
            "patch_stat": {"files": 1, "added": 1, "removed": 0, "binary": 0, "bytes": 80}}]
    (agent / "logs" / "q9.jsonl").write_text("".join(json.dumps({**e, "ts": now}) + "\n" for e in log))
    (agent / "patches" / "q9-2.patch").write_text(f"--- a/b.py\n+++ b/b.py\n@@ -1 +1,2 @@\n x = 1\n+# {HOSTILE}\n")
    with board(project) as (url, port, token):
        browser.get(url.replace("/?", "/sessions/q9?"))
        wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "ul.tree .isolation"), what="the isolated children")
        first = browser.find_element(By.CSS_SELECTOR, "li[data-id='q9-1'] .isolation")
        assert "merged" in first.get_attribute("class").split()
        assert first.text == "isolated · 1 file(s) +1 -1 · merged: 1 applied, 0 conflict(s)"
        second = browser.find_element(By.CSS_SELECTOR, "li[data-id='q9-2'] .isolation")
        assert "not-merged" in second.get_attribute("class").split()
        assert second.text.startswith("isolated · 1 file(s) +1 -0 · not merged")
        second.find_element(By.TAG_NAME, "summary").click()
        pre = second.find_element(By.CSS_SELECTOR, "pre.patch")
        assert f"+# {HOSTILE}" in pre.text  # the patch as text, never as markup
        assert browser.execute_script("return window.pwned === undefined")
        shot(browser, "isolated-children")
