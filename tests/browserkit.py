"""Headless chromium for the board's browser tests (Debian's chromium through its chromedriver,
offline): `chromium()` for a module's `browser` fixture (one browser per test module), waits on conditions, the text
of an element, screenshots into $MOSS_TEST_ARTIFACTS (default tests/artifacts/, git-ignored).

    from browserkit import BROWSER_MARKS, chromium, shot, text_of, wait
    pytestmark = BROWSER_MARKS

    @pytest.fixture(scope="module")
    def browser():
        yield from chromium()
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

CHROMIUM, DRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
BROWSER_MARKS = [
    pytest.mark.slow, pytest.mark.browser,
    pytest.mark.skipif(not (os.path.exists(CHROMIUM) and os.path.exists(DRIVER)),
                       reason="chromium and chromium-driver are not installed (apt-get install chromium "
                              "chromium-driver; .ci/run does)"),
]
ARTIFACTS = Path(os.environ.get("MOSS_TEST_ARTIFACTS") or Path(__file__).parent / "artifacts")


def chromium():
    """A headless chromium (as a generator: a test module's fixture yields from it, and it
    quits after)."""
    selenium = pytest.importorskip("selenium", reason="selenium is not installed (pip install -e '.[dev]')")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    del selenium
    os.environ.setdefault("SE_OFFLINE", "true")  # Selenium Manager never looks for a driver online
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,1000", "--no-first-run", "--disable-extensions"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=DRIVER), options=opts)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


DOCS_IMAGES = Path(__file__).resolve().parent.parent / "docs" / "images"


def shot(driver, name: str, doc: str | None = None) -> Path:
    """A screenshot of the page as `board-NAME.png` among the artifacts; with `doc`, and
    MOSS_DOCS_IMAGES=1 in the environment, also as docs/images/DOC.png: the screenshots in
    docs/ui.md are retaken so (docs/ui.md, Tests)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"board-{name}.png"
    driver.save_screenshot(str(path))
    if doc and os.environ.get("MOSS_DOCS_IMAGES") == "1":
        (DOCS_IMAGES / f"{doc}.png").write_bytes(path.read_bytes())
    return path


def wait(driver, cond, timeout=40, what="the page"):
    """`cond(driver)` once it is true; after `timeout` s a failure naming `what` with the text the
    page shows then (and its screenshot among the artifacts), so a failure says what was there."""
    from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:  # the page redraws as it polls: an element found just before a redraw is asked again
        return WebDriverWait(driver, timeout, poll_frequency=0.2,
                             ignored_exceptions=(StaleElementReferenceException,)).until(lambda d: cond(d))
    except TimeoutException:
        shown = text_of(driver, "body")[-1500:]
        where = shot(driver, "timeout")
        raise AssertionError(f"waiting for {what}: {driver.current_url} shows {shown!r} ({where})") from None


def text_of(driver, css: str) -> str:
    """The text of the first element `css` finds, "" if none; found again if the page replaced it
    between the find and the read (the board redraws its live parts in place)."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By

    for _ in range(5):
        found = driver.find_elements(By.CSS_SELECTOR, css)
        try:
            return found[0].text if found else ""
        except StaleElementReferenceException:
            continue
    raise AssertionError(f"{css} was replaced five times in a row while being read")
