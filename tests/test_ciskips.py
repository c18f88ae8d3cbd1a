"""tests/ciskips.py, the plugin that keeps CI from passing while it silently stopped testing the
sandbox, the browser or Ray: pytest run on a small test file, as CI runs it (CI=true)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_bubblewrap import MASK, SYSTEM, bundled, masks

TESTS = Path(__file__).resolve().parent
SAMPLE = '''
import pytest

@pytest.mark.needs_sandbox
def test_sandboxed():
    pass

@pytest.mark.browser
def test_browser():
    pytest.skip("chromium is not installed")

@pytest.mark.ray
def test_ray():
    pytest.skip("Ray is not installed")

@pytest.mark.needs_sandbox
def test_kernel_probe():
    pytest.skip("this kernel has no /proc/sysrq-trigger")

def test_opt_in():
    pytest.skip("llama-cpp-python is not installed (opt-in)")
'''
NAMES = ("sandboxed", "browser", "ray", "kernel_probe", "opt_in")
# pytest's SKIPPED lines name the file and line of the skip, not the test
SKIP_LINE = {n: f"test_sample.py:{SAMPLE.splitlines().index(f'def test_{n}():') + 2}:" for n in NAMES}


def pytest_in_ci(tmp_path: Path, mask: list[str] = ()) -> dict[str, str]:
    """{test name: outcome line of pytest's summary} for SAMPLE run with CI=true, in a mount
    namespace where each path of `mask` reads as /dev/null."""
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    # no plugin but ciskips: the installed ones' imports (Ray's, hypothesis's) are 2 s of a start
    env = {**os.environ, "CI": "true", "PYTHONPATH": str(TESTS), "MOSS_TEST_MASK": " ".join(mask),
           "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    env.pop("MOSS_BWRAP", None)
    argv = [sys.executable, "-m", "pytest", "-p", "ciskips", "-p", "no:cacheprovider", "-q",
            "-rA", "--rootdir", str(tmp_path), "test_sample.py"]
    if mask:
        argv = ["unshare", "-m", "sh", "-c", MASK, "sh", *argv]
    r = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    out = {}
    for line in r.stdout.splitlines():
        word, _, rest = line.partition(" ")
        if word in ("PASSED", "FAILED", "ERROR", "SKIPPED"):
            name = next((n for n in NAMES if f"::test_{n} " in rest + " " or SKIP_LINE[n] in rest), None)
            if name:
                out[name] = line
    return out



@pytest.mark.needs_sandbox
def test_under_ci_a_missing_browser_or_ray_fails_and_stated_optional_skips_stay(tmp_path):
    out = pytest_in_ci(tmp_path)
    assert out["sandboxed"].startswith("PASSED"), out
    assert out["browser"].startswith("FAILED") and "CI installs chromium and chromium-driver" in out["browser"]
    assert out["ray"].startswith("FAILED") and "Ray is not installed" in out["ray"]
    assert out["kernel_probe"].startswith("SKIPPED") and "no /proc/sysrq-trigger" in out["kernel_probe"]
    assert out["opt_in"].startswith("SKIPPED"), out


@pytest.mark.needs_sandbox
@masks
def test_under_ci_a_missing_sandbox_fails(tmp_path):
    out = pytest_in_ci(tmp_path, [*SYSTEM, bundled()])
    assert out["sandboxed"].startswith("ERROR"), out
    assert "CI: this test needs the bubblewrap sandbox, and bubblewrap was not found" in out["sandboxed"]
    assert out["opt_in"].startswith("SKIPPED"), out
