"""The tests' moss processes are forked from a zygote (tests/forkserver.py) instead of started
as new interpreters. These tests hold it to its promise: a forked `python -m moss` is the same
program to whoever runs it as a fresh one — same output, errors, exit status, environment,
working directory, streaming, signals — and `fresh=True` (or MOSS_TEST_FORK=0) really starts a
new interpreter. If a difference crept in, the rest of the suite would be testing something
users never run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import forkserver
import pytest

pytestmark = pytest.mark.skipif(not forkserver.ENABLED, reason="MOSS_TEST_FORK=0: every moss process is fresh")

FAILS = """
print("to stdout")
moss.ui.print("to the terminal")
error("boom")
"""

WAITS = """
moss.access.set("read-shell")
print("started")
local r = moss.shell.run("sleep 30", {timeout = 60})
print("after", r.exit)
"""


def both(project, *args, **kw):
    """(forked, fresh): the same moss command run both ways."""
    forked = project.moss(*args, **kw)
    fresh = project.moss(*args, fresh=True, **kw)
    return forked, fresh


def test_the_test_processes_really_are_forked_and_fresh_really_is_fresh(project):
    """`Project.popen` hands back a zygote child unless asked for a fresh interpreter: the
    zygote child's parent is the monitor, not this test; the fresh one's parent is this test.
    Either way its command line in /proc is the command it was started as."""
    project.script("hold", WAITS)
    for fresh, forked in ((False, True), (True, False)):
        p = project.popen("@hold", fresh=fresh)
        try:
            assert p.stdout.readline() == "started\n"
            parent = int(open(f"/proc/{p.pid}/stat").read().rsplit(")", 1)[1].split()[1])
            assert isinstance(p, forkserver.ZygotePopen) is forked
            assert (parent == os.getpid()) is not forked
            # ps, top and pgrep show the command it stands for, forked or not
            shown = open(f"/proc/{p.pid}/cmdline", "rb").read().rstrip(b"\0").split(b"\0")
            assert shown == [os.fsencode(a) for a in p.args]
        finally:
            p.kill()
            p.wait(timeout=30)
        assert p.returncode == -signal.SIGKILL  # killed as any child is


@pytest.mark.parametrize("args", [("--help",), ("nonsense",), ("@fails",), ("@missing",), ("view", "a.py"),
                                  ("@agent", "--help")])
def test_a_forked_moss_says_and_exits_as_a_fresh_one(project, args):
    """Same stdout, stderr and exit status for help, a usage error (2), a Lua error with its
    traceback (1), a missing script, a file view from the working directory."""
    project.script("fails", FAILS)
    project.write("a.py", "def f():\n    return 1\n")
    forked, fresh = both(project, *args)
    assert (forked.returncode, forked.stdout, forked.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)


def test_each_forked_moss_gets_its_own_environment_and_directory(project, tmp_path):
    """Two calls through the same zygote, each with its own XDG_CONFIG_HOME, read each its own
    user config; a variable the test worker has but did not pass is not there; a call from a
    subfolder finds the project above it, as a fresh process does."""
    for n in (1, 2):
        cfg = tmp_path / f"cfg{n}" / "moss"
        cfg.mkdir(parents=True)
        (cfg / "config.toml").write_text(f'[llm]\nmodel = "model-{n}"\n')
    outs = [project.moss("config", "get", "llm.model", env={"XDG_CONFIG_HOME": str(tmp_path / f"cfg{n}")}) for n in (1, 2)]
    assert [o.returncode for o in outs] == [0, 0]
    assert "model-1" in outs[0].stdout and "model-2" in outs[1].stdout
    sub = project.root / "deep" / "er"
    sub.mkdir(parents=True)
    forked, fresh = both(project, "config", "get", "llm.model", cwd=sub)
    assert (forked.returncode, forked.stdout) == (fresh.returncode, fresh.stdout)


def test_output_streams_before_the_end_and_ctrl_c_ends_both_alike(project):
    """The first line arrives while moss still runs (PYTHONUNBUFFERED, as the tests set it), and
    SIGINT ends a forked moss with the status and words of a fresh one (130, "interrupted")."""
    project.script("hold", WAITS)
    ends = []
    for fresh in (False, True):
        p = project.popen("@hold", fresh=fresh)
        assert p.stdout.readline() == "started\n" and p.poll() is None
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
        ends.append((p.returncode, out, err.strip().splitlines()[-1:]))
    assert ends[0] == ends[1] and ends[0][0] == 130


def test_stdin_reaches_a_forked_moss(project):
    """What the test writes on stdin is what moss reads: an answer to the script's question
    (MOSS_ASSUME_TTY=1 makes moss ask on stdin), the same both ways."""
    project.script("asks", 'print("got " .. tostring(moss.ui.ask("name?")))')
    forked, fresh = both(project, "@asks", input="Ada\n", env={"MOSS_ASSUME_TTY": "1"})
    assert forked.returncode == 0 and "got Ada" in forked.stdout
    assert (forked.returncode, forked.stdout, forked.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)


def test_moss_test_fork_0_starts_every_process_fresh(project):
    """MOSS_TEST_FORK=0 in pytest's environment turns the zygote off for the whole run: the
    same call then starts a plain `subprocess.Popen`, a new interpreter, and moss answers."""
    code = ("import forkserver, subprocess, sys\n"
            "p = forkserver.popen([sys.executable, '-m', 'moss', '--version'], env=dict(%r), stdout=subprocess.PIPE)\n"
            "out = p.communicate()[0]\n"
            "print(type(p).__name__, p.returncode, bool(out.strip()))\n" % (project.env,))
    r = subprocess.run([sys.executable, "-c", code], cwd=os.path.dirname(forkserver.__file__),
                       env=dict(os.environ, MOSS_TEST_FORK="0"), capture_output=True, text=True, timeout=60)
    assert r.stdout.split() == ["Popen", "0", "True"], r.stderr
